package live

import (
	"context"
	"fmt"
	"slices"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	mcsql "github.com/mcpulse/mcpulse/sql"
)

// Observe reads what ClickHouse holds of the live servers, in Run's shape and order. Errors
// are ClickHouse's.
func Observe(ctx context.Context, ch driver.Conn) ([]Figure, error) {
	rows, err := ch.Query(ctx, mcsql.Query("outcome_live_servers"))
	if err != nil {
		return nil, fmt.Errorf("live figures: %w", err)
	}
	defer rows.Close()
	var out []Figure
	for rows.Next() {
		var (
			f                                                  Figure
			calls, errs, validation, unknownTool, meas, withIK uint64
		)
		if err := rows.Scan(&f.Server, &f.Tool, &calls, &errs, &validation, &unknownTool, &meas, &withIK, &f.IgnoredKeys); err != nil {
			return nil, fmt.Errorf("live figures: %w", err)
		}
		f.Calls, f.Errors, f.ValidationErrors, f.UnknownToolCalls = int64(calls), int64(errs), int64(validation), int64(unknownTool)
		f.MeasurableCalls, f.CallsWithIgnoredKeys = int64(meas), int64(withIK)
		out = append(out, f)
	}
	return out, rows.Err()
}

// Compare describes each difference between the expected and the observed figures (nil when
// they agree): a tool missing, unexpected, or with another figure.
func Compare(want, got []Figure) []string {
	var out []string
	key := func(f Figure) string { return f.Server + " " + f.Tool }
	have := map[string]Figure{}
	for _, f := range got {
		have[key(f)] = f
	}
	for _, w := range want {
		g, ok := have[key(w)]
		delete(have, key(w))
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("live %s: want %+v, missing", key(w), w))
		case w.Calls != g.Calls || w.Errors != g.Errors || w.ValidationErrors != g.ValidationErrors ||
			w.UnknownToolCalls != g.UnknownToolCalls || w.MeasurableCalls != g.MeasurableCalls ||
			w.CallsWithIgnoredKeys != g.CallsWithIgnoredKeys || !slices.Equal(w.IgnoredKeys, g.IgnoredKeys):
			out = append(out, fmt.Sprintf("live %s: want %+v, got %+v", key(w), w, g))
		}
	}
	for _, f := range got {
		if _, extra := have[key(f)]; extra {
			out = append(out, fmt.Sprintf("live %s: unexpected %+v", key(f), f))
		}
	}
	return out
}
