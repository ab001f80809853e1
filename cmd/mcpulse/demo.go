package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/dashboards/server"
	"github.com/mcpulse/mcpulse/demo"
	"github.com/mcpulse/mcpulse/demo/gen"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/stack"
)

func newDemoCmd() *cobra.Command {
	var (
		cfg      demo.Config
		asJSON   bool
		logLevel string
		serve    string
		web      dashboardsFlags
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the whole pipeline on an embedded stack and check every figure against the generator",
		Long: `Starts an embedded stack (in-process Kafka, redis-server and clickhouse-server child
processes on free loopback ports), migrates ClickHouse, generates --events realistic MCP
events from real tool schemas, publishes them, consumes them until drained, and prints a
summary: events per kind, duplicates dropped, dead-lettered, the tools with the highest
ignored-key rate (over the calls whose keys could be measured) and their top ignored keys, the
tools agents misuse most (input refused by validation, calls to unlisted tools), gate-reason
shares and the funnel per campaign, identities suppressed and in cooldown, and the end-to-end
throughput.

Then it runs two live MCP servers on the official Go SDK, driven by its client, with a tool set
per session, a paged tools/list and a tool removed at run time: one reports PostHog events
through an in-process gateway's capture API, the other only OpenTelemetry spans to its
/v1/traces; the summary shows each tool's calls, errors, unlisted calls and ignored keys.

Every figure, the live servers' included, is compared with what the corpus and the scripted
calls imply; a mismatch is printed and the exit status is 1. Needs Debian packages
redis-server and clickhouse-server.

With --shards S and --replicas R (either above 1), ClickHouse is a cluster of S × R
clickhouse-server processes and a ZooKeeper (Debian package zookeeper), migrated with
"migrate up --cluster"; with S above 1 in the sharded layout (Distributed tables over
mcpulse_local), and the summary shows the rows of tool_calls on each shard, a shard without
any being a mismatch. The consumer and every comparison go through the first host.

With --serve ADDR the stack keeps running after the summary and the dashboards (see
"mcpulse dashboards --help") are served on ADDR over the demo's data until Ctrl-C; the URL is
printed. --assets, --token and --basic-auth work as for "mcpulse dashboards".`,
		Example: "  mcpulse demo\n  mcpulse demo --events 20000 --seed 7 --json\n  mcpulse demo --kafka-brokers 3\n  mcpulse demo --shards 2 --replicas 2\n  mcpulse demo --serve 127.0.0.1:8090",
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Events < 1 {
				return fmt.Errorf("--events must be at least 1, got %d", cfg.Events)
			}
			if cfg.KafkaBrokers < 1 || cfg.KafkaBrokers > stack.MaxBrokers {
				return fmt.Errorf("--kafka-brokers must be between 1 and %d, got %d", stack.MaxBrokers, cfg.KafkaBrokers)
			}
			if err := (stack.ClusterConfig{Shards: cfg.Shards, Replicas: cfg.Replicas}).Validate(); err != nil {
				return fmt.Errorf("--shards, --replicas: %w", err)
			}
			cfg.Progress = cmd.ErrOrStderr()
			if logLevel != "" {
				cfg.Logger, _ = newLogger("text") // a constant, valid format
			}
			var webCfg server.Config
			if serve != "" {
				// Checked before the run, so a missing chart library does not cost a whole demo.
				if err := web.apply(&webCfg); err != nil {
					return err
				}
				webCfg.Listen, webCfg.Logger = serve, cfg.Logger
				stackDir := ""
				if cfg.DataDir != "" {
					stackDir = filepath.Join(cfg.DataDir, "stack")
				}
				fmt.Fprintln(cfg.Progress, "▸ starting the embedded stack (kfake, redis-server, clickhouse-server); it keeps running for --serve")
				start := time.Now()
				stack, err := stack.Start(cmd.Context(), stack.Config{DataDir: stackDir, Brokers: cfg.KafkaBrokers,
					Shards: cfg.Shards, Replicas: cfg.Replicas, Logger: cfg.Logger})
				if err != nil {
					return err
				}
				defer stack.Close()
				fmt.Fprintf(cfg.Progress, "▸ stack ready in %.1fs\n", time.Since(start).Seconds())
				cfg.Stack = stack
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
			if serve != "" {
				ch, err := stores.OpenClickHouse(cmd.Context(), cfg.Stack.ClickHouseDSN)
				if err != nil {
					return err
				}
				defer ch.Close()
				webCfg.ClickHouse = ch
				urlOut := out
				if asJSON {
					urlOut = cmd.ErrOrStderr() // stdout holds exactly one JSON object
				}
				if err := serveDashboards(cmd.Context(), webCfg, urlOut); err != nil {
					return err
				}
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
	f.StringVar((*string)(&cfg.Shape), "shape", string(gen.ShapeDemo), `tool-call shape: "demo" (mcpulse's event contract) or "sdk" (as @posthog/mcp sends them: ignored keys derived from results and served schemas)`)
	f.IntVar(&cfg.Shards, "shards", 1, "ClickHouse shards: above 1 (or with --replicas above 1) a cluster of shards × replicas servers and a ZooKeeper, migrated ON CLUSTER, sharded through Distributed tables when shards > 1")
	f.IntVar(&cfg.Replicas, "replicas", 1, "ClickHouse replicas per shard (see --shards)")
	f.IntVar(&cfg.KafkaBrokers, "kafka-brokers", 1, "brokers of the embedded Kafka, each on its own port; topics are replicated on min(3, N) of them")
	f.StringVar(&cfg.DataDir, "data-dir", "", "keep the stack's data and the corpus here (default: a temporary directory, removed afterwards)")
	f.BoolVar(&asJSON, "json", false, `print the summary as one JSON object (with "mismatches", empty when all agree)`)
	f.StringVar(&logLevel, "verbose", "", "log the services' activity to stderr")
	f.Lookup("verbose").NoOptDefVal = "info"
	f.StringVar(&serve, "serve", "", "after the summary, serve the dashboards on this address (host:port) until Ctrl-C")
	web.register(cmd)
	return cmd
}
