package consumers

import (
	"context"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/consumers/rollup"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/misuse"
)

// Pipelining. A batch goes through three stages: prepare (decode ▸ validate ▸ dedup in each
// partition's window ▸ the raw rows: computation on the messages, no store touched), raw
// (Redis ▸ the raw tables, dead letters and audit rows, their ClickHouse inserts at once on
// several connections ▸ what the stored events add to the rollups) and commit (for a
// streamed batch the end of its INSERTs ▸ the rollup rows ▸ the offset commit). The three run
// at once on consecutive batches: while batch N's rollups are written and its offsets
// committed, batch N+1's raw rows are stored and batch N+2 is fetched and prepared, so the
// store round trips overlap each other and the decoding.
// A batch's offsets are still committed only after Redis and ClickHouse hold it (DESIGN.md
// §5), in fetch order; and a batch's rollup rows are written only after the batch before it
// was committed, so at most one batch per partition has rollup rows stored but not committed
// (what a new owner's reset relies on: consumers/rollup). Raw rows of a batch that is never
// committed are replaced by its replay (the raw tables are idempotent). Preparing touches no
// store, so nothing a prepared batch does is visible before its turn; a batch whose store is
// retried is not prepared again. What is fetched and prepared is a chunk of a batch: the raw
// stage streams consecutive chunks into one batch (stream.go), which then goes to the commit
// stage whole.

// prepared is a fetched batch after prepare.
type prepared struct {
	msgs []kafka.Message
	// ranges are each event partition's offsets in the batch, as recorded before its INSERTs
	// ended (ranges.go); set once the batch is closed.
	ranges map[topicPartition]batchRange
	// rows are the raw rows of the valid events kept (ingest.Rows.Append), the served schemas
	// collapsed (ingest.CollapseServedSchemas); kept says which events they are.
	rows ingest.Rows
	// slots hold the tool-call events the rows were made from, by message (releaseRows).
	slots []ingest.ToolCallSlot
	kept  []keptEvent
	// responses are the invitation responses kept, for the suppression records; misuse the
	// tool calls and tool listings kept, for deriveMisuse (let go once it ran).
	responses []*ingest.Event
	misuse    []*ingest.Event
	// misuseAt is each misuse event's place in the log.
	misuseAt []misuse.Position
	// toolCallStreams is the partition each row of rows.ToolCalls was read from.
	toolCallStreams []rollup.Stream
	// derived: deriveMisuse filled the tool-call rows; counted: the stored events were added
	// to rollup (once, after the raw inserts, leaving out what ClickHouse refused).
	derived, counted bool
	// folded: the cardinality caps folded the tool-call rows (after deriveMisuse).
	folded    bool
	bad       []ingest.DeadLetter
	deadRows  []row
	auditRows []row
	audits    []*ingest.AuditEvent
	// duplicates are the kinds of the events dropped as duplicates (their partition's dedup
	// window held their uuid).
	duplicates []*ingest.Kind
	// rollup is what the kept events add to the rollups; rollupWrite the rows the store stage
	// computed from it, kept so a retried store writes the same rows.
	rollup      *rollup.Batch
	rollupWrite *rollup.Write
	// result is what the raw stage stored, accounted once the batch's rollups are written.
	result batchResult
	// messages is how many messages the batch read: len(msgs), or for a streamed batch
	// (openBatch.closed, whose msgs are each partition's last) those of all its chunks.
	messages int
	// cut: fill returned before the batch reached its bounds (nothing more was waiting).
	cut bool
	// firstRead is when fill received the batch's first message (zero for an empty batch):
	// a streamed batch's age counts from its first chunk's (Config.BatchMaxAge).
	firstRead time.Time
	// sentBefore: the send time of every invitation stored in an INSERT that has not ended
	// yet, so no query sees it: for a chunk of a streamed batch, those the batch's earlier
	// chunks stored (openBatch.sent), and those of the batch before while its INSERTs end.
	sentBefore []map[string]time.Time
}

// rawStored lets go of what only the raw stage needed (the rows, the events kept), so that a
// batch waiting for its rollups and commit holds little more than its rollup cells and its
// messages' offsets.
func (p *prepared) rawStored() {
	p.rows = ingest.Rows{}
	p.kept, p.responses, p.misuse, p.misuseAt, p.toolCallStreams = nil, nil, nil, nil, nil
	p.bad, p.deadRows, p.auditRows, p.audits, p.duplicates = nil, nil, nil, nil, nil
}

// freeRowSlices is how many tool-call row slices a consumer keeps for reuse: one per chunk in
// flight (one prepared while one is stored).
const freeRowSlices = 2

// toolCallRows returns an empty slice with room for n tool-call rows: one a stored chunk left
// (releaseRows) when it fits, else a new one. A chunk's rows are one large allocation (576
// bytes a row: 12 MiB for a 16 MiB chunk of demo events), which the runtime would otherwise
// zero, and, under the soft memory limit, return to the operating system and fault in again,
// for every chunk. A kept slice more than twice as large as n is let go, so that slices sized
// for larger chunks do not outlive a lower chunk bound (budget.go); a chunk without tool calls
// (an idle poll's empty batch) takes none.
func (c *Consumer) toolCallRows(n int) []ingest.ToolCallRow {
	if n == 0 {
		return []ingest.ToolCallRow{}
	}
	return fromPool(c.freeToolCallRows, n)
}

// toolCallSlots returns n zeroed tool-call event slots (ingest.ParseIn), from a stored
// chunk's (releaseRows) when they fit, else new: a chunk's tool-call events take one slot per
// message (about 620 bytes each; a message of another kind leaves its slot unused), one
// allocation reused like its rows.
func (c *Consumer) toolCallSlots(n int) []ingest.ToolCallSlot {
	if n == 0 {
		return nil
	}
	return fromPool(c.freeToolCallSlots, n)[:n]
}

// releaseRows lets go of p's tool-call rows and the events they were made from, once
// ClickHouse holds them (nothing else refers to them then: a row's optional numbers point
// into its event), keeping their slices for a later chunk (toolCallRows, toolCallSlots). Both
// are zeroed first, so that they keep none of their strings alive.
func (c *Consumer) releaseRows(p *prepared) {
	rows, slots := p.rows.ToolCalls, p.slots
	p.rows.ToolCalls, p.slots = nil, nil
	toPool(c.freeToolCallRows, rows)
	toPool(c.freeToolCallSlots, slots)
}

// fromPool returns an empty slice with room for n elements: one from free when its capacity
// is between n and 2n (larger ones are let go, so that slices sized for larger chunks do not
// outlive a lower chunk bound), else a new one.
func fromPool[T any](free chan []T, n int) []T {
	select {
	case s := <-free:
		if cap(s) >= n && cap(s) <= 2*n {
			return s[:0]
		}
	default:
	}
	return make([]T, 0, n)
}

// toPool zeroes s and keeps it in free when there is room.
func toPool[T any](free chan []T, s []T) {
	if cap(s) == 0 {
		return
	}
	clear(s)
	select {
	case free <- s[:0]:
	default:
	}
}

// keptEvent is what the store stage needs of an event prepare kept: to count it, add it to
// events_by_name_hourly, and dead-letter it if ClickHouse refuses its row.
type keptEvent struct {
	id   uuid.UUID
	kind *ingest.Kind
	name string
	at   time.Time
	msg  int // its message in prepared.msgs
}

// fetchLoop reads one generation's partitions (partitionReaders), fills and prepares batches
// and hands them to out (unbuffered: one batch is prepared ahead of the one being stored)
// until ctx ends, then stops the readers and closes out. An empty batch (nothing arrived for
// BatchWait, or before the open batch's age bound) is handed on too, so the store stage can
// close the open batch and check for drain. opened is the open batch's opening as the store
// stage sets it (nil: no age bound; fill). rp replays the recorded uncommitted batches first
// (ranges.go; nil for none).
func (c *Consumer) fetchLoop(ctx context.Context, assignments map[string][]kafka.PartitionAssignment, out chan<- *prepared, opened *batchOpened, rp *replay) {
	defer close(out)
	// The dedup windows first: a partition is read only once its window is as of the
	// committed offset.
	backoff := c.cfg.RetryBackoff
	for {
		err := c.syncWindows(ctx, assignments)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		c.stats.fetchRetries.Add(1)
		c.cfg.Logger.Warn("rebuilding the dedup windows failed; retrying", "retry_in", backoff, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, c.cfg.MaxRetryBackoff)
	}
	msgs := make(chan kafka.Message, partitionQueue)
	wait := c.partitionReaders(ctx, assignments, msgs, rp)
	defer wait()
	last := 0 // the last non-empty batch's length: room for the next one (fill)
	for {
		batch, cut, first := c.fill(ctx, msgs, last, opened)
		if len(batch) > 0 {
			last = len(batch)
		}
		if ctx.Err() != nil {
			return
		}
		if len(batch) > 0 {
			if err := c.syncClock(ctx); err != nil {
				c.cfg.Logger.Debug("reading Redis's clock failed; keeping the last offset", "err", err)
			}
		}
		p := c.prepare(batch)
		p.cut, p.firstRead = cut, first
		select {
		case out <- p:
		case <-ctx.Done():
			return
		}
	}
}

// fill reads up to BatchSize messages, or up to the message whose key and value (plus
// MessageOverhead) bring the batch to its byte bound (BatchBytes, lowered while the dedup
// windows fill the memory budget: budget.go), from msgs, waiting at most BatchWait for the batch to fill; cut reports
// that the wait (or ctx) ended it first, first when its first message arrived (zero when none
// did). With opened (nil: no age bound), it also ends, uncut and possibly empty, when the
// batch it joins reaches BatchMaxAge (batchOpened.deadline): the store stage then closes that
// batch unless the consumer is catching up (openBatch.full). The batch starts with room for
// about hint messages (the last non-empty batch's length): grown by doubling, a batch of
// large kafka.Message values was copied again and again.
func (c *Consumer) fill(ctx context.Context, msgs <-chan kafka.Message, hint int, opened *batchOpened) (batch []kafka.Message, cut bool, first time.Time) {
	start := time.Now()
	timer := time.NewTimer(c.cfg.BatchWait)
	defer timer.Stop()
	// aged fires at the age deadline of the batch the chunk joins (agedC is nil while there is
	// none); it is set again when the chunk's first message arrives and when the store stage
	// opens or closes a batch (changed).
	aged := time.NewTimer(0)
	aged.Stop()
	defer aged.Stop()
	var agedC <-chan time.Time
	setAged := func() {
		aged.Stop()
		agedC = nil
		if d := opened.deadline(c.cfg.BatchMaxAge, start, first); !d.IsZero() {
			aged.Reset(time.Until(d))
			agedC = aged.C
		}
	}
	var changed <-chan struct{} // nil (never ready) without opened
	if opened != nil {
		changed = opened.changed
	}
	setAged()
	batch = make([]kafka.Message, 0, min(hint+hint/8, c.cfg.BatchSize))
	bytes, maxBytes := 0, c.batchBytes()
	for len(batch) < c.cfg.BatchSize && bytes < maxBytes {
		select {
		case m := <-msgs:
			if len(batch) == 0 {
				first = time.Now()
				setAged()
			}
			batch = append(batch, m)
			bytes += len(m.Key) + len(m.Value) + MessageOverhead
		case <-changed:
			setAged()
		case <-agedC:
			return batch, false, first
		case <-timer.C:
			return batch, true, first
		case <-ctx.Done():
			return batch, true, first
		}
	}
	return batch, false, first
}

// messageTime is a raw row's inserted_at: m's record timestamp in UTC, to the second, so that a
// message read again builds the same row (ingest.RowContext.InsertedAt); now when the broker
// gave none, or one a DateTime column cannot hold (a producer sets the record timestamp, and a
// value past 2106 would make ClickHouse refuse the row).
func messageTime(m *kafka.Message, now time.Time) time.Time {
	if s := m.Time.Unix(); s <= 0 || s > math.MaxUint32 {
		return now.UTC().Truncate(time.Second)
	}
	return m.Time.UTC().Truncate(time.Second)
}

// parallelDecodeMin is the batch size from which events are decoded on several goroutines.
const parallelDecodeMin = 1000

// prepare decodes and validates msgs (in parallel chunks for a large batch: ingest.Parse is a
// pure function), decides duplicates in each partition's dedup window (windows.go), builds
// the raw rows of the events kept and adds them to the batch's rollups (package
// consumers/rollup).
func (c *Consumer) prepare(msgs []kafka.Message) *prepared {
	type parsed struct {
		ev  *ingest.Event
		err error
	}
	out := make([]parsed, len(msgs))
	slots := c.toolCallSlots(len(msgs))
	parallel(len(msgs), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if dedupTopic(msgs[i].Topic) {
				out[i].ev, out[i].err = ingest.ParseIn(msgs[i].Value, &slots[i])
			}
		}
	})

	now := c.now()
	p := &prepared{msgs: msgs, rollup: c.rollups.NewBatch(), slots: slots}
	// Room for every row at once: a slice of rows grown by doubling copied them again and again.
	perTopic := map[string]int{}
	for i := range msgs {
		perTopic[msgs[i].Topic]++
	}
	p.rows.ToolCalls = c.toolCallRows(perTopic[ingest.TopicToolCalls])
	p.rows.Recruitment = make([]ingest.RecruitmentRow, 0, perTopic[ingest.TopicRecruitment])
	p.kept = make([]keptEvent, 0, perTopic[ingest.TopicToolCalls]+perTopic[ingest.TopicRecruitment])
	p.misuse = make([]*ingest.Event, 0, perTopic[ingest.TopicToolCalls])
	p.misuseAt = make([]misuse.Position, 0, perTopic[ingest.TopicToolCalls])
	p.toolCallStreams = make([]rollup.Stream, 0, perTopic[ingest.TopicToolCalls])
	at := ingest.RowContext{DefaultInstanceURL: c.cfg.DefaultInstanceURL, Keys: c.keys}
	c.windows.mu.Lock()
	defer c.windows.mu.Unlock()
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
		stream := rollup.Stream{Topic: m.Topic, Partition: int32(m.Partition)}
		ev, err := out[i].ev, out[i].err
		w, werr := c.windows.get(m.Topic, m.Partition)
		if werr != nil {
			panic("BUG: " + werr.Error()) // the window size was validated by New
		}
		var id [16]byte
		if err == nil {
			id = ev.UUID
		}
		dup, oerr := w.Observe(m.Offset, id, err == nil)
		if oerr != nil {
			// Observed already in this generation: the same message fetched twice. Its first
			// copy is stored (or dropped) on its own; this one changes nothing.
			slots[i] = ingest.ToolCallSlot{} // let go of the event and the bytes it shares
			continue
		}
		p.rollup.Advance(stream, m.Offset)
		if dup {
			p.duplicates = append(p.duplicates, ev.Kind)
			slots[i] = ingest.ToolCallSlot{}
			continue
		}
		if err == nil {
			err = ingest.CheckClock(ev, now)
		}
		if err != nil {
			p.bad = append(p.bad, ingest.DeadLetter{ID: position(m), Payload: m.Value, Reason: err.Error(), Source: m.Topic, Class: ingest.ClassOf(err)})
			slots[i] = ingest.ToolCallSlot{}
			continue
		}
		at.Partition, at.Offset, at.InsertedAt = int32(m.Partition), m.Offset, messageTime(m, now)
		p.rows.Append(ev, at)
		p.kept = append(p.kept, keptEvent{id: ev.UUID, kind: ev.Kind, name: ev.Name, at: ev.Timestamp, msg: i})
		switch {
		case ev.Kind == ingest.KindInvitationResponse:
			ev.Properties = nil // it shares the message's bytes, which are let go below
			p.responses = append(p.responses, ev)
		case ev.ToolCall != nil:
			// deriveMisuse reads a call's parameters and response only when it reported no
			// ignored keys: let the others go with the message's bytes they share.
			ev.Properties = nil
			if ev.ToolCall.IgnoredKeysReported {
				ev.ToolCall.Parameters, ev.ToolCall.Response = nil, nil
			}
			p.misuse = append(p.misuse, ev)
			p.misuseAt = append(p.misuseAt, misuse.Position{Partition: int32(m.Partition), Offset: m.Offset})
			p.toolCallStreams = append(p.toolCallStreams, stream)
		case ev.ToolsList != nil:
			p.misuse = append(p.misuse, ev)
			p.misuseAt = append(p.misuseAt, misuse.Position{Partition: int32(m.Partition), Offset: m.Offset})
		}
	}
	if len(p.toolCallStreams) != len(p.rows.ToolCalls) {
		panic("BUG: one tool-call row per tool call")
	}
	p.rows.ServedSchemas = ingest.CollapseServedSchemas(p.rows.ServedSchemas)
	// The rows hold copies of what they need: the messages' bytes go with the last event that
	// shares them (deriveMisuse's), not with the batch (a dead letter keeps its own payload).
	for i := range msgs {
		msgs[i].Value, msgs[i].Key = nil, nil
	}
	return p
}
