package consumers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// Replayed batches written as the same parts (DESIGN.md §5, "Replays dedup at insert").
//
// The raw tables are partitioned by month and Kafka partition, and ClickHouse drops an
// inserted part whose rows are those of a part it stored before. So a batch read again after
// a crash (or by a partition's next owner) is dropped by the server if, for each Kafka
// partition, it holds exactly the offsets the first attempt held: the same rows (a row holds
// nothing of the moment it is stored: ingest.RowContext.InsertedAt), in one INSERT, so in one
// part per month. The boundaries are what the ClickHouse Kafka Connect sink also keeps: before
// a batch's INSERTs end, the member records each partition's range [start, end) of the batch
// in Redis, one hash per consumer group (rangesKey), one field per partition and start. A
// member starting a generation reads the ranges that begin at each of its partitions'
// committed offsets, chained (a batch ending where the next began, as the commit stage can
// leave two uncommitted), and reads each partition range by range: its reader holds the first
// message past a range's end (rangeGate) until the batch holding the range closed, and that
// batch closes only once every recorded range it holds is complete (openBatch.replaying).
// A committed batch's fields are deleted with the next batch's record; fields below a
// partition's committed offset are deleted when a generation reads them.
//
// The record is best effort: when Redis does not answer within rangeWriteTimeout the batch is
// stored anyway, and a replay of it is then stored again, which the tables collapse at merges
// (readers count with FINAL or uniqExact), as before the raw tables were partitioned so.

// batchRange is one Kafka partition's offsets in one batch: [start, end).
type batchRange struct{ start, end int64 }

// rangeWriteTimeout bounds the record of a batch's ranges.
const rangeWriteTimeout = 2 * time.Second

// rangesKey is the Redis hash of a consumer group's recorded batch ranges; the braces make it
// one slot of a Redis Cluster.
func rangesKey(group string) string { return "mcpulse:batch-ranges:{" + group + "}" }

// rangeField names one range in rangesKey: "topic/partition/start".
func rangeField(tp topicPartition, start int64) string {
	return tp.topic + "/" + strconv.Itoa(tp.partition) + "/" + strconv.FormatInt(start, 10)
}

// parseRangeField is rangeField's inverse.
func parseRangeField(f string) (topicPartition, int64, error) {
	i := strings.LastIndexByte(f, '/')
	j := -1
	if i > 0 {
		j = strings.LastIndexByte(f[:i], '/')
	}
	if j <= 0 {
		return topicPartition{}, 0, fmt.Errorf("batch range field %q is not topic/partition/start", f)
	}
	p, err := strconv.Atoi(f[j+1 : i])
	if err != nil {
		return topicPartition{}, 0, fmt.Errorf("batch range field %q: partition: %w", f, err)
	}
	start, err := strconv.ParseInt(f[i+1:], 10, 64)
	if err != nil {
		return topicPartition{}, 0, fmt.Errorf("batch range field %q: start: %w", f, err)
	}
	return topicPartition{f[:j], p}, start, nil
}

// rangesOf returns each event partition's range in msgs, a batch's messages.
func rangesOf(msgs []kafka.Message) map[topicPartition]batchRange {
	out := map[topicPartition]batchRange{}
	for i := range msgs {
		m := &msgs[i]
		if !dedupTopic(m.Topic) {
			continue
		}
		k := topicPartition{m.Topic, m.Partition}
		r, ok := out[k]
		if !ok {
			r = batchRange{m.Offset, m.Offset + 1}
		}
		r.start, r.end = min(r.start, m.Offset), max(r.end, m.Offset+1)
		out[k] = r
	}
	return out
}

// recordRanges records ranges, a batch's, before its INSERTs end, and deletes the fields of
// the batches committed since the last record (forget). Best effort: a failure is logged.
func (c *Consumer) recordRanges(ctx context.Context, ranges map[topicPartition]batchRange) {
	c.rangesMu.Lock()
	idle := len(ranges) == 0 && len(c.forget) == 0
	c.rangesMu.Unlock()
	if idle {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, rangeWriteTimeout)
	defer cancel()
	key := rangesKey(c.cfg.GroupID)
	c.rangesMu.Lock()
	forget := slices.Clone(c.forget)
	c.rangesMu.Unlock()
	pipe := c.cfg.Redis.Pipeline()
	if len(forget) > 0 {
		pipe.HDel(ctx, key, forget...)
	}
	if len(ranges) > 0 {
		vals := make([]any, 0, 2*len(ranges))
		for tp, r := range ranges {
			vals = append(vals, rangeField(tp, r.start), r.end)
		}
		pipe.HSet(ctx, key, vals...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		c.cfg.Logger.Warn("recording the batch's offset ranges in Redis failed; a replay of it is stored again and collapsed at merges", "err", err)
		return
	}
	c.rangesMu.Lock()
	c.forget = slices.DeleteFunc(c.forget, func(f string) bool { return slices.Contains(forget, f) })
	c.rangesMu.Unlock()
}

// committedRanges queues the fields of ranges, a committed batch's, for deletion with the next
// record.
func (c *Consumer) committedRanges(ranges map[topicPartition]batchRange) {
	c.rangesMu.Lock()
	defer c.rangesMu.Unlock()
	for tp, r := range ranges {
		c.forget = append(c.forget, rangeField(tp, r.start))
	}
}

// rangeGate holds one partition's reader at the end of each recorded range, from its committed
// offset on, until the batch holding the range closed. Its methods are safe for concurrent use
// by the reader and the store stage.
type rangeGate struct {
	mu    sync.Mutex
	start int64   // the current range's first offset
	cuts  []int64 // the ends of the recorded ranges from start on, ascending; cuts[0] ends the current one
	// reached: the reader met an offset at or past cuts[0] and holds it; below is the last
	// offset it delivered before (start-1 if none): with gaps in the log, the range is
	// complete once the batch holds below.
	reached bool
	below   int64
	release chan struct{} // closed when the batch holding the current range closed
}

func newRangeGate(start int64, cuts []int64) *rangeGate {
	return &rangeGate{start: start, cuts: cuts, below: start - 1, release: make(chan struct{})}
}

// wait is the reader's: before it delivers the message at offset (sent is the last offset it
// delivered, or -1), it waits while offset is past the current range's end and the batch
// holding the range is open. It returns false when ctx ended.
func (g *rangeGate) wait(ctx context.Context, offset, sent int64) bool {
	for {
		g.mu.Lock()
		if len(g.cuts) == 0 || offset < g.cuts[0] {
			if len(g.cuts) > 0 && sent < g.start && offset > g.start {
				g.start = offset // the range's head is gone from the log: it begins here
			}
			g.mu.Unlock()
			return true
		}
		if sent < g.start && !g.reached {
			// Nothing of the range is left in the log (retention deleted it): no batch will
			// hold it, so the next range begins here.
			g.start, g.cuts = g.cuts[0], g.cuts[1:]
			g.mu.Unlock()
			continue
		}
		if !g.reached {
			g.reached = true
			g.below = max(sent, g.start-1)
		}
		ch := g.release
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// holds reports whether a batch whose offsets of the partition begin at first holds a recorded
// range (the current one), and if so whether the batch, which holds up to last, holds all of it.
func (g *rangeGate) holds(first, last int64) (bounded, complete bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.cuts) == 0 || first != g.start {
		return false, false
	}
	return true, last >= g.cuts[0]-1 || (g.reached && last >= g.below)
}

// next moves the gate to the range after the current one, whose batch closed, and lets the
// reader go on.
func (g *rangeGate) next() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.cuts) == 0 {
		return
	}
	g.start, g.cuts = g.cuts[0], g.cuts[1:]
	g.reached, g.below = false, g.start-1
	close(g.release)
	g.release = make(chan struct{})
}

// off ends the gate: its reader goes on and no batch waits for a range.
func (g *rangeGate) off() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.cuts) == 0 {
		return
	}
	g.cuts = nil
	close(g.release)
	g.release = make(chan struct{})
}

// rangeGates are a generation's gates, by partition; nil (or empty) when nothing is replayed.
type rangeGates map[topicPartition]*rangeGate

// off ends every gate: the batch boundaries can no longer follow the records (a chunk stored
// as a batch of its own), so the rest is read as it comes.
func (gs rangeGates) off() {
	for _, g := range gs {
		g.off()
	}
}

// loadRanges reads the recorded ranges of the generation's partitions that begin at each
// one's committed offset (assignments' Offset; a partition without one begins at its lowest
// recorded start), chained, and returns a gate for each partition that has any. It deletes the
// fields below each partition's committed offset: their batches were committed. Best effort:
// a failure is logged, and the partitions are read as they come.
func (c *Consumer) loadRanges(ctx context.Context, assignments map[string][]kafka.PartitionAssignment) rangeGates {
	ctx, cancel := context.WithTimeout(ctx, rangeWriteTimeout)
	defer cancel()
	key := rangesKey(c.cfg.GroupID)
	all, err := c.cfg.Redis.HGetAll(ctx, key).Result()
	if err != nil {
		c.cfg.Logger.Warn("reading the recorded batch ranges from Redis failed; partitions are read as they come", "err", err)
		return nil
	}
	recorded := map[topicPartition]map[int64]int64{} // start → end
	var stale []string                               // fields to delete with the next record
	for f, v := range all {
		tp, start, err := parseRangeField(f)
		end, verr := strconv.ParseInt(v, 10, 64)
		if err != nil || verr != nil || end <= start {
			c.cfg.Logger.Warn("a recorded batch range is malformed; dropped", "field", f, "value", v)
			stale = append(stale, f)
			continue
		}
		if recorded[tp] == nil {
			recorded[tp] = map[int64]int64{}
		}
		recorded[tp][start] = end
	}
	gates := rangeGates{}
	replayed := 0
	for topic, parts := range assignments {
		if !dedupTopic(topic) {
			continue
		}
		for _, pa := range parts {
			tp := topicPartition{topic, pa.ID}
			byStart := recorded[tp]
			if len(byStart) == 0 {
				continue
			}
			from := pa.Offset
			if from < 0 {
				from = slices.Min(slices.Collect(maps.Keys(byStart)))
			}
			for start := range byStart {
				if start < from {
					stale = append(stale, rangeField(tp, start))
				}
			}
			var cuts []int64
			for at := from; ; {
				end, ok := byStart[at]
				if !ok {
					break
				}
				cuts = append(cuts, end)
				at = end
			}
			if len(cuts) > 0 {
				gates[tp] = newRangeGate(from, cuts)
				replayed += len(cuts)
			}
		}
	}
	c.rangesMu.Lock()
	c.forget = append(c.forget, stale...)
	c.rangesMu.Unlock()
	if replayed > 0 {
		c.cfg.Logger.Info("reading uncommitted batches again at their recorded offset ranges, so ClickHouse drops what they stored before",
			"partitions", len(gates), "ranges", replayed)
	}
	return gates
}
