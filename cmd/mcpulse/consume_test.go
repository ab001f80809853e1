package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
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
