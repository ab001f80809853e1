package consumers

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestFillBoundsBatchBytes: a batch closes at the message that brings its keys and values to
// BatchBytes, or at BatchSize messages, whichever comes first; the messages after it stay
// queued for the next batch.
func TestFillBoundsBatchBytes(t *testing.T) {
	queue := func(n int) chan kafka.Message {
		msgs := make(chan kafka.Message, n)
		for range n {
			msgs <- kafka.Message{Key: []byte("k"), Value: bytes.Repeat([]byte("v"), 999)}
		}
		return msgs
	}
	for _, tc := range []struct {
		name              string
		batchSize, nbytes int
		want              int
	}{
		{"bytes first", 100, 3500, 4},
		{"bytes exactly", 100, 3000, 3},
		{"count first", 2, 1 << 20, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Consumer{cfg: Config{BatchSize: tc.batchSize, BatchBytes: tc.nbytes, BatchWait: 5 * time.Second}}
			for _, hint := range []int{0, 1, 50} { // the room hint changes no batch
				msgs := queue(10)
				before := time.Now()
				got, cut, first := c.fill(context.Background(), msgs, hint)
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
	if got, cut, first := c.fill(context.Background(), make(chan kafka.Message), 0); len(got) != 0 || !cut || !first.IsZero() {
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
