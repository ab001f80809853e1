package consumers_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/demo/outcome"
	"github.com/mcpulse/mcpulse/demo/report"
	"github.com/mcpulse/mcpulse/ingest"
)

// streamedEvents publishes the events of the streaming tests: n tool calls spread over
// partitions and hours, half of them with an ignored key, and an invitation answered.
func (h *harness) publishStreamedEvents(n int) {
	h.t.Helper()
	var calls [][]byte
	for i := 1; i <= n; i++ {
		if i%2 == 0 {
			calls = append(calls, toolCall(i*37, "user-"+string(rune('a'+i%7)), "create_issue", "titel"))
		} else {
			calls = append(calls, toolCall(i*37, "user-"+string(rune('a'+i%7)), "search"))
		}
	}
	h.publish(ingest.TopicToolCalls, calls...)
	h.publish(ingest.TopicRecruitment, invitation(100000, "dora", "inv-1", base), response(100001, "dora", "inv-1", "decline", base.Add(time.Minute)))
}

// insertedParts is how many parts inserts wrote into a raw table, in the partition (month and
// Kafka partition) that got the most (level 0, merged away or not: the parts a merge replaced
// stay listed, inactive, for minutes). An INSERT writes one part into each partition it has
// rows for, so this is how many INSERTs stored rows of one Kafka partition.
func (h *harness) insertedParts(table string) int64 {
	h.t.Helper()
	return h.count(`SELECT max(parts) FROM (SELECT partition_id, count() AS parts FROM system.parts
WHERE database = 'mcpulse' AND table = ? AND level = 0 GROUP BY partition_id)`, table)
}

// checkStored holds the stores to the n tool calls and two recruitment events published,
// each stored once, and every rollup to its recomputation from the raw tables.
func (h *harness) checkStored(c *consumers.Consumer, n int) {
	h.t.Helper()
	if got := h.count("SELECT count() FROM mcpulse.tool_calls FINAL"); got != int64(n) {
		h.t.Errorf("tool_calls rows = %d, want %d", got, n)
	}
	if got := h.count("SELECT sum(successful_calls) FROM mcpulse.v_ignored_key_rates_hourly"); got != int64(n) {
		h.t.Errorf("successful calls in the rollup = %d, want %d", got, n)
	}
	if got := h.count("SELECT sum(calls_with_ignored_keys) FROM mcpulse.v_ignored_key_rates_hourly"); got != int64(n/2) {
		h.t.Errorf("calls with ignored keys in the rollup = %d, want %d", got, n/2)
	}
	if got := h.count("SELECT sum(declined) FROM mcpulse.v_recruitment_funnel_daily"); got != 1 {
		h.t.Errorf("declined = %d, want 1", got)
	}
	if s := c.Stats(); s.Stored["tool_call"] != int64(n) || s.Duplicates != 0 {
		h.t.Errorf("stats %+v: want %d tool calls stored, no duplicates", s, n)
	}
	ctx := context.Background()
	observed, err := report.Observe(ctx, h.ch, h.rdb)
	if err != nil {
		h.t.Fatal(err)
	}
	recomputed, err := report.Recompute(ctx, h.ch)
	if err != nil {
		h.t.Fatal(err)
	}
	// Only the rollups are recomputed: the rest is taken as observed.
	recomputed.EventsByKind, recomputed.Tables, recomputed.Suppression = observed.EventsByKind, observed.Tables, observed.Suppression
	recomputed.ServedSchemas = observed.ServedSchemas
	recomputed.FunnelByPath = observed.FunnelByPath // read from the raw table already
	if len(recomputed.Funnel) == 0 || len(recomputed.IgnoredKeyRates) == 0 {
		h.t.Error("the recomputation returned no rows")
	}
	for _, m := range outcome.Compare(recomputed, observed, time.Now()) {
		h.t.Errorf("rollup differs from its recomputation: %s", m)
	}
}

// chunk30 is a Config.BatchBytes that closes a chunk at about 30 of the tool calls
// publishStreamedEvents publishes (about 270 bytes each, and MessageOverhead).
const chunk30 = 30 * (270 + consumers.MessageOverhead)

// A batch of many chunks writes one part per table: its chunks' rows go into INSERTs that
// stay open until the batch closes.
func TestABatchOfManyChunksWritesOnePartPerTable(t *testing.T) {
	h := newHarness(t)
	const n = 600
	h.publishStreamedEvents(n)
	c := h.consumer(func(cfg *consumers.Config) {
		cfg.BatchBytes = chunk30
		cfg.BatchSize = 100_000
		cfg.BatchWait = 2 * time.Second           // no chunk cut short before the topic's end
		cfg.BatchMaxAge = consumers.NoBatchMaxAge // nor a batch closed by its age on a slow machine
	})
	h.drain(c)
	h.checkStored(c, n)
	// 600 tool calls of about 270 bytes are some 20 chunks; read one chunk per batch they
	// made as many parts.
	if parts, batches := h.insertedParts("tool_calls"), c.Stats().Batches; parts > batches || parts > 4 {
		t.Errorf("tool_calls got %d inserted parts in %d batches, want one per batch, at most 4 (the chunks were streamed into one INSERT)", parts, batches)
	}
}

// failingConn fails the Flush or Send of INSERTs into table when armed, once.
type failingConn struct {
	driver.Conn
	table string
	// flushes counts down the flushes of the table's INSERTs; the one that reaches 0 fails.
	flushes atomic.Int64
	// sends and prepares: the same for Send and for starting an INSERT.
	sends, prepares atomic.Int64
}

var errInjected = errors.New("injected: connection reset by peer")

func (c *failingConn) PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	if !strings.Contains(query, c.table+" ") {
		return c.Conn.PrepareBatch(ctx, query, opts...)
	}
	if c.prepares.Add(-1) == 0 {
		return nil, errInjected
	}
	b, err := c.Conn.PrepareBatch(ctx, query, opts...)
	if err != nil {
		return b, err
	}
	return &failingBatch{Batch: b, conn: c}, nil
}

type failingBatch struct {
	driver.Batch
	conn *failingConn
}

func (b *failingBatch) Flush() error {
	if b.conn.flushes.Add(-1) == 0 {
		_ = b.Batch.Abort()
		return errInjected
	}
	return b.Batch.Flush()
}

func (b *failingBatch) Send() error {
	if b.conn.sends.Add(-1) == 0 {
		_ = b.Batch.Abort()
		return errInjected
	}
	return b.Batch.Send()
}

// A streamed batch keeps no rows to retry an INSERT with: when one of its INSERTs fails part
// way (a chunk's flush) or at its end (Send), the member rejoins and reads the batch again from
// the committed offsets, one chunk per batch. When a chunk fails without ending an INSERT (here:
// the INSERT it would open fails to start), the batch is ended without it and only the chunk
// is retried. Either way nothing is lost or counted twice.
func TestAFailedStreamedBatchIsReadAgainOneChunkPerBatch(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		table                string
		flush, send, prepare int64
		minParts, maxParts   int64 // inserted parts of tool_calls
	}{
		// The replay of the chunks up to the failure writes a part each.
		{name: "a chunk's flush fails", table: "mcpulse.tool_calls", flush: 5, minParts: 5, maxParts: 100},
		{name: "the batch's send fails", table: "mcpulse.tool_calls", send: 1, minParts: 10, maxParts: 100},
		// Only the chunk with the invitation is stored on its own: one more part, not one per chunk.
		{name: "a chunk's table fails to open", table: "mcpulse.recruitment_events", prepare: 1, minParts: 1, maxParts: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			const n = 600
			h.publishStreamedEvents(n)
			fc := &failingConn{Conn: h.ch, table: tc.table}
			fc.flushes.Store(tc.flush)
			fc.sends.Store(tc.send)
			fc.prepares.Store(tc.prepare)
			c := h.consumer(func(cfg *consumers.Config) {
				cfg.ClickHouse = fc
				cfg.BatchBytes = chunk30
				cfg.BatchSize = 100_000
				cfg.BatchWait = 2 * time.Second
				cfg.BatchMaxAge = consumers.NoBatchMaxAge
			})
			h.drain(c)
			if fc.flushes.Load() > 0 || fc.sends.Load() > 0 || fc.prepares.Load() > 0 {
				t.Fatalf("the injected failure never fired (flushes left %d, sends left %d, starts left %d)", fc.flushes.Load(), fc.sends.Load(), fc.prepares.Load())
			}
			h.checkStored(c, n)
			if s := c.Stats(); s.StoreRetries < 1 {
				t.Errorf("stats %+v: want the failure counted as a store retry", s)
			}
			if parts := h.insertedParts("tool_calls"); parts < tc.minParts || parts > tc.maxParts {
				t.Errorf("tool_calls got %d inserted parts, want %d to %d", parts, tc.minParts, tc.maxParts)
			}
		})
	}
}

// A response finds the send time of its invitation when the invitation went into the same
// streamed batch's open INSERT in an earlier chunk, which no query shows until the batch
// closes.
func TestAResponseFindsItsInvitationInAnEarlierChunkOfItsBatch(t *testing.T) {
	h := newHarness(t)
	const n = 20
	h.publishStreamedEvents(n)
	c := h.consumer(func(cfg *consumers.Config) {
		cfg.BatchBytes = 1 // a chunk per message: the invitation and its response in two chunks
		cfg.BatchSize = 100_000
		cfg.BatchWait = 2 * time.Second
		cfg.BatchMaxAge = consumers.NoBatchMaxAge
	})
	h.drain(c)
	h.checkStored(c, n)
	if got := h.count("SELECT count() FROM mcpulse.recruitment_events FINAL WHERE kind = 'response' AND invitation_sent_at = ?", base); got != 1 {
		t.Errorf("responses with their invitation's send time = %d, want 1", got)
	}
	if parts := h.insertedParts("recruitment_events"); parts != 1 {
		t.Errorf("recruitment_events got %d inserted parts, want 1: the two chunks in one batch", parts)
	}
}

// heldConn holds the end (Send) of table's first INSERT until a later INSERT of the table has
// sent a block (or for at most hold), then for up to hold more unless a batch's rollups start
// being written (a rollup_batches INSERT) meanwhile, which it records.
type heldConn struct {
	driver.Conn
	table    string
	hold     time.Duration
	inserts  atomic.Int64
	released chan struct{} // closed at the later INSERT's first block
	once     sync.Once
	overlap  atomic.Bool // the first INSERT's end was released by a later INSERT, not by hold
	ended    atomic.Bool // the first INSERT ended
	// rollupsEarly: a rollup_batches INSERT started before the first INSERT ended; closed then.
	rollupsEarly     chan struct{}
	rollupsEarlyOnce sync.Once
}

func (c *heldConn) PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	if strings.Contains(query, "mcpulse.rollup_batches") && !c.ended.Load() {
		c.rollupsEarlyOnce.Do(func() { close(c.rollupsEarly) })
	}
	b, err := c.Conn.PrepareBatch(ctx, query, opts...)
	if err != nil || !strings.Contains(query, c.table+" ") {
		return b, err
	}
	return &heldBatch{Batch: b, conn: c, nth: c.inserts.Add(1)}, nil
}

type heldBatch struct {
	driver.Batch
	conn *heldConn
	nth  int64
}

func (b *heldBatch) Flush() error {
	rows := b.Batch.Rows()
	err := b.Batch.Flush()
	if err == nil && rows > 0 && b.nth > 1 {
		b.conn.once.Do(func() { close(b.conn.released) })
	}
	return err
}

func (b *heldBatch) Send() error {
	if b.nth == 1 {
		select {
		case <-b.conn.released:
			b.conn.overlap.Store(true)
		case <-time.After(b.conn.hold):
		}
		select { // a commit stage that did not wait for this end writes its rollups now
		case <-b.conn.rollupsEarly:
		case <-time.After(b.conn.hold):
		}
		defer b.conn.ended.Store(true)
	}
	return b.Batch.Send()
}

// A batch's INSERTs end while the next batch streams: ClickHouse writes the batch's parts
// meanwhile. The batch's rollups wait for the end. A response in the next batch still finds
// the send time of its invitation, which went into the INSERT still ending and which no query
// shows yet.
func TestTheInsertsOfABatchEndWhileTheNextBatchStreams(t *testing.T) {
	h := newHarness(t)
	h.publish(ingest.TopicRecruitment, invitation(100000, "dora", "inv-1", base), response(100001, "dora", "inv-1", "decline", base.Add(time.Minute)))
	held := &heldConn{Conn: h.ch, table: "mcpulse.recruitment_events", hold: 2 * time.Second,
		released: make(chan struct{}), rollupsEarly: make(chan struct{})}
	c := h.consumer(func(cfg *consumers.Config) {
		cfg.ClickHouse = held
		cfg.BatchSize = 1 // the invitation and its response in two batches
	})
	h.drain(c)
	if n := held.inserts.Load(); n < 2 {
		t.Fatalf("%d INSERTs of recruitment_events, want 2: one per batch", n)
	}
	if !held.overlap.Load() {
		t.Errorf("the first batch's INSERT ended only after %s: the next batch did not stream while it ended", held.hold)
	}
	select {
	case <-held.rollupsEarly:
		t.Error("a batch's rollups were written before the first batch's INSERT ended")
	default:
	}
	if n := h.count("SELECT count() FROM mcpulse.rollup_batches"); n == 0 {
		t.Error("no rollup batch marker stored: the batches wrote no rollups, so their order went unchecked")
	}
	if got := h.count("SELECT count() FROM mcpulse.recruitment_events FINAL"); got != 2 {
		t.Errorf("recruitment_events rows = %d, want 2", got)
	}
	if got := h.count("SELECT count() FROM mcpulse.recruitment_events FINAL WHERE kind = 'response' AND invitation_sent_at = ?", base); got != 1 {
		t.Errorf("responses with their invitation's send time = %d, want 1", got)
	}
	if s := c.Stats(); s.Batches != 2 || s.StoreRetries != 0 {
		t.Errorf("stats %+v: want 2 batches and no retry", s)
	}
}

// A streamed batch's rollup cells are loaded while its INSERTs end, not after them: only the
// rollup rows' insert waits for the INSERTs. Here the tool_calls INSERT's end waits (up to
// ten seconds) for the first load of rollup cells.
func TestABatchLoadsItsRollupCellsWhileItsInsertsEnd(t *testing.T) {
	h := newHarness(t)
	const n = 40
	h.publishStreamedEvents(n)
	gc := &loadGatedConn{Conn: h.ch, loaded: make(chan struct{})}
	c := h.consumer(func(cfg *consumers.Config) { cfg.ClickHouse = gc })
	h.drain(c)
	h.checkStored(c, n)
	if gc.sends.Load() == 0 {
		t.Fatal("no tool_calls INSERT ended")
	}
	if gc.timedOut.Load() {
		t.Error("the tool_calls INSERT ended before any rollup cells were loaded: the batch's rollups were prepared only after its INSERTs")
	}
}

// loadGatedConn holds the end (Send) of every tool_calls INSERT until the first query that
// loads rollup cells (sql/rollup/cells.sql) has started, or ten seconds have passed.
type loadGatedConn struct {
	driver.Conn
	once     sync.Once
	loaded   chan struct{}
	sends    atomic.Int64
	timedOut atomic.Bool
}

func (c *loadGatedConn) Query(ctx context.Context, query string, args ...any) (driver.Rows, error) {
	if strings.Contains(query, "The newest row of every cell") {
		c.once.Do(func() { close(c.loaded) })
	}
	return c.Conn.Query(ctx, query, args...)
}

func (c *loadGatedConn) PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	b, err := c.Conn.PrepareBatch(ctx, query, opts...)
	if err != nil || !strings.Contains(query, "mcpulse.tool_calls ") {
		return b, err
	}
	return &loadGatedBatch{Batch: b, conn: c}, nil
}

type loadGatedBatch struct {
	driver.Batch
	conn *loadGatedConn
}

func (b *loadGatedBatch) Send() error {
	select {
	case <-b.conn.loaded:
	case <-time.After(10 * time.Second):
		b.conn.timedOut.Store(true)
	}
	b.conn.sends.Add(1)
	return b.Batch.Send()
}

// A batch closes once it is BatchMaxAge old even when its last chunk would not end for a long
// while (its byte bound far off, its wait ten seconds): the chunk being filled ends at the
// batch's age, and the batch's rows and rollups are stored, and its offsets committed, then.
func TestAStreamedBatchClosesAtItsMaxAgeBeforeItsLastChunkWouldEnd(t *testing.T) {
	h := newHarness(t)
	const n = 60
	h.publishStreamedEvents(n)
	const wait = 10 * time.Second
	c := h.consumer(func(cfg *consumers.Config) {
		cfg.BatchBytes = chunk30 // the last chunk is partial
		cfg.BatchSize = 100_000
		cfg.BatchWait = wait // a chunk is cut short only after this
		cfg.BatchMaxAge = 300 * time.Millisecond
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	start := time.Now()
	go func() { ran <- c.Run(ctx) }()
	var stored time.Duration
	for time.Since(start) < 2*wait {
		// The rollups are written just before the offsets are committed; the consumer's own
		// counts follow the commit, so the loop waits for those too before stopping it (a
		// stop between the two leaves the batch uncommitted, to be consumed again).
		if stored == 0 && h.count("SELECT sum(successful_calls) FROM mcpulse.v_ignored_key_rates_hourly") == n {
			stored = time.Since(start)
		}
		if stored != 0 && c.Stats().Stored["tool_call"] == n {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	// The bound is half the wait: far above the age (0.3 s) and the consumer's start, far
	// below the ten seconds after which the wait would have cut the last chunk.
	if stored == 0 || stored >= wait/2 {
		t.Fatalf("the rollups held all %d tool calls after %v (0: not within %v); want within %v, at the batch's 300ms age", n, stored, 2*wait, wait/2)
	}
	h.checkStored(c, n)
}
