package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
)

func newMigrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Manage the ClickHouse schema (database mcpulse)",
	}
	var dsn string
	up := &cobra.Command{
		Use:   "up",
		Short: "Create or upgrade database mcpulse: raw tables, rollups, materialized views, analyst views",
		Long: `Applies every embedded migration (migrations/sql/NNNN_name.sql) not yet recorded in
mcpulse.schema_migrations, in order. Safe to run any number of times: the statements are
idempotent and applied versions are skipped. Works on ClickHouse 18.16 and current releases.`,
		Example: "  mcpulse migrate up\n  mcpulse migrate up --clickhouse clickhouse://default@127.0.0.1:9000/default",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			conn, err := stores.OpenClickHouse(ctx, dsn)
			if err != nil {
				return err
			}
			defer conn.Close()
			log := slog.New(slog.NewTextHandler(os.Stderr, nil))
			applied, err := migrations.Up(ctx, conn, log)
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
	cmd.AddCommand(up)
	return groupOnly(cmd)
}
