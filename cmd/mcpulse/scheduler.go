package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/forward"
	"github.com/mcpulse/mcpulse/internal/obs"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/jobs"
	"github.com/mcpulse/mcpulse/schemacheck"
)

func newSchedulerCmd() *cobra.Command {
	var (
		redisURL, dsn, logFormat string
		metricsListen            string
		ratchets                 string
		posthogHost, posthogKey  string
		cfg                      jobs.SchedulerConfig
	)
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "Run the scheduled jobs: suppression reconcile, contact-policy audit, rollup seal and schema checks",
		Long: `Runs mcpulse's scheduled jobs (robfig/cron) until interrupted:

  reconcile      rebuilds every live suppression record in Redis from the ClickHouse response
                 history and reset audit, repairing missing, stale and wrong records
  contact audit  checks the event log for invitations sent while suppressed or in cooldown,
                 and repeat invitations within 7 days; stores them in contact_policy_violations
  seal           recomputes every closed hour (before the previous hour) of the ignored-key
                 rate rollup as exact counts in ignored_key_rates_hourly_sealed, which the
                 tool-diagnostics panels read instead of the uuid states
  schema check   (with --ratchets) lists each MCP server's tools and checks the schema
                 ratchets; every run lands in schema_check_runs and schema_check_tools, once
                 across scheduler replicas (a Redis lock per server and period)

A panicking run is logged and the scheduler lives on; a run still going when the next is due
is skipped, never overlapped. Schedules are cron specs or "@every 15m"; "" disables a job.`,
		Example: "  mcpulse scheduler\n  mcpulse scheduler --reconcile '@every 5m' --contact-audit ''",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var err error
			if cfg.Logger, err = newLogger(logFormat); err != nil {
				return err
			}
			rdb, ch, closeStores, err := openStores(ctx, redisURL, dsn)
			if err != nil {
				return err
			}
			defer closeStores()
			cfg.Redis, cfg.ClickHouse = rdb, ch
			if ratchets != "" {
				conf, err := schemacheck.LoadConfig(ratchets)
				if err != nil {
					return err
				}
				cfg.SchemaServers = conf.Servers
			}
			if posthogHost != "" {
				if posthogKey == "" {
					return fmt.Errorf("--posthog-host needs --posthog-api-key (or $%s)", posthogAPIKeyEnv)
				}
				fw, err := forward.New(posthogHost, posthogKey, cfg.Logger)
				if err != nil {
					return err
				}
				defer fw.Close() // flushes queued summaries on shutdown
				cfg.SchemaSummary = jobs.SchemaSummary(fw)
			}
			reg := newProcessRegistry()
			if cfg.Metrics, err = jobs.NewJobMetrics(reg); err != nil {
				return err
			}
			c, err := jobs.NewScheduler(cfg)
			if err != nil {
				return err
			}
			stopMetrics, err := serveMetrics(ctx, metricsListen, reg, cfg.Logger, obs.RedisCheck(rdb), obs.ClickHouseCheck(ch))
			if err != nil {
				return err
			}
			defer stopMetrics()
			c.Start()
			cfg.Logger.Info("scheduler started", "reconcile", cfg.ReconcileSchedule, "contact_audit", cfg.ContactAuditSchedule, "seal", cfg.SealSchedule)
			<-ctx.Done()
			<-c.Stop().Done() // let a running job finish
			cfg.Logger.Info("scheduler stopped")
			return nil
		},
	}
	addAllowEvictionFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&redisURL, "redis", os.Getenv(stores.EnvRedisURL), "Redis URL (default $"+stores.EnvRedisURL+")")
	f.StringVar(&dsn, "clickhouse", os.Getenv(stores.EnvClickHouseDSN), "ClickHouse DSN, native protocol (default $"+stores.EnvClickHouseDSN+")")
	f.StringVar(&cfg.ReconcileSchedule, "reconcile", jobs.DefaultReconcileSchedule, "schedule of the suppression reconcile")
	f.StringVar(&cfg.ContactAuditSchedule, "contact-audit", jobs.DefaultContactAuditSchedule, "schedule of the contact-policy audit")
	f.StringVar(&cfg.SealSchedule, "seal", jobs.DefaultSealSchedule, "schedule of the rollup seal (closed hours of the ignored-key rates as exact counts)")
	f.DurationVar(&cfg.ContactAuditWindow, "contact-audit-window", 30*24*time.Hour, "how far back each contact-policy audit looks")
	f.StringVar(&ratchets, "ratchets", "", "ratchets.yaml: the MCP servers whose tool schemas are checked on their schedules (see ratchets.example.yaml)")
	f.StringVar(&posthogHost, "posthog-host", "", "send each schema check's summary to this PostHog instance (e.g. https://us.i.posthog.com)")
	f.StringVar(&posthogKey, "posthog-api-key", os.Getenv(posthogAPIKeyEnv), "PostHog project API key for --posthog-host (default $"+posthogAPIKeyEnv+")")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	addMetricsListenFlag(f, &metricsListen)
	return cmd
}
