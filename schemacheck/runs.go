package schemacheck

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
)

// Where a stored run's tools came from: schema_check_runs.source.
const (
	// RunFromServer: the tools were listed from the server (Streamable HTTP or stdio).
	RunFromServer = "server"
	// RunFromTraffic: the snapshots the server served in traffic (LoadFromTraffic).
	RunFromTraffic = "traffic"
	// RunFromFile: a saved tools file or snapshot (LoadFromFile), checked by hand.
	RunFromFile = "file"
)

// Run is one schema check of one server as stored in schema_check_runs (one row) and
// schema_check_tools (one row per tool of the report). The scheduler's ratchet job and
// `mcpulse schemacheck --store` both record their checks as a Run through StoreRun, so the
// Schema ratchet dashboard and the ratchet-broken alert read one history.
type Run struct {
	// ID is a UUIDv7 (NewRun), the run_id of its rows.
	ID string
	// Server is the name the run is stored and charted under (ratchets.yaml's name, or
	// --server-name by hand).
	Server    string
	StartedAt time.Time
	Duration  time.Duration
	// Err is why the server could not be checked; Report is then nil and the run is stored
	// with reached = 0 and the error, never as a run with zero tools.
	Err    error
	Report *Report
	// Source is RunFromServer, RunFromTraffic or RunFromFile; ServerVersion is the version a
	// traffic run checked ("" otherwise).
	Source        string
	ServerVersion string
}

// NewRun starts the record of a check of server from source, started at started (stored as
// UTC seconds), with a fresh run id.
func NewRun(server, source string, started time.Time) Run {
	return Run{ID: uuid.Must(uuid.NewV7()).String(), Server: server, Source: source, StartedAt: started.UTC()}
}

// StoreRun inserts run into schema_check_runs and its report's tools into schema_check_tools.
// Storing the same run id twice is harmless (ReplacingMergeTree; readers use FINAL). The
// error is ClickHouse's, or a BUG when a row does not fit the tables.
func StoreRun(ctx context.Context, ch driver.Conn, run Run) error {
	r := run.Report
	if r == nil {
		r = &Report{Violations: []string{}, Notes: []string{}}
	}
	errText, reached, ok := "", uint8(1), uint8(0)
	if run.Err != nil {
		errText, reached = run.Err.Error(), 0
	} else if r.OK() {
		ok = 1
	}
	batch, err := ch.PrepareBatch(ctx, `INSERT INTO mcpulse.schema_check_runs (run_id, server, started_at, duration_ms,
reached, error, ok, tools, char_limit, oversized, max_oversized, nested_properties, described_nested_properties,
nested_description_coverage, min_nested_coverage, full_nested_description_coverage, name_failures, violations, notes,
source, server_version)`)
	if err != nil {
		return err
	}
	if err := batch.Append(run.ID, run.Server, run.StartedAt, uint32(run.Duration.Milliseconds()), reached, errText, ok,
		uint32(r.Tools), uint32(r.CharLimit), uint32(r.Oversized), uint32(r.MaxOversized), uint32(r.NestedProperties),
		uint32(r.DescribedNestedProperties), r.NestedDescriptionCoverage, r.MinNestedCoverage, r.FullNestedDescriptionCoverage,
		uint32(r.NameFailures), nonNil(r.Violations), nonNil(r.Notes), cmp.Or(run.Source, RunFromServer), run.ServerVersion); err != nil {
		_ = batch.Abort()
		return fmt.Errorf("BUG: append run: %w", err)
	}
	if err := batch.Send(); err != nil {
		return err
	}
	if len(r.PerTool) == 0 {
		return nil
	}
	tools, err := ch.PrepareBatch(ctx, `INSERT INTO mcpulse.schema_check_tools (run_id, server, started_at, tool_name,
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
