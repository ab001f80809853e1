package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/dashboards"
	"github.com/mcpulse/mcpulse/demo"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/stack"
)

// newBenchDashboardsCmd is `mcpulse bench dashboards`.
func newBenchDashboardsCmd() *cobra.Command {
	var (
		events   int
		seed     int64
		dataDir  string
		cfg      dashboards.BenchConfig
		jsonOnly bool
	)
	cmd := &cobra.Command{
		Use:   "dashboards",
		Short: "Latency of every dashboard panel's query, against the same figures computed from the raw tables",
		Long: `Starts the embedded stack (in-process Kafka, redis-server and clickhouse-server children),
loads --events generated events through the real pipeline (the demo: publish, consume, then
its schema-check runs and suppression resets), and times every panel of every dashboard in
dashboards/ with the default filters (all time, no selection, limit 20): --warmup untimed
runs, then the median and 95th percentile of --runs runs, each the wall time from sending the
query to reading its last row over the native protocol. Each panel that reads a rollup is
timed beside its raw-table equivalent (sql/queries/raw_*.sql: the same figures from the
deduplicated raw tables with FINAL) and the ratio raw median ÷ panel median is printed.

The budget is 200 ms per panel at 1,000,000 events; the table says which panels are
under it, and the exit status is 1 when one is not. Prints a table, then one JSON object per
panel (dashboard, panel, rows, median_ms, p95_ms, raw_median_ms, ratio, under_200ms).
Loading a million events takes a few minutes on a 2-core machine.`,
		Example: "  mcpulse bench dashboards\n  mcpulse bench dashboards --events 100000 --runs 10 --json",
		RunE: func(cmd *cobra.Command, args []string) error {
			if events < 1 {
				return fmt.Errorf("--events must be at least 1, got %d", events)
			}
			ctx := cmd.Context()
			progress := cmd.ErrOrStderr()
			dir := dataDir
			if dir == "" {
				tmp, err := os.MkdirTemp("", "mcpulse-bench-dashboards-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				dir = tmp
			}
			stack, err := stack.Start(ctx, stack.Config{DataDir: filepath.Join(dir, "stack")})
			if err != nil {
				return err
			}
			defer stack.Close()
			began := time.Now()
			summary, err := demo.Run(ctx, demo.Config{Events: events, Seed: seed, DataDir: filepath.Join(dir, "demo"), Stack: stack, Progress: progress})
			if err != nil {
				return err
			}
			fmt.Fprintf(progress, "▸ loaded %d events in %.0fs", summary.Throughput.Events, time.Since(began).Seconds())
			if n := len(summary.Mismatches); n > 0 {
				fmt.Fprintf(progress, " (warning: %d figures differ from the expected outcome; first: %s)", n, summary.Mismatches[0])
			}
			fmt.Fprintln(progress)

			ch, err := stores.OpenClickHouse(ctx, stack.ClickHouseDSN)
			if err != nil {
				return err
			}
			defer ch.Close()
			ds, err := dashboards.Load()
			if err != nil {
				return err
			}
			fmt.Fprintf(progress, "▸ timing every panel: %d warm-up runs, then %d timed runs each\n", cfg.Warmup, cfg.Runs)
			results, err := dashboards.Bench(ctx, ch, ds, cfg)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if !jsonOnly {
				fmt.Fprintf(out, "Dashboard panel latency at %d events (ClickHouse 18.16, embedded stack, median of %d runs):\n\n", summary.Throughput.Events, cfg.Runs)
				if err := dashboards.PrintBenchTable(out, results); err != nil {
					return err
				}
				fmt.Fprintln(out)
			}
			enc := newJSONEncoder(out)
			for _, r := range results {
				if err := enc.Encode(r); err != nil {
					return err
				}
			}
			over := 0
			for _, r := range results {
				if !r.UnderBudget {
					over++
				}
			}
			if over > 0 {
				return exitCodeError{code: 1, msg: fmt.Sprintf("%d of %d panels take %v or more", over, len(results), dashboards.Budget)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&events, "events", 1000000, "events to generate and load through the pipeline")
	f.Int64Var(&seed, "seed", 1, "generator seed")
	f.StringVar(&dataDir, "data-dir", "", "keep the stack's data and the corpus here (default: a temporary directory, removed afterwards)")
	f.IntVar(&cfg.Warmup, "warmup", 3, "untimed runs of each query before timing")
	f.IntVar(&cfg.Runs, "runs", 20, "timed runs of each query")
	f.BoolVar(&jsonOnly, "json", false, "print only the JSON objects (one per panel)")
	return cmd
}
