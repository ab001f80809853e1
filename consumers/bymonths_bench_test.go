package consumers

import (
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/migrations"
)

// BenchmarkByMonths measures cutting a batch of tool-call rows (one month) into inserts, per row.
func BenchmarkByMonths(b *testing.B) {
	rows := make([]ingest.ToolCallRow, 20000)
	at := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	for i := range rows {
		rows[i].Timestamp, rows[i].InsertedAt = at.Add(time.Duration(i)*time.Second), at
	}
	times := structTimes[ingest.ToolCallRow]()
	b.ReportAllocs()
	for b.Loop() {
		if len(byMonths(rows, migrations.MaxPartitionsPerInsert, times)) != 1 {
			b.Fatal("want one chunk")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
}
