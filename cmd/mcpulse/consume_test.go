package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/consumers"
)

// The consumer's last log line gives its stored counts per kind as key=value pairs (text) or an
// object (JSON), not Go's map syntax.
func TestConsumerStoppedLogsStoredCountsPerKind(t *testing.T) {
	stored := map[string]int64{"tool_call": 7880, "response": 679, "other": 0}
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("consumer stopped", storedByKind(stored))
	slog.New(slog.NewJSONHandler(&js, nil)).Info("consumer stopped", storedByKind(stored))
	if got := text.String(); strings.Contains(got, "map[") || !strings.Contains(got, "stored.other=0 stored.response=679 stored.tool_call=7880") {
		t.Errorf("text log: %s", got)
	}
	if got := js.String(); !strings.Contains(got, `"stored":{"other":0,"response":679,"tool_call":7880}`) {
		t.Errorf("JSON log: %s", got)
	}
}

// consume's --batch-max-age, parsed by the real command, reaches the consumer as the bound it
// names: the flag's default is consumers.DefaultBatchMaxAge, 0 is consumers.NoBatchMaxAge (a
// Config's 0 would mean the default instead), and any other value is kept as given.
func TestConsumeBatchMaxAgeFlagBecomesTheConsumersBound(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, consumers.DefaultBatchMaxAge},
		{[]string{"--batch-max-age", "0"}, consumers.NoBatchMaxAge},
		{[]string{"--batch-max-age", "0s"}, consumers.NoBatchMaxAge},
		{[]string{"--batch-max-age", "250ms"}, 250 * time.Millisecond},
	} {
		cmd, rest, err := newRootCmd().Find(append([]string{"consume"}, tc.args...))
		if err != nil || cmd.Name() != "consume" {
			t.Fatalf("finding consume: %v, %v", cmd, err)
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		maxAge, err := cmd.Flags().GetDuration("batch-max-age")
		if err != nil {
			t.Fatal(err)
		}
		cfg := consumers.Config{BatchMaxAge: maxAge}
		if err := batchBoundsFromFlags(&cfg); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if cfg.BatchMaxAge != tc.want {
			t.Errorf("%q: BatchMaxAge %v, want %v", tc.args, cfg.BatchMaxAge, tc.want)
		}
	}
}
