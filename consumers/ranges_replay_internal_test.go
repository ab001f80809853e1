package consumers

import (
	"context"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/stack"
)

// A recorded batch whose partitions a rebalance split between members is replayed whole for
// each: the member owning a part of it replays that part, records it and, once committed,
// deletes its record, which is named by the batch's first range and so may be the record it
// replayed; the other partitions' ranges are kept for their owner, who replays them although
// the rest of the record is committed. (Read as they came instead, those would be stored
// again as other parts.)
func TestARecordReplayedInPartByOneMemberIsReplayedForTheRestByAnother(t *testing.T) {
	s := stack.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb, err := stores.OpenRedis(ctx, s.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	c := &Consumer{cfg: Config{Redis: rdb, GroupID: "split", Logger: slog.New(slog.DiscardHandler)}}
	topic := ingest.TopicToolCalls
	a, b, other := topicPartition{topic, 0}, topicPartition{topic, 1}, topicPartition{topic, 2}
	c.recordRanges(ctx, map[topicPartition]batchRange{a: {10, 20}, b: {5, 9}}, "")
	c.recordRanges(ctx, map[topicPartition]batchRange{other: {0, 4}}, "") // another batch, untouched

	phases := func(rp *replay) []map[topicPartition]batchRange {
		if rp == nil {
			return nil
		}
		return rp.phases
	}
	// The first member owns a (the record's first range) only.
	rp := c.loadReplay(ctx, map[string][]kafka.PartitionAssignment{topic: {{ID: 0, Offset: 10}}})
	if got := phases(rp); len(got) != 1 || !maps.Equal(got[0], map[topicPartition]batchRange{a: {10, 20}}) {
		t.Fatalf("the member owning partition 0 replays %v, want its range [10, 20) alone", got)
	}
	// It replays and commits a's range, as closeOpen and outcome do.
	replayed := map[topicPartition]batchRange{a: {10, 20}}
	c.recordRanges(ctx, replayed, "")
	c.committedRanges(replayed)
	c.recordRanges(ctx, map[topicPartition]batchRange{a: {20, 25}}, "") // the next batch's record deletes it

	// The next member owns both: a committed at 20 (its next batch's record waits at 20), b at 5.
	rp = c.loadReplay(ctx, map[string][]kafka.PartitionAssignment{topic: {{ID: 0, Offset: 20}, {ID: 1, Offset: 5}}})
	got := phases(rp)
	if len(got) != 2 || !containsPhase(got, map[topicPartition]batchRange{b: {5, 9}}) || !containsPhase(got, map[topicPartition]batchRange{a: {20, 25}}) {
		t.Errorf("the member owning partitions 0 and 1 replays %v, want partition 1's range [5, 9) and partition 0's next batch [20, 25), each alone", got)
	}
	left, err := rdb.HGetAll(ctx, rangesKey("split")).Result()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := left[batchField(map[topicPartition]batchRange{other: {0, 4}})]; !ok {
		t.Errorf("the record of another batch was lost: %v", left)
	}
}

// containsPhase reports whether phases holds want as one phase.
func containsPhase(phases []map[topicPartition]batchRange, want map[topicPartition]batchRange) bool {
	for _, p := range phases {
		if maps.Equal(p, want) {
			return true
		}
	}
	return false
}
