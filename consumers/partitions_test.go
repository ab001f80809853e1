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

// structTimes reads a row's time.Time fields and its non-nil *time.Time ones, in field order.
func TestStructTimesReadsTimeFields(t *testing.T) {
	type r struct {
		A    string
		At   time.Time
		N    *time.Time
		Sent *time.Time
		B    int64
		Last time.Time
	}
	at, sent, last := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 12, 31, 23, 0, 0, 0, time.UTC), time.Unix(7, 0)
	times := structTimes[r]()
	got := times(&r{A: "x", At: at, Sent: &sent, B: 9, Last: last}, nil)
	if len(got) != 3 || !got[0].Equal(at) || !got[1].Equal(sent) || !got[2].Equal(last) {
		t.Errorf("times = %v, want [%v %v %v]", got, at, sent, last)
	}
	if got := times(&r{}, got[:0]); len(got) != 2 {
		t.Errorf("zero row: times = %v, want the two zero time.Time values", got)
	}
}
