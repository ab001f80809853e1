package consumers

import (
	"testing"

	"github.com/mcpulse/mcpulse/migrations"
)

// A chunk joins a streamed batch only while the batch's INSERTs would write at most
// migrations.MaxPartitionsPerInsert months (current ClickHouse refuses more per block, and it
// squashes an INSERT's blocks).
func TestAChunkJoinsABatchWhileItsMonthsFit(t *testing.T) {
	b := &openBatch{months: map[int]bool{}}
	for m := range migrations.MaxPartitionsPerInsert - 1 {
		b.months[24000+m] = true
	}
	for _, tc := range []struct {
		name   string
		months []int
		want   bool
	}{
		{"months the batch holds", []int{24000, 24001}, true},
		{"one new month: at the limit", []int{24000, 30000}, true},
		{"two new months: over it", []int{30000, 30001}, false},
		{"no rows", nil, true},
	} {
		chunk := map[int]bool{}
		for _, m := range tc.months {
			chunk[m] = true
		}
		if got := b.fits(chunk); got != tc.want {
			t.Errorf("%s: fits = %v, want %v", tc.name, got, tc.want)
		}
	}
}
