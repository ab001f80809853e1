package consumers

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/consumers/dedup"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/misuse"
)

// Deduplication by uuid (DESIGN.md §5; package consumers/dedup). An event at offset o of a
// partition is a duplicate when a valid event with the same uuid is at an offset in [o−W, o)
// of the same partition, W being Config.DedupWindow. The prepare stage observes every message
// of the event topics in offset order in its partition's dedup.Window; the decisions are a
// function of the log, so a replay decides the same and the stores' idempotent writes make
// it change nothing. A producer's retry carries its first attempt's uuid and message key, so
// it lands on the same partition, within W offsets unless it came much later.
//
// A member keeps the windows of the partitions it read. When a generation assigns it a
// partition at committed offset C, the window is brought to C before the partition is read:
// unchanged when it is already there, rewound (dedup.Window.Rewind) when this member had
// prepared batches past C that were never stored, moved forward by reading [Next, C) when
// another member committed further, and otherwise rebuilt by reading the log's offsets
// [C−W, C): never more than W messages, decoded in parallel. The tools lists among the
// messages read are given to the listing state (misuse.Listings) too: a member that takes a
// partition over, or restarts, knows the listings of the W offsets before the committed
// offset, as the member that read them did.

// windows holds the dedup windows of the event-topic partitions this member has read.
type windows struct {
	mu    sync.Mutex
	size  int
	byKey map[topicPartition]*window
}

type topicPartition struct {
	topic     string
	partition int
}

type window struct {
	w *dedup.Window
	// synced: the window's state is the log's as of w.Next() (false for a new window, or one
	// whose rebuild failed).
	synced bool
}

// dedupTopic reports whether messages of topic are events deduplicated by uuid (the
// dead-letter and audit topics are keyed by their own ids).
func dedupTopic(topic string) bool {
	return topic != ingest.TopicDeadLetters && topic != ingest.TopicAudit
}

// get returns the window of (topic, partition), or nil for a topic without dedup; the caller
// holds mu.
func (ws *windows) get(topic string, partition int) (*dedup.Window, error) {
	if !dedupTopic(topic) {
		return nil, nil
	}
	k := topicPartition{topic, partition}
	if w, ok := ws.byKey[k]; ok {
		return w.w, nil
	}
	d, err := dedup.NewWindow(ws.size)
	if err != nil {
		return nil, err
	}
	ws.byKey[k] = &window{w: d}
	return d, nil
}

// commit records that msgs' offsets are committed: their windows drop what undoing them needs.
func (ws *windows) commit(msgs []kafka.Message) {
	next := map[topicPartition]int64{}
	for i := range msgs {
		m := &msgs[i]
		k := topicPartition{m.Topic, m.Partition}
		next[k] = max(next[k], m.Offset+1)
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for k, n := range next {
		if w, ok := ws.byKey[k]; ok {
			w.w.Commit(n)
		}
	}
}

// Bytes is the memory the windows hold (0 for none).
func (ws *windows) Bytes() int {
	if ws == nil {
		return 0
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	n := 0
	for _, w := range ws.byKey {
		n += w.w.Bytes()
	}
	return n
}

// syncWindows brings the window of every assigned event-topic partition to its committed
// offset (see above), reading the partitions' recent offsets from Kafka where needed. It
// returns ctx's error, or the first Kafka error (the windows it could not sync are rebuilt
// by the next attempt).
func (c *Consumer) syncWindows(ctx context.Context, assignments map[string][]kafka.PartitionAssignment) error {
	type job struct {
		tp       topicPartition
		from, to int64
	}
	var jobs []job
	firsts, err := c.firstOffsets(ctx, assignments)
	if err != nil {
		return err
	}
	ws := c.windows
	ws.mu.Lock()
	for topic, parts := range assignments {
		if !dedupTopic(topic) {
			continue
		}
		for _, pa := range parts {
			tp := topicPartition{topic, pa.ID}
			first := firsts[tp]
			committed := pa.Offset
			if committed < first { // nothing committed (kafka.FirstOffset), or below retention
				committed = first
			}
			if _, err := ws.get(topic, pa.ID); err != nil {
				ws.mu.Unlock()
				return err
			}
			w := ws.byKey[tp]
			size := int64(w.w.Size())
			switch next := w.w.Next(); {
			case w.synced && next == committed:
			case w.synced && committed < next && w.w.Rewind(committed):
			case w.synced && committed > next && committed-next < size:
				w.synced = false
				jobs = append(jobs, job{tp, next, committed})
			default:
				from := max(committed-size, first)
				w.w.Reset(from)
				w.synced = false
				jobs = append(jobs, job{tp, from, committed})
			}
		}
	}
	ws.mu.Unlock()
	// One reader per partition, all at once: each read is mostly waiting on Kafka.
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			began := time.Now()
			n, err := c.rebuildWindow(ctx, j.tp, j.from, j.to)
			if err != nil {
				errs[i] = fmt.Errorf("dedup window of %s/%d: %w", j.tp.topic, j.tp.partition, err)
				return
			}
			c.cfg.Logger.Info("dedup window rebuilt from the log", "topic", j.tp.topic, "partition", j.tp.partition,
				"from", j.from, "to", j.to, "messages", n, "took", time.Since(began).Round(time.Millisecond))
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// firstOffsets asks the brokers for the first offset of every assigned partition.
func (c *Consumer) firstOffsets(ctx context.Context, assignments map[string][]kafka.PartitionAssignment) (map[topicPartition]int64, error) {
	req := map[string][]kafka.OffsetRequest{}
	for topic, parts := range assignments {
		if !dedupTopic(topic) {
			continue
		}
		for _, pa := range parts {
			req[topic] = append(req[topic], kafka.FirstOffsetOf(pa.ID))
		}
	}
	out := map[topicPartition]int64{}
	if len(req) == 0 {
		return out, nil
	}
	res, err := c.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: req})
	if err != nil {
		return nil, fmt.Errorf("first offsets: %w", err)
	}
	for topic, ps := range res.Topics {
		for _, p := range ps {
			if p.Error != nil {
				return nil, fmt.Errorf("first offset of %s/%d: %w", topic, p.Partition, p.Error)
			}
			out[topicPartition{topic, p.Partition}] = p.FirstOffset
		}
	}
	return out, nil
}

// rebuildChunk is how many messages a window rebuild decodes at once.
const rebuildChunk = 4096

// rebuildWindow observes the offsets [from, to) of tp's log in its window (positioned at
// from), decoding each message as the prepare stage does, and marks the window synced at to.
// It returns how many messages it read.
func (c *Consumer) rebuildWindow(ctx context.Context, tp topicPartition, from, to int64) (int, error) {
	ws := c.windows
	read := 0
	if from < to {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers: c.cfg.Brokers, Topic: tp.topic, Partition: tp.partition,
			MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 250 * time.Millisecond, QueueCapacity: rebuildChunk, Dialer: fetchDialer,
			ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) { logReaderError(c.cfg.Logger, fmt.Sprintf(msg, args...)) }),
		})
		defer r.Close()
		if err := r.SetOffset(from); err != nil {
			return 0, err
		}
		chunk := make([]kafka.Message, 0, rebuildChunk)
		flush := func() error {
			ids, valid, lists := eventIDs(chunk)
			// The tools lists read back go to the listing state, at their places in the
			// log, so calls after the committed offset are judged as they were before.
			for i, ev := range lists {
				if ev != nil {
					c.listings.Observe(listingPage(ev, misuse.Position{Partition: int32(chunk[i].Partition), Offset: chunk[i].Offset}))
				}
			}
			ws.mu.Lock()
			defer ws.mu.Unlock()
			w := ws.byKey[tp].w
			for i := range chunk {
				if _, err := w.Observe(chunk[i].Offset, ids[i], valid[i]); err != nil {
					return err
				}
			}
			read += len(chunk)
			chunk = chunk[:0]
			return nil
		}
		for {
			// Every offset below to holds a message (the event topics are neither compacted
			// nor written in transactions), so the read ends at to−1; it waits as long as
			// Kafka takes (a rebuild that stopped early would miss duplicates).
			m, err := r.FetchMessage(ctx)
			if err != nil {
				return read, err
			}
			if m.Offset >= to {
				break
			}
			chunk = append(chunk, m)
			if len(chunk) == rebuildChunk || m.Offset == to-1 {
				if err := flush(); err != nil {
					return read, err
				}
			}
			if m.Offset == to-1 {
				break
			}
		}
		if len(chunk) > 0 {
			if err := flush(); err != nil {
				return read, err
			}
		}
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.byKey[tp]
	if err := w.w.Pass(to); err != nil {
		return read, err
	}
	w.w.Commit(to)
	w.synced = true
	return read, nil
}

// eventIDs decodes msgs (in parallel for many) as the prepare stage does and returns each
// one's uuid and whether it is a valid event, the membership of the dedup window, and the
// tools list events among them (nil for any other message).
func eventIDs(msgs []kafka.Message) ([][16]byte, []bool, []*ingest.Event) {
	ids, valid, lists := make([][16]byte, len(msgs)), make([]bool, len(msgs)), make([]*ingest.Event, len(msgs))
	parse := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if ev, err := ingest.Parse(msgs[i].Value); err == nil {
				ids[i], valid[i] = ev.UUID, true
				if ev.ToolsList != nil {
					lists[i] = ev
				}
			}
		}
	}
	parallel(len(msgs), parse)
	return ids, valid, lists
}

// parallel runs fn over [0, n) in chunks on up to GOMAXPROCS goroutines, from
// parallelDecodeMin items on.
func parallel(n int, fn func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), n/parallelDecodeMin)
	if workers <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		wg.Go(func() { fn(lo, min(lo+chunk, n)) })
	}
	wg.Wait()
}
