package main

import "github.com/spf13/cobra"

// newBenchCmd groups the benchmark commands; each prints its figures as a table and as JSON,
// with the ratio to the peer it names, measured on the same machine in the same run.
func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure mcpulse against the peers a user would pick instead",
		Long: `Benchmarks that run on the embedded stack (no hand-started services) and print their
figures as a table and as JSON, each beside the ratio to a named peer measured in the same run.`,
	}
	cmd.AddCommand(newBenchPipelineCmd(), newBenchDashboardsCmd(), newBenchGatewayCmd())
	return cmd
}
