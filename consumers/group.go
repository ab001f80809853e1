package consumers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/consumers/rollup"
	"github.com/mcpulse/mcpulse/ingest"
)

// Consumer-group membership and commits (DESIGN.md §5; a broker restart included).
//
// The consumer joins the group through kafka-go's ConsumerGroup and reads each generation's
// partitions with one partition reader each. A batch's offsets are committed with the
// generation its messages were fetched in (kafka.Generation.CommitOffsets), never a later one:
//
//   - Once the group has moved to a new generation, the coordinator refuses an old
//     generation's commit (ILLEGAL_GENERATION), so a late commit can never move a partition's
//     offset back under its new owner, and the new owner starts from the last committed
//     offset. kafka-go's group-mode Reader instead queues a commit that waits across a
//     rebalance and sends it with the next generation: after a broker restart, a member's
//     commit from before the restart landed after the partition's new owner had committed
//     further, and the group's offset went back by thousands of messages, left there until
//     more traffic reached the partition.
//   - A commit that still fails while the generation lives ends the generation: the member
//     rejoins and every partition is read again from its committed offset, so a failed commit
//     cannot leave a partition behind (kafka-go's Reader does not rewind after a failed
//     commit).
//
// A generation is held open (kafka.Generation.Start) until the store stage is done with the
// batches fetched in it, so the batch being stored when the coordinator starts a rebalance is
// still committed with its generation, as Kafka allows while the group prepares the
// rebalance. Batches fetched but not yet stored are dropped at the generation's end; they were
// not committed, so whoever owns their partitions next reads them again.

// errGenerationEnded reports that a batch was left to the partitions' next owner because its
// generation ended.
var errGenerationEnded = errors.New("consumer group generation ended")

// joinGroupBackoff is the pause before a member retries a failed consumer-group join (kafka-go's
// default is 5 s), so a member is back in the group soon after the coordinator returns.
const joinGroupBackoff = time.Second

// commitAttempts bounds commit: a commit that still fails ends the generation.
const commitAttempts = 4

// group returns the member's consumer group, joining it on first use.
func (c *Consumer) group() (*kafka.ConsumerGroup, error) {
	c.groupMu.Lock()
	defer c.groupMu.Unlock()
	if c.closed {
		return nil, errors.New("consumer: closed")
	}
	if c.cg != nil {
		return c.cg, nil
	}
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:      c.cfg.GroupID,
		Brokers: c.cfg.Brokers,
		Topics:  c.cfg.Topics,
		// A member that died is noticed after SessionTimeout, and its partitions move then.
		SessionTimeout:    c.cfg.SessionTimeout,
		HeartbeatInterval: min(c.cfg.SessionTimeout/3, 3*time.Second),
		RebalanceTimeout:  c.cfg.SessionTimeout,
		JoinGroupBackoff:  joinGroupBackoff,
		StartOffset:       kafka.FirstOffset,
		ErrorLogger:       kafka.LoggerFunc(func(msg string, args ...any) { logReaderError(c.cfg.Logger, fmt.Sprintf(msg, args...)) }),
	})
	if err != nil {
		return nil, fmt.Errorf("consumer group: %w", err)
	}
	c.cg = cg
	return cg, nil
}

// run joins generation after generation until ctx ends or, with untilDrained, the group's
// partitions are consumed to their ends.
func (c *Consumer) run(ctx context.Context, untilDrained bool) error {
	cg, err := c.group()
	if err != nil {
		return err
	}
	c.loadRecentVerdicts(ctx)
	lastMessage := time.Now()  // across generations, for the drain check
	var failingSince time.Time // the first of the current run of failed joins
	for {
		gen, err := cg.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, kafka.ErrGroupClosed) {
				return errors.New("consumer: closed")
			}
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			// A service keeps retrying (Kafka comes back); a run that must drain and end gives up.
			if untilDrained && time.Since(failingSince) >= c.cfg.DrainUnreachableTimeout {
				return fmt.Errorf("%w at %s: no consumer-group join succeeded for %s, nothing consumed since: %v",
					ingest.ErrKafkaUnreachable, strings.Join(c.cfg.Brokers, ","), c.cfg.DrainUnreachableTimeout, err)
			}
			// kafka-go's group rejoins on its own (after joinGroupBackoff); this only reports.
			c.stats.fetchRetries.Add(1)
			c.cfg.Logger.Warn("joining the consumer group failed; retrying", "err", err)
			continue
		}
		failingSince = time.Time{}
		c.stats.generations.Add(1)
		if done := c.consumeGeneration(ctx, gen, untilDrained, &lastMessage); done {
			return nil
		}
	}
}

// consumeGeneration fetches and stores the generation's partitions until the generation ends
// (it returns false: the caller joins the next one), ctx ends or the group is drained (true).
func (c *Consumer) consumeGeneration(ctx context.Context, gen *kafka.Generation, untilDrained bool, lastMessage *time.Time) (done bool) {
	runCtx, stopRun := context.WithCancel(ctx) // returning stops the fetch stage, which ends the generation
	defer stopRun()
	batches := make(chan *prepared) // unbuffered: one batch prepared while one is stored, not two
	stored := make(chan struct{})   // closed when the store stage is done with this generation
	genCtxs := make(chan context.Context, 1)
	openedAt := newBatchOpened() // the open batch's opening, for the fetch stage's fills
	// Uncommitted batches that were recorded are read again first, one batch each, in
	// streamed batches only (ranges.go).
	var rp *replay
	var ts *tokenServer // nil: streamed batches bear no insert token (token.go)
	if c.cfg.ClickHouse.Stats().MaxOpenConns >= streamConns {
		if server, ok := c.dedupTokens(ctx); ok {
			ts = &server
		}
		rp = c.loadReplay(ctx, gen.Assignments)
	}
	defer rp.off() // readers of a generation left early wait for nothing
	gen.Start(func(genCtx context.Context) {
		genCtxs <- genCtx
		fetchCtx, stop := context.WithCancel(runCtx)
		defer stop()
		defer context.AfterFunc(genCtx, stop)() // the coordinator ending the generation stops the fetch
		c.fetchLoop(fetchCtx, gen.Assignments, batches, openedAt, rp)
		<-stored // hold the generation until its batches are committed or dropped
	})
	genCtx := <-genCtxs
	defer close(stored)
	c.rollupsBegun = false
	c.rollupCommitted = map[rollup.Stream]int64{}
	c.caps.Reset() // the partitions may have moved: windows are read back from ClickHouse
	for topic, parts := range gen.Assignments {
		if dedupTopic(topic) {
			for _, pa := range parts {
				c.rollupCommitted[rollup.Stream{Topic: topic, Partition: int32(pa.ID)}] = max(pa.Offset, 0)
			}
		}
	}

	// pending is the batch before in the commit stage, run on its own goroutine while the loop
	// stores the next batch's raw rows: for a streamed batch the end of its INSERTs, then for
	// every batch its rollups and its commit; nil when none.
	var pending *committing
	// outcome takes pending's outcome err on this loop and returns it.
	outcome := func(err error) error {
		var failed *sendFailure
		switch {
		case err == nil:
			c.committedRanges(pending.ranges)
			c.windows.commit(pending.msgs)
			for i := range pending.msgs {
				m := &pending.msgs[i]
				c.caps.Committed(m.Topic, int32(m.Partition), m.Offset+1)
			}
			c.replayed(pending.msgs)
			c.stats.batches.Add(1)
		case errors.As(err, &failed) && ctx.Err() == nil:
			c.streamFailed(pending.sending, nil, failed.err)
		}
		pending = nil
		return err
	}
	// settle waits for pending's outcome.
	settle := func() error {
		if pending == nil {
			return nil
		}
		return outcome(<-pending.done)
	}
	// poll takes pending's outcome if the stage has ended, without waiting: a failure is
	// handled before more is stored in vain (or, idle, at once).
	poll := func() error {
		if pending == nil {
			return nil
		}
		select {
		case err := <-pending.done:
			return outcome(err)
		default:
			return nil
		}
	}
	// inFlight is the invitations of the batch whose INSERTs are ending, which no query sees
	// yet (nil when none).
	inFlight := func() map[string]time.Time {
		if pending == nil || pending.sending == nil {
			return nil
		}
		return pending.sending.sent
	}
	defer func() { _ = settle() }() // before stored closes: the generation holds until the commit is done
	// toCommit hands batch p, stored, to the commit stage, run on its own goroutine while the
	// next batch is stored.
	toCommit := func(p *prepared) {
		pending = &committing{msgs: p.msgs, ranges: p.ranges, done: make(chan error, 1)}
		go func(done chan<- error) { done <- c.commitStage(ctx, genCtx, gen, p) }(pending.done)
	}
	// open is the streamed batch whose INSERTs are open (stream.go); nil when none.
	var open *openBatch
	defer func() {
		if open != nil { // stopped mid-batch: nothing of it is committed
			open.abort()
		}
	}()
	// closeOpen ends open's INSERTs and hands it to the commit stage once the previous batch
	// is committed; false when the member must stop or rejoin (logged). failed is the chunk
	// whose failure closes the batch without it (nil for none): replayed with the batch if
	// the batch cannot be ended.
	//
	// ClickHouse writes an INSERT's part when the INSERT ends (it squashes the blocks it
	// received), which takes a few hundred milliseconds for a batch of 100,000 rows. Unless a
	// chunk failed (or the pool is too small for two batches' INSERTs: endsAsync), the INSERTs
	// therefore end on a goroutine of their own at once; once the batch before is committed,
	// the batch's rollup rows are computed while they end, and the commit stage writes them and
	// commits once they ended, while this loop streams the next batch: the consumer's CPU is
	// not idle while ClickHouse writes. A failure to end them is the stage's outcome
	// (sendFailure), handled on this loop (outcome) as one here would be.
	closeOpen := func(failed *prepared) bool {
		b := open
		open = nil
		openedAt.set(time.Time{})
		if b.messages == 0 { // only a chunk that failed
			b.abort()
			rp.off()
			return true
		}
		if !b.wholeReplay(rp, failed != nil) {
			// Under the first attempt's tokens, a part of the recorded batch could be
			// dropped where the first attempt stored nothing, and then stand for the whole
			// (token.go): aborted, its offsets stored a chunk per batch.
			rp.off()
			c.streamFailed(b, failed, errReplayCut)
			_ = settle()
			return false
		}
		if rp.active() {
			if failed == nil && rp.complete(b.lastOffsets()) {
				defer rp.next() // the readers go on to the next recorded batch
			} else {
				rp.off() // its boundaries cannot follow the records any more
			}
		}
		// Recorded before the INSERTs end, when ClickHouse writes their parts: a replay of
		// the batch then holds exactly its ranges (ranges.go).
		p := b.closed()
		nonce := ""
		if b.nonce != "" {
			// Every row sent before the record names the nonce (token.go).
			if err := b.flush(ctx); err != nil {
				if ctx.Err() == nil {
					c.streamFailed(b, failed, err)
				}
				_ = settle()
				return false
			}
			nonce = b.recordNonce(ts)
		}
		c.recordRanges(ctx, p.ranges, nonce)
		if failed == nil && c.endsAsync() {
			sent := make(chan error, 1)
			go func() { sent <- b.send(ctx) }()
			if settle() != nil {
				<-sent
				b.abort()
				return false // logged by the commit stage, or by streamFailed
			}
			pending = &committing{msgs: p.msgs, ranges: p.ranges, done: make(chan error, 1), sending: b}
			go func(done chan<- error) {
				// The batch's rollup rows are computed (their cells loaded) while its INSERTs
				// end; only their insert waits for the INSERTs. A failure is the commit
				// stage's to retry.
				rollupsPrepared := make(chan struct{})
				go func() {
					defer close(rollupsPrepared)
					_ = c.prepareRollups(ctx, p)
				}()
				err := <-sent
				<-rollupsPrepared
				if err != nil {
					done <- &sendFailure{err}
					return
				}
				done <- c.commitStage(ctx, genCtx, gen, p)
			}(pending.done)
			return true
		}
		if err := b.send(ctx); err != nil {
			if ctx.Err() == nil {
				c.streamFailed(b, failed, err)
			}
			_ = settle()
			return false
		}
		if settle() != nil {
			return false // logged by the commit stage
		}
		toCommit(p)
		return true
	}

	for {
		var batch *prepared
		var ok bool
		select {
		case <-ctx.Done():
			return true
		case batch, ok = <-batches:
		}
		if !ok || ctx.Err() != nil {
			return ctx.Err() != nil // the generation ended, or the consumer stops
		}
		if genCtx.Err() != nil {
			// Prepared ahead, not stored: leave it to the partitions' next owner rather than
			// keep the group waiting for this member while it stores a batch it cannot commit.
			return false
		}
		msgs := batch.msgs
		if len(msgs) == 0 {
			// Nothing more was waiting (cut), or the open batch reached its age bound.
			if open != nil && open.closes(&c.cfg, batch, time.Now(), rp) && !closeOpen(nil) {
				return ctx.Err() != nil
			}
			if poll() != nil {
				return ctx.Err() != nil
			}
			if untilDrained && time.Since(*lastMessage) >= c.cfg.IdleToDrain {
				if settle() != nil {
					return ctx.Err() != nil
				}
				drained, err := c.drained(ctx)
				if err != nil {
					c.cfg.Logger.Warn("drain check failed", "err", err)
				} else if drained {
					return true
				}
			}
			continue
		}
		*lastMessage = time.Now()
		c.stats.messages.Add(int64(len(msgs)))
		batch.messages = len(msgs)
		streams := c.streams(batch)
		if open != nil && !streams {
			if !closeOpen(nil) {
				return ctx.Err() != nil
			}
		}
		if streams {
			if poll() != nil {
				return ctx.Err() != nil // the batch before failed: this one is read again too
			}
			if open != nil && !open.admits(batch) && !closeOpen(nil) {
				return ctx.Err() != nil // a replay under recorded tokens met other offsets
			}
			if open == nil {
				open = c.newOpenBatch()
				open.drawNonce(ts, rp, batch)
			}
			batch.sentBefore = []map[string]time.Time{open.sent, inFlight()}
			err := c.storeRawWith(ctx, batch, open.insert(c))
			if err == nil {
				open.add(batch)
				c.releaseRows(batch)
				if open.closes(&c.cfg, batch, time.Now(), rp) {
					if !closeOpen(nil) {
						return ctx.Err() != nil
					}
				} else if open.messages == len(msgs) { // its first chunk: fills stop at its age
					openedAt.set(open.opened)
				}
				continue
			}
			if ctx.Err() != nil {
				return true
			}
			// The chunks before this one are complete in the open INSERTs unless this chunk's
			// failure ended one of them: end them, and retry this chunk as a batch of its own
			// (below); any of its rows the INSERTs took are stored again.
			if errors.Is(err, errTooManyParts) {
				c.cfg.Logger.Info("a chunk is stored as a batch of its own", "messages", len(msgs), "reason", err)
			} else {
				c.stats.retries.Add(1)
				c.cfg.Logger.Warn("storing a chunk of a streamed batch failed; the chunks before it are stored and committed, and it is retried on its own",
					"messages", len(msgs), "err", err)
			}
			if !closeOpen(batch) {
				return ctx.Err() != nil
			}
			batch.sentBefore = nil // stored now: the batch's invitations are visible
		}
		if sent := inFlight(); sent != nil {
			batch.sentBefore = []map[string]time.Time{sent}
		}
		rp.off() // a chunk stored as a batch of its own: boundaries as they come
		batch.ranges = rangesOf(batch.msgs)
		c.recordRanges(ctx, batch.ranges, "")               // no token: stored as a batch of its own
		err := c.retryStore(ctx, genCtx, batch, c.storeRaw) // while the previous batch commits
		if settle() != nil {
			return ctx.Err() != nil // logged by the commit stage
		}
		if err != nil {
			if ctx.Err() != nil {
				return true
			}
			c.cfg.Logger.Info("generation ended while a store was retried; the partitions' next owner reads the batch again", "messages", len(msgs))
			return false
		}
		c.releaseRows(batch)
		batch.rawStored()
		toCommit(batch)
	}
}

// committing is a batch in the commit stage.
type committing struct {
	msgs   []kafka.Message
	ranges map[topicPartition]batchRange // the batch's recorded ranges (ranges.go)
	done   chan error                    // receives the stage's outcome: nil once the batch is committed
	// sending is the streamed batch whose INSERTs the stage ends first; nil for a batch
	// stored before it reached the stage.
	sending *openBatch
}

// sendFailure is the commit stage's outcome when a streamed batch's INSERTs could not be
// ended (err): nothing of the batch was committed.
type sendFailure struct{ err error }

func (f *sendFailure) Error() string { return f.err.Error() }
func (f *sendFailure) Unwrap() error { return f.err }

// commitStage writes batch p's rollup rows (retried like every store step), accounts what the
// batch stored and commits its offsets with gen. The raw stage stored p already, and the
// batch before p was committed. A non-nil error means p was not committed: ctx ended, gen
// ended (the partitions' next owner reads p again), or the commit kept failing (the member
// rejoins and reads it again); the stage logs which.
func (c *Consumer) commitStage(ctx, genCtx context.Context, gen *kafka.Generation, p *prepared) error {
	msgs := p.msgs
	if err := c.retryStore(ctx, genCtx, p, c.storeRollups); err != nil {
		if ctx.Err() == nil {
			c.cfg.Logger.Info("generation ended while a store was retried; the partitions' next owner reads the batch again", "messages", p.messages)
		}
		return err
	}
	c.account(p.result)
	if err := c.commit(genCtx, gen, msgs); err != nil {
		if ctx.Err() == nil {
			// Stored but not committed: every write is idempotent, and the next generation
			// reads the partitions again from their committed offsets.
			c.cfg.Logger.Warn("commit failed; rejoining the group to read the batch again", "messages", p.messages, "generation", gen.ID, "err", err)
		}
		return err
	}
	return nil
}

// commit commits msgs' offsets (each partition's highest offset + 1) with gen, retrying a
// failure with the store backoff while gen lives, at most commitAttempts times.
func (c *Consumer) commit(genCtx context.Context, gen *kafka.Generation, msgs []kafka.Message) error {
	offsets := map[string]map[int]int64{}
	for i := range msgs {
		m := &msgs[i]
		byPartition := offsets[m.Topic]
		if byPartition == nil {
			byPartition = map[int]int64{}
			offsets[m.Topic] = byPartition
		}
		if next := m.Offset + 1; next > byPartition[m.Partition] {
			byPartition[m.Partition] = next
		}
	}
	backoff := c.cfg.RetryBackoff
	for attempt := 1; ; attempt++ {
		err := gen.CommitOffsets(offsets)
		if err == nil {
			return nil
		}
		if attempt == commitAttempts || genCtx.Err() != nil {
			return err
		}
		c.cfg.Logger.Info("commit failed; retrying", "attempt", attempt, "retry_in", backoff, "messages", len(msgs), "err", err)
		select {
		case <-genCtx.Done():
			return fmt.Errorf("%w: %w", errGenerationEnded, err)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, c.cfg.MaxRetryBackoff)
	}
}

// partitionReaders starts one kafka-go partition reader per assignment, each at its
// committed offset (or the first offset when none was committed), all feeding msgs until ctx
// ends; while a recorded batch is replayed, each holds the messages outside it (ranges.go).
// The returned wait blocks until every reader has stopped and closed.
func (c *Consumer) partitionReaders(ctx context.Context, assignments map[string][]kafka.PartitionAssignment, msgs chan<- kafka.Message, rp *replay) (wait func()) {
	var wg sync.WaitGroup
	for topic, parts := range assignments {
		for _, pa := range parts {
			r := kafka.NewReader(kafka.ReaderConfig{
				Brokers:        c.cfg.Brokers,
				Topic:          topic,
				Partition:      pa.ID,
				MinBytes:       1,
				MaxBytes:       fetchMaxBytes,
				MaxWait:        500 * time.Millisecond,
				QueueCapacity:  partitionQueue,
				ReadBackoffMin: 50 * time.Millisecond,
				ReadBackoffMax: time.Second,
				Dialer:         fetchDialer,
				ErrorLogger:    kafka.LoggerFunc(func(msg string, args ...any) { logReaderError(c.cfg.Logger, fmt.Sprintf(msg, args...)) }),
			})
			tp := topicPartition{topic, pa.ID}
			wg.Go(func() {
				defer r.Close()
				sent := int64(-1) // the last offset delivered
				if err := r.SetOffset(pa.Offset); err != nil {
					c.cfg.Logger.Error("kafka partition reader: setting the start offset", "topic", topic, "partition", pa.ID, "offset", pa.Offset, "err", err)
					return
				}
				backoff := c.cfg.RetryBackoff
				for {
					m, err := r.FetchMessage(ctx)
					if err != nil {
						if ctx.Err() != nil {
							return
						}
						c.stats.fetchRetries.Add(1)
						c.cfg.Logger.Warn("kafka fetch failed; retrying", "topic", topic, "partition", pa.ID, "retry_in", backoff, "err", err)
						select {
						case <-ctx.Done():
							return
						case <-time.After(backoff):
						}
						backoff = min(backoff*2, c.cfg.MaxRetryBackoff)
						continue
					}
					backoff = c.cfg.RetryBackoff
					if !rp.wait(ctx, tp, m.Offset, sent) {
						return
					}
					select {
					case msgs <- m:
						sent = m.Offset
					case <-ctx.Done():
						return
					}
				}
			})
		}
	}
	return wg.Wait
}

// fetchMaxBytes is each partition reader's MaxBytes: the most record bytes one fetch asks the
// partition's leader for (1 MiB, kafka-go's default and the Java client's and librdkafka's
// per-partition default). A larger fetch saves no work here: the reader decodes a fetch's
// messages one at a time as they arrive, and loopback round trips are cheap. It costs the
// broker: with 16 MiB fetches the in-process broker of `mcpulse bench pipeline` spent 4.4 µs
// per SDK-shaped event building responses (growing one buffer per fetch), with 1 MiB 2.7
// µs, on a machine whose cores it shares with the consumer.
const fetchMaxBytes = 1 << 20

// partitionQueue is each partition reader's QueueCapacity (messages fetched ahead of fill).
const partitionQueue = 250
