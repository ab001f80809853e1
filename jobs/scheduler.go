// Package jobs runs mcpulse's scheduled jobs with robfig/cron: suppression reconcile (Redis
// rebuilt from ClickHouse), the contact-policy audit, the seal of the closed hours, the
// schema ratchet of each configured MCP server, the campaign flag lint, and the alert rules'
// evaluation.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"

	"github.com/mcpulse/mcpulse/consumers/rollup"
	"github.com/mcpulse/mcpulse/schemacheck"
	"github.com/mcpulse/mcpulse/suppression"
)

// SchedulerConfig configures NewScheduler.
type SchedulerConfig struct {
	// Redis holds the suppression records. Required.
	Redis redis.UniversalClient
	// ClickHouse holds the response history and audit. Required.
	ClickHouse driver.Conn
	// ReconcileSchedule is the cron spec of the suppression reconcile. "" disables it.
	// Default: "@every 15m".
	ReconcileSchedule string
	// ContactAuditSchedule is the cron spec of the contact-policy audit. "" disables it.
	// Default: "@hourly".
	ContactAuditSchedule string
	// ContactAuditWindow is how far back each contact-policy audit looks. Default: 30 days.
	ContactAuditWindow time.Duration
	// ContactPolicy, when set, gives each contact-policy audit its options (non-product tools,
	// exclusion members read afresh from a file or PostHog cohort); its error fails the run.
	// Default: nil, suppression.ContactPolicyOptions{}.
	ContactPolicy func(context.Context) (suppression.ContactPolicyOptions, error)
	// SealSchedule is the cron spec of the seal of the closed hours (rollup.SealClosedHours:
	// their ignored key paths and gate-reason calls and people, kept without the Kafka
	// partition). "" disables it: readers then take every hour from the per-partition rollup
	// rows, its gate-reason people from the raw rows. Default: "@every 10m".
	SealSchedule string
	// Location is the zone of schedules without CRON_TZ= or TZ= (ParseSchedule). Default:
	// time.Local.
	Location *time.Location
	// Timeout bounds one run of any job. Default: 10m.
	Timeout time.Duration
	// Logger receives one line per run. Default: discard.
	Logger *slog.Logger
	// Now returns the current time. Default: time.Now.
	Now func() time.Time
	// SchemaServers are the MCP servers whose tool schemas are checked, each on its own
	// schedule (ratchets.yaml).
	SchemaServers []schemacheck.ServerConfig
	// SchemaSummary, when set, receives every schema check's outcome (PostHog forwarding).
	SchemaSummary func(Run)
	// Getenv reads the environment variables of SchemaServers' tokens (auth_header_env, $NAME
	// in headers). Default: os.Getenv.
	Getenv func(string) string
	// Metrics, when set, records every scheduled run (NewJobMetrics). Default: nil, none.
	Metrics *JobMetrics
	// AlertSchedule is the cron spec of the alert evaluation. "" disables it. Default:
	// "@every 1m".
	AlertSchedule string
	// Alerts evaluates the alert rules and notifies their receivers; nil disables the job.
	Alerts AlertEvaluator
	// CampaignsLintSchedule is the cron spec of the campaign flag lint. "" disables it.
	// Default (`mcpulse scheduler`): "@every 15m" when a flag source is given.
	CampaignsLintSchedule string
	// CampaignsLint is the campaign flag lint (its flag source, retention); nil disables the
	// job. Its unset ClickHouse, Logger, Now, Timeout and Getenv are the scheduler's.
	CampaignsLint *CampaignsLint
}

// AlertEvaluator evaluates alert rules as of now and notifies their receivers once per
// transition across scheduler replicas (dashboards/alerts.Evaluator; an interface here so
// jobs does not depend on the dashboards). The error is the run's failure, already logged.
type AlertEvaluator interface {
	EvaluateAndLog(ctx context.Context, now time.Time) error
}

// The schedules `mcpulse scheduler` uses unless told otherwise.
const (
	DefaultReconcileSchedule    = "@every 15m"
	DefaultContactAuditSchedule = "@hourly"
	DefaultAlertSchedule        = "@every 1m"
	DefaultSealSchedule         = "@every 10m"
	// DefaultSchemaCheckSchedule applies to a ratchets.yaml server without a schedule.
	DefaultSchemaCheckSchedule = "@every 6h"
)

func (c *SchedulerConfig) setDefaults() {
	if c.ContactAuditWindow == 0 {
		c.ContactAuditWindow = 30 * 24 * time.Hour
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Minute
	}
	if c.Location == nil {
		c.Location = time.Local
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Getenv == nil {
		c.Getenv = os.Getenv
	}
}

// Validate lists every problem with the configuration.
func (c *SchedulerConfig) Validate() error {
	var errs []error
	if c.Redis == nil {
		errs = append(errs, errors.New("scheduler: no Redis client"))
	}
	if c.ClickHouse == nil {
		errs = append(errs, errors.New("scheduler: no ClickHouse connection"))
	}
	for name, spec := range map[string]string{"reconcile": c.ReconcileSchedule, "contact audit": c.ContactAuditSchedule, "alerts": c.AlertSchedule, "seal": c.SealSchedule, "campaigns lint": c.CampaignsLintSchedule} {
		if spec == "" {
			continue
		}
		if _, err := ParseSchedule(spec, c.Location); err != nil {
			errs = append(errs, fmt.Errorf("scheduler: %s schedule %q: %w", name, spec, err))
		}
	}
	return errors.Join(errs...)
}

// NewScheduler returns a cron scheduler (not started) with the jobs registered. Schedules are
// read by ParseSchedule (each wall-clock time runs once, daylight-saving transitions included).
// Every job runs behind cron.Recover (a panic is logged, the scheduler lives on),
// cron.SkipIfStillRunning (a slow run is never overlapped by the next) and the run guard
// (runGuard: each run once across scheduler replicas sharing the Redis). A schema server whose
// token variable is unset or empty is logged now, one error line per variable naming the
// server and the variable; its checks then fail saying so, without asking the server.
func NewScheduler(cfg SchedulerConfig) (*cron.Cron, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := newCron(cfg.Logger, cfg.Location)
	// add registers one job: job is its metrics label, what names it in errors.
	add := func(job, what, spec string, guard runGuard, run func() error) error {
		sched, err := ParseSchedule(spec, cfg.Location)
		if err != nil {
			return fmt.Errorf("scheduler: %s: schedule %q: %w", what, spec, err)
		}
		c.Schedule(sched, cron.FuncJob(cfg.Metrics.wrap(job, guarded(guard, sched, cfg.Logger, run))))
		return nil
	}
	guard := func(name string) runGuard {
		return runGuard{rdb: cfg.Redis, name: name, timeout: cfg.Timeout, now: cfg.Now}
	}
	alertSchedule := cfg.AlertSchedule
	if cfg.Alerts == nil {
		alertSchedule = ""
	}
	lintSchedule := cfg.CampaignsLintSchedule
	if cfg.CampaignsLint == nil {
		lintSchedule = ""
	}
	for _, j := range []struct {
		name, spec string
		run        func(SchedulerConfig) error
	}{
		{JobReconcile, cfg.ReconcileSchedule, ReconcileOnce},
		{JobContactAudit, cfg.ContactAuditSchedule, ContactAuditOnce},
		{JobAlerts, alertSchedule, AlertsOnce},
		{JobSeal, cfg.SealSchedule, SealOnce},
		{JobCampaignsLint, lintSchedule, CampaignsLintOnce},
	} {
		if j.spec == "" {
			continue
		}
		if err := add(j.name, j.name, j.spec, guard(j.name), func() error { return j.run(cfg) }); err != nil {
			return nil, err
		}
	}
	for _, server := range cfg.SchemaServers {
		if server.Schedule == "" {
			server.Schedule = DefaultSchemaCheckSchedule
		}
		var missing *schemacheck.MissingEnvError
		if errors.As(server.MissingEnv(cfg.Getenv), &missing) {
			for _, v := range missing.Missing {
				cfg.Logger.Error("schema check: token variable not set; every check of this server fails until the scheduler runs with it",
					"server", server.Name, "variable", v.Name, "setting", v.UsedBy)
			}
		}
		job := &SchemaRatchet{Server: server, ClickHouse: cfg.ClickHouse, Redis: cfg.Redis, Summary: cfg.SchemaSummary,
			Getenv: cfg.Getenv, Logger: cfg.Logger, Now: cfg.Now, Timeout: cfg.Timeout}
		if err := add(JobSchemaCheck, "schema check of "+server.Name, server.Schedule, job.guard(), job.checkAndLog); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// newCron returns a cron whose jobs run behind cron.SkipIfStillRunning and cron.Recover, in
// that order: Recover must be the inner wrapper, because a panic escaping SkipIfStillRunning
// would never release its "running" token, and every later run of the job would be skipped.
func newCron(log *slog.Logger, loc *time.Location) *cron.Cron {
	logger := cronLogger{log}
	return cron.New(cron.WithChain(cron.SkipIfStillRunning(logger), cron.Recover(logger)), cron.WithLogger(logger), cron.WithLocation(loc))
}

// ReconcileOnce runs one suppression reconcile and logs its report; the error is also logged.
func ReconcileOnce(cfg SchedulerConfig) error {
	cfg.setDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	start := time.Now()
	rep, err := suppression.Reconcile(ctx, cfg.ClickHouse, cfg.Redis, cfg.Now(), false)
	if err != nil {
		cfg.Logger.Error("suppression reconcile failed", "err", err, "took", time.Since(start))
		return err
	}
	cfg.Logger.Info("suppression reconcile", "identities", rep.Identities, "live", rep.Live, "repairs", rep.Repairs(),
		"missing", rep.Missing, "stale", rep.Stale, "wrong", rep.Wrong, "resets_restored", rep.ResetsRestored,
		"kept_newer", rep.KeptNewer, "unknown_to_clickhouse", rep.UnknownToClickHouse, "took", time.Since(start))
	return nil
}

// ContactAuditOnce runs one contact-policy audit over ContactAuditWindow and logs its counts;
// the error is also logged.
func ContactAuditOnce(cfg SchedulerConfig) error {
	cfg.setDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	now := cfg.Now()
	var opts suppression.ContactPolicyOptions
	if cfg.ContactPolicy != nil {
		var err error
		if opts, err = cfg.ContactPolicy(ctx); err != nil {
			cfg.Logger.Error("contact-policy audit failed", "err", err)
			return err
		}
	}
	a, err := suppression.AuditContactPolicyWith(ctx, cfg.ClickHouse, now.Add(-cfg.ContactAuditWindow), now, false, opts)
	if err != nil {
		cfg.Logger.Error("contact-policy audit failed", "err", err)
		return err
	}
	args := []any{"invitations", a.Invitations, "violations", len(a.Violations), "excluded_members", a.Excluded}
	for _, k := range suppression.ViolationKinds {
		args = append(args, k.Kind, a.ByKind[k.Kind])
	}
	cfg.Logger.Info("contact-policy audit", args...)
	return nil
}

// SealOnce seals the closed hours that need it (rollup.SealClosedHours) at cfg.Now() and logs
// what it sealed; the error is also logged.
func SealOnce(cfg SchedulerConfig) error {
	cfg.setDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	start := time.Now()
	res, err := rollup.SealClosedHours(ctx, cfg.ClickHouse, cfg.Now())
	if err != nil {
		cfg.Logger.Error("seal of the closed hours failed", "err", err, "sealed_hours", len(res.Hours), "took", time.Since(start))
		return err
	}
	cfg.Logger.Info("seal of the closed hours", "sealed_hours", len(res.Hours), "before", res.Through, "took", time.Since(start))
	return nil
}

// AlertsOnce evaluates the alert rules once at cfg.Now() (cfg.Alerts; nil does nothing).
func AlertsOnce(cfg SchedulerConfig) error {
	cfg.setDefaults()
	if cfg.Alerts == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	return cfg.Alerts.EvaluateAndLog(ctx, cfg.Now())
}

// cronLogger adapts slog to cron.Logger.
type cronLogger struct{ l *slog.Logger }

// Info implements cron.Logger. cron's routine scheduling chatter goes to Debug; a run skipped
// because the previous one is still running is a warning.
func (c cronLogger) Info(msg string, kv ...any) {
	if msg == "skip" {
		c.l.Warn("cron: skipped a run, the previous one is still running", kv...)
		return
	}
	c.l.Debug("cron: "+msg, kv...)
}

// Error implements cron.Logger (recovered panics and skipped overlapping runs arrive here).
func (c cronLogger) Error(err error, msg string, kv ...any) {
	c.l.Error("cron: "+msg, append(kv, "err", err)...)
}
