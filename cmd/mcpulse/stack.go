package main

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/internal/shutdown"
	"github.com/mcpulse/mcpulse/stack"
)

func newStackCmd() *cobra.Command {
	var (
		dataDir      string
		partitions   int
		kafkaBrokers int
		shards       int
		replicas     int
		verbose      bool
	)
	cmd := &cobra.Command{
		Use:   "stack [--data-dir DIR] [--partitions N] [--kafka-brokers N] [--shards S --replicas R]",
		Short: "Run the embedded Kafka, Redis and ClickHouse stack until interrupted",
		Long: `Run the embedded stack that tests and "mcpulse demo" use (DESIGN.md §7), for working
against mcpulse by hand:

  Kafka       in-process (franz-go kfake), one broker on a free 127.0.0.1 port, in memory,
              with topics mcp_tool_calls, mcp_recruitment, mcpulse_dlq and mcpulse_audit;
              with --kafka-brokers N, N brokers on their own ports and every topic
              replicated on min(3, N) of them (kfake keeps one copy of the data)
  Redis       a redis-server child on a free 127.0.0.1 port, AOF in the data dir, noeviction
  ClickHouse  a clickhouse-server child on free 127.0.0.1 ports (native and HTTP); with
              --shards or --replicas above 1, a cluster instead: a ZooKeeper child and
              S × R clickhouse-server children, cluster "mcpulse_cluster" in each server's
              remote_servers, with {shard} and {replica} macros (docs/scaling.md)

When the stack is up, three lines go to stdout, ready for a shell:

  export MCPULSE_KAFKA_BROKERS=127.0.0.1:PORT[,127.0.0.1:PORT...]
  export MCPULSE_REDIS_URL=redis://127.0.0.1:PORT/0
  export MCPULSE_CLICKHOUSE_DSN='clickhouse://default@127.0.0.1:PORT/default?dial_timeout=5s'

Paste them into another shell, or capture them, and every mcpulse command run there
uses this stack. The stack runs until Ctrl-C (SIGINT) or SIGTERM, then stops its servers
cleanly. Kafka's data is lost on exit; Redis's append-only file and ClickHouse's tables stay
in --data-dir if one was given (a temporary directory is removed).

The MCPULSE_* variables already set in this shell are ignored: this command always starts
its own services.

The DSN exported for a cluster is its first host's (shard 1, replica 1); every host's DSN
is listed on stderr. The stack creates no schema: run "mcpulse migrate up" against it, with
"--cluster mcpulse_cluster" for a cluster, and "--sharded" as well with --shards above 1
(Distributed tables over mcpulse_local, as "mcpulse demo --shards" migrates); stderr prints
the command.

Requires the Debian packages redis-server and clickhouse-server, and zookeeper for a cluster.`,
		Example: `  mcpulse stack                          # throw-away stack in a temporary directory
  mcpulse stack --data-dir ./.stack      # keep ClickHouse tables and server logs
  mcpulse stack --kafka-brokers 3        # three brokers, replication factor 3
  mcpulse stack > stack.env &            # then: . ./stack.env
  mcpulse stack --shards 2 --replicas 2  # then: mcpulse migrate up --cluster mcpulse_cluster --sharded
  mcpulse stack --replicas 2             # then: mcpulse migrate up --cluster mcpulse_cluster`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if partitions < 1 || partitions > 10000 {
				return fmt.Errorf("--partitions must be between 1 and 10000, got %d", partitions)
			}
			if kafkaBrokers < 1 || kafkaBrokers > stack.MaxBrokers {
				return fmt.Errorf("--kafka-brokers must be between 1 and %d, got %d", stack.MaxBrokers, kafkaBrokers)
			}
			if shards < 1 || replicas < 1 || shards*replicas > 16 {
				return fmt.Errorf("--shards and --replicas must be at least 1 and their product at most 16 servers, got %d × %d", shards, replicas)
			}
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			ctx := cmd.Context()
			began := time.Now()
			s, err := stack.Start(ctx, stack.Config{
				DataDir:    dataDir,
				Partitions: partitions,
				Brokers:    kafkaBrokers,
				Shards:     shards,
				Replicas:   replicas,
				Logger:     logger,
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, kv := range s.Env() {
				name, value, _ := strings.Cut(kv, "=")
				fmt.Fprintf(out, "export %s=%s\n", name, shellQuote(value))
			}
			fmt.Fprintf(cmd.ErrOrStderr(),
				"mcpulse stack: up in %s, data and server logs in %s\n"+
					"mcpulse stack: run the export lines above in another shell to use it; Ctrl-C stops the stack\n",
				time.Since(began).Round(time.Millisecond), s.DataDir)
			if cc := s.ClickHouseCluster; cc != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "mcpulse stack: ClickHouse cluster %s, %d shards × %d replicas, ZooKeeper %s:\n",
					cc.Name, cc.Shards, cc.Replicas, cc.ZooKeeperAddr)
				for _, h := range cc.Hosts {
					fmt.Fprintf(cmd.ErrOrStderr(), "mcpulse stack:   shard %d replica %d  %s\n", h.Shard, h.Replica, h.DSN)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "mcpulse stack: create the schema with: %s\n", migrateHint(cc.Name, cc.Shards))
			}
			// The servers get their own stop bounds (ClickHouse 20 s), so that a persistent
			// --data-dir is left as they write it; a second Ctrl-C still kills at once.
			shutdown.Allow(30 * time.Second)
			<-ctx.Done()
			fmt.Fprintln(cmd.ErrOrStderr(), "mcpulse stack: stopping")
			if err := s.Close(); err != nil {
				return err
			}
			fmt.Fprintln(cmd.ErrOrStderr(), "mcpulse stack: stopped")
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "",
		"directory for the servers' data and logs, created if missing and kept on exit (default: a temporary directory, removed on exit)")
	cmd.Flags().IntVar(&partitions, "partitions", 4, "partitions per Kafka topic")
	cmd.Flags().IntVar(&kafkaBrokers, "kafka-brokers", 1, "Kafka brokers, each on its own port; topics are replicated on min(3, N) of them")
	cmd.Flags().IntVar(&shards, "shards", 1, "ClickHouse shards; above 1 (or --replicas above 1) runs a cluster with ZooKeeper")
	cmd.Flags().IntVar(&replicas, "replicas", 1, "ClickHouse replicas per shard")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log start-up and shutdown progress to stderr")
	return cmd
}

// migrateHint is the command that creates the schema on a stack's cluster: ON CLUSTER
// cluster, in the sharded layout when it has more than one shard (as "mcpulse demo" migrates
// it).
func migrateHint(cluster string, shards int) string {
	hint := "mcpulse migrate up --cluster " + cluster
	if shards > 1 {
		hint += " --sharded"
	}
	return hint
}

// shellQuote returns s unchanged when a POSIX shell would read it as one literal word, and
// single-quoted otherwise.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
