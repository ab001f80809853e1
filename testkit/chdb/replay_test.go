package chdb_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
	"github.com/mcpulse/mcpulse/testkit/chdb"
)

// What the current engine drops of a replayed insert into a raw table, on a single server
// migrated by migrate up (non_replicated_deduplication_window set, DESIGN.md §5 "Replays dedup
// at insert"): an INSERT whose block is the very block stored before is dropped; but a block
// holding one Kafka partition's rows as before beside other rows is stored again, although
// the rows of that partition make the same part. The current engine hashes each block as
// inserted, before it splits it by partition (18.16's replicated tables hash each part), so
// there the consumer's replays are dropped only when their blocks are cut as before.
func TestTheCurrentEngineDropsARepeatedBlockNotARepeatedPart(t *testing.T) {
	inst := chdb.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cur, err := stores.OpenClickHouse(ctx, inst.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	if _, err := migrations.Up(ctx, cur, nil); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	type call struct {
		id        uuid.UUID
		partition int32
	}
	var p0, p1, p2 []call
	for range 50 {
		p0 = append(p0, call{uuid.New(), 0})
		p1 = append(p1, call{uuid.New(), 1})
		p2 = append(p2, call{uuid.New(), 2})
	}
	insert := func(calls ...[]call) {
		t.Helper()
		b, err := cur.PrepareBatch(ctx, "INSERT INTO mcpulse.tool_calls (uuid, timestamp, distinct_id, tool_name, kafka_partition, kafka_offset, inserted_at)")
		if err != nil {
			t.Fatal(err)
		}
		for _, cs := range calls {
			for i, c := range cs {
				if err := b.Append(c.id, at, "user", "search", c.partition, int64(i), at); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := b.Send(); err != nil {
			t.Fatal(err)
		}
	}
	rows := func() uint64 {
		t.Helper()
		var n uint64
		if err := cur.QueryRow(ctx, "SELECT count() FROM mcpulse.tool_calls").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	insert(p0, p1)
	insert(p0, p1)
	if n := rows(); n != 100 {
		t.Errorf("the same block inserted twice: %d rows, want 100 (the second dropped)", n)
	}
	insert(p0, p2)
	if n := rows(); n != 200 {
		t.Errorf("partition 0's rows again beside partition 2's: %d rows, want 200 (stored again: the block differs); "+
			"if 150, the engine now drops a repeated part and DESIGN.md §5 is out of date", n)
	}
}
