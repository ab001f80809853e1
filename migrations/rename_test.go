package migrations_test

import (
	"context"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
	"github.com/mcpulse/mcpulse/stack"
)

// fence is the migration that renames the tables only the release before migration 0035
// names (rollup_epochs, rollup_writes), so that release fails on them.
const fence = 36

// applyBelow applies every migration below version to ch, recording each as Up does: the
// schema of the release before it.
func applyBelow(ctx context.Context, t *testing.T, ch driver.Conn, version int) {
	t.Helper()
	if _, err := migrations.UpWith(ctx, ch, nil, migrations.Options{Below: version}); err != nil {
		t.Fatal(err)
	}
}

// tableExists reports whether mcpulse.name exists.
func tableExists(ctx context.Context, t *testing.T, ch driver.Conn, name string) bool {
	t.Helper()
	var n uint64
	if err := ch.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = 'mcpulse' AND name = ?", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// A migration stopped after its first RENAME ran (the connection dropped) is applied by the
// next Up: that RENAME, which fails now that its source is gone (no IF EXISTS on 18.16), is
// taken as done, the next one runs, and the migration is recorded. The epochs and markers of
// the release before migration 0035 are in the renamed tables.
func TestARenameDoneByAnEarlierAttemptIsTakenAsDone(t *testing.T) {
	s := stack.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ch, err := stores.OpenClickHouse(ctx, s.ClickHouseDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	applyBelow(ctx, t, ch, fence)
	for _, q := range []string{
		"INSERT INTO mcpulse.rollup_epochs (name, epoch, taken_at) SELECT 'rollups', 7, now()",
		`INSERT INTO mcpulse.rollup_writes (kafka_topic, kafka_partition, as_of, hours, version)
SELECT 'mcp_tool_calls', 3, 120, [toDateTime('2026-03-01 10:00:00', 'UTC')], 30064771077`,
	} {
		if err := ch.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	var m migrations.Migration
	for _, m = range all {
		if m.Version == fence {
			break
		}
	}
	if len(m.Statements) != 2 {
		t.Fatalf("migration %04d has %d statements, want its two RENAMEs", fence, len(m.Statements))
	}
	first := m.Statements[0]
	if done, err := migrations.RenameDone(ctx, ch, first); err != nil || done {
		t.Fatalf("before the rename ran: RenameDone = %v, %v; want false", done, err)
	}
	// The first attempt: the first rename ran, then the connection dropped.
	if err := ch.Exec(ctx, first); err != nil {
		t.Fatal(err)
	}
	if done, err := migrations.RenameDone(ctx, ch, first); err != nil || !done {
		t.Fatalf("after the rename ran: RenameDone = %v, %v; want true", done, err)
	}
	applied, err := migrations.Up(ctx, ch, nil)
	if err != nil {
		t.Fatalf("Up after a rename of an attempt that stopped: %v", err)
	}
	if len(applied) == 0 || applied[0].Version != fence {
		t.Errorf("Up applied %d migrations, want %04d first", len(applied), fence)
	}
	recorded, err := migrations.AppliedVersions(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	if recorded[fence].Checksum != m.Checksum {
		t.Errorf("migration %d recorded as %+v", fence, recorded[fence])
	}
	for old, renamed := range map[string]string{"rollup_epochs": "rollup_epochs_taken", "rollup_writes": "rollup_writes_before_0035"} {
		if tableExists(ctx, t, ch, old) || !tableExists(ctx, t, ch, renamed) {
			t.Errorf("after Up: want %s renamed to %s", old, renamed)
		}
	}
	var epoch uint64
	if err := ch.QueryRow(ctx, "SELECT max(epoch) FROM mcpulse.rollup_epochs_taken").Scan(&epoch); err != nil || epoch != 7 {
		t.Errorf("the epoch taken before the rename: %d (%v), want 7", epoch, err)
	}
	var asOf int64
	if err := ch.QueryRow(ctx, "SELECT as_of FROM mcpulse.rollup_writes_before_0035 FINAL WHERE kafka_partition = 3").Scan(&asOf); err != nil || asOf != 120 {
		t.Errorf("the marker written before the rename: as_of %d (%v), want 120", asOf, err)
	}
}

// A RENAME is taken as done only when every source is gone and every target there: one whose
// source and target are both missing, or both there, failed for a reason of its own.
func TestRenameDoneOnlyWhenTheTablesAreWhereTheRenameLeftThem(t *testing.T) {
	s := stack.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ch, err := stores.OpenClickHouse(ctx, s.ClickHouseDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for _, st := range []string{
		"CREATE DATABASE IF NOT EXISTS mcpulse",
		"CREATE TABLE mcpulse.a (x UInt8) ENGINE = Memory",
		"CREATE TABLE mcpulse.b (x UInt8) ENGINE = Memory",
		"CREATE TABLE mcpulse.c (x UInt8) ENGINE = Memory",
	} {
		if err := ch.Exec(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		stmt string
		want bool
	}{
		{"RENAME TABLE mcpulse.gone TO mcpulse.a", true},
		{"RENAME TABLE mcpulse.gone TO mcpulse.a, mcpulse.gone_too TO mcpulse.b", true},
		{"rename table\n    mcpulse.gone to mcpulse.a", true},
		{"RENAME TABLE mcpulse.a TO mcpulse.b", false},          // source still there
		{"RENAME TABLE mcpulse.gone TO mcpulse.missing", false}, // target missing
		{"RENAME TABLE mcpulse.gone TO mcpulse.a, mcpulse.gone_too TO mcpulse.missing", false},
		{"RENAME TABLE mcpulse.b TO mcpulse.c, mcpulse.a TO mcpulse.b", false},       // b renamed back to, a still there
		{"RENAME TABLE mcpulse.gone TO mcpulse.c, mcpulse.b TO mcpulse.gone", false}, // gone renamed back to, but is missing
		{"RENAME TABLE gone TO a", false},                                            // not database-qualified
		{"RENAME TABLE mcpulse.gone TO mcpulse.a ON CLUSTER prod", false},            // the cluster form
		{"DROP TABLE mcpulse.gone", false},
	} {
		got, err := migrations.RenameDone(ctx, ch, c.stmt)
		if err != nil {
			t.Fatalf("%s: %v", c.stmt, err)
		}
		if got != c.want {
			t.Errorf("RenameDone(%q) = %v, want %v", c.stmt, got, c.want)
		}
	}
}
