package chdb_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
	"github.com/mcpulse/mcpulse/testkit/chdb"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// insertProbe is a consumer's ClickHouse connection that asks the server, with each raw
// INSERT's own settings, what the INSERT runs with (insert_deduplicate, and its
// insert_deduplication_token), and that, with stop set, stops the consumer when a batch, its
// raw rows stored, first writes its rollup markers: a crash after the INSERTs ended and before
// anything was committed.
type insertProbe struct {
	driver.Conn
	t       *testing.T
	stop    context.CancelFunc // nil: never stops
	stopped atomic.Bool

	mu       sync.Mutex
	tokens   map[string][]string // raw table → the tokens of its INSERTs, in order ("" for none)
	dedupOff map[string]bool     // raw table → an INSERT ran with insert_deduplicate = 0
}

func newInsertProbe(t *testing.T, conn driver.Conn, stop context.CancelFunc) *insertProbe {
	return &insertProbe{Conn: conn, t: t, stop: stop, tokens: map[string][]string{}, dedupOff: map[string]bool{}}
}

func (p *insertProbe) PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	if p.stop != nil && strings.Contains(query, "mcpulse.rollup_batches") && p.stopped.CompareAndSwap(false, true) {
		p.stop()
		return nil, context.Canceled
	}
	if f := strings.Fields(query); len(f) > 2 && f[0] == "INSERT" && slices.Contains(migrations.RawTables, strings.TrimPrefix(f[2], migrations.Database+".")) {
		var dedup, token string
		err := p.Conn.QueryRow(ctx, "SELECT toString(getSetting('insert_deduplicate')), toString(getSetting('insert_deduplication_token'))").Scan(&dedup, &token)
		if err != nil {
			return nil, err // the consumer retries
		}
		table := strings.TrimPrefix(f[2], migrations.Database+".")
		p.mu.Lock()
		p.tokens[table] = append(p.tokens[table], token)
		if dedup == "0" || dedup == "false" {
			p.dedupOff[table] = true
		}
		p.mu.Unlock()
	}
	return p.Conn.PrepareBatch(ctx, query, opts...)
}

// event is one corpus line.
func event(id, name, distinctID string, at time.Time, props map[string]any) []byte {
	b, err := json.Marshal(map[string]any{"uuid": id, "event": name, "distinct_id": distinctID,
		"timestamp": at.Format(time.RFC3339Nano), "properties": props})
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

// A batch read again after the consumer stopped between its raw INSERTs and its commit is
// dropped by a current server (migrated by migrate up: non_replicated_deduplication_window
// set) although the next member reads it in other chunks, with another batch size: its
// INSERTs bear the first attempt's insert_deduplication_token (consumers, token.go), so
// every raw table holds each event once without FINAL (an INSERT run with
// insert_deduplicate = 0, which would be stored again, fails the test). Then a
// second corpus stopped alike with the records deleted before the replay is stored twice:
// the check can fail. Last, a third corpus stopped alike while the server writes an INSERT's
// blocks as they come (min_insert_block_size_rows = 1), before the INSERT ends: the record
// names no nonce (a replay under the first attempt's token could lose rows a dead first
// attempt never sent), and the replay is stored again, whole.
func TestAReplayedBatchIsDroppedByTheCurrentEngine(t *testing.T) {
	inst := chdb.ForTest(t)
	env := testenv.New(t, testenv.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cur, err := stores.OpenClickHouse(ctx, inst.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	if _, err := migrations.Up(ctx, cur, nil); err != nil {
		t.Fatal(err)
	}
	// Rows are counted without FINAL: a merge collapsing a replay would pass for a drop.
	for _, table := range migrations.RawTables {
		if err := cur.Exec(ctx, "SYSTEM STOP MERGES "+migrations.Database+"."+table); err != nil {
			t.Fatal(err)
		}
	}
	const group = "chdb-replay-token"
	consumer := func(conn driver.Conn, batchSize, batchBytes int) *consumers.Consumer {
		t.Helper()
		c, err := consumers.New(consumers.Config{
			Brokers: env.Stack.KafkaBrokers, GroupID: group, Redis: env.Redis, ClickHouse: conn,
			DeadLetters: env.Publisher, BatchSize: batchSize, BatchBytes: batchBytes,
			BatchWait: 100 * time.Millisecond, IdleToDrain: 500 * time.Millisecond, MaxRetryBackoff: 500 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	base := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	const calls, invitations, handshakes = 2000, 200, 1000
	for round, rc := range []struct {
		records bool
		// squashRows is the server's min_insert_block_size_rows while the first member runs
		// (0: its default): below the batch's rows, the server writes an INSERT in pieces
		// before it ends, and the record names no nonce.
		squashRows int
	}{{true, 0}, {false, 0}, {true, 1}} {
		records, dropped := rc.records, rc.records && rc.squashRows == 0
		tool, prefix := fmt.Sprintf("tool_%d", round), fmt.Sprintf("inv%d-", round)
		var corpus strings.Builder
		id := func(n int) string { return fmt.Sprintf("0192f2a0-0000-7000-8000-%012d", round*100000+n) }
		for n := range calls {
			corpus.Write(event(id(n), ingest.EventToolCall, fmt.Sprintf("user-%d", n%97), base.Add(time.Duration(n)*time.Second),
				map[string]any{"$mcp_tool_name": tool, "$mcp_client_name": "claude-code", "$mcp_is_error": false}))
		}
		for n := range invitations {
			corpus.Write(event(id(10000+n), ingest.EventInvitationSent, fmt.Sprintf("person-%d", n), base,
				map[string]any{"campaign_id": "onboarding", "invitation_id": fmt.Sprintf("%s%d", prefix, n),
					"feature_flag": "mcp-interviews", "interview_recruitment_reason": "invited"}))
		}
		for n := range handshakes {
			corpus.Write(event(id(20000+n), ingest.EventInitialize, fmt.Sprintf("user-%d", n%89), base,
				map[string]any{"$mcp_server_name": tool, "$mcp_client_name": "claude-code"}))
		}
		if _, err := ingest.PublishFile(ctx, env.Publisher, strings.NewReader(corpus.String()), "replay.jsonl", nil); err != nil {
			t.Fatal(err)
		}

		if rc.squashRows > 0 {
			if err := cur.Exec(ctx, fmt.Sprintf("SET min_insert_block_size_rows = %d", rc.squashRows)); err != nil {
				t.Fatal(err)
			}
		}
		runCtx, stop := context.WithCancel(ctx)
		first := newInsertProbe(t, cur, stop)
		c1 := consumer(first, 100000, 0)
		if err := c1.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		stop()
		if !first.stopped.Load() {
			t.Fatal("the first member never reached its rollup markers")
		}
		c1.Close()
		if rc.squashRows > 0 {
			if err := cur.Exec(ctx, "SET min_insert_block_size_rows = DEFAULT"); err != nil {
				t.Fatal(err)
			}
		}
		tables := []struct {
			name, topic, where string
			want               uint64
		}{
			{"mcp_initialize_events", ingest.TopicToolCalls, "server_name = '" + tool + "'", handshakes},
			{"tool_calls", ingest.TopicToolCalls, "tool_name = '" + tool + "'", calls},
			{"recruitment_events", ingest.TopicRecruitment, "startsWith(invitation_id, '" + prefix + "')", invitations},
		}
		count := func(table, where string) (rows, events uint64) {
			t.Helper()
			if err := cur.QueryRow(ctx, "SELECT count(), uniqExact(uuid) FROM mcpulse."+table+" WHERE "+where).Scan(&rows, &events); err != nil {
				t.Fatal(err)
			}
			return rows, events
		}
		// The rows the first member stored and did not commit (a batch that writes no rollup
		// marker is committed before the stop): what the second member reads again.
		committed := committedOffsets(ctx, t, env.Stack.KafkaBrokers, group)
		before := map[string]uint64{}
		for _, tbl := range tables {
			before[tbl.name], _ = count(tbl.name, tbl.where+" AND kafka_offset >= "+committed[tbl.topic])
		}
		if before["mcp_initialize_events"] == 0 {
			t.Fatal("the first member stored no handshake before it stopped: nothing is replayed")
		}
		if !records {
			if err := env.Redis.Del(ctx, consumers.BatchRangesKeyPrefix+"{"+group+"}").Err(); err != nil {
				t.Fatal(err)
			}
		}
		// Another batch size, and chunks of 32 KiB (the first member's were up to 16 MiB):
		// read again without the records, the rows arrive in other chunks and batches.
		second := newInsertProbe(t, cur, nil)
		drainCtx, stopDrain := context.WithTimeout(ctx, time.Minute)
		c2 := consumer(second, 100, 32<<10)
		if err := c2.RunUntilDrained(drainCtx); err != nil || drainCtx.Err() != nil {
			t.Fatalf("the second member did not drain within a minute (err %v); engine said:\n%s", err, inst.Log())
		}
		stopDrain()
		st := c2.Stats()
		t.Logf("records %t, squashing at %d rows: the second member sent %d handshakes, %d tool calls, %d invitations (the first member's uncommitted batches, then the rest)",
			records, rc.squashRows, st.Stored[ingest.KindInitialize.Name], st.Stored[ingest.KindToolCall.Name], st.Stored[ingest.KindInvitationSent.Name])

		for _, tbl := range tables {
			rows, events := count(tbl.name, tbl.where)
			if events != tbl.want {
				t.Errorf("%s holds %d events, want %d", tbl.name, events, tbl.want)
			}
			t.Logf("records %t, squashing at %d rows: %s %d rows, %d events (%d uncommitted rows stored before the stop)", records, rc.squashRows, tbl.name, rows, events, before[tbl.name])
			if first.dedupOff[tbl.name] || second.dedupOff[tbl.name] {
				// Every raw table drops a replayed INSERT (no view reads one: the views read
				// feeds, migration 0045).
				t.Errorf("%s is inserted with insert_deduplicate = 0: its replay is stored again", tbl.name)
				continue
			}
			firstTokens, secondTokens := first.tokens[tbl.name], second.tokens[tbl.name]
			switch {
			case dropped && rows != events:
				t.Errorf("%s holds %d rows for %d events without FINAL: the replay was stored again", tbl.name, rows, events)
			case len(firstTokens) == 0 || firstTokens[0] == "":
				t.Errorf("%s: the first member's INSERT bore no insert_deduplication_token (%q)", tbl.name, firstTokens)
			case dropped && (len(secondTokens) == 0 || secondTokens[0] != firstTokens[0]):
				t.Errorf("%s: the replay's first INSERT bore token %q, want the first attempt's %q", tbl.name, secondTokens, firstTokens[0])
			case !dropped && rows != events+before[tbl.name]:
				t.Errorf("%s holds %d rows for %d events, %d uncommitted before the stop: without the records, or a nonce in them, the replay should be stored again, whole",
					tbl.name, rows, events, before[tbl.name])
			case !dropped && len(secondTokens) > 0 && secondTokens[0] == firstTokens[0]:
				t.Errorf("%s: the replay reused the first attempt's token %q, which no record named", tbl.name, firstTokens[0])
			}
		}
	}
}

// committedOffsets returns, per topic of the group's, an SQL expression of a raw row's
// partition's committed offset (0 for none), over its kafka_partition.
func committedOffsets(ctx context.Context, t *testing.T, brokers []string, group string) map[string]string {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	topics := []string{ingest.TopicToolCalls, ingest.TopicRecruitment}
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		t.Fatal(err)
	}
	parts := map[string][]int{}
	for _, tp := range meta.Topics {
		if tp.Error != nil {
			t.Fatal(tp.Error)
		}
		for _, pt := range tp.Partitions {
			parts[tp.Name] = append(parts[tp.Name], pt.ID)
		}
	}
	resp, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: parts})
	if err != nil || resp.Error != nil {
		t.Fatalf("offsets of group %s: %v %v", group, err, resp.Error)
	}
	out := map[string]string{}
	for _, topic := range topics {
		expr := "multiIf("
		for _, pt := range resp.Topics[topic] {
			if pt.Error != nil {
				t.Fatal(pt.Error)
			}
			expr += fmt.Sprintf("kafka_partition = %d, %d, ", pt.Partition, max(pt.CommittedOffset, 0))
		}
		out[topic] = expr + "0)"
	}
	return out
}
