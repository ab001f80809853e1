package chdb_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/migrations"
)

// On the current engine too, a migration whose RENAMEs ran but which was not recorded (the
// connection dropped before Up recorded it) is applied by the next migrations.Up (each RENAME,
// failing now, is found done), and the tables are only there under their new names:
// migration 0036 on a re-run.
func TestARenameDoneByAnEarlierAttemptIsTakenAsDoneOnCurrentEngine(t *testing.T) {
	const fence = 36
	cur := openCurrent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := migrations.UpWith(ctx, cur, nil, migrations.Options{Below: fence}); err != nil {
		t.Fatal(err)
	}
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if m.Version != fence {
			continue
		}
		for _, st := range m.Statements { // ran, not recorded
			if err := cur.Exec(ctx, st); err != nil {
				t.Fatalf("migration %04d_%s: %v", m.Version, m.Name, err)
			}
		}
	}
	applied, err := migrations.Up(ctx, cur, nil)
	if err != nil {
		t.Fatalf("Up after a rename that was not recorded: %v", err)
	}
	if len(applied) == 0 || applied[0].Version != fence {
		t.Errorf("Up applied %d migrations, want %04d first", len(applied), fence)
	}
	var tables []string
	rows, err := cur.Query(ctx, `SELECT name FROM system.tables
WHERE database = 'mcpulse' AND (startsWith(name, 'rollup_writes') OR startsWith(name, 'rollup_epochs')) ORDER BY name`)
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
	if want := []string{"rollup_epochs_taken", "rollup_writes_before_0035"}; !slices.Equal(tables, want) {
		t.Errorf("epochs and markers tables after Up: %v, want %v", tables, want)
	}
}
