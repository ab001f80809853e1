// Command mcpulse is the event pipeline for MCP servers: it ingests tool-call and interview
// recruitment events into Kafka, consumes them into Redis suppression state and ClickHouse
// tables, and runs the jobs and pages built on them. Each subcommand only wires packages
// together; the behaviour lives in ingest/, consumers/, migrations/ and internal/.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/internal/shutdown"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Once told to stop, every command exits within shutdown.Deadline, whatever still runs;
	// a second signal kills it at once.
	shutdown.Watch(ctx.Done(), stop, shutdown.Deadline, os.Stderr, shutdown.Exit)
	root := newRootCmd()
	if err := root.ExecuteContext(ctx); err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "mcpulse: interrupted")
			os.Exit(130)
		}
		var exit exitCodeError
		if asExitCode(err, &exit) {
			os.Exit(exit.code)
		}
		fmt.Fprintln(os.Stderr, "mcpulse:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "mcpulse",
		Short: "Event pipeline for MCP servers: tool misuse analytics and interview recruitment without spam",
		Long: `mcpulse ingests MCP tool-call and interview recruitment events into Kafka, consumes them
into Redis suppression/cooldown state and ClickHouse tables and rollups, and serves the
figures product analysts, research teams and ops need.

Services are found through environment variables (unset means "not configured"):
  MCPULSE_KAFKA_BROKERS    comma-separated host:port list
  MCPULSE_REDIS_URL        redis://host:port/db
  MCPULSE_CLICKHOUSE_DSN   clickhouse://user:pass@host:port/default (native protocol;
                           the tables live in database mcpulse)

Run "mcpulse demo" to see the whole pipeline on an embedded stack.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newStackCmd(),
		newGenCmd(),
		newPublishCmd(),
		newMigrateCmd(),
		newConsumeCmd(),
		newDemoCmd(),
		newSchedulerCmd(),
		newSuppressionCmd(),
		newSchemacheckCmd(),
		newCampaignsCmd(),
		newIntentsCmd(),
		newGatewayCmd(),
		newDashboardsCmd(),
		newBenchCmd(),
		newHealthcheckCmd(),
		newVersionCmd(),
	)
	hideEnvironmentDefaults(root)
	return groupOnly(root) // cobra's own refusal would echo an unknown command whole
}
