package consumers

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// Replayed batches written as the same parts (DESIGN.md §5, "Replays dedup at insert").
//
// ClickHouse drops an inserted part whose rows are those of a part it stored before (18.16:
// replicated tables). So a batch read again after a crash (or by a partition's next owner) is
// dropped if it holds exactly the offsets the first attempt held: the same rows (a row holds
// nothing of the moment it is stored: ingest.RowContext.InsertedAt) in one INSERT. The raw
// tables are partitioned by month and Kafka partition, so one partition's rows make a part
// whatever else shares the INSERT; no view reads them (the views read feeds: fedTable).
//
// The boundaries are what the ClickHouse Kafka Connect sink also keeps: before a batch's
// INSERTs end, the member records the batch's ranges [start, end), one per partition, in
// Redis, one hash per consumer group (rangesKey), one field per batch (batchField) listing
// them all (encodeRanges). A member starting a generation reads the records whose ranges
// begin at its partitions' committed offsets, in the order the offsets chain them (the commit
// stage can leave two batches uncommitted), and replays them one batch each (replay): while a
// recorded batch is replayed, each reader delivers only its partition's range of it and holds
// every other message, and the batch closes exactly once it holds each range whole; then the
// next recorded batch, then everything as it comes. A record naming partitions the member does
// not own (the group rebalanced) is replayed for those it owns. A committed batch's field is
// deleted with the next batch's record; fields wholly below the committed offsets when a
// generation reads them.
//
// On a server that knows insert_deduplication_token, the record also carries the nonce the
// batch's INSERTs named their tokens by (encodeRecord; token.go), which a replay of the whole
// record reuses, so that a current server, which hashes blocks rather than parts, drops it.
//
// The record is best effort: when Redis does not answer within rangeWriteTimeout the batch is
// stored anyway, and a replay of it is then stored again, which the tables collapse at merges
// (readers count with FINAL or uniqExact).

// batchRange is one Kafka partition's offsets in one batch: [start, end).
type batchRange struct{ start, end int64 }

// rangeWriteTimeout bounds the record of a batch's ranges.
const rangeWriteTimeout = 2 * time.Second

// BatchRangesKeyPrefix starts the Redis key of each consumer group's record of its uncommitted
// batches' offset ranges ("mcpulse:batch-ranges:{<group>}", a hash of a field or two per
// member, whatever the events): the consumer's only Redis key that is not a person's.
const BatchRangesKeyPrefix = "mcpulse:batch-ranges:"

// rangesKey is the Redis hash of a consumer group's recorded batch ranges; the braces make it
// one slot of a Redis Cluster.
func rangesKey(group string) string { return BatchRangesKeyPrefix + "{" + group + "}" }

// rangeField names one range: "topic/partition/start".
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
		return topicPartition{}, 0, fmt.Errorf("batch range %q is not topic/partition/start", f)
	}
	p, err := strconv.Atoi(f[j+1 : i])
	if err != nil {
		return topicPartition{}, 0, fmt.Errorf("batch range %q: partition: %w", f, err)
	}
	start, err := strconv.ParseInt(f[i+1:], 10, 64)
	if err != nil {
		return topicPartition{}, 0, fmt.Errorf("batch range %q: start: %w", f, err)
	}
	return topicPartition{f[:j], p}, start, nil
}

// batchField names a batch's record in rangesKey: its first range's rangeField.
func batchField(ranges map[topicPartition]batchRange) string {
	first := ""
	for tp, r := range ranges {
		if f := rangeField(tp, r.start); first == "" || f < first {
			first = f
		}
	}
	return first
}

// encodeRecord is a record's value: encodeRanges, then, for a batch whose INSERTs bore a token
// (token.go), ";" and its nonce. A member of an earlier release finds a record with a nonce
// malformed and drops it: that batch's replay is stored again.
func encodeRecord(ranges map[topicPartition]batchRange, nonce string) string {
	if nonce == "" {
		return encodeRanges(ranges)
	}
	return encodeRanges(ranges) + ";" + nonce
}

// decodeRecord is encodeRecord's inverse; nonce is "" for a record without one (written by
// an earlier release, or for a batch without a token).
func decodeRecord(v string) (ranges map[topicPartition]batchRange, nonce string, err error) {
	v, nonce, hasNonce := strings.Cut(v, ";")
	if hasNonce && !validNonce(nonce) {
		return nil, "", fmt.Errorf("batch record nonce %q is not 24 lowercase hex digits", nonce)
	}
	ranges, err = decodeRanges(v)
	if err != nil {
		return nil, "", err
	}
	return ranges, nonce, nil
}

// encodeRanges is a record's ranges: "topic/partition/start/end" per range, comma-separated,
// sorted.
func encodeRanges(ranges map[topicPartition]batchRange) string {
	parts := make([]string, 0, len(ranges))
	for tp, r := range ranges {
		parts = append(parts, rangeField(tp, r.start)+"/"+strconv.FormatInt(r.end, 10))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// decodeRanges is encodeRanges' inverse.
func decodeRanges(v string) (map[topicPartition]batchRange, error) {
	out := map[topicPartition]batchRange{}
	for _, part := range strings.Split(v, ",") {
		i := strings.LastIndexByte(part, '/')
		if i <= 0 {
			return nil, fmt.Errorf("batch range %q is not topic/partition/start/end", part)
		}
		tp, start, err := parseRangeField(part[:i])
		if err != nil {
			return nil, err
		}
		end, err := strconv.ParseInt(part[i+1:], 10, 64)
		if err != nil || end <= start {
			return nil, fmt.Errorf("batch range %q: bad end", part)
		}
		out[tp] = batchRange{start, end}
	}
	return out, nil
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

// maxForget bounds the fields of committed batches queued for deletion while Redis does not
// answer: past it the oldest are left in Redis, where the next generation deletes them (its
// committed offsets are past them).
const maxForget = 1024

// recordRanges records ranges, a batch's, with the nonce of its INSERTs' tokens ("" for none;
// token.go), before its INSERTs end, and deletes the fields of the batches committed since
// the last record (forget). Best effort: a failure is logged.
func (c *Consumer) recordRanges(ctx context.Context, ranges map[topicPartition]batchRange, nonce string) {
	c.rangesMu.Lock()
	forget := slices.Clone(c.forget)
	c.rangesMu.Unlock()
	if len(ranges) == 0 && len(forget) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, rangeWriteTimeout)
	defer cancel()
	key := rangesKey(c.cfg.GroupID)
	pipe := c.cfg.Redis.Pipeline()
	if len(forget) > 0 {
		pipe.HDel(ctx, key, forget...)
	}
	if len(ranges) > 0 {
		pipe.HSet(ctx, key, batchField(ranges), encodeRecord(ranges, nonce))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		c.cfg.Logger.Warn("recording the batch's offset ranges in Redis failed; a replay of it is stored again and collapsed at merges", "err", err)
		return
	}
	deleted := make(map[string]bool, len(forget))
	for _, f := range forget {
		deleted[f] = true
	}
	c.rangesMu.Lock()
	c.forget = slices.DeleteFunc(c.forget, func(f string) bool { return deleted[f] })
	c.rangesMu.Unlock()
}

// committedRanges queues the record of ranges, a committed batch's, for deletion with the
// next record; at most maxForget are kept.
func (c *Consumer) committedRanges(ranges map[topicPartition]batchRange) {
	if len(ranges) == 0 {
		return
	}
	c.queueForget(batchField(ranges))
}

// queueForget queues fields for deletion with the next record, keeping the newest maxForget.
func (c *Consumer) queueForget(fields ...string) {
	c.rangesMu.Lock()
	defer c.rangesMu.Unlock()
	c.forget = append(c.forget, fields...)
	if over := len(c.forget) - maxForget; over > 0 {
		c.forget = slices.Delete(c.forget, 0, over)
	}
}

// phaseTimeout bounds how long the readers wait for one recorded batch to be replayed whole;
// past it (a range the log no longer holds, say) the rest is read as it comes.
const phaseTimeout = time.Minute

// replay replays a generation's recorded batches, one batch each, before the partitions are
// read as they come. Its methods are safe for concurrent use by the readers and the store
// stage, and do nothing on a nil *replay.
type replay struct {
	mu     sync.Mutex
	log    func(msg string, args ...any)
	phases []map[topicPartition]batchRange // the recorded batches still to replay, in order
	// nonces are phases' nonces where their batches may reuse them (token.go): recorded with
	// one, and every range held by this member; "" otherwise. Shorter than phases: "" beyond.
	nonces []string
	seq    uint64 // counts the recorded batches ended (drop): names phases[0]
	// reached: per partition of phases[0], the reader met an offset at or past its range's end
	// and holds it; the value is the last offset it delivered before (with gaps in the log, or
	// a range it no longer holds, the range is whole once the batch holds that).
	reached map[topicPartition]int64
	release chan struct{} // closed when phases[0] is done (next, off)
	since   time.Time     // when phases[0] began
}

// active reports whether a recorded batch is being replayed.
func (r *replay) active() bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.phases) > 0
}

// wait is the reader's of partition tp: before it delivers the message at offset (sent is the
// last offset it delivered, or -1), it waits while a recorded batch is replayed that does not
// hold the offset. It returns false when ctx ended.
func (r *replay) wait(ctx context.Context, tp topicPartition, offset, sent int64) bool {
	if r == nil {
		return true
	}
	for {
		r.mu.Lock()
		if len(r.phases) == 0 {
			r.mu.Unlock()
			return true
		}
		rg, in := r.phases[0][tp]
		if in && offset < rg.end {
			r.mu.Unlock()
			return true // offsets below the range's start are not in the log: none arrives
		}
		if in {
			if _, ok := r.reached[tp]; !ok {
				r.reached[tp] = max(sent, rg.start-1)
			}
		}
		ch, left := r.release, phaseTimeout-time.Since(r.since)
		r.mu.Unlock()
		timer := time.NewTimer(max(left, 0))
		select {
		case <-ch:
			timer.Stop()
		case <-timer.C:
			r.mu.Lock()
			stuck := r.release == ch
			r.mu.Unlock()
			if stuck {
				r.log("a recorded batch was not read again whole in time; reading the rest as it comes", "waited", phaseTimeout)
				r.off()
			}
		case <-ctx.Done():
			timer.Stop()
			return false
		}
	}
}

// current returns the recorded batch being replayed: its ranges, the nonce its batch reuses
// ("" for none) and its sequence number (for at); ok false when none is.
func (r *replay) current() (ranges map[topicPartition]batchRange, nonce string, seq uint64, ok bool) {
	if r == nil {
		return nil, "", 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.phases) == 0 {
		return nil, "", 0, false
	}
	if len(r.nonces) > 0 {
		nonce = r.nonces[0]
	}
	return r.phases[0], nonce, r.seq, true
}

// at reports whether the recorded batch current named seq is still being replayed.
func (r *replay) at(seq uint64) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.phases) > 0 && r.seq == seq
}

// complete reports whether a batch whose partitions end at last (each one's last offset)
// holds the recorded batch being replayed whole (true when none is).
func (r *replay) complete(last map[topicPartition]int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.phases) == 0 {
		return true
	}
	for tp, rg := range r.phases[0] {
		l, holds := last[tp]
		if holds && l >= rg.end-1 {
			continue
		}
		below, reached := r.reached[tp]
		switch {
		case !reached:
			return false
		case holds && l >= below:
		case !holds && below < rg.start: // the log holds nothing of the range
		default:
			return false
		}
	}
	return true
}

// next ends the replay of the recorded batch whose batch closed whole, and lets the readers
// go on to the next.
func (r *replay) next() { r.drop(1) }

// off ends the replay: every reader goes on, and batches close as they would.
func (r *replay) off() { r.drop(-1) }

// drop ends the replay of the next n recorded batches (every one for n < 0) and lets the
// readers waiting on them go on.
func (r *replay) drop(n int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.phases) == 0 {
		return
	}
	if n < 0 || n > len(r.phases) {
		n = len(r.phases)
	}
	r.phases = r.phases[n:]
	r.nonces = r.nonces[min(n, len(r.nonces)):]
	r.seq++
	r.reached = map[topicPartition]int64{}
	r.since = time.Now()
	close(r.release)
	r.release = make(chan struct{})
}

// loadReplay reads the recorded batches of the generation's partitions and orders those to
// replay: a batch whose every range of a partition the member owns, and has not committed,
// begins where that partition's previous replayed range ended, from its committed offset
// (assignments' Offset; a partition without one begins at its lowest recorded start). A
// record that also names partitions the member does not own is replayed for those it owns,
// and the ranges of the others are recorded again under a field of their own, so that the
// replay's record and deletion (under the batch's first range, which may be the record's)
// leave them to their owners, who replay them as theirs. It queues for deletion the records
// wholly below the committed offsets. nil when there is nothing to replay. Best effort: a
// failure is logged, and the partitions are read as they come.
func (c *Consumer) loadReplay(ctx context.Context, assignments map[string][]kafka.PartitionAssignment) *replay {
	ctx, cancel := context.WithTimeout(ctx, rangeWriteTimeout)
	defer cancel()
	all, err := c.cfg.Redis.HGetAll(ctx, rangesKey(c.cfg.GroupID)).Result()
	if err != nil {
		c.cfg.Logger.Warn("reading the recorded batch ranges from Redis failed; partitions are read as they come", "err", err)
		return nil
	}
	owned := map[topicPartition]int64{} // → committed offset (-1: none)
	for topic, parts := range assignments {
		if dedupTopic(topic) {
			for _, pa := range parts {
				owned[topicPartition{topic, pa.ID}] = pa.Offset
			}
		}
	}
	type record struct {
		field  string
		ranges map[topicPartition]batchRange // of the partitions owned
		nonce  string                        // "" unless recorded with one and every range is owned
	}
	var records []record
	var stale []string
	rests := map[string]string{} // field → value: the ranges of records replayed in part
	lowest := map[topicPartition]int64{}
	for f, v := range all {
		ranges, nonce, err := decodeRecord(v)
		if err != nil {
			c.cfg.Logger.Warn("a recorded batch is malformed; dropped", "field", f, "err", err)
			stale = append(stale, f)
			continue
		}
		mine := map[topicPartition]batchRange{}
		rest := map[topicPartition]batchRange{}
		below := true // every range below its partition's committed offset
		for tp, rg := range ranges {
			committed, ok := owned[tp]
			if !ok {
				below = false // another member's to judge
				rest[tp] = rg
				continue
			}
			if committed >= 0 && rg.end <= committed {
				continue // committed: replayed in part before, by a member that owned it
			}
			below = false
			mine[tp] = rg
			if l, ok := lowest[tp]; !ok || rg.start < l {
				lowest[tp] = rg.start
			}
		}
		if below {
			stale = append(stale, f)
			continue
		}
		if len(mine) > 0 {
			records = append(records, record{f, mine, reusableNonce(ranges, mine, nonce)})
			if len(rest) > 0 {
				// The replay records and then forgets its ranges under its own field, which
				// may be f: the ranges of the partitions it does not own are kept under a
				// field of their own for their owners.
				rests[batchField(rest)] = encodeRanges(rest)
			}
		}
	}
	if len(rests) > 0 {
		if err := c.cfg.Redis.HSet(ctx, rangesKey(c.cfg.GroupID), rests).Err(); err != nil {
			c.cfg.Logger.Warn("keeping the recorded ranges of other members' partitions failed; a replay of them is stored again and collapsed at merges", "err", err)
		}
	}
	at := map[topicPartition]int64{} // each owned partition's next offset to replay from
	for tp, committed := range owned {
		if committed < 0 {
			committed = lowest[tp]
		}
		at[tp] = committed
	}
	var phases []map[topicPartition]batchRange
	var nonces []string
	for {
		found := -1
		for i, rec := range records {
			ok := true
			for tp, rg := range rec.ranges {
				if rg.start != at[tp] {
					ok = false
					break
				}
			}
			if ok {
				found = i
				break
			}
		}
		if found < 0 {
			break
		}
		rec := records[found]
		records = slices.Delete(records, found, found+1)
		phases = append(phases, rec.ranges)
		nonces = append(nonces, rec.nonce)
		for tp, rg := range rec.ranges {
			at[tp] = rg.end
		}
	}
	c.queueForget(stale...)
	if len(phases) == 0 {
		return nil
	}
	c.cfg.Logger.Info("reading uncommitted batches again at their recorded offset ranges, so ClickHouse drops what they stored before",
		"batches", len(phases))
	return &replay{log: c.cfg.Logger.Warn, phases: phases, nonces: nonces, reached: map[topicPartition]int64{}, release: make(chan struct{}), since: time.Now()}
}
