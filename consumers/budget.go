package consumers

import (
	"math"
	"runtime/debug"
)

// Memory budget. The process's soft memory limit (runtime/debug.SetMemoryLimit; `mcpulse
// consume --memory-limit-mib`, 256 MiB by default) has to hold two things that grow
// differently: the dedup windows, which fill up to W offsets per partition read and then stay
// (25 bytes per offset: 100 MiB for four partitions at the default W), and the batches in
// flight, whose memory follows their message bytes (about 2.6 times them at their peak:
// values, decoded events, rows, the inserts' column buffers) with three batches at once (one
// prepared, one storing its raw rows, one ending its INSERTs, whose last blocks' buffers it
// holds, then writing its rollups and committing). With
// Config.BatchBytes alone, full windows left the garbage collector no room: measured on 10M
// demo events over four partitions, consumer CPU rose from about 20 to 55 µs per event and
// RSS to 315 MiB. So a batch's byte bound shrinks as the windows grow, keeping windows plus
// batches under batchHeapShare of the limit; below it the collector runs at its usual pace.

const (
	// MessageOverhead is what a chunk's byte bound (Config.BatchBytes) counts for each message
	// besides its key and value, in bytes: the memory the consumer holds per message of a
	// chunk whatever its size, its kafka.Message (152 bytes on 64-bit platforms), decoded
	// event (ingest.ToolCallSlot, 648) and raw row (ingest.ToolCallRow, 672), sizes as
	// unsafe.Sizeof gives them, rounded up to 1.5 KiB. Without it a chunk of small messages
	// (835-byte demo events) held about twice the memory of one of SDK-shaped tool calls
	// (2,400 bytes) under the same bound, and the garbage collector worked the harder for it.
	MessageOverhead = 1536
	// GCPercent is the garbage collector's target percentage (runtime/debug.SetGCPercent)
	// `mcpulse consume` sets while a soft memory limit is set and $GOGC is not: the heap may
	// grow to four times what is live before a collection, or to the limit, whichever comes
	// first. The limit bounds the heap either way; Go's default of 100 collected whenever the
	// heap doubled, far below it. Measured with `mcpulse bench pipeline` on 2 cores (1M
	// demo events, the limit at its default): 11.1 µs of consumer CPU per event with Go's
	// default and chunks counting message bytes only, 10.5 with 300 alone, 8.5-8.6 with 300
	// and MessageOverhead counted; peak RSS 280-283 MiB in each (docs/scaling.md, "Where the
	// consumer's CPU goes").
	GCPercent = 300
	// batchHeapShare is the share of the soft memory limit the windows and the batches in
	// flight may take together, in eighths: the rest is the collector's room to work in
	// (with GOGC=100 it would let the heap reach twice what is live) and what the process
	// holds besides (the rollup cell cache, connections, buffers).
	batchHeapShare = 5
	// batchMemoryFactor is the heap the batches in flight take per byte of a batch's bound:
	// three batches, each about 2.6 times its message bytes at its peak (measured with heap
	// profiles of `mcpulse bench pipeline`), rounded up.
	batchMemoryFactor = 8
	// minBatchBytes is the smallest byte bound the budget lowers a batch to: below it the
	// inserts get so small that ClickHouse's merges cost more than the memory saved.
	minBatchBytes = 1 << 20
)

// batchBytes is the byte bound of the next batch: Config.BatchBytes, lowered while the
// dedup windows, the listing state (misuse.Listings.Bytes, which grows with the live
// sessions up to its cap) and the cardinality caps' windows (cardinality.Folder.Bytes, up to
// Config.Caps.Budget) take so much of the process's soft memory limit that batches of that size
// would crowd it (see above). It reads the limit from the runtime each time, so a limit set
// after New (as `mcpulse consume` does) counts.
func (c *Consumer) batchBytes() int {
	limit, windowBytes, listingBytes, capBytes := debug.SetMemoryLimit(-1), int64(c.windows.Bytes()), int64(c.listings.Bytes()), c.caps.Bytes()
	n := batchBytesWithin(c.cfg.BatchBytes, limit, windowBytes+listingBytes+capBytes)
	if prev := c.lastBatchBytes.Swap(int64(n)); prev != int64(n) && (prev != 0 || n != c.cfg.BatchBytes) && c.cfg.Logger != nil {
		c.cfg.Logger.Info("batch byte bound set by the memory budget", "batch_bytes_mib", mib(int64(n)),
			"configured_mib", mib(int64(c.cfg.BatchBytes)), "dedup_windows_mib", mib(windowBytes), "listings_mib", mib(listingBytes), "cardinality_mib", mib(capBytes), "memory_limit_mib", mib(limit))
	}
	return n
}

// mib is n bytes in MiB, to one decimal.
func mib(n int64) float64 { return math.Round(float64(n)/(1<<20)*10) / 10 }

// batchBytesWithin is the byte bound of a batch, in bytes: configured, lowered so that the
// windows (windowBytes) and the batches in flight fit in batchHeapShare eighths of limit
// (bytes; math.MaxInt64 means no limit, and then configured is kept), but never below
// minBatchBytes nor above configured.
func batchBytesWithin(configured int, limit, windowBytes int64) int {
	if limit == math.MaxInt64 || limit <= 0 {
		return configured
	}
	room := (limit/8*batchHeapShare - windowBytes) / batchMemoryFactor
	if room >= int64(configured) {
		return configured
	}
	return int(max(room, min(minBatchBytes, int64(configured))))
}
