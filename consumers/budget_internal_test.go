package consumers

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/mcpulse/mcpulse/consumers/dedup"
)

// windowsHolding returns the memory four default-size dedup windows hold once each has
// observed n offsets of distinct valid events, as a member reading four partitions has.
func windowsHolding(t *testing.T, n int) int64 {
	t.Helper()
	total := 0
	for p := range 4 {
		w, err := dedup.NewWindow(DefaultDedupWindow)
		if err != nil {
			t.Fatal(err)
		}
		var id [16]byte
		binary.BigEndian.PutUint32(id[:4], uint32(p))
		for o := range n {
			binary.BigEndian.PutUint64(id[8:], uint64(o))
			if dup, err := w.Observe(int64(o), id, true); err != nil || dup {
				t.Fatalf("offset %d: dup %v, err %v", o, dup, err)
			}
			if o%20_000 == 0 { // committed batch by batch, as the consumer does
				w.Commit(int64(o + 1))
			}
		}
		w.Commit(int64(n))
		total += w.Bytes()
	}
	return int64(total)
}

// The batch byte bound keeps its configured value while the dedup windows are small, and
// shrinks once full windows would leave batches of that size no room under the soft memory
// limit: the windows plus the batches in flight stay within the budget's share of it.
func TestBatchBytesShrinkAsTheDedupWindowsFill(t *testing.T) {
	limit := int64(DefaultMemoryLimit)
	share := limit / 8 * batchHeapShare

	// 1M events over four partitions: 250,000 offsets per window.
	quarter := windowsHolding(t, 250_000)
	if got := batchBytesWithin(DefaultBatchBytes, limit, quarter); got != DefaultBatchBytes {
		t.Errorf("windows of %d MiB: batch bound %d, want the configured %d", quarter>>20, got, DefaultBatchBytes)
	}

	// 10M events: every window full.
	full := windowsHolding(t, DefaultDedupWindow+1000)
	if full < 4*DefaultDedupWindow*16 {
		t.Fatalf("full windows hold %d bytes, less than their uuids alone", full)
	}
	got := batchBytesWithin(DefaultBatchBytes, limit, full)
	t.Logf("windows: %.1f MiB at 250,000 offsets each, %.1f MiB full; batch bound when full: %.1f MiB", float64(quarter)/(1<<20), float64(full)/(1<<20), float64(got)/(1<<20))
	if got >= DefaultBatchBytes || got < minBatchBytes {
		t.Fatalf("windows of %d MiB: batch bound %d, want below %d and at least %d", full>>20, got, DefaultBatchBytes, minBatchBytes)
	}
	if used := full + int64(got)*batchMemoryFactor; used > share {
		t.Errorf("windows %d + batches %d×%d = %d bytes, over the budget's %d", full, got, batchMemoryFactor, used, share)
	}

	// Windows past the budget: the floor, never more than configured.
	if got := batchBytesWithin(DefaultBatchBytes, limit, limit); got != minBatchBytes {
		t.Errorf("windows over the limit: batch bound %d, want the floor %d", got, minBatchBytes)
	}
	if got := batchBytesWithin(512<<10, limit, limit); got != 512<<10 {
		t.Errorf("configured below the floor: batch bound %d, want the configured %d", got, 512<<10)
	}
	// No limit (--memory-limit-mib 0): the configured bound.
	if got := batchBytesWithin(DefaultBatchBytes, math.MaxInt64, full); got != DefaultBatchBytes {
		t.Errorf("no memory limit: batch bound %d, want %d", got, DefaultBatchBytes)
	}
}
