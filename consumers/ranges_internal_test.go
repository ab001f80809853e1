package consumers

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// deliver runs a reader of partition tp through rp over offsets, recording what it delivered
// on out (closed when done), as partitionReaders does.
func deliver(ctx context.Context, rp *replay, tp topicPartition, offsets []int64, out chan<- int64) {
	defer close(out)
	sent := int64(-1)
	for _, o := range offsets {
		if !rp.wait(ctx, tp, o, sent) {
			return
		}
		out <- o
		sent = o
	}
}

// receive takes what a reader delivers until it has delivered n offsets or is held (nothing
// for 100 ms).
func receive(in <-chan int64, n int) []int64 {
	var got []int64
	for len(got) < n {
		select {
		case o, ok := <-in:
			if !ok {
				return got
			}
			got = append(got, o)
		case <-time.After(100 * time.Millisecond):
			return got
		}
	}
	return got
}

func newReplay(phases ...map[topicPartition]batchRange) *replay {
	return &replay{log: slog.New(slog.DiscardHandler).Warn, phases: phases, reached: map[topicPartition]int64{},
		release: make(chan struct{}), since: time.Now()}
}

// Two recorded batches are replayed one each: while the first is, the reader of a partition it
// holds delivers that range only, and the reader of a partition it does not hold delivers
// nothing; a batch holds the first whole only once it reached each range's last offset; after
// the last recorded batch every partition is read as it comes.
func TestAReplayReadsEachRecordedBatchAloneAndWhole(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, b := topicPartition{"t", 0}, topicPartition{"t", 1}
	rp := newReplay(
		map[topicPartition]batchRange{a: {10, 14}},
		map[topicPartition]batchRange{a: {14, 17}, b: {3, 5}},
	)
	outA, outB := make(chan int64), make(chan int64)
	go deliver(ctx, rp, a, []int64{10, 11, 12, 13, 14, 15, 16, 17, 18}, outA)
	go deliver(ctx, rp, b, []int64{3, 4, 5, 6}, outB)

	if got := receive(outA, 10); len(got) != 4 || got[3] != 13 {
		t.Fatalf("during the first recorded batch partition 0 delivered %v, want 10..13 and then held", got)
	}
	if got := receive(outB, 10); len(got) != 0 {
		t.Fatalf("during the first recorded batch partition 1, which it does not hold, delivered %v", got)
	}
	if rp.complete(map[topicPartition]int64{a: 12}) {
		t.Error("a batch up to 12 holds the range 10..13 whole")
	}
	if !rp.complete(map[topicPartition]int64{a: 13}) {
		t.Error("a batch up to 13 does not hold the range 10..13 whole")
	}
	rp.next()
	gotA, gotB := receive(outA, 10), receive(outB, 10)
	if len(gotA) != 3 || gotA[0] != 14 || len(gotB) != 2 || gotB[1] != 4 {
		t.Fatalf("during the second recorded batch: partition 0 %v (want 14..16), partition 1 %v (want 3, 4)", gotA, gotB)
	}
	if rp.complete(map[topicPartition]int64{a: 16}) {
		t.Error("a batch without partition 1 holds the second recorded batch whole")
	}
	if !rp.complete(map[topicPartition]int64{a: 16, b: 4}) {
		t.Error("a batch holding both ranges does not hold the second recorded batch whole")
	}
	rp.next()
	if rp.active() {
		t.Error("still replaying after the last recorded batch")
	}
	if gotA, gotB := receive(outA, 10), receive(outB, 10); len(gotA) != 2 || len(gotB) != 2 {
		t.Fatalf("after the replay: partition 0 %v, partition 1 %v, want the rest as it comes", gotA, gotB)
	}
}

// A range with a gap at its end (no offset just below it in the log) is whole once the batch
// holds the last offset delivered before it, and a range of which the log holds nothing any
// more is whole with nothing; off lets every reader go on.
func TestAReplayCompletesRangesWithGapsOrLostAndTurnsOff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, b := topicPartition{"t", 0}, topicPartition{"t", 1}
	rp := newReplay(map[topicPartition]batchRange{a: {0, 5}, b: {0, 5}})
	outA, outB := make(chan int64), make(chan int64)
	go deliver(ctx, rp, a, []int64{0, 1, 2, 7, 8}, outA)
	go deliver(ctx, rp, b, []int64{6, 7}, outB)
	if got := receive(outA, 10); len(got) != 3 {
		t.Fatalf("partition 0 delivered %v, want 0..2 and then held at 7", got)
	}
	if got := receive(outB, 10); len(got) != 0 {
		t.Fatalf("partition 1 delivered %v from past its range", got)
	}
	if !rp.complete(map[topicPartition]int64{a: 2}) {
		t.Error("with the gap 3..4 and partition 1's range gone, a batch up to 2 is not whole")
	}
	rp.off()
	if gotA, gotB := receive(outA, 10), receive(outB, 10); len(gotA) != 2 || len(gotB) != 2 {
		t.Fatalf("after off: partition 0 %v, partition 1 %v, want the rest", gotA, gotB)
	}
}

// A recorded batch reads back as written, and malformed records are refused.
func TestBatchRecordsRoundTrip(t *testing.T) {
	ranges := map[topicPartition]batchRange{{"mcp_tool_calls", 3}: {120345, 130000}, {"mcp_recruitment", 0}: {7, 9}}
	got, err := decodeRanges(encodeRanges(ranges))
	if err != nil || len(got) != 2 || got[topicPartition{"mcp_tool_calls", 3}] != (batchRange{120345, 130000}) {
		t.Fatalf("decodeRanges(encodeRanges(%v)) = %v, %v", ranges, got, err)
	}
	if f := batchField(ranges); f != "mcp_recruitment/0/7" {
		t.Errorf("batchField = %q, want the first range's", f)
	}
	for _, bad := range []string{"", "t/1", "t/x/3/4", "t/1/5/4", "t/1/2/3,t/2"} {
		if _, err := decodeRanges(bad); err == nil {
			t.Errorf("decodeRanges(%q): no error", bad)
		}
	}
}

// A raw row's inserted_at is its message's record timestamp to the second, so a replay builds
// the same row; a timestamp a DateTime column cannot hold (none, before 1970, past 2106: a
// producer chooses it) gives the consumer's clock instead, so the row is not refused.
func TestInsertedAtIsTheRecordTimeWhenAColumnCanHoldIt(t *testing.T) {
	now := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	sent := time.Date(2026, 12, 6, 2, 59, 58, 700_000_000, time.FixedZone("x", 3600))
	for _, tc := range []struct {
		name string
		at   time.Time
		want time.Time
	}{
		{"the record time", sent, time.Date(2026, 12, 6, 1, 59, 58, 0, time.UTC)},
		{"none", time.Time{}, now},
		{"before 1970", time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC), now},
		{"past 2106", time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC), now},
	} {
		if got := messageTime(&kafka.Message{Time: tc.at}, now); !got.Equal(tc.want) || got.Location() != time.UTC {
			t.Errorf("%s: inserted_at %v, want %v in UTC", tc.name, got, tc.want)
		}
	}
}
