package consumers

import (
	"context"
	"fmt"
	"maps"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"

	"github.com/mcpulse/mcpulse/consumers/chwrite"
	"github.com/mcpulse/mcpulse/consumers/rollup"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/migrations"
)

// Streamed batches. What a batch holds in memory follows its message bytes (Config.BatchBytes),
// but what ClickHouse spends on a batch follows the parts it writes: each insert makes a part
// per table, and every part is written, then merged again and again, at a cost that hardly
// depends on its rows. With large events (the MCP analytics SDK's tool calls are about 2.6 KB
// with their arguments, results and tool listings), a batch bounded by memory is a few
// thousand rows, and ClickHouse's merges cost more than everything else the pipeline does.
//
// So a batch is read as a sequence of chunks, each bounded by Config.BatchBytes (what fill
// reads and prepare decodes), and its raw rows are streamed: each raw table's INSERT stays open
// from the batch's first chunk to its last, every chunk's rows are sent into it as blocks
// (chwrite.OpenInsert) and let go, and ClickHouse squashes the blocks of one INSERT into one
// part. Everything else a chunk does is done as it comes (Redis, dead letters, audit rows: all
// idempotent), and what it adds to the rollups is merged into the batch's. The batch closes,
// and its INSERTs end, at its first chunk that brings it to Config.BatchSize messages, that
// fill cut short (nothing more was waiting: a consumer that keeps up closes a batch per chunk,
// so streaming adds no latency), or that fill ended when the batch was Config.BatchMaxAge old
// (batchOpened), counted from its first message's read, while less than the rest of a batch
// waits behind it (a steady stream too fast for a chunk to be cut would otherwise keep a batch
// open until it reaches BatchSize; a consumer catching up still fills it). Only once every
// INSERT ended does the batch's commit stage write its rollups, then commit its offsets, so
// offsets are still committed only after ClickHouse holds the batch. The INSERTs end while the
// next batch streams (ClickHouse writes each part then), and the commit stage waits for them
// (consumeGeneration's closeOpen).
//
// When a chunk's store fails, the batch is closed without it (its INSERTs ended, then
// committed) and the chunk is stored as a batch of its own, with the retries and the
// refused-row splitting of storeRaw; any of its rows the INSERTs took are stored again, which
// the replacing raw tables absorb. But a streamed batch keeps no rows to retry an INSERT
// with: when one of its INSERTs cannot be ended (a block's flush failed, or its end), the
// member aborts them all, marks the batch's offsets, and rejoins the group; reading again from
// the committed offsets (its dedup windows rewound to them), it stores every chunk up to the
// marked offsets as a batch of its own, and streams again after them.

// streamConns is the fewest connections the ClickHouse pool must allow for batches to be
// streamed: one open INSERT per raw table, plus the connections the chunk's other inserts (its
// feeds' among them) and the previous batch's rollups use meanwhile. A smaller pool (a DSN's
// max_open_conns) gets one chunk per batch.
var streamConns = len(rawTables) + len(migrations.ViewFeeds) + 6

// asyncEndConns is the fewest connections the pool must allow for a streamed batch's INSERTs
// to end while the next batch streams: as many again for them, the next batch's dead-letter
// and audit inserts and its lookups. A pool of streamConns up to this ends them before the
// next batch streams.
var asyncEndConns = 2*len(rawTables) + len(migrations.ViewFeeds) + 4

// endsAsync reports whether the pool allows a streamed batch's INSERTs to end while the next
// batch streams (asyncEndConns).
func (c *Consumer) endsAsync() bool {
	return c.cfg.ClickHouse.Stats().MaxOpenConns >= asyncEndConns
}

// batchOpened is when the open streamed batch opened, as the store stage sets it for the
// fetch stage: a chunk being filled stops when the batch it joins reaches Config.BatchMaxAge
// (fill), so the batch closes then (full) rather than up to a chunk (at most BatchWait) later,
// as it did when its age was checked only where a chunk ended at its byte bound or its wait.
// One per generation; nil for no age bound.
type batchOpened struct {
	at      atomic.Pointer[time.Time] // the open batch's opened; nil when no batch is open
	changed chan struct{}             // capacity 1: signalled whenever at changes
}

func newBatchOpened() *batchOpened { return &batchOpened{changed: make(chan struct{}, 1)} }

// set records that the open batch opened at opened (zero: none is open) and wakes a fill.
func (o *batchOpened) set(opened time.Time) {
	if opened.IsZero() {
		o.at.Store(nil)
	} else {
		o.at.Store(&opened)
	}
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

// deadline is when a chunk whose fill started at start, and whose first message was read at
// first (zero: none yet), ends so that the batch it joins closes at maxAge. With a batch
// open, that is the batch's opened plus maxAge, or none if that had passed when the fill
// started: the store stage kept the batch open past its age, catching up, and its chunks
// fill to their bounds. With none open, it is first plus maxAge, the age of the batch the
// chunk opens. Zero means no deadline; so does a nil batchOpened, or a maxAge of
// NoBatchMaxAge (or 0).
func (o *batchOpened) deadline(maxAge time.Duration, start, first time.Time) time.Time {
	if o == nil || maxAge <= 0 || maxAge == NoBatchMaxAge {
		return time.Time{}
	}
	if at := o.at.Load(); at != nil {
		if d := at.Add(maxAge); d.After(start) {
			return d
		}
		return time.Time{}
	}
	if first.IsZero() {
		return time.Time{}
	}
	return first.Add(maxAge)
}

// rawInsert is one raw table's INSERT kept open over a batch's chunks.
type rawInsert interface {
	// write sends the table's rows of rows into the INSERT.
	write(rows *ingest.Rows) error
	// flush sends the rows written that wait for a full block (chwrite.OpenInsert.Flush).
	flush() error
	// size is the rows written and a bound of their bytes (chwrite.OpenInsert.Bytes).
	size() (rows, bytes int64)
	send() error
	abort()
}

// openBatch is a streamed batch whose raw INSERTs are open.
type openBatch struct {
	inserts []rawInsert // by index in rawTables; nil until a chunk has rows for the table
	// parts are the partitions (rawPartKeys: month and Kafka partition) of the rows sent: an
	// INSERT may write at most migrations.MaxPartitionsPerInsert of them.
	parts    map[int]bool
	rollup   *rollup.Batch
	result   batchResult
	last     map[topicPartition]kafka.Message // each partition's last message (offsets only)
	first    map[topicPartition]int64         // each partition's first offset
	messages int
	// opened is when the batch's first message was read (its first chunk's prepared.firstRead).
	opened time.Time
	// sent is the earliest send time of every invitation the batch's chunks sent into its
	// INSERT of recruitment_events: no query sees them before the INSERT ends, and a later
	// chunk's responses need them (fillInvitationSentAt).
	sent map[string]time.Time
	// nonce names the tokens the batch's INSERTs bear (token.go); "" for none.
	nonce string
	// replays are the ranges of the recorded batch whose nonce the batch reuses, replayed as
	// replay sequence number replaySeq; nil when it drew its own (or none).
	replays   map[topicPartition]batchRange
	replaySeq uint64
}

func (c *Consumer) newOpenBatch() *openBatch {
	return &openBatch{
		inserts: make([]rawInsert, len(rawTables)),
		parts:   map[int]bool{},
		rollup:  c.rollups.NewBatch(),
		result:  batchResult{suppression: map[string]int64{}, stored: map[*ingest.Kind]int64{}},
		last:    map[topicPartition]kafka.Message{},
		first:   map[topicPartition]int64{},
		sent:    map[string]time.Time{},
	}
}

// streams reports whether chunk p may be streamed: the pool has room for the open INSERTs,
// and no offset of p is one a failed streamed batch held (streamFailed), which are replayed
// one chunk per batch.
func (c *Consumer) streams(p *prepared) bool {
	if c.cfg.ClickHouse.Stats().MaxOpenConns < streamConns {
		return false
	}
	if len(c.replayUntil) == 0 {
		return true
	}
	for i := range p.msgs {
		m := &p.msgs[i]
		if until, ok := c.replayUntil[topicPartition{m.Topic, m.Partition}]; ok && m.Offset <= until {
			return false
		}
	}
	return true
}

// fits reports whether a chunk whose rows fall in parts may join b's INSERTs without them
// writing more than migrations.MaxPartitionsPerInsert partitions.
func (b *openBatch) fits(parts map[int]bool) bool {
	n := len(b.parts)
	for m := range parts {
		if !b.parts[m] {
			n++
		}
	}
	return n <= migrations.MaxPartitionsPerInsert
}

// insert is storeRaw's insert step for a chunk of b: the dead-letter topic's and audit rows
// inserted at once (few, and their own tables), the raw rows sent into b's INSERTs, opening
// those the batch has not opened yet. It refuses nothing: an error of any table is returned,
// and the caller closes the batch without the chunk. So does a chunk whose rows would bring
// the batch's INSERTs past migrations.MaxPartitionsPerInsert partitions (errTooManyParts),
// counted once its rows are complete (fillInvitationSentAt adds a time column).
func (b *openBatch) insert(c *Consumer) rawInserter {
	return func(ctx context.Context, rows *ingest.Rows, deadRows, auditRows []row, res *batchResult) (map[uuid.UUID]string, error) {
		parts := map[int]bool{}
		for _, t := range rawTables {
			t.parts(rows, parts)
		}
		if !b.fits(parts) {
			return nil, errTooManyParts
		}
		tables, err := c.rawTablesToWrite(ctx, rows, res)
		if err != nil {
			return nil, err
		}
		g, gctx := errgroup.WithContext(ctx)
		for _, i := range tables {
			t := rawTables[i]
			g.Go(func() error {
				if b.inserts[i] == nil {
					// Opened on the batch's context, not the chunk's errgroup's: the INSERT
					// outlives this chunk.
					in, err := t.open(withDedupToken(ctx, b.nonce, t.name), c.cfg.ClickHouse)
					if err != nil {
						return err
					}
					b.inserts[i] = in
				}
				if err := b.inserts[i].write(rows); err != nil {
					return err
				}
				if b.nonce != "" {
					return nil // blocks cut at rawBlockRows only (token.go)
				}
				// The chunk's last rows go now, as a block of their own: the server
				// squashes the blocks, and the chunk's memory holds nothing unsent.
				return b.inserts[i].flush()
			})
		}
		c.insertTopicRows(gctx, g, deadRows, auditRows)
		if err := g.Wait(); err != nil {
			return nil, err
		}
		maps.Copy(b.parts, parts)
		return nil, nil
	}
}

// errTooManyParts: a chunk's rows would bring its streamed batch's INSERTs past
// migrations.MaxPartitionsPerInsert partitions (months × Kafka partitions); it is stored as a
// batch of its own, whose inserts are cut by partitions (byParts).
var errTooManyParts = fmt.Errorf("its rows and the batch's fall in more than %d partitions (months × Kafka partitions): stored as a batch of its own", migrations.MaxPartitionsPerInsert)

// add merges chunk p, stored by storeRaw with b's insert, into b.
func (b *openBatch) add(p *prepared) {
	for i := range p.rows.Recruitment {
		if r := &p.rows.Recruitment[i]; r.Kind == ingest.KindInvitationSent.Name {
			if prev, ok := b.sent[r.InvitationID]; !ok || r.Timestamp.Before(prev) {
				b.sent[r.InvitationID] = r.Timestamp
			}
		}
	}
	b.rollup.Merge(p.rollup)
	b.result.add(&p.result)
	for i := range p.msgs {
		m := &p.msgs[i]
		k := topicPartition{m.Topic, m.Partition}
		if last, ok := b.last[k]; !ok || m.Offset > last.Offset {
			b.last[k] = kafka.Message{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, HighWaterMark: m.HighWaterMark}
		}
		if b.first == nil {
			b.first = map[topicPartition]int64{}
		}
		if first, ok := b.first[k]; !ok || m.Offset < first {
			b.first[k] = m.Offset
		}
	}
	if b.messages == 0 {
		b.opened = p.firstRead
	}
	b.messages += len(p.msgs)
}

// full reports whether b closes after its last chunk, p: it reached BatchSize messages,
// fill cut p short (nothing more was waiting), or its first message was read BatchMaxAge ago
// or more, at now, and fewer messages than it lacks to BatchSize wait behind it (behind).
func (b *openBatch) full(cfg *Config, p *prepared, now time.Time) bool {
	if b.messages >= cfg.BatchSize || p.cut {
		return true
	}
	if cfg.BatchMaxAge <= 0 || cfg.BatchMaxAge == NoBatchMaxAge {
		return false
	}
	return now.Sub(b.opened) >= cfg.BatchMaxAge && b.behind() < int64(cfg.BatchSize-b.messages)
}

// closes reports whether b closes after its last chunk, p. While a recorded batch is replayed
// (ranges.go), b closes exactly once it holds that batch whole, whatever its size or age, so
// that its parts are those the first attempt wrote; otherwise when full.
func (b *openBatch) closes(cfg *Config, p *prepared, now time.Time, rp *replay) bool {
	if rp.active() {
		return rp.complete(b.lastOffsets())
	}
	return b.full(cfg, p, now)
}

// lastOffsets is each partition's last offset in b.
func (b *openBatch) lastOffsets() map[topicPartition]int64 {
	out := make(map[topicPartition]int64, len(b.last))
	for tp, m := range b.last {
		out[tp] = m.Offset
	}
	return out
}

// ranges are b's offsets of each event partition.
func (b *openBatch) ranges() map[topicPartition]batchRange {
	out := make(map[topicPartition]batchRange, len(b.first))
	for tp, first := range b.first {
		if dedupTopic(tp.topic) {
			out[tp] = batchRange{first, b.last[tp].Offset + 1}
		}
	}
	return out
}

// behind is how many messages the partitions b read held after b's last message of each, as
// their high watermarks stood when those messages were fetched: what a consumer catching up
// has yet to read. A partition whose reader has not fetched since (its leader moved, say)
// counts with its last high watermark, which can only keep a batch open longer; a broker
// that sends no high watermark (0) counts as caught up.
func (b *openBatch) behind() int64 {
	var n int64
	for _, m := range b.last {
		n += max(m.HighWaterMark-m.Offset-1, 0)
	}
	return n
}

// send ends b's INSERTs, all at once; once it returns nil ClickHouse holds every row of b.
func (b *openBatch) send(ctx context.Context) error {
	g, _ := errgroup.WithContext(ctx)
	for i, in := range b.inserts {
		if in != nil {
			g.Go(func() error {
				if err := in.send(); err != nil {
					return fmt.Errorf("insert %s: %w", rawTables[i].name, err)
				}
				return nil
			})
		}
	}
	return g.Wait()
}

// abort ends b's INSERTs without completing them.
func (b *openBatch) abort() {
	for _, in := range b.inserts {
		if in != nil {
			in.abort()
		}
	}
}

// closed is b as a batch for the commit stage: its rollups, what it stored, and one message
// per partition, its last (what the commit and the dedup windows need of the offsets).
func (b *openBatch) closed() *prepared {
	p := &prepared{rollup: b.rollup, result: b.result, messages: b.messages, ranges: b.ranges()}
	p.msgs = make([]kafka.Message, 0, len(b.last))
	for _, m := range b.last {
		p.msgs = append(p.msgs, m)
	}
	return p
}

// streamFailed gives up streamed batch b, whose INSERTs could not be ended, after err: its
// INSERTs are aborted, and its offsets, and those of the chunk whose failure ended them
// (failed; nil for none), are replayed one chunk per batch (streams) once the member has
// rejoined.
func (c *Consumer) streamFailed(b *openBatch, failed *prepared, err error) {
	if c.replayUntil == nil {
		c.replayUntil = map[topicPartition]int64{}
	}
	mark := func(m *kafka.Message) {
		k := topicPartition{m.Topic, m.Partition}
		if until, ok := c.replayUntil[k]; !ok || m.Offset > until {
			c.replayUntil[k] = m.Offset
		}
	}
	b.abort()
	for _, m := range b.last {
		mark(&m)
	}
	messages := b.messages
	if failed != nil {
		for i := range failed.msgs {
			mark(&failed.msgs[i])
		}
		messages += len(failed.msgs)
	}
	c.stats.retries.Add(1)
	c.cfg.Logger.Warn("storing a streamed batch failed; rejoining the group to read it again one chunk per batch",
		"messages", messages, "err", err)
}

// replayed forgets the replay marks p's commit passed.
func (c *Consumer) replayed(msgs []kafka.Message) {
	for i := range msgs {
		m := &msgs[i]
		k := topicPartition{m.Topic, m.Partition}
		if until, ok := c.replayUntil[k]; ok && m.Offset >= until {
			delete(c.replayUntil, k)
		}
	}
}

// add adds r's counts to res.
func (res *batchResult) add(r *batchResult) {
	for k, n := range r.stored {
		res.stored[k] += n
	}
	for k, n := range r.suppression {
		res.suppression[k] += n
	}
	res.rowsLeftOut += r.rowsLeftOut
	res.storeRefused += r.storeRefused
	res.insertSplits += r.insertSplits
	res.duplicates += r.duplicates
	res.deadLettered += r.deadLettered
	res.deadLetters += r.deadLetters
	res.audits += r.audits
	res.duplicatesByKind = addCounts(res.duplicatesByKind, r.duplicatesByKind)
	res.deadLetteredByClass = addCounts(res.deadLetteredByClass, r.deadLetteredByClass)
	res.recordedByClass = addCounts(res.recordedByClass, r.recordedByClass)
}

func addCounts[K comparable](dst, src map[K]int64) map[K]int64 {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[K]int64, len(src))
	}
	for k, n := range src {
		dst[k] += n
	}
	return dst
}

// typedInsert is the rawInsert of a raw table whose rows are of type T.
type typedInsert[T any] struct {
	in   *chwrite.OpenInsert[T]
	rows func(*ingest.Rows) []T
}

func (t *typedInsert[T]) write(r *ingest.Rows) error { return t.in.Write(t.rows(r)) }
func (t *typedInsert[T]) flush() error               { return t.in.Flush() }
func (t *typedInsert[T]) size() (int64, int64)       { return int64(t.in.Rows()), t.in.Bytes() }
func (t *typedInsert[T]) send() error                { return t.in.Send() }
func (t *typedInsert[T]) abort()                     { t.in.Abort() }
