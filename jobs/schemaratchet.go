package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"

	"github.com/mcpulse/mcpulse/internal/safetext"
	"github.com/mcpulse/mcpulse/schemacheck"
)

// SchemaRatchet is the scheduled schema check of one MCP server: list its tools (or, for a
// traffic server, read the snapshots of the version seen most recently), check the ratchets,
// store the run in schema_check_runs and its tools in schema_check_tools.
//
// A url or command server's listed tools are also stored in served_tool_schemas
// (schemacheck.StoreServedSchemas), under the name and version the server gives itself in its
// initialize result's serverInfo, seen at the run's start: the consumer reads a server
// version's schemas there for calls whose listing named the tool without a schema (the spans
// of @traceloop/instrumentation-mcp), so such a server's calls get their ignored keys. On by
// default; ratchets.yaml's store_served_schemas: false turns it off for a server. A server
// whose serverInfo has no name is logged and nothing is stored for it.
type SchemaRatchet struct {
	Server     schemacheck.ServerConfig
	ClickHouse driver.Conn
	// Redis, when set, makes each scheduled run happen once across scheduler replicas.
	Redis redis.UniversalClient
	// Getenv reads the token variables (auth_header_env, $NAME in headers). Default: os.Getenv.
	Getenv func(string) string
	// Summary, when set, receives each run's outcome (PostHog forwarding).
	Summary func(Run)
	Logger  *slog.Logger
	Now     func() time.Time
	// Timeout bounds one run, listing included. Default: 2m.
	Timeout time.Duration
}

// Run is one schema check's outcome: Report is nil when the server could not be checked
// (schemacheck.Run, stored by schemacheck.StoreRun).
type Run = schemacheck.Run

// RunOnce checks the server now and stores the run. A server that cannot be reached (or, for
// a traffic server, whose tools/list was never seen) is stored as a failed run (reached = 0,
// the error kept), never as a run with zero tools.
func (j *SchemaRatchet) RunOnce(ctx context.Context) (Run, error) {
	j.setDefaults()
	started := j.Now().UTC()
	run := schemacheck.NewRun(j.Server.Name, schemacheck.RunFromServer, started)
	ctx, cancel := context.WithTimeout(ctx, j.Timeout)
	defer cancel()
	var tools []schemacheck.Tool
	var listing *schemacheck.Listing // what a url or command server was listed
	var err error
	if t := j.Server.Traffic; t != nil {
		run.Source = schemacheck.RunFromTraffic
		var snap schemacheck.Snapshot
		snap, err = schemacheck.LoadFromTraffic(ctx, j.ClickHouse, t.Source())
		tools, run.ServerVersion = snap.Tools, snap.ServerVersion
	} else {
		var src schemacheck.Source
		if src, err = j.Server.Source(j.Getenv); err == nil {
			var l schemacheck.Listing
			if l, err = schemacheck.LoadListing(ctx, src); err == nil {
				tools, listing = l.Tools, &l
			}
		}
	}
	if err == nil {
		run.Report = schemacheck.Check(tools, j.Server.Settings())
	}
	run.Err = err
	run.Duration = j.Now().Sub(started)
	if serr := schemacheck.StoreRun(context.WithoutCancel(ctx), j.ClickHouse, run); serr != nil {
		return run, fmt.Errorf("store schema check of %s: %w", j.Server.Name, serr)
	}
	if listing != nil && j.Server.StoresServedSchemas() {
		n, serr := schemacheck.StoreServedSchemas(context.WithoutCancel(ctx), j.ClickHouse, run, *listing)
		switch {
		case errors.Is(serr, schemacheck.ErrNoServerName):
			j.Logger.Warn("schema check: served schemas not stored", "server", j.Server.Name, "err", serr)
		case serr != nil:
			return run, fmt.Errorf("store the served schemas of %s: %w", j.Server.Name, serr)
		default:
			j.Logger.Info("schema check: served schemas stored", "server", j.Server.Name,
				"server_info_name", safetext.Escape(listing.Server.Name), "server_info_version", safetext.Escape(listing.Server.Version), "tools", n)
		}
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
	var missing *schemacheck.MissingEnvError
	switch {
	case err != nil:
		j.Logger.Error("schema check could not be stored", "server", j.Server.Name, "err", err)
	case errors.As(run.Err, &missing):
		names := make([]string, len(missing.Missing))
		for i, v := range missing.Missing {
			names[i] = v.Name
		}
		j.Logger.Error("schema check not run: token variable not set, server not asked", "server", j.Server.Name,
			"variables", names, "err", run.Err)
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
