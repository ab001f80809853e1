package main

import (
	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/testkit/bench"
)

func newBenchGatewayCmd() *cobra.Command {
	cfg := bench.GatewayConfig{}
	var jsonOnly bool
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Ingest throughput of the gateway's OTLP/HTTP traces path against its capture API, for the same tool calls",
		Long: `Starts a gateway in this process, publishing to an in-process Kafka, and posts the same
--events tool calls over loopback, --runs times, both ways: as capture-API events (POST
/batch/, JSON, shaped as @posthog/mcp sends them, with their arguments) and as OTLP spans
(POST /v1/traces, binary protobuf, SERVER spans following the OpenTelemetry semantic
conventions for MCP, arguments in gen_ai.tool.call.arguments), --batch per request and
--clients requests in flight. Every request is answered only after Kafka acknowledged its
events, as in production. events/s = events ÷ (first request sent → last answer); the ratio
is OTLP spans/s ÷ capture events/s of the same run, and the order of the two alternates from
run to run. A ratio of 1 or more means the OTLP path takes spans at least as fast as the
capture API takes events.`,
		Example: "  mcpulse bench gateway\n  mcpulse bench gateway --events 200000 --runs 5 --json",
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := bench.RunGateway(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return printBenchResult(cmd.OutOrStdout(), res, jsonOnly)
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Events, "events", 100_000, "tool calls each path takes per run")
	f.IntVar(&cfg.Batch, "batch", 100, "events (spans) per request")
	f.IntVar(&cfg.Clients, "clients", 4, "requests in flight at once")
	f.IntVar(&cfg.Runs, "runs", 3, "how many times both paths are measured")
	f.BoolVar(&jsonOnly, "json", false, "print only the JSON")
	return cmd
}
