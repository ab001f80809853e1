// Package consumers runs the mcpulse consumer group (DESIGN.md §1, §5): it reads the event
// topics in batches, decodes and validates each event, drops duplicates by uuid, applies
// invitation responses to the Redis suppression records, writes the raw tables and dead
// letters to ClickHouse, then the rollups the stored events add to, and only then commits
// the batch's offsets (the stages overlap on consecutive batches: pipeline.go).
//
// Every store write is idempotent, so a crash at any point, a rebalance that hands a message
// to a second member, or a redelivered batch neither loses nor double-counts an event: raw rows
// collapse in ReplacingMergeTree and are read with FINAL, rollup rows are cumulative totals as
// of a partition's offset (package consumers/rollup), the suppression script ignores a
// response that is not newer than the record, and dead letters are keyed by their source
// position.
package consumers

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"

	"github.com/mcpulse/mcpulse/consumers/cardinality"
	"github.com/mcpulse/mcpulse/consumers/rollup"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/safetext"
	"github.com/mcpulse/mcpulse/misuse"
	"github.com/mcpulse/mcpulse/suppression"
)

// Consumer is one member of the consumer group. Create it with New, run it with Run or
// RunUntilDrained, and Close it.
type Consumer struct {
	cfg    Config
	keys   *ingest.KeyFilter
	client *kafka.Client
	stats  counters

	groupMu sync.Mutex
	cg      *kafka.ConsumerGroup // joined on the first Run (group.go)
	closed  bool

	metrics *Metrics // nil without Config.Registerer

	tablesSeen  sync.Map            // optional tables found to exist (name → true); a missing one is asked again
	listings    *misuse.Listings    // what each session and server version was served (misuse.go)
	derivations *misuse.DeriveCache // misuse derivations by (served schema, argument shape)
	redisOffset redisOffsetT        // clock.go
	hostNow     func() time.Time    // this host's clock: time.Now (tests skew it)
	windows     *windows            // dedup state per partition (prepare stage; windows.go)
	adder       rollup.Adder        // store stage
	rollups     *rollup.Store       // store stage
	caps        *cardinality.Folder // store stage (raw, after the misuse derivation; commits on the loop)
	// rollupsBegun: Begin ran in this generation; rollupCommitted: the generation's event
	// partitions at their committed offsets.
	rollupsBegun    bool
	rollupCommitted map[rollup.Stream]int64
	// lastBatchBytes is the byte bound the previous batch was filled to (budget.go), so that
	// a change of it is logged once.
	lastBatchBytes atomic.Int64
	// replayUntil holds, per partition, the last offset of a streamed batch that failed: the
	// chunks up to it are stored one per batch (stream.go). Store stage only.
	replayUntil map[topicPartition]int64
	// forget are the batch-range fields of batches committed since the last record, deleted
	// with the next (ranges.go); rangesMu guards it.
	rangesMu sync.Mutex
	forget   []string
	// tokens: whether the server knows insert_deduplication_token, asked once (token.go).
	tokens tokens
	// freeToolCallRows holds the tool-call row slices of chunks whose rows were stored, for
	// the next chunks to fill (pipeline.go).
	freeToolCallRows chan []ingest.ToolCallRow
	// freeToolCallSlots holds the tool-call event slots of those chunks (toolCallSlots).
	freeToolCallSlots chan []ingest.ToolCallSlot
	// verdictsLoaded: the stored schema verdicts were read at start (verdicts.go).
	verdictsLoaded atomic.Bool
}

// optionalTableExists reports whether an optional raw table exists, asking ClickHouse until it
// does.
func (c *Consumer) optionalTableExists(ctx context.Context, name string) (bool, error) {
	if _, ok := c.tablesSeen.Load(name); ok {
		return true, nil
	}
	ok, err := tableExists(ctx, c.cfg.ClickHouse, name)
	if ok {
		c.tablesSeen.Store(name, true)
	}
	return ok, err
}

// Stats are a consumer's running totals since it started.
type Stats struct {
	Messages     int64            // messages read from Kafka
	Stored       map[string]int64 // events stored, by kind ("tool_call", ...)
	Duplicates   int64            // events dropped because their uuid was already claimed
	DeadLettered int64            // malformed events sent to the dead-letter topic
	DeadLetters  int64            // dead-letter messages recorded in table dead_letters
	Audits       int64            // audit events recorded in table suppression_audit
	Suppression  map[string]int64 // suppression script outcomes (suppression.Outcome)
	Batches      int64            // batches stored and committed
	StoreRetries int64            // batch attempts that failed on a store and were retried
	FetchRetries int64            // Kafka fetches that failed (group not joined or synced) and were retried
	RowsLeftOut  int64            // rows not stored because their (optional) table did not exist
	StoreRefused int64            // valid events ClickHouse refused for good, dead-lettered (class store_refused)
	InsertSplits int64            // permanently refused inserts split in halves to find the refused rows
}

type counters struct {
	messages, duplicates, deadLettered, deadLetters, audits atomic.Int64
	rowsLeftOut, storeRefused, insertSplits                 atomic.Int64
	batches, retries, fetchRetries, generations             atomic.Int64
	stored                                                  map[*ingest.Kind]*atomic.Int64 // every kind, made by New
	suppression                                             map[string]*atomic.Int64
}

// New checks the configuration and joins nothing yet: the group is joined by the first Run or
// RunUntilDrained, and the member stays in it between runs until Close.
func New(cfg Config) (*Consumer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	keys, _ := ingest.NewKeyFilter(cfg.ClientInjectedKeys) // validated above
	if wrapClickHouse != nil {
		cfg.ClickHouse = wrapClickHouse(cfg.ClickHouse)
	}
	c := &Consumer{cfg: cfg, keys: keys, hostNow: time.Now, freeToolCallRows: make(chan []ingest.ToolCallRow, freeRowSlices),
		freeToolCallSlots: make(chan []ingest.ToolCallSlot, freeRowSlices)}
	c.stats.suppression = map[string]*atomic.Int64{}
	c.stats.stored = map[*ingest.Kind]*atomic.Int64{}
	for _, k := range ingest.Kinds() {
		c.stats.stored[k] = new(atomic.Int64)
	}
	for _, k := range suppression.Outcomes {
		c.stats.suppression[string(k)] = new(atomic.Int64)
	}
	c.client = &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: 10 * time.Second}
	c.windows = &windows{size: cfg.DedupWindow, byKey: map[topicPartition]*window{}}
	if cfg.Listings.Logger == nil {
		cfg.Listings.Logger = cfg.Logger
	}
	c.listings = misuse.NewListings(cfg.Listings)
	c.derivations = misuse.NewDeriveCache(misuse.DefaultDeriveCacheEntries)
	c.caps = cardinality.New(cfg.ClickHouse, cfg.Caps, cfg.Logger, func(d cardinality.Dimension, n int) {
		if c.metrics != nil {
			c.metrics.overflow.WithLabelValues(string(d)).Add(float64(n))
		}
	})
	var err error
	if c.metrics, err = newMetrics(cfg.Registerer, c); err != nil { // last: a scrape may come at once
		return nil, err
	}
	c.caps.SetConn(c.cfg.ClickHouse) // instrumented by newMetrics (a scrape reads only Bytes)
	c.rollups = rollup.NewStore(c.cfg.ClickHouse, rollup.Tables(), cfg.RollupCacheCells, cfg.Logger)
	return c, nil
}

// logReaderError logs the kafka-go reader's errors. A fetch that the broker held for the whole
// MaxWait can reach the reader just after its read deadline; kafka-go then reports an i/o
// timeout and fetches again, losing nothing, so that case is logged at Debug.
func logReaderError(log *slog.Logger, msg string) {
	if strings.Contains(msg, "i/o timeout") {
		log.Debug("kafka reader: " + msg)
		return
	}
	log.Warn("kafka reader: " + msg)
}

// Close leaves the consumer group. A closed Consumer cannot run again.
func (c *Consumer) Close() error {
	c.groupMu.Lock()
	defer c.groupMu.Unlock()
	c.closed = true
	if c.cg == nil {
		return nil
	}
	return c.cg.Close()
}

// Stats returns the running totals.
func (c *Consumer) Stats() Stats {
	s := Stats{
		Messages:     c.stats.messages.Load(),
		Duplicates:   c.stats.duplicates.Load(),
		DeadLettered: c.stats.deadLettered.Load(),
		DeadLetters:  c.stats.deadLetters.Load(),
		Audits:       c.stats.audits.Load(),
		Batches:      c.stats.batches.Load(),
		StoreRetries: c.stats.retries.Load(),
		FetchRetries: c.stats.fetchRetries.Load(),
		RowsLeftOut:  c.stats.rowsLeftOut.Load(),
		StoreRefused: c.stats.storeRefused.Load(),
		InsertSplits: c.stats.insertSplits.Load(),
		Stored:       map[string]int64{},
		Suppression:  map[string]int64{},
	}
	for k, n := range c.stats.stored {
		s.Stored[k.Name] = n.Load()
	}
	for k, v := range c.stats.suppression {
		s.Suppression[k] = v.Load()
	}
	return s
}

// Run consumes until ctx is cancelled, then returns nil. Store outages pause consumption and
// are retried with backoff; nothing is committed until the stores hold a batch. Kafka errors
// (a refused group join, a failed fetch or commit) are retried too (group.go). The only error
// is that the Consumer was closed.
func (c *Consumer) Run(ctx context.Context) error { return c.run(ctx, false) }

// RunUntilDrained consumes until every partition of the group's topics has been committed to
// its end offset and nothing arrived for IdleToDrain, then returns nil.
func (c *Consumer) RunUntilDrained(ctx context.Context) error { return c.run(ctx, true) }

// retryStore runs a store step of batch p (Redis and the raw tables: storeRaw; the rollups:
// storeRollups), retrying it with capped exponential backoff until it succeeds, ctx is
// cancelled (ctx's error), or a retry would start after the batch's generation ended
// (errGenerationEnded: the partitions' next owner reads the batch again). Every step is
// idempotent and keeps what it computed in p, so a retry writes the same rows.
func (c *Consumer) retryStore(ctx, genCtx context.Context, p *prepared, step func(context.Context, *prepared) error) error {
	backoff := c.cfg.RetryBackoff
	for attempt := 1; ; attempt++ {
		err := step(ctx, p)
		if err == nil {
			if attempt > 1 {
				c.cfg.Logger.Info("store recovered; consumption resumes", "attempts", attempt)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.stats.retries.Add(1)
		c.cfg.Logger.Warn("storing a batch failed; consumption paused, retrying", "attempt", attempt, "retry_in", backoff, "messages", p.messages, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-genCtx.Done():
			return errGenerationEnded
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, c.cfg.MaxRetryBackoff)
	}
}

// batchResult is what one successful store did, accounted only once it succeeded.
type batchResult struct {
	stored       map[*ingest.Kind]int64
	rowsLeftOut  int64 // rows of an optional table that does not exist
	storeRefused int64 // events ClickHouse refused for good, dead-lettered
	insertSplits int64 // permanently refused inserts split in halves
	duplicates   int64
	deadLettered int64
	deadLetters  int64
	audits       int64
	suppression  map[string]int64
	batchMetrics
}

func (c *Consumer) account(r batchResult) {
	c.metrics.account(&r)
	for k, n := range r.stored {
		c.stats.stored[k].Add(n)
	}
	c.stats.duplicates.Add(r.duplicates)
	c.stats.rowsLeftOut.Add(r.rowsLeftOut)
	c.stats.storeRefused.Add(r.storeRefused)
	c.stats.insertSplits.Add(r.insertSplits)
	c.stats.deadLettered.Add(r.deadLettered)
	c.stats.deadLetters.Add(r.deadLetters)
	c.stats.audits.Add(r.audits)
	for k, n := range r.suppression {
		if ctr, ok := c.stats.suppression[k]; ok {
			ctr.Add(n)
		}
	}
}

func position(m *kafka.Message) string {
	return m.Topic + "/" + strconv.Itoa(m.Partition) + "/" + strconv.FormatInt(m.Offset, 10)
}

// storeRaw is a batch's first store step: Redis ▸ the raw tables, dead letters and audit rows
// ▸ what the stored events add to the rollups (counted in p.rollup, written by storeRollups).
// The ClickHouse inserts of the step go to their tables at once, each on its own connection.
// It is idempotent: running it again on the same batch changes no store, so a failed attempt
// is retried with the same p. On success p.result holds what the batch stored.
func (c *Consumer) storeRaw(ctx context.Context, p *prepared) error {
	return c.storeRawWith(ctx, p, c.insertRaw)
}

// rawInserter stores a batch's raw rows, the dead-letter topic's rows and the audit rows, and
// returns the events ClickHouse refuses for good (uuid → why): insertRaw, or a streamed
// batch's openBatch.insert.
type rawInserter func(ctx context.Context, rows *ingest.Rows, deadRows, auditRows []row, res *batchResult) (map[uuid.UUID]string, error)

// storeRawWith is storeRaw with the raw rows stored by insert.
func (c *Consumer) storeRawWith(ctx context.Context, p *prepared, insert rawInserter) error {
	res := batchResult{suppression: map[string]int64{}, stored: map[*ingest.Kind]int64{}}
	msgs, bad, deadRows, auditRows, audits := p.msgs, p.bad, p.deadRows, p.auditRows, p.audits
	rows := p.rows
	for _, k := range p.duplicates {
		res.duplicate(k)
	}

	if err := c.applySuppression(ctx, p.responses, res.suppression); err != nil {
		return err
	}
	if err := c.fillInvitationSentAt(ctx, rows.Recruitment, p.sentBefore); err != nil {
		return err
	}
	if !p.derived {
		// Once per batch: the derivation fills the rows in place.
		if err := c.deriveMisuse(ctx, p.misuse, p.misuseAt, rows.ToolCalls); err != nil {
			return err
		}
		// The events stay until the rows are stored (a row's optional numbers point into its
		// event): let go of the arguments and results they share with the messages now.
		for _, ev := range p.misuse {
			if ev.ToolCall != nil {
				ev.ToolCall.Parameters, ev.ToolCall.Response = nil, nil
			}
		}
		p.misuse, p.misuseAt, p.derived = nil, nil, true
	}
	// The schema verdicts decided so far, before the batch can be committed.
	if err := c.storeVerdicts(ctx); err != nil {
		return err
	}
	if !p.folded {
		// After the derivation, which fills the counted ignored keys; a retry folds alike.
		if err := c.caps.Fold(ctx, rows.ToolCalls, func(i int) string { return p.toolCallStreams[i].Topic }); err != nil {
			return err
		}
		p.folded = true
	}
	if len(bad) > 0 {
		if err := c.cfg.DeadLetters.DeadLetter(ctx, bad...); err != nil {
			return fmt.Errorf("dead-letter %d events: %w", len(bad), err)
		}
	}
	refused, err := insert(ctx, &rows, deadRows, auditRows, &res)
	if err != nil {
		return err
	}
	// Events ClickHouse refuses for good are dead-lettered, so that the batch is committed
	// and nothing else waits on them (refused.go).
	if len(refused) > 0 {
		var letters []ingest.DeadLetter
		var at []*kafka.Message
		for _, k := range p.kept {
			if reason, ok := refused[k.id]; ok {
				m := &msgs[k.msg]
				letters = append(letters, ingest.DeadLetter{ID: position(m), Reason: reason, Source: m.Topic, Class: ingest.ClassStoreRefused})
				at = append(at, m)
			}
		}
		// The messages' bytes were let go after prepare: read the few refused back.
		if err := c.refetchPayloads(ctx, at, letters); err != nil {
			return err
		}
		if err := c.cfg.DeadLetters.DeadLetter(ctx, letters...); err != nil {
			return fmt.Errorf("dead-letter %d events ClickHouse refused: %w", len(letters), err)
		}
		c.cfg.Logger.Warn("events ClickHouse refuses for good were dead-lettered", "events", len(letters), "first", letters[0].Reason)
		bad = append(bad[:len(bad):len(bad)], letters...)
		res.storeRefused = int64(len(letters))
	}
	if !p.counted {
		// Begun first: a group reading again offsets the rollups counted already adds only
		// the events beyond them (rollup.Store.CountedFrom).
		if err := c.beginRollups(ctx); err != nil {
			return err
		}
		c.countRollups(p, refused)
		p.counted = true
	}
	res.audits = int64(len(auditRows))
	if len(audits) > 0 && c.cfg.AuditStored != nil {
		c.cfg.AuditStored(audits)
	}
	for _, k := range p.kept {
		if _, ok := refused[k.id]; !ok {
			res.stored[k.kind]++
		}
	}
	res.deadLettered = int64(len(bad))
	res.classifyDeadLetters(bad, msgs)
	res.deadLetters = int64(len(deadRows))
	p.result = res
	return nil
}

// insertRaw inserts a batch's raw rows, the dead-letter topic's rows and the audit rows, each
// table's insert on its own connection, all at once: the tables are independent and every
// insert is idempotent, and ClickHouse writes the parts of concurrent inserts on its own
// threads. It returns the events ClickHouse refuses for good (uuid → why), in the order of
// rawTables where two tables refuse one event, and the first error. res gets the rows left
// out of optional tables and the refused inserts split.
func (c *Consumer) insertRaw(ctx context.Context, rows *ingest.Rows, deadRows, auditRows []row, res *batchResult) (map[uuid.UUID]string, error) {
	refusedBy := make([]map[uuid.UUID]error, len(rawTables))
	splits := make([]int, len(rawTables))
	tables, err := c.rawTablesToWrite(ctx, rows, res)
	if err != nil {
		return nil, err
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, i := range tables {
		t := rawTables[i]
		g.Go(func() error {
			ref, n, err := t.insert(gctx, c.cfg.ClickHouse, rows)
			refusedBy[i], splits[i] = ref, n
			if err != nil {
				return fmt.Errorf("insert %s: %w", t.name, err)
			}
			return nil
		})
	}
	c.insertTopicRows(gctx, g, deadRows, auditRows)
	err = g.Wait()
	var refused map[uuid.UUID]string
	for i, ref := range refusedBy {
		res.insertSplits += int64(splits[i])
		for id, err := range ref {
			if refused == nil {
				refused = map[uuid.UUID]string{}
			}
			if _, seen := refused[id]; !seen {
				refused[id] = refusalReason(rawTables[i].name, err)
			}
		}
	}
	return refused, err
}

// insertTopicRows starts, in g, the inserts of the dead-letter topic's rows (table
// dead_letters) and of the audit rows (table suppression_audit), each on its own connection.
func (c *Consumer) insertTopicRows(ctx context.Context, g *errgroup.Group, deadRows, auditRows []row) {
	g.Go(func() error {
		if err := insertRows(ctx, c.cfg.ClickHouse, insertDeadLetters, deadRows); err != nil {
			return fmt.Errorf("insert dead_letters: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if err := insertRows(ctx, c.cfg.ClickHouse, insertAudit, auditRows); err != nil {
			return fmt.Errorf("insert suppression_audit: %w", err)
		}
		return nil
	})
}

// rawTablesToWrite returns the indexes in rawTables of the tables rows has rows for, leaving
// out an optional table that does not exist (its rows counted in res.rowsLeftOut, with a
// warning). It asks ClickHouse before any insert starts, so a failed check leaves none running.
func (c *Consumer) rawTablesToWrite(ctx context.Context, rows *ingest.Rows, res *batchResult) ([]int, error) {
	var tables []int
	for i, t := range rawTables {
		n := t.len(rows)
		if n == 0 {
			continue
		}
		if t.optional {
			if ok, err := c.optionalTableExists(ctx, t.name); err != nil {
				return nil, err
			} else if !ok {
				c.cfg.Logger.Warn("table missing: rows left out (run mcpulse migrate up)", "table", t.name, "rows", n)
				res.rowsLeftOut += int64(n)
				continue
			}
		}
		tables = append(tables, i)
	}
	return tables, nil
}

// applySuppression runs the suppression script (package suppression) for every response,
// pipelined (runScripts). The script's result does not depend on the order responses are
// applied in (it keeps the maximum under the precedence order), so one round trip serves the
// whole batch; on a Redis Cluster
// the pipeline is split by slot, and an identity's two keys share one slot (hash tag).
func (c *Consumer) applySuppression(ctx context.Context, responses []*ingest.Event, outcomes map[string]int64) error {
	if len(responses) == 0 {
		return nil
	}
	now := c.now()
	calls := make([]scriptCall, len(responses))
	for i, ev := range responses {
		r := ev.Recruitment
		keys, args := suppression.ApplyCall(c.identity(ev), suppression.NewResponse(ev.DistinctID, r.CampaignID, r.Response, r.RespondedAt), now)
		calls[i] = scriptCall{keys: keys, args: args}
	}
	cmds, err := runScripts(ctx, c.cfg.Redis, suppression.ApplyScript(), calls)
	if err != nil {
		return fmt.Errorf("suppression: %w", err)
	}
	for _, cmd := range cmds {
		out, err := cmd.Text()
		if err != nil {
			return fmt.Errorf("suppression: %w", err)
		}
		outcomes[out]++
	}
	return nil
}

func (c *Consumer) identity(ev *ingest.Event) string {
	url := ev.Recruitment.InstanceURL
	if url == "" {
		url = c.cfg.DefaultInstanceURL
	}
	return ingest.IdentityHash(url, ev.DistinctID)
}

// fillInvitationSentAt sets the invitation send time of every recruitment row whose
// invitation is in the batch, in before (invitations sent into INSERTs that have not ended,
// which ClickHouse shows no query yet: prepared.sentBefore; the earliest time wins) or already
// stored: the funnel is a cohort by the invitation's send day (DESIGN.md
// §8). Rows are modified in place.
func (c *Consumer) fillInvitationSentAt(ctx context.Context, rows []ingest.RecruitmentRow, before []map[string]time.Time) error {
	sentAt := map[string]time.Time{}
	for i := range rows {
		id := rows[i].InvitationID
		for _, sent := range before {
			if at, ok := sent[id]; ok {
				if prev, ok := sentAt[id]; !ok || at.Before(prev) {
					sentAt[id] = at
				}
			}
		}
	}
	for i := range rows {
		if r := &rows[i]; r.Kind == ingest.KindInvitationSent.Name {
			if prev, ok := sentAt[r.InvitationID]; !ok || r.Timestamp.Before(prev) {
				sentAt[r.InvitationID] = r.Timestamp
			}
		}
	}
	var missing []string
	for i := range rows {
		if _, ok := sentAt[rows[i].InvitationID]; !ok {
			missing = append(missing, rows[i].InvitationID)
		}
	}
	if len(missing) > 0 {
		stored, err := lookupInvitationSentAt(ctx, c.cfg.ClickHouse, missing)
		if err != nil {
			return err
		}
		for id, at := range stored {
			if prev, ok := sentAt[id]; !ok || at.Before(prev) {
				sentAt[id] = at
			}
		}
	}
	for i := range rows {
		if at, ok := sentAt[rows[i].InvitationID]; ok {
			rows[i].InvitationSentAt = &at
		}
	}
	return nil
}

// maxPayload caps the payload kept in dead_letters; the full message stays in the topic.
const maxPayload = 64 << 10

// deadLetterRow records one message of the dead-letter topic. Its id comes from the
// mcpulse-dead-letter-id header (the source position or publishing file and line), so a
// dead letter published twice is stored once.
func deadLetterRow(m *kafka.Message) row {
	id, reason, source, class := "", "", "", ingest.DeadLetterClass("")
	for _, h := range m.Headers {
		switch h.Key {
		case ingest.HeaderDeadLetterID:
			id = string(h.Value)
		case ingest.HeaderError:
			reason = string(h.Value)
		case ingest.HeaderSourceTopic:
			source = string(h.Value)
		case ingest.HeaderErrorClass:
			class = ingest.ParseDeadLetterClass(string(h.Value))
		}
	}
	if id == "" {
		id = position(m)
	}
	var peek struct {
		UUID       any `json:"uuid"`
		Event      any `json:"event"`
		DistinctID any `json:"distinct_id"`
	}
	_ = json.Unmarshal(m.Value, &peek) // best effort: the payload is malformed by definition
	payload := m.Value
	if len(payload) > maxPayload {
		payload = payload[:maxPayload]
	}
	// The texts are caller input (a dead letter is malformed by definition; its headers can be
	// written by anyone who can write the topic): each is bounded as the pipeline bounds a
	// stored name or text (safetext.Bound), so a 900 KB event name costs a line, not a row.
	name, text := func(s string) string { return safetext.Bound(s, safetext.MaxName) }, func(s string) string { return safetext.Bound(s, safetext.MaxText) }
	return row{safetext.Bound(id, safetext.MaxKeyPath), m.Time.UTC(), name(source), text(reason), name(peekString(peek.UUID)),
		name(peekString(peek.Event)), safetext.Bound(peekString(peek.DistinctID), safetext.MaxKeyPath), string(payload), int32(m.Partition), m.Offset, string(class)}
}

func peekString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}

// auditRow records one ops audit event.
func auditRow(m *kafka.Message, a *ingest.AuditEvent) row {
	prev := string(a.PreviousRecord)
	if prev == "" {
		prev = "null"
	}
	return row{a.UUID, a.At, a.Action, a.IdentityHash, a.DistinctID, a.InstanceURL, a.Actor, a.Reason,
		nonNilStrings(a.DeletedKeys), prev, int32(m.Partition), m.Offset, a.At.UnixMilli()}
}

// storeRollups writes what p adds to the rollups (prepareRollups, then the rows' insert), so
// a retry writes the same rows.
func (c *Consumer) storeRollups(ctx context.Context, p *prepared) error {
	if err := c.prepareRollups(ctx, p); err != nil {
		return err
	}
	return p.rollupWrite.Insert(ctx)
}

// prepareRollups computes p's rollup rows unless p holds them already: once per generation
// it first takes the generation's epoch and resets what a batch stored but not committed left
// (rollup.Store.Begin); the rows are computed once (rollup.Store.Prepare, which advances the
// cache) and kept in p. It must run after the batch before p has been committed. Errors are
// ClickHouse's; nothing of p is kept then.
func (c *Consumer) prepareRollups(ctx context.Context, p *prepared) error {
	if err := c.beginRollups(ctx); err != nil {
		return err
	}
	if p.rollupWrite == nil {
		w, err := c.rollups.Prepare(ctx, p.rollup)
		if err != nil {
			return err
		}
		p.rollupWrite = w
	}
	return nil
}

// beginRollups begins the generation's rollups once (rollup.Store.Begin): it takes the
// generation's epoch and resets what a batch stored but not committed left. It runs in the
// first batch's raw stage, before the batch's events are counted (no batch of the generation
// is in its commit stage then), or at the latest before the first rollup rows are prepared.
// Errors are ClickHouse's; it is retried with the step that called it.
func (c *Consumer) beginRollups(ctx context.Context) error {
	if c.rollupsBegun {
		return nil
	}
	if err := c.rollups.Begin(ctx, c.rollupCommitted); err != nil {
		return err
	}
	c.rollupsBegun = true
	return nil
}

// countRollups adds the batch's stored events to its rollups: every event to
// events_by_name_hourly, every tool call's row (filled by deriveMisuse) to the tool-call
// rollups; an event ClickHouse refused is in no raw table, so in no rollup either. An event
// below the offset its partition's rollups are counted from (rollup.Store.CountedFrom: a
// group reading offsets counted already) is in the totals already and is left out.
func (c *Consumer) countRollups(p *prepared, refused map[uuid.UUID]string) {
	for _, k := range p.kept {
		if _, ok := refused[k.id]; !ok {
			m := &p.msgs[k.msg]
			st := rollup.Stream{Topic: m.Topic, Partition: int32(m.Partition)}
			if m.Offset >= c.rollups.CountedFrom(st) {
				c.adder.AddEvent(p.rollup, st, k.name, k.at)
			}
		}
	}
	for i := range p.rows.ToolCalls {
		r := &p.rows.ToolCalls[i]
		if _, ok := refused[r.UUID]; !ok && r.KafkaOffset >= c.rollups.CountedFrom(p.toolCallStreams[i]) {
			c.addToolCallRollups(p.rollup, p.toolCallStreams[i], r)
		}
	}
}

// addToolCallRollups adds a stored tool call's row, read from stream s, to the batch's
// rollups.
func (c *Consumer) addToolCallRollups(b *rollup.Batch, s rollup.Stream, r *ingest.ToolCallRow) {
	tc := rollup.ToolCall{
		Timestamp: r.Timestamp, Tool: r.ToolName, Client: r.ClientName, Server: r.ServerName, ServerVersion: r.ServerVersion,
		IsError: r.IsError == 1, DurationMs: r.DurationMs, CountedIgnoredKeys: r.CountedIgnoredKeys,
		Source: misuse.Source(r.IgnoredKeysSource), Reason: misuse.Reason(r.IgnoredKeysReason), ErrorClass: misuse.ErrorClass(r.ErrorClass),
		UnknownTool: r.UnknownTool == 1,
		CampaignID:  r.CampaignID, GateReason: r.RecruitmentReason, URLSupport: support(r.URLSupported), FormSupport: support(r.FormSupported),
	}
	c.adder.AddToolCall(b, s, &tc)
}

// support stores a capability flag (a row's Nullable(UInt8)) as the rollups' UInt8: 0 no,
// 1 yes, 2 unknown.
func support(v *uint8) uint8 {
	if v == nil {
		return 2
	}
	return *v
}
