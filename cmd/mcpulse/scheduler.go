package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mcpulse/mcpulse/campaigns"
	"github.com/mcpulse/mcpulse/dashboards"
	"github.com/mcpulse/mcpulse/dashboards/alerts"
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
		alertReceivers           string
		alertRules               string
		lint                     campaignsLintFlags
		cfg                      jobs.SchedulerConfig
		policy                   = contactPolicyFlags{withLint: true}
	)
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "Run the scheduled jobs: suppression reconcile, contact-policy audit, seal of closed hours, schema checks, campaign flag lint and alerts",
		Long: `Runs mcpulse's scheduled jobs (robfig/cron) until interrupted:

  reconcile      rebuilds every live suppression record in Redis from the ClickHouse response
                 history and reset audit, repairing missing, stale and wrong records
  contact audit  checks the event log for invitations that broke the contact policy (sent
                 while suppressed or in cooldown, repeats within 7 days, before the warm-up
                 thresholds, to a client without URL elicitation, on another surface or a
                 task-bound request, twice from one evaluation, to an excluded person: see
                 mcpulse suppression audit --help and its flags, which it takes too); stores
                 them in contact_policy_violations. The exclusion members are read afresh at
                 each run
  schema check   (with --ratchets) lists each MCP server's tools and checks the schema
                 ratchets; every run lands in schema_check_runs and schema_check_tools. A
                 server whose token variable (auth_header_env, $NAME in headers) is not set
                 is named at start-up (server, variable), and each of its runs fails saying so
                 without asking the server. The tools a url or command server listed are also
                 stored in served_tool_schemas under the name and version its initialize
                 result gives (serverInfo), where the consumer finds the schemas of calls
                 traced without them (@traceloop/instrumentation-mcp); on by default,
                 store_served_schemas: false in ratchets.yaml turns it off per server
  alerts         evaluates the alert rules (dashboards/alerts/*.yaml, plus --alert-rules DIR)
                 and notifies their receivers (--alert-receivers FILE: Alertmanager-format
                 webhooks, Slack incoming webhooks) once when an alert fires and once when it
                 resolves, however many replicas run; the history is on the alerts dashboard
  seal           recomputes each closed hour not sealed yet, or whose rollups changed since,
                 from the raw tool calls: its ignored key paths and the calls and distinct
                 people of its gate-reason cells, kept as plain counts without the Kafka
                 partition, whose per-partition rollup rows it then deletes; readers take
                 the hours without a current seal from the per-partition or raw rows.
                 A closed hour is one that ended over an hour ago (an hour is sealed
                 from the start of the second hour after it, leaving an hour for
                 in-flight events); its log line's "before" is the first hour not sealed
  campaigns lint (with --flags-file or --campaigns-project-id, or --campaigns-config giving a
                 project) reads the PostHog flags mcp-interview-recruitment and
                 mcp-intent-prompt, lints them as mcpulse campaigns lint does, and stores the
                 run: one campaign_lint_runs row per flag and variant (will_recruit,
                 exclusion_ok, problems) and every payload version seen in
                 flag_payload_versions (SHA-256 of the payload; first and last seen; a row
                 with removed = 1 when a variant goes). Runs older than
                 --campaigns-lint-retention are deleted. The alerts campaign-cannot-recruit
                 and campaign-lost-exclusion fire from them; the recruitment dashboard shows
                 each campaign's lint state and payload changes. The personal API key is read
                 from $` + campaigns.EnvPersonalAPIKey + ` (or the variable the config names).

Every job runs once per period across scheduler replicas sharing the Redis (a lock per job
while it runs, and its last start kept for one period). A panicking run is logged and the
scheduler lives on; a run still going when the next is due is skipped, never overlapped.

Schedules are cron specs ("0 3 * * *", "@hourly") or "@every 15m"; "" disables a job. A spec
runs on the machine's local time unless it starts with CRON_TZ=<zone> (or TZ=<zone>), e.g.
"CRON_TZ=Europe/Paris 30 2 * * *". Each wall-clock time runs exactly once, also on
daylight-saving days: a time the clocks skip runs when they land (02:30 runs at 03:00), a time
they repeat runs at its first occurrence only. @every counts elapsed time.`,
		Example: "  mcpulse scheduler\n  mcpulse scheduler --reconcile '@every 5m' --contact-audit ''\n" +
			"  MCPULSE_ALERT_SLACK_URL=https://hooks.slack.com/services/... mcpulse scheduler --alert-receivers alert-receivers.yaml\n" +
			"  " + campaigns.EnvPersonalAPIKey + "=phx_... mcpulse scheduler --campaigns-config campaigns.yaml --campaigns-lint '@every 15m'",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := policy.check(); err != nil {
				return err
			}
			cfg.ContactPolicy = policy.options
			if cfg.ContactAuditWindow <= 0 {
				return fmt.Errorf("--contact-audit-window must be positive, got %s (e.g. 720h for 30 days)", cfg.ContactAuditWindow)
			}
			var err error
			if cfg.Logger, err = newLogger(logFormat); err != nil {
				return err
			}
			lint.cohort = policy.cohortID
			if cfg.CampaignsLint, err = lint.job(cmd.Flags()); err != nil {
				return err
			}
			policy.shareLintSource(cfg.CampaignsLint, cmd.Flags())
			if policy.exclusionFile == "" && policy.cohortID != 0 && policy.cohortProject == "" {
				cfg.Logger.Warn("the contact-policy audit reads no exclusion cohort members: --exclusion-cohort has no PostHog project (give --exclusion-cohort-project, --campaigns-project-id or --exclusion-members)")
			}
			rdb, ch, closeStores, err := openStores(ctx, redisURL, dsn)
			if err != nil {
				return err
			}
			closing := &stopBudget{log: cfg.Logger}
			defer closing.close("closing the Redis and ClickHouse clients", func() error { closeStores(); return nil })
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
				defer closing.close("flushing the PostHog queue", fw.Close) // queued summaries
				cfg.SchemaSummary = jobs.SchemaSummary(fw)
			}
			if cfg.AlertSchedule != "" {
				if cfg.Alerts, err = newAlertEvaluator(alertRules, alertReceivers, rdb, ch, cfg.Logger); err != nil {
					return err
				}
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
			lintSchedule := ""
			if cfg.CampaignsLint != nil {
				lintSchedule = cfg.CampaignsLintSchedule
			}
			cfg.Logger.Info("scheduler started", "reconcile", cfg.ReconcileSchedule, "contact_audit", cfg.ContactAuditSchedule, "alerts", cfg.AlertSchedule, "seal", cfg.SealSchedule, "campaigns_lint", lintSchedule)
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
	f.StringVar(&cfg.SealSchedule, "seal", jobs.DefaultSealSchedule, "schedule of the seal of closed hours (ignored key paths, gate-reason calls and people)")
	f.StringVar(&cfg.AlertSchedule, "alerts", jobs.DefaultAlertSchedule, "schedule of the alert rules' evaluation")
	f.StringVar(&alertReceivers, "alert-receivers", "", "the alert receivers file (see alert-receivers.example.yaml); without it alerts are recorded (alerts dashboard) but sent nowhere")
	f.StringVar(&alertRules, "alert-rules", "", "a directory of further alert rules (*.yaml, the format of dashboards/alerts), evaluated beside the built-in ones")
	f.DurationVar(&cfg.ContactAuditWindow, "contact-audit-window", 30*24*time.Hour, "how far back each contact-policy audit looks")
	policy.add(f)
	f.StringVar(&ratchets, "ratchets", "", "ratchets.yaml: the MCP servers whose tool schemas are checked on their schedules (see ratchets.example.yaml)")
	f.StringVar(&posthogHost, "posthog-host", "", "send each schema check's summary to this PostHog instance (e.g. https://us.i.posthog.com)")
	f.StringVar(&posthogKey, "posthog-api-key", os.Getenv(posthogAPIKeyEnv), "PostHog project API key for --posthog-host (default $"+posthogAPIKeyEnv+")")
	f.StringVar(&cfg.CampaignsLintSchedule, "campaigns-lint", jobs.DefaultCampaignsLintSchedule, "schedule of the campaign flag lint; it runs only with a flag source (--flags-file, --campaigns-project-id or --campaigns-config)")
	f.StringVar(&lint.file, "flags-file", "", "campaign flag lint: a PostHog flag definitions file, re-read at every run")
	f.StringVar(&lint.project, "campaigns-project-id", "", "campaign flag lint: the PostHog project whose flags are read through its feature-flags API (key in $"+campaigns.EnvPersonalAPIKey+")")
	f.StringVar(&lint.host, "campaigns-posthog-host", campaigns.DefaultPostHogHost, "campaign flag lint: PostHog API host for --campaigns-project-id")
	f.StringVar(&lint.config, "campaigns-config", "", "campaign flag lint: campaigns.yaml with exclusion_cohort and the PostHog project (see campaigns.example.yaml); flags given override it")
	f.DurationVar(&lint.retention, "campaigns-lint-retention", campaigns.DefaultRetention, "campaign flag lint: delete stored lint runs older than this")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	addMetricsListenFlag(f, &metricsListen)
	return cmd
}

// campaignsLintFlags are the scheduler's campaign flag lint flags.
type campaignsLintFlags struct {
	file, project, host, config string
	cohort                      int64
	retention                   time.Duration
}

// job returns the scheduler's campaign flag lint, or nil when no flag source is given (no
// --flags-file, --campaigns-project-id or --campaigns-config). The source is resolved as
// `mcpulse campaigns lint` resolves it (campaigns.ResolveSource); its errors and a retention
// that is not positive stop the scheduler before it starts.
func (l campaignsLintFlags) job(f *pflag.FlagSet) (*jobs.CampaignsLint, error) {
	if l.file == "" && l.project == "" && l.config == "" {
		return nil, nil
	}
	if l.retention <= 0 {
		return nil, fmt.Errorf("--campaigns-lint-retention must be positive, got %s (e.g. 720h for 30 days)", l.retention)
	}
	if l.file == "-" {
		return nil, errors.New("--flags-file -: the scheduler re-reads the file at every run, so it cannot be standard input")
	}
	src, err := campaigns.ResolveSource(campaigns.Source{File: l.file, ProjectID: l.project, Host: l.host, ExclusionCohort: l.cohort}, l.config,
		campaigns.Given{ExclusionCohort: f.Changed("exclusion-cohort"), Host: f.Changed("campaigns-posthog-host"), ProjectID: f.Changed("campaigns-project-id")})
	switch {
	case errors.Is(err, campaigns.ErrNoSource):
		return nil, fmt.Errorf("--campaigns-config gives no PostHog project: give --flags-file or --campaigns-project-id too")
	case errors.Is(err, campaigns.ErrTwoSources):
		return nil, fmt.Errorf("give --flags-file or --campaigns-project-id, not both")
	case errors.Is(err, campaigns.ErrNegativeCohort):
		return nil, fmt.Errorf("--exclusion-cohort %d is not a cohort id", src.ExclusionCohort)
	case err != nil:
		return nil, err
	}
	return &jobs.CampaignsLint{Source: src, Retention: l.retention}, nil
}

// newAlertEvaluator loads the built-in alert rules (and those of rulesDir), the receivers file
// (when given) and returns the scheduler's evaluator. A rule naming a receiver the file lacks is
// logged, not refused: its transitions are still recorded.
func newAlertEvaluator(rulesDir, receiversFile string, rdb redis.UniversalClient, ch driver.Conn, logger *slog.Logger) (*alerts.Evaluator, error) {
	ds, err := dashboards.Load()
	if err != nil {
		return nil, err
	}
	rules, err := alerts.DefaultRules(ds)
	if err != nil {
		return nil, err
	}
	if rulesDir != "" {
		more, err := alerts.LoadRulesDir(rulesDir, ds)
		if err != nil {
			return nil, err
		}
		for _, r := range more {
			if slices.ContainsFunc(rules, func(d alerts.Rule) bool { return d.Name == r.Name }) {
				return nil, fmt.Errorf("--alert-rules: rule %s has the name of a built-in rule; rename the file", r.Name)
			}
		}
		rules = append(rules, more...)
	}
	var receivers alerts.ReceiversConfig
	if receiversFile != "" {
		if receivers, err = alerts.LoadReceivers(receiversFile, nil); err != nil {
			return nil, err
		}
	}
	ev := &alerts.Evaluator{Rules: rules, Dashboards: ds, Receivers: receivers, ClickHouse: ch, Redis: rdb, Logger: logger}
	if err := ev.Validate(); err != nil {
		logger.Warn("alerts: some notifications go nowhere", "err", err)
	}
	return ev, nil
}
