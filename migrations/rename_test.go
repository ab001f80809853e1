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

// applyBelow creates the migrations table and applies every migration below version to ch
// statement by statement, recording each as Up does.
func applyBelow(ctx context.Context, t *testing.T, ch driver.Conn, version int) {
	t.Helper()
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range migrations.Bootstrap {
		if err := ch.Exec(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range all {
		if m.Version >= version {
			break
		}
		for _, st := range m.Statements {
			if err := ch.Exec(ctx, st); err != nil {
				t.Fatalf("migration %04d_%s: %v", m.Version, m.Name, err)
			}
		}
		if err := ch.Exec(ctx, `INSERT INTO mcpulse.schema_migrations (version, name, checksum, applied_at)
SELECT ?, ?, ?, now()`, uint32(m.Version), m.Name, m.Checksum); err != nil {
			t.Fatal(err)
		}
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
