package main

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
)

func newMigrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Manage the ClickHouse schema (database mcpulse)",
	}
	var (
		dsn, cluster     string
		sharded          bool
		preflightTimeout time.Duration
		ddlTimeout       time.Duration
	)
	up := &cobra.Command{
		Use:   "up",
		Short: "Create or upgrade database mcpulse: raw tables, rollups, materialized views, analyst views",
		Long: `Applies every embedded migration (migrations/sql/NNNN_name.sql) not yet recorded in
mcpulse.schema_migrations, in order. Safe to run any number of times: the statements are
idempotent and applied versions are skipped. Works on ClickHouse 18.16 and current releases.

With --cluster NAME every statement runs ON CLUSTER NAME and every table is a
Replicated*MergeTree under the {shard} and {replica} macros (docs/scaling.md); the hosts
need those macros and ClickHouse Keeper. "mcpulse migrate sql --cluster NAME" prints the SQL.
schema_migrations is one table replicated on every host of every shard, so a run through any
host sees what a run through another recorded.

Before any statement on a cluster, a preflight checks that the server migrated through
reaches every host of NAME in its system.clusters and that each host reads ZooKeeper, each
check bounded by --preflight-timeout; it fails naming every host down, and runs nothing.
Each ON CLUSTER statement then waits at most --ddl-timeout for every host to run it
(distributed_ddl_task_timeout, sent so ClickHouse 18.16 and current releases read the same
seconds); it must stay under the connection's read timeout (60s unless the DSN sets
read_timeout).

With --sharded as well, the tables, Null tables and materialized views are created in
database mcpulse_local on every shard, and database mcpulse holds a Distributed table of the
same name over each table (its sharding key: the identity hash, distinct_id or the Kafka
partition, else the first shard), the analyst views and schema_migrations; readers and
writers keep naming mcpulse's tables (docs/scaling.md). The hosts' default profile needs
insert_distributed_sync = 1, distributed_product_mode = 'allow' and load_balancing =
'in_order'. A cluster migrated
without --sharded keeps that layout.`,
		Example: "  mcpulse migrate up\n  mcpulse migrate up --clickhouse clickhouse://default@127.0.0.1:9000/default\n  mcpulse migrate up --cluster mcpulse_cluster\n  mcpulse migrate up --cluster mcpulse_cluster --sharded",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if sharded && cluster == "" {
				return fmt.Errorf("--sharded needs --cluster")
			}
			if cluster != "" {
				if err := migrations.ValidClusterName(cluster); err != nil {
					return fmt.Errorf("--cluster: %w", err)
				}
				if preflightTimeout <= 0 {
					return fmt.Errorf("--preflight-timeout must be positive, got %s", preflightTimeout)
				}
				if err := checkDDLTimeout(ddlTimeout, dsn); err != nil {
					return err
				}
			}
			conn, err := stores.OpenClickHouse(ctx, dsn)
			if err != nil {
				return err
			}
			defer conn.Close()
			log := slog.New(slog.NewTextHandler(os.Stderr, nil))
			applied, err := migrations.UpWith(ctx, conn, log, migrations.Options{Cluster: cluster, Sharded: sharded, PreflightTimeout: preflightTimeout, DDLTimeout: ddlTimeout})
			if err != nil {
				return err
			}
			if len(applied) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "schema is up to date")
			}
			for _, m := range applied {
				fmt.Fprintf(cmd.OutOrStdout(), "applied %04d_%s (%d statements)\n", m.Version, m.Name, len(m.Statements))
			}
			return nil
		},
	}
	up.Flags().StringVar(&dsn, "clickhouse", os.Getenv(stores.EnvClickHouseDSN), "ClickHouse DSN, native protocol (default $"+stores.EnvClickHouseDSN+")")
	up.Flags().StringVar(&cluster, "cluster", "", "create the replicated schema ON CLUSTER this cluster (a remote_servers name)")
	up.Flags().BoolVar(&sharded, "sharded", false, "with --cluster: tables in mcpulse_local on each shard, Distributed tables over them in mcpulse")
	up.Flags().DurationVar(&ddlTimeout, "ddl-timeout", migrations.DefaultDDLTimeout, "with --cluster: how long each statement waits for every host to run it (whole seconds)")
	up.Flags().DurationVar(&preflightTimeout, "preflight-timeout", migrations.DefaultPreflightTimeout, "with --cluster: bound of each preflight check (a host reached, ZooKeeper read)")

	var (
		sqlCluster string
		sqlSharded bool
	)
	sql := &cobra.Command{
		Use:   "sql [--cluster NAME [--sharded]]",
		Short: "Print the SQL migrate up runs on an empty server (or cluster), without connecting",
		Long: `Prints every statement "mcpulse migrate up" runs on an empty server, in order, each ended
by ";" and a blank line, under a "-- NNNN_name" comment per migration; recording the
versions in schema_migrations is not shown. With --cluster NAME it prints the cluster
variant: ON CLUSTER NAME and Replicated*MergeTree engines, from the same migration files;
with --sharded as well, the sharded layout "migrate up --cluster NAME --sharded" creates.`,
		Example: "  mcpulse migrate sql\n  mcpulse migrate sql --cluster mcpulse_cluster > schema.sql",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sqlSharded && sqlCluster == "" {
				return fmt.Errorf("--sharded needs --cluster")
			}
			if sqlCluster != "" {
				if err := migrations.ValidClusterName(sqlCluster); err != nil {
					return fmt.Errorf("--cluster: %w", err)
				}
			}
			all, err := migrations.All()
			if err != nil {
				return err
			}
			boot, err := migrations.BootstrapForCluster(sqlCluster)
			if err != nil {
				return err
			}
			var plan [][][]migrations.Statement
			if sqlSharded {
				if boot, err = migrations.ShardedBootstrap(sqlCluster); err != nil {
					return err
				}
				if plan, err = migrations.ShardedPlan(all, sqlCluster); err != nil {
					return err
				}
			}
			w := bufio.NewWriter(cmd.OutOrStdout())
			fmt.Fprintln(w, "-- bootstrap")
			for _, st := range boot {
				fmt.Fprintf(w, "%s;\n\n", st)
			}
			for i, m := range all {
				sts, err := m.ForCluster(sqlCluster)
				if err != nil {
					return err
				}
				if plan != nil {
					sts = sts[:0]
					for _, group := range plan[i] {
						for _, st := range group {
							sts = append(sts, st.SQL)
						}
					}
				}
				fmt.Fprintf(w, "-- %04d_%s\n", m.Version, m.Name)
				for _, st := range sts {
					fmt.Fprintf(w, "%s;\n\n", st)
				}
			}
			return w.Flush()
		},
	}
	sql.Flags().StringVar(&sqlCluster, "cluster", "", "print the replicated variant ON CLUSTER this cluster")
	sql.Flags().BoolVar(&sqlSharded, "sharded", false, "with --cluster: print the sharded layout (Distributed tables over mcpulse_local)")
	cmd.AddCommand(up, sql)
	return groupOnly(cmd)
}

// checkDDLTimeout refuses a --ddl-timeout under a second, or one that would outlast the
// connection's read timeout (the DSN's read_timeout, else the stores default): the client
// would give up before the server's answer naming the hosts that did not run the statement.
func checkDDLTimeout(d time.Duration, dsn string) error {
	if d < time.Second {
		return fmt.Errorf("--ddl-timeout must be at least 1s, got %s", d)
	}
	read := stores.DefaultClickHouseReadTimeout
	if opts, err := clickhouse.ParseDSN(dsn); err == nil && opts.ReadTimeout > 0 {
		read = opts.ReadTimeout
	}
	if d+5*time.Second > read {
		return fmt.Errorf("--ddl-timeout %s must stay at least 5s under the connection's read timeout %s (set read_timeout in the DSN to raise it)", d, read)
	}
	return nil
}
