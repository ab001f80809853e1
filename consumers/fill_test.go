package consumers

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestFillBoundsBatchBytes: a batch closes at the message that brings its keys and values
// (and MessageOverhead each) to BatchBytes, or at BatchSize messages, whichever comes first; the messages after it stay
// queued for the next batch.
func TestFillBoundsBatchBytes(t *testing.T) {
	queue := func(n int) chan kafka.Message {
		msgs := make(chan kafka.Message, n)
		for range n {
			msgs <- kafka.Message{Key: []byte("k"), Value: bytes.Repeat([]byte("v"), 999)}
		}
		return msgs
	}
	const perMessage = 1000 + MessageOverhead // what each message counts
	for _, tc := range []struct {
		name              string
		batchSize, nbytes int
		want              int
	}{
		{"bytes first", 100, 3*perMessage + perMessage/2, 4},
		{"bytes exactly", 100, 3 * perMessage, 3},
		{"count first", 2, 1 << 20, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Consumer{cfg: Config{BatchSize: tc.batchSize, BatchBytes: tc.nbytes, BatchWait: 5 * time.Second}}
			for _, hint := range []int{0, 1, 50} { // the room hint changes no batch
				msgs := queue(10)
				before := time.Now()
				got, cut, first := c.fill(context.Background(), msgs, hint, nil)
				if len(got) != tc.want {
					t.Errorf("hint %d: batch of %d messages of 1,000 bytes with BatchSize %d, BatchBytes %d: want %d", hint, len(got), tc.batchSize, tc.nbytes, tc.want)
				}
				if cut {
					t.Errorf("hint %d: a batch that reached its bound is reported cut short", hint)
				}
				if first.Before(before) || first.After(time.Now()) {
					t.Errorf("hint %d: first message read at %v, not during the fill (from %v)", hint, first, before)
				}
				if left := len(msgs); left != 10-tc.want {
					t.Errorf("hint %d: %d messages left queued, want %d", hint, left, 10-tc.want)
				}
			}
		})
	}

	// Nothing arrives: the fill is cut at BatchWait with no first message.
	c := &Consumer{cfg: Config{BatchSize: 10, BatchBytes: 1 << 20, BatchWait: 10 * time.Millisecond}}
	if got, cut, first := c.fill(context.Background(), make(chan kafka.Message), 0, nil); len(got) != 0 || !cut || !first.IsZero() {
		t.Errorf("an empty fill returned %d messages, cut %v, first read %v; want none, cut, zero", len(got), cut, first)
	}

	var cfg Config
	cfg.setDefaults()
	if cfg.BatchBytes != DefaultBatchBytes {
		t.Errorf("default BatchBytes %d, want %d", cfg.BatchBytes, DefaultBatchBytes)
	}
	if cfg.BatchMaxAge != DefaultBatchMaxAge {
		t.Errorf("default BatchMaxAge %v, want %v", cfg.BatchMaxAge, DefaultBatchMaxAge)
	}
	cfg.BatchBytes = -1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "BatchBytes") {
		t.Errorf("Validate accepted BatchBytes -1: %v", err)
	}
	cfg.BatchBytes, cfg.BatchMaxAge = DefaultBatchBytes, -time.Second
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "BatchMaxAge") {
		t.Errorf("Validate accepted BatchMaxAge -1s: %v", err)
	}
}

// TestBatchOpenedDeadline: a chunk's fill ends at the open batch's age bound unless that had
// passed when the fill started, at the bound of the batch the chunk opens when none is open,
// and never without a bound.
func TestBatchOpenedDeadline(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	first := start.Add(100 * time.Millisecond)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	for _, tc := range []struct {
		name   string
		opened time.Time // zero: no batch open
		maxAge time.Duration
		first  time.Time
		want   time.Time
	}{
		{"open batch, bound ahead", at(-300 * time.Millisecond), time.Second, first, at(700 * time.Millisecond)},
		{"open batch, bound ahead, no message yet", at(-300 * time.Millisecond), time.Second, time.Time{}, at(700 * time.Millisecond)},
		{"open batch past its bound (kept open, catching up)", at(-2 * time.Second), time.Second, first, time.Time{}},
		{"open batch past its bound, no message yet", at(-2 * time.Second), time.Second, time.Time{}, time.Time{}},
		{"no batch open", time.Time{}, time.Second, first, first.Add(time.Second)},
		{"no batch open, no message yet", time.Time{}, time.Second, time.Time{}, time.Time{}},
		{"no bound", at(-300 * time.Millisecond), NoBatchMaxAge, first, time.Time{}},
		{"zero bound", at(-300 * time.Millisecond), 0, first, time.Time{}},
	} {
		o := newBatchOpened()
		o.set(tc.opened)
		if got := o.deadline(tc.maxAge, start, tc.first); !got.Equal(tc.want) {
			t.Errorf("%s: deadline %v, want %v", tc.name, got, tc.want)
		}
	}
	var none *batchOpened
	if got := none.deadline(time.Second, start, first); !got.IsZero() {
		t.Errorf("nil batchOpened (no age bound): deadline %v, want none", got)
	}
}

// TestFillEndsAtTheOpenBatchsMaxAge: while messages keep coming, a chunk whose byte bound and
// wait lie far ahead ends, uncut, once the batch it joins reaches BatchMaxAge, and not at the
// chunk's own age bound later, including when the store stage opens that batch during the
// fill; an empty fill ends at the bound too, uncut; a bound that had passed when the fill
// started (a batch kept open while catching up) ends nothing.
func TestFillEndsAtTheOpenBatchsMaxAge(t *testing.T) {
	// maxAge is long, so that a fill that missed the open batch's bound and ended at its own
	// (its first message + maxAge) shows, however slow the machine.
	const maxAge = 10 * time.Second
	c := &Consumer{cfg: Config{BatchSize: 1 << 20, BatchBytes: 1 << 30, BatchWait: time.Minute, BatchMaxAge: maxAge}}
	// stream sends a message every millisecond until its stop is called.
	stream := func() (chan kafka.Message, func()) {
		msgs, stop, done := make(chan kafka.Message), make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				select {
				case msgs <- kafka.Message{Value: []byte("v")}:
				case <-stop:
					return
				}
			}
		}()
		return msgs, func() { close(stop); <-done }
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // the test's own bound
	defer cancel()
	// endedAtBound checks that a fill ended at the batch's bound, opened+maxAge, and well
	// before the chunk's own.
	endedAtBound := func(t *testing.T, opened time.Time) {
		t.Helper()
		if age := time.Since(opened); age < maxAge || age >= maxAge+3*time.Second {
			t.Errorf("fill ended when the open batch was %v old; want from %v, before the chunk's own bound", age, maxAge)
		}
	}

	t.Run("open batch", func(t *testing.T) {
		msgs, stop := stream()
		defer stop()
		o := newBatchOpened()
		opened := time.Now().Add(-maxAge + 300*time.Millisecond)
		o.set(opened)
		got, cut, _ := c.fill(ctx, msgs, 0, o)
		if cut || len(got) == 0 || ctx.Err() != nil {
			t.Fatalf("fill returned %d messages, cut %v (ctx %v); want messages, uncut, at the batch's age bound", len(got), cut, ctx.Err())
		}
		endedAtBound(t, opened)
	})

	t.Run("batch opened during the fill", func(t *testing.T) {
		msgs, stop := stream()
		defer stop()
		o := newBatchOpened()
		opened := time.Now().Add(-maxAge + 300*time.Millisecond)
		go func() {
			time.Sleep(50 * time.Millisecond)
			o.set(opened) // the store stage added the chunk before: the batch opened earlier
		}()
		got, cut, _ := c.fill(ctx, msgs, 0, o)
		if cut || len(got) == 0 || ctx.Err() != nil {
			t.Fatalf("fill returned %d messages, cut %v (ctx %v); want messages, uncut, at the bound of the batch opened during it", len(got), cut, ctx.Err())
		}
		endedAtBound(t, opened)
	})

	t.Run("empty at the bound", func(t *testing.T) {
		o := newBatchOpened()
		opened := time.Now().Add(-maxAge + time.Second)
		o.set(opened)
		got, cut, first := c.fill(ctx, make(chan kafka.Message), 0, o)
		if len(got) != 0 || cut || !first.IsZero() || ctx.Err() != nil {
			t.Errorf("an empty fill at the bound returned %d messages, cut %v, first %v (ctx %v); want none, uncut", len(got), cut, first, ctx.Err())
		}
		endedAtBound(t, opened)
	})

	t.Run("bound passed before the fill", func(t *testing.T) {
		queued := make(chan kafka.Message, 50)
		for range 50 {
			queued <- kafka.Message{Value: []byte("v")}
		}
		o := newBatchOpened()
		o.set(time.Now().Add(-time.Hour))
		c := &Consumer{cfg: c.cfg}
		c.cfg.BatchSize = 50
		got, cut, _ := c.fill(ctx, queued, 0, o)
		if len(got) != 50 || cut {
			t.Errorf("a fill behind a batch kept open past its bound returned %d messages, cut %v; want all 50 queued, uncut", len(got), cut)
		}
	})
}
