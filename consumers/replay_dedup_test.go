package consumers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/demo"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
	"github.com/mcpulse/mcpulse/stack"
)

// stopBeforeMarkers is a consumer's ClickHouse connection that stops the consumer (cancel)
// when a batch, its raw rows stored, first writes its rollup markers: a crash after the
// INSERTs ended and before anything was committed.
type stopBeforeMarkers struct {
	driver.Conn
	cancel  context.CancelFunc
	stopped atomic.Bool
}

func (s *stopBeforeMarkers) PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	if strings.Contains(query, "mcpulse.rollup_batches") && s.stopped.CompareAndSwap(false, true) {
		s.cancel()
		return nil, context.Canceled
	}
	return s.Conn.PrepareBatch(ctx, query, opts...)
}

// A batch read again after the consumer stopped between its raw INSERTs and its commit is
// written as the same parts, which a replicated server drops: with the batch's offset ranges
// recorded, a raw table no view reads (mcp_initialize_events) holds each event once on both
// replicas without FINAL, although the next member reads with another batch size; the two
// tables views read (tool_calls, recruitment_events) are stored again, on purpose
// (insert_deduplicate = 0), and hold each event at least once. Then, on the same cluster, a
// second corpus stopped alike with the records deleted before the replay is stored twice: the
// check can fail.
func TestAReplayedBatchIsDroppedByAReplicatedServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s, err := stack.Start(ctx, stack.Config{Replicas: 2})
	stack.SkipOrFail(t, err)
	t.Cleanup(func() { s.Close() })
	cc := s.ClickHouseCluster
	replica := func(i int) driver.Conn {
		conn, err := stores.OpenClickHouse(ctx, cc.Hosts[i].DSN)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	first, second := replica(0), replica(1)
	if _, err := migrations.UpWith(ctx, first, nil, migrations.Options{Cluster: cc.Name, DDLTimeout: demo.EmbeddedDDLTimeout}); err != nil {
		t.Fatal(err)
	}
	rdb, err := stores.OpenRedis(ctx, s.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	pub, err := ingest.NewPublisher(ingest.PublisherConfig{Brokers: s.KafkaBrokers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	h := &harness{t: t, stack: s, ch: first, rdb: rdb, pub: pub}

	const calls, invitations, handshakes = 3000, 200, 1000
	for round, records := range []bool{true, false} {
		tool, prefix := fmt.Sprintf("tool_%d", round), fmt.Sprintf("inv%d-", round)
		var values [][]byte
		for n := 1; n <= calls; n++ {
			values = append(values, toolCall(round*calls+n, fmt.Sprintf("user-%d", n%97), tool))
		}
		h.publish(ingest.TopicToolCalls, values...)
		values = values[:0]
		for i := range invitations {
			values = append(values, invitation(100000+round*invitations+i, person(i), fmt.Sprintf("%s%d", prefix, i), base))
		}
		h.publish(ingest.TopicRecruitment, values...)
		values = values[:0]
		for n := range handshakes {
			values = append(values, envelope(uuidN(500000+round*handshakes+n), ingest.EventInitialize, fmt.Sprintf("user-%d", n%89), base,
				map[string]any{"$mcp_server_name": tool, "$mcp_client_name": "claude-code"}))
		}
		h.publish(ingest.TopicToolCalls, values...)

		runCtx, stop := context.WithCancel(ctx)
		crash := &stopBeforeMarkers{Conn: first, cancel: stop}
		c1 := h.consumer(func(cfg *consumers.Config) { cfg.ClickHouse = crash; cfg.BatchSize = 100000 })
		if err := c1.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		stop()
		if !crash.stopped.Load() {
			t.Fatal("the first member never reached its rollup markers")
		}
		c1.Close()
		stored := h.count("SELECT count() FROM mcpulse.tool_calls WHERE tool_name = ?", tool)
		if stored == 0 {
			t.Fatal("the first member stored no raw row before it stopped: nothing is replayed")
		}
		if !records {
			if err := rdb.Del(ctx, "mcpulse:batch-ranges:{"+consumers.DefaultGroupID+"}").Err(); err != nil {
				t.Fatal(err)
			}
		}
		// Batches far smaller than a partition's handshakes (1,000 over the topic's
		// partitions): read again without the records, they surely cut them into other blocks.
		h.drain(h.consumer(func(cfg *consumers.Config) { cfg.BatchSize = 100 }))

		for i, conn := range []driver.Conn{first, second} {
			for _, q := range []string{"SYSTEM SYNC REPLICA mcpulse.tool_calls", "SYSTEM SYNC REPLICA mcpulse.recruitment_events", "SYSTEM SYNC REPLICA mcpulse.mcp_initialize_events"} {
				if err := conn.Exec(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			for _, tbl := range []struct {
				name, where string
				want        int64
			}{
				{"mcp_initialize_events", "server_name = '" + tool + "'", handshakes},
				{"tool_calls", "tool_name = '" + tool + "'", calls},
				{"recruitment_events", "startsWith(invitation_id, '" + prefix + "')", invitations},
			} {
				dropped := tbl.name == "mcp_initialize_events" // no view reads it
				var rows, events uint64
				if err := conn.QueryRow(ctx, "SELECT count(), uniqExact(uuid) FROM mcpulse."+tbl.name+" WHERE "+tbl.where).Scan(&rows, &events); err != nil {
					t.Fatal(err)
				}
				if int64(events) != tbl.want {
					t.Errorf("replica %d: %s holds %d events, want %d", i+1, tbl.name, events, tbl.want)
				}
				switch {
				case records && dropped && rows != events:
					t.Errorf("replica %d: %s holds %d rows for %d events without FINAL: the replay was stored again", i+1, tbl.name, rows, events)
				case !records && dropped && rows == events:
					t.Errorf("replica %d: without the records the replay of %s was still dropped: the check cannot tell", i+1, tbl.name)
				}
				t.Logf("records %t, replica %d: %s %d rows, %d events (%d tool calls stored before the stop)", records, i+1, tbl.name, rows, events, stored)
			}
		}
	}
}
