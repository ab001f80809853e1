package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newBenchPipelineCmd is filled in by the pipeline benchmark (issue 7).
func newBenchPipelineCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "pipeline",
		Short:  "Pipeline throughput and latency (not built yet)",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("bench pipeline is not built yet") },
	}
}
