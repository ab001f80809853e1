package jobs

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/schemacheck"
)

// Summaries reach a PostHog capture endpoint through posthog-go with the run id as the event
// uuid and only summary properties; Close flushes them.
func TestSchemaCheckSummariesReachPostHog(t *testing.T) {
	var (
		mu     sync.Mutex
		events []map[string]any
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		var batch struct {
			Batch []map[string]any `json:"batch"`
		}
		if err := json.NewDecoder(body).Decode(&batch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		events = append(events, batch.Batch...)
		mu.Unlock()
		w.Write([]byte(`{"status":1}`))
	}))
	defer srv.Close()

	p, err := NewPostHogSummaries(srv.URL, "phc_test", nil)
	if err != nil {
		t.Fatal(err)
	}
	started := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p.Send(Run{ID: "0192f2a0-0000-7000-8000-000000000001", Server: "posthog", StartedAt: started, Duration: time.Second,
		Report: &schemacheck.Report{Tools: 40, Oversized: 2, MaxOversized: 44, NestedDescriptionCoverage: 0.6667, Violations: []string{}}})
	p.Send(Run{ID: "0192f2a0-0000-7000-8000-000000000002", Server: "down", StartedAt: started, Err: errors.New("connection refused")})
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 2 {
		t.Fatalf("PostHog received %d events, want 2: %v", len(events), events)
	}
	for _, e := range events {
		props, _ := e["properties"].(map[string]any)
		if e["event"] != SchemaCheckEvent || !strings.HasPrefix(e["uuid"].(string), "0192f2a0-") || props["run_id"] != e["uuid"] {
			t.Errorf("event %v: want %q with the run id as uuid", e, SchemaCheckEvent)
		}
		if _, ok := props["per_tool"]; ok {
			t.Errorf("summary %v carries per-tool results: only summary figures may be sent", props)
		}
		switch props["server"] {
		case "posthog":
			if props["reached"] != true || props["tools"] != float64(40) || props["oversized"] != float64(2) || props["ok"] != true {
				t.Errorf("summary of the checked run %v, want reached, 40 tools, 2 oversized, ok", props)
			}
		case "down":
			if props["reached"] != false || props["error"] != "connection refused" || props["tools"] != nil {
				t.Errorf("summary of the failed run %v, want reached false, the error and no figures", props)
			}
		default:
			t.Errorf("summary for unexpected server %v", props["server"])
		}
	}
	if p.Failed() != 0 {
		t.Errorf("%d failures counted, want 0", p.Failed())
	}
}
