package consumers

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/ingest"
)

// Pipelining (issue 7). A batch goes through two stages: prepare (decode ▸ validate ▸ in-batch
// dedup: pure computation on the messages, no store touched) and store (dedup claims ▸ Redis ▸
// ClickHouse ▸ commit). The next batch is fetched and prepared while the current one is
// stored, so decoding overlaps the stores' round trips; stores and commits stay sequential,
// in fetch order, and a batch's offsets are still committed only after the stores hold it
// (DESIGN.md §5). Preparing touches no store, so nothing a prepared batch does is visible
// before its turn; a batch whose store is retried is not prepared again.

// prepared is a fetched batch after prepare.
type prepared struct {
	msgs   []kafka.Message
	events []decoded // valid events, the first of each uuid in the batch
	// rows are the raw rows of events (ingest.Rows.Append); the store stage keeps those of
	// the events whose uuid the batch owns.
	rows      ingest.Rows
	bad       []ingest.DeadLetter
	deadRows  []row
	auditRows []row
	audits    []*ingest.AuditEvent
	// inBatchDups are the kinds of events dropped because an earlier message of the batch
	// carried their uuid.
	inBatchDups []*ingest.Kind
}

// fetchLoop reads one generation's partitions (partitionReaders), fills and prepares batches
// and hands them to out (capacity 1: one batch is prepared ahead of the one being stored)
// until ctx ends, then stops the readers and closes out. An empty batch (nothing arrived for
// BatchWait) is handed on too, so the store stage can check for drain.
func (c *Consumer) fetchLoop(ctx context.Context, assignments map[string][]kafka.PartitionAssignment, out chan<- *prepared) {
	defer close(out)
	msgs := make(chan kafka.Message, partitionQueue)
	wait := c.partitionReaders(ctx, assignments, msgs)
	defer wait()
	for {
		batch := c.fill(ctx, msgs)
		if ctx.Err() != nil {
			return
		}
		if len(batch) > 0 {
			if err := c.syncClock(ctx); err != nil {
				c.cfg.Logger.Debug("reading Redis's clock failed; keeping the last offset", "err", err)
			}
		}
		select {
		case out <- c.prepare(batch):
		case <-ctx.Done():
			return
		}
	}
}

// fill reads up to BatchSize messages from msgs, waiting at most BatchWait for the batch to
// fill.
func (c *Consumer) fill(ctx context.Context, msgs <-chan kafka.Message) []kafka.Message {
	timer := time.NewTimer(c.cfg.BatchWait)
	defer timer.Stop()
	var batch []kafka.Message
	for len(batch) < c.cfg.BatchSize {
		select {
		case m := <-msgs:
			batch = append(batch, m)
		case <-timer.C:
			return batch
		case <-ctx.Done():
			return batch
		}
	}
	return batch
}

// parallelDecodeMin is the batch size from which events are decoded on several goroutines.
const parallelDecodeMin = 1000

// prepare decodes and validates msgs (in parallel chunks for a large batch: ingest.Parse is
// a pure function), drops in-batch duplicates, keeping the first message of each uuid, and
// builds the raw rows of the events kept.
func (c *Consumer) prepare(msgs []kafka.Message) *prepared {
	type parsed struct {
		ev  *ingest.Event
		err error
	}
	out := make([]parsed, len(msgs))
	parse := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if t := msgs[i].Topic; t == ingest.TopicDeadLetters || t == ingest.TopicAudit {
				continue
			}
			out[i].ev, out[i].err = ingest.Parse(msgs[i].Value)
		}
	}
	if workers := min(runtime.GOMAXPROCS(0), len(msgs)/parallelDecodeMin); workers > 1 {
		var wg sync.WaitGroup
		chunk := (len(msgs) + workers - 1) / workers
		for lo := 0; lo < len(msgs); lo += chunk {
			wg.Go(func() { parse(lo, min(lo+chunk, len(msgs))) })
		}
		wg.Wait()
	} else {
		parse(0, len(msgs))
	}

	now := c.now()
	p := &prepared{msgs: msgs, events: make([]decoded, 0, len(msgs))}
	at := ingest.RowContext{InsertedAt: now.UTC().Truncate(time.Second), DefaultInstanceURL: c.cfg.DefaultInstanceURL, Keys: c.keys}
	firstSeen := make(map[[16]byte]string, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		switch m.Topic {
		case ingest.TopicDeadLetters:
			p.deadRows = append(p.deadRows, deadLetterRow(m))
			continue
		case ingest.TopicAudit:
			a, err := ingest.ParseAuditEvent(m.Value)
			if err != nil {
				p.bad = append(p.bad, ingest.DeadLetter{ID: position(m), Payload: m.Value, Reason: "audit event: " + err.Error(), Source: m.Topic, Class: ingest.ClassAuditInvalid})
				continue
			}
			p.auditRows = append(p.auditRows, auditRow(m, a))
			p.audits = append(p.audits, a)
			continue
		}
		ev, err := out[i].ev, out[i].err
		if err == nil {
			err = ingest.CheckClock(ev, now)
		}
		if err != nil {
			p.bad = append(p.bad, ingest.DeadLetter{ID: position(m), Payload: m.Value, Reason: err.Error(), Source: m.Topic, Class: ingest.ClassOf(err)})
			continue
		}
		pos := position(m)
		if prev, seen := firstSeen[ev.UUID]; seen {
			if prev != pos { // the same message fetched twice (after a rebalance) is not a duplicate
				p.inBatchDups = append(p.inBatchDups, ev.Kind)
			}
			continue
		}
		firstSeen[ev.UUID] = pos
		p.events = append(p.events, decoded{msg: m, ev: ev, pos: pos})
		at.Partition, at.Offset = int32(m.Partition), m.Offset
		p.rows.Append(ev, at)
	}
	return p
}
