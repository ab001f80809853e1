package rollup

import (
	"context"
	"fmt"
)

// InsertPartly inserts part of w, as a consumer that died in the middle of Insert would have:
// "markers only", "half the tables" (the markers and the first half of the tables) or "all
// tables" (everything, but the batch is never committed). "rows only" inserts every table's
// rows without the markers, as a ClickHouse replica may show them: replication copies each
// table's parts on its own, so a member reading another replica than the writer's can see a
// batch's rows before its marker.
func InsertPartly(ctx context.Context, w *Write, part string) error {
	if part == "rows only" {
		markers := w.markers
		w.markers = nil
		defer func() { w.markers = markers }()
		for ti, rows := range w.rows {
			if err := w.store.insertRows(ctx, w.store.tables[ti], rows); err != nil {
				return err
			}
		}
		return nil
	}
	n := map[string]int{"markers only": 0, "half the tables": len(w.rows) / 2, "all tables": len(w.rows)}
	tables, ok := n[part]
	if !ok {
		return fmt.Errorf("InsertPartly: unknown part %q", part)
	}
	rows := w.rows
	w.rows = w.rows[:tables]
	defer func() { w.rows = rows }()
	return w.Insert(ctx)
}
