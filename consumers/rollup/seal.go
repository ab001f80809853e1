package rollup

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	mcsql "github.com/mcpulse/mcpulse/sql"
)

// SealHoursPerInsert is how many hours one seal INSERT recomputes at most, so a long backlog
// (a first seal, a replay of old events) is sealed in inserts of bounded memory.
const SealHoursPerInsert = 24

// SealResult is what one SealGateReasonPeople did.
type SealResult struct {
	// Through is the first hour not sealed (UTC): the start of the hour before now's.
	Through time.Time
	// Hours are the hours sealed, oldest first (empty when every closed hour was current).
	Hours []time.Time
}

// SealGateReasonPeople seals the distinct people of the gate-reason cells of the closed hours
// that need it (migration 0034): every hour before the start of the hour before now's (an hour
// gets an hour after its end for in-flight events) holding a cell with calls whose seal is
// missing or whose calls changed since (view v_gate_reason_unsealed_hours). Each such hour's
// cells are recomputed from the deduplicated raw table (calls, uniqExact(distinct_id)) and
// inserted with sealed_at = now, SealHoursPerInsert hours per INSERT. Readers
// (v_gate_reasons_hourly) take a sealed count only while its calls equal the rollup's, so a
// seal is never wrong, only late: a run is idempotent, and an event arriving in a sealed hour
// sends that hour back to the raw rows until the next run. Errors are ClickHouse's, wrapped;
// the hours inserted before an error stay sealed.
func SealGateReasonPeople(ctx context.Context, conn driver.Conn, now time.Time) (SealResult, error) {
	now = now.UTC().Truncate(time.Second)
	res := SealResult{Through: now.Truncate(time.Hour).Add(-time.Hour)}
	rows, err := conn.Query(ctx, mcsql.Rollup("unsealed_hours"), res.Through.Unix())
	if err != nil {
		return res, fmt.Errorf("seal gate-reason people: list the unsealed hours: %w", err)
	}
	var hours []time.Time
	for rows.Next() {
		var h time.Time
		if err := rows.Scan(&h); err != nil {
			rows.Close()
			return res, fmt.Errorf("seal gate-reason people: list the unsealed hours: %w", err)
		}
		hours = append(hours, h.UTC())
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return res, fmt.Errorf("seal gate-reason people: list the unsealed hours: %w", err)
	}
	for i := 0; i < len(hours); i += SealHoursPerInsert {
		part := hours[i:min(i+SealHoursPerInsert, len(hours))]
		unix := make([]uint32, len(part))
		for j, h := range part {
			unix[j] = uint32(h.Unix())
		}
		first, last := part[0], part[len(part)-1]
		if err := conn.Exec(ctx, mcsql.Rollup("seal_gate_reason_people"), now.Unix(), first.Unix(), last.Unix(), unix); err != nil {
			return res, fmt.Errorf("seal gate-reason people of %s to %s: %w", first.Format(time.RFC3339), last.Format(time.RFC3339), err)
		}
		res.Hours = append(res.Hours, part...)
	}
	return res, nil
}
