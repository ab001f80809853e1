package consumers

import (
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/migrations"
)

// byMonths keeps every INSERT within current ClickHouse's partition limit, counting each
// row's every time (a rollup may be partitioned by another of them), and keeps row order.
func TestByMonthsBoundsPartitionsPerInsert(t *testing.T) {
	first := time.Date(2010, 1, 15, 0, 0, 0, 0, time.UTC)
	var rows []row
	for i := range 250 {
		ts := first.AddDate(0, i, 0)
		var sent *time.Time
		if i%2 == 0 {
			s := ts.AddDate(0, -3, 0) // another month again, as invitation_sent_at may be
			sent = &s
		}
		rows = append(rows, row{i, ts, sent, "x"})
	}
	chunks := byMonths(rows, migrations.MaxPartitionsPerInsert, rowTimes)
	if len(chunks) < 3 {
		t.Errorf("250+ months in %d chunks, want at least 3", len(chunks))
	}
	next := 0
	for ci, c := range chunks {
		months := map[string]bool{}
		for _, r := range c {
			if r[0].(int) != next {
				t.Fatalf("chunk %d holds row %v where row %d was due", ci, r[0], next)
			}
			next++
			months[r[1].(time.Time).Format("2006-01")] = true
			if s := r[2].(*time.Time); s != nil {
				months[s.Format("2006-01")] = true
			}
		}
		if len(months) > migrations.MaxPartitionsPerInsert {
			t.Errorf("chunk %d touches %d months", ci, len(months))
		}
	}
	if next != len(rows) {
		t.Errorf("chunks hold %d rows, want %d", next, len(rows))
	}
	if got := byMonths(rows[:40], migrations.MaxPartitionsPerInsert, rowTimes); len(got) != 1 {
		t.Errorf("40 rows over 43 months in %d chunks, want 1", len(got))
	}
	if got := byMonths([]row(nil), migrations.MaxPartitionsPerInsert, rowTimes); len(got) != 0 {
		t.Errorf("no rows gave %d chunks", len(got))
	}
}
