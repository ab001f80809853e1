package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/internal/demo"
)

func newDemoCmd() *cobra.Command {
	var (
		cfg      demo.Config
		asJSON   bool
		logLevel string
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the whole pipeline on an embedded stack and check every figure against the generator",
		Long: `Starts an embedded stack (in-process Kafka, redis-server and clickhouse-server child
processes on free loopback ports), migrates ClickHouse, generates --events realistic MCP
events from real tool schemas, publishes them, consumes them until drained, and prints a
summary: events per kind, duplicates dropped, dead-lettered, the tools with the highest
ignored-key rate and their top ignored keys, gate-reason shares and the funnel per campaign,
identities suppressed and in cooldown, and the end-to-end throughput.

Every figure is compared with the corpus's expected outcome; a mismatch is printed and the
exit status is 1. Needs Debian packages redis-server and clickhouse-server.`,
		Example: "  mcpulse demo\n  mcpulse demo --events 20000 --seed 7 --json",
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Progress = cmd.ErrOrStderr()
			if logLevel != "" {
				cfg.Logger = newLogger("text")
			}
			summary, err := demo.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := newJSONEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(summary); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(out)
				summary.Print(out)
			}
			if len(summary.Mismatches) > 0 {
				return exitCodeError{code: 1, msg: fmt.Sprintf("%d figures differ from the expected outcome", len(summary.Mismatches))}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Events, "events", 200000, "events to generate")
	f.Int64Var(&cfg.Seed, "seed", 1, "generator seed (same seed, same corpus)")
	f.StringVar(&cfg.DataDir, "data-dir", "", "keep the stack's data and the corpus here (default: a temporary directory, removed afterwards)")
	f.BoolVar(&asJSON, "json", false, `print the summary as one JSON object (with "mismatches", empty when all agree)`)
	f.StringVar(&logLevel, "verbose", "", "log the services' activity to stderr")
	f.Lookup("verbose").NoOptDefVal = "info"
	return cmd
}
