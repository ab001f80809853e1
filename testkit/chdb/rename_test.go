package chdb_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/migrations"
)

// On the current engine too, a migration whose RENAME ran but which was not recorded is
// applied by the next migrations.Up (the RENAME, failing now, is found done), and the old
// markers table is only there under its new name: migration 0036 on a re-run.
func TestARenameDoneByAnEarlierAttemptIsTakenAsDoneOnCurrentEngine(t *testing.T) {
	const fencedMarkers = 36
	cur := openCurrent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range migrations.Bootstrap {
		if err := cur.Exec(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range all {
		if m.Version > fencedMarkers {
			break
		}
		for _, st := range m.Statements {
			if err := cur.Exec(ctx, st); err != nil {
				t.Fatalf("migration %04d_%s: %v", m.Version, m.Name, err)
			}
		}
		if m.Version == fencedMarkers {
			break // ran, not recorded
		}
		if err := cur.Exec(ctx, `INSERT INTO mcpulse.schema_migrations (version, name, checksum, applied_at)
SELECT ?, ?, ?, now()`, uint32(m.Version), m.Name, m.Checksum); err != nil {
			t.Fatal(err)
		}
	}
	applied, err := migrations.Up(ctx, cur, nil)
	if err != nil {
		t.Fatalf("Up after a rename that was not recorded: %v", err)
	}
	if len(applied) == 0 || applied[0].Version != fencedMarkers {
		t.Errorf("Up applied %d migrations, want %04d first", len(applied), fencedMarkers)
	}
	var tables []string
	rows, err := cur.Query(ctx, "SELECT name FROM system.tables WHERE database = 'mcpulse' AND startsWith(name, 'rollup_writes') ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	if len(tables) != 1 || tables[0] != "rollup_writes_before_0035" {
		t.Errorf("markers tables of the release before 0035 after Up: %v, want [rollup_writes_before_0035]", tables)
	}
}
