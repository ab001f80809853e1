package consumers

import (
	"context"
	"testing"
	"time"
)

// deliver runs a reader through gate g over offsets, recording what it delivered on out
// (closed when done), as partitionReaders does.
func deliver(ctx context.Context, g *rangeGate, offsets []int64, out chan<- int64) {
	defer close(out)
	sent := int64(-1)
	for _, o := range offsets {
		if !g.wait(ctx, o, sent) {
			return
		}
		out <- o
		sent = o
	}
}

// receive takes what the reader delivers until it has delivered n more offsets or is held
// (nothing for 100 ms).
func receive(t *testing.T, in <-chan int64, n int) []int64 {
	t.Helper()
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

// A partition with two recorded ranges from its committed offset is read range by range: its
// reader holds at each range's end until the batch holding the range closed (next), a batch
// holds a range whole only once it reached the range's last offset, and after the last range
// the partition is read as it comes.
func TestAGateHoldsTheReaderAtEachRecordedRangesEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g := newRangeGate(10, []int64{14, 17})
	out := make(chan int64)
	go deliver(ctx, g, []int64{10, 11, 12, 13, 14, 15, 16, 17, 18}, out)

	if got := receive(t, out, 10); len(got) != 4 || got[3] != 13 {
		t.Fatalf("before the first range's end the reader delivered %v, want 10..13 and then held", got)
	}
	if held, whole := g.holds(10, 12); !held || whole {
		t.Errorf("a batch from 10 to 12: holds = %v, %v, want the range, not whole", held, whole)
	}
	if held, whole := g.holds(10, 13); !held || !whole {
		t.Errorf("a batch from 10 to 13: holds = %v, %v, want the range whole", held, whole)
	}
	if held, _ := g.holds(11, 13); held {
		t.Error("a batch beginning inside the range holds it")
	}
	g.next()
	if got := receive(t, out, 10); len(got) != 3 || got[0] != 14 || got[2] != 16 {
		t.Fatalf("after the first batch closed the reader delivered %v, want 14..16 and then held", got)
	}
	if held, whole := g.holds(14, 16); !held || !whole {
		t.Errorf("the second range: holds = %v, %v, want it whole", held, whole)
	}
	g.next()
	if got := receive(t, out, 10); len(got) != 2 || got[1] != 18 {
		t.Fatalf("after the last range the reader delivered %v, want 17 and 18 as they come", got)
	}
	if held, _ := g.holds(17, 18); held {
		t.Error("after the last range a batch is still held to one")
	}
}

// A range with a gap at its end (the log has no offset just below it) is whole once the batch
// holds the last offset the reader delivered before it; a range of which the log holds nothing
// any more is skipped, not waited for.
func TestAGateCompletesARangeWithAGapAndSkipsOneTheLogLost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g := newRangeGate(0, []int64{5, 9})
	out := make(chan int64)
	go deliver(ctx, g, []int64{0, 1, 2, 7, 8, 9}, out)
	if got := receive(t, out, 10); len(got) != 3 {
		t.Fatalf("delivered %v, want 0..2 and then held at 7", got)
	}
	if held, whole := g.holds(0, 2); !held || !whole {
		t.Errorf("with the gap 3..4: holds(0, 2) = %v, %v, want whole", held, whole)
	}
	g.next()
	if got := receive(t, out, 10); len(got) != 2 || got[0] != 7 {
		t.Fatalf("delivered %v, want 7 and 8", got)
	}

	lost := newRangeGate(0, []int64{5, 9})
	out = make(chan int64)
	go deliver(ctx, lost, []int64{6, 7, 8, 9, 10}, out)
	if got := receive(t, out, 10); len(got) != 3 || got[0] != 6 || got[2] != 8 {
		t.Fatalf("the log beginning at 6: delivered %v, want 6..8 (the range 5..8), held at 9", got)
	}
	if held, whole := lost.holds(6, 8); !held || !whole {
		t.Errorf("holds(6, 8) = %v, %v, want the range 5..8, whole", held, whole)
	}
	lost.off()
	if got := receive(t, out, 10); len(got) != 2 {
		t.Fatalf("after off the reader delivered %v, want 9 and 10", got)
	}
}

// A recorded range's field names its partition and first offset, and reads back as written.
func TestRangeFieldsRoundTrip(t *testing.T) {
	tp := topicPartition{"mcp_tool_calls", 3}
	f := rangeField(tp, 120345)
	got, start, err := parseRangeField(f)
	if err != nil || got != tp || start != 120345 {
		t.Fatalf("parseRangeField(%q) = %v, %d, %v", f, got, start, err)
	}
	for _, bad := range []string{"", "t/1", "t/x/3", "t/1/y", "/1/2"} {
		if _, _, err := parseRangeField(bad); err == nil {
			t.Errorf("parseRangeField(%q): no error", bad)
		}
	}
}
