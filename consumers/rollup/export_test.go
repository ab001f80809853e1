package rollup

import (
	"context"
	"fmt"
)

// InsertPartly inserts part of w, as a consumer that died in the middle of Insert would have:
// "markers only", "half the tables" (the markers and the first half of the tables) or "all
// tables" (everything, but the batch is never committed).
func InsertPartly(ctx context.Context, w *Write, part string) error {
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
