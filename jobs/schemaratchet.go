package jobs

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"

	"github.com/mcpulse/mcpulse/schemacheck"
)

// SchemaRatchet is the scheduled schema check of one MCP server: list its tools (or, for a
// traffic server, read the snapshots of the version seen most recently), check the ratchets,
// store the run in schema_check_runs and its tools in schema_check_tools.
type SchemaRatchet struct {
	Server     schemacheck.ServerConfig
	ClickHouse driver.Conn
	// Redis, when set, makes each scheduled run happen once across scheduler replicas.
	Redis redis.UniversalClient
	// Getenv reads the auth header's environment variable. Default: os.Getenv.
	Getenv func(string) string
	// Summary, when set, receives each run's outcome (PostHog forwarding).
	Summary func(Run)
	Logger  *slog.Logger
	Now     func() time.Time
	// Timeout bounds one run, listing included. Default: 2m.
	Timeout time.Duration
}

// Run is one schema check's outcome: Report is nil when the server could not be checked.
type Run struct {
	ID        string
	Server    string
	StartedAt time.Time
	Duration  time.Duration
	Err       error
	Report    *schemacheck.Report
	// Source is "server" (the tools were listed) or "traffic" (snapshots seen in traffic);
	// ServerVersion is the version a traffic run checked.
	Source        string
	ServerVersion string
}

// RunOnce checks the server now and stores the run. A server that cannot be reached (or, for
// a traffic server, whose tools/list was never seen) is stored as a failed run (reached = 0,
// the error kept), never as a run with zero tools.
func (j *SchemaRatchet) RunOnce(ctx context.Context) (Run, error) {
	j.setDefaults()
	started := j.Now().UTC()
	run := Run{ID: uuid.Must(uuid.NewV7()).String(), Server: j.Server.Name, StartedAt: started}
	ctx, cancel := context.WithTimeout(ctx, j.Timeout)
	defer cancel()
	var tools []schemacheck.Tool
	var err error
	if t := j.Server.Traffic; t != nil {
		run.Source = "traffic"
		var snap schemacheck.Snapshot
		snap, err = schemacheck.LoadFromTraffic(ctx, j.ClickHouse, t.Source())
		tools, run.ServerVersion = snap.Tools, snap.ServerVersion
	} else {
		run.Source = "server"
		var src schemacheck.Source
		if src, err = j.Server.Source(j.Getenv); err == nil {
			tools, err = schemacheck.LoadFromServer(ctx, src)
		}
	}
	if err == nil {
		run.Report = schemacheck.Check(tools, j.Server.Settings())
	}
	run.Err = err
	run.Duration = j.Now().Sub(started)
	if serr := j.store(context.WithoutCancel(ctx), run); serr != nil {
		return run, fmt.Errorf("store schema check of %s: %w", j.Server.Name, serr)
	}
	if j.Summary != nil {
		j.Summary(run)
	}
	return run, nil
}

func (j *SchemaRatchet) setDefaults() {
	if j.Getenv == nil {
		j.Getenv = os.Getenv
	}
	if j.Logger == nil {
		j.Logger = slog.New(slog.DiscardHandler)
	}
	if j.Now == nil {
		j.Now = time.Now
	}
	if j.Timeout == 0 {
		j.Timeout = 2 * time.Minute
	}
}

// guard is the schema check's run guard (runGuard): one lock and last start per server, so
// each scheduled check of a server happens once across scheduler replicas. Without Redis there
// is no guard.
func (j *SchemaRatchet) guard() runGuard {
	j.setDefaults()
	return runGuard{rdb: j.Redis, name: JobSchemaCheck + "/" + j.Server.Name, timeout: j.Timeout, now: j.Now}
}

// scheduled is the cron entry on the schedule sched: the run guard, then checkAndLog.
func (j *SchemaRatchet) scheduled(sched cron.Schedule) func() error {
	j.setDefaults()
	return guarded(j.guard(), sched, j.Logger, j.checkAndLog)
}

// checkAndLog runs the check and logs the outcome; it returns the failure of a check that could
// not run or be stored. A panic is left to cron.Recover; a hanging server ends at Timeout.
func (j *SchemaRatchet) checkAndLog() error {
	j.setDefaults()
	run, err := j.RunOnce(context.Background())
	switch {
	case err != nil:
		j.Logger.Error("schema check could not be stored", "server", j.Server.Name, "err", err)
	case run.Err != nil:
		j.Logger.Error("schema check failed: server not checked", "server", j.Server.Name, "err", run.Err)
	case !run.Report.OK():
		j.Logger.Warn("schema ratchet broke", "server", j.Server.Name, "violations", run.Report.Violations)
	default:
		j.Logger.Info("schema ratchet holds", "server", j.Server.Name, "tools", run.Report.Tools,
			"oversized", run.Report.Oversized, "nested_description_coverage", run.Report.NestedDescriptionCoverage)
	}
	return cmp.Or(err, run.Err)
}

func (j *SchemaRatchet) store(ctx context.Context, run Run) error {
	r := run.Report
	if r == nil {
		r = &schemacheck.Report{Violations: []string{}, Notes: []string{}}
	}
	errText, reached, ok := "", uint8(1), uint8(0)
	if run.Err != nil {
		errText, reached = run.Err.Error(), 0
	} else if r.OK() {
		ok = 1
	}
	batch, err := j.ClickHouse.PrepareBatch(ctx, `INSERT INTO mcpulse.schema_check_runs (run_id, server, started_at, duration_ms,
reached, error, ok, tools, char_limit, oversized, max_oversized, nested_properties, described_nested_properties,
nested_description_coverage, min_nested_coverage, full_nested_description_coverage, name_failures, violations, notes,
source, server_version)`)
	if err != nil {
		return err
	}
	if err := batch.Append(run.ID, run.Server, run.StartedAt, uint32(run.Duration.Milliseconds()), reached, errText, ok,
		uint32(r.Tools), uint32(r.CharLimit), uint32(r.Oversized), uint32(r.MaxOversized), uint32(r.NestedProperties),
		uint32(r.DescribedNestedProperties), r.NestedDescriptionCoverage, r.MinNestedCoverage, r.FullNestedDescriptionCoverage,
		uint32(r.NameFailures), nonNil(r.Violations), nonNil(r.Notes), cmp.Or(run.Source, "server"), run.ServerVersion); err != nil {
		_ = batch.Abort()
		return fmt.Errorf("BUG: append run: %w", err)
	}
	if err := batch.Send(); err != nil {
		return err
	}
	if len(r.PerTool) == 0 {
		return nil
	}
	tools, err := j.ClickHouse.PrepareBatch(ctx, `INSERT INTO mcpulse.schema_check_tools (run_id, server, started_at, tool_name,
schema_chars, oversized, nested, described, full_nested, full_described, name_ok, name_warnings, problems, truncated)`)
	if err != nil {
		return err
	}
	for _, t := range r.PerTool {
		if err := tools.Append(run.ID, run.Server, run.StartedAt, t.Name, uint32(t.SchemaChars), b2u(t.Oversized), uint32(t.Nested),
			uint32(t.Described), uint32(t.FullNested), uint32(t.FullDescribed), b2u(t.NameOK), nonNil(t.NameWarnings), nonNil(t.Problems), b2u(t.Truncated)); err != nil {
			_ = tools.Abort()
			return fmt.Errorf("BUG: append tool: %w", err)
		}
	}
	return tools.Send()
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
