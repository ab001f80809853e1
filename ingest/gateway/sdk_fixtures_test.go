package gateway_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/ingest/gateway"
)

// recordedRequest is one line of testdata/sdk/requests.jsonl (see its README).
type recordedRequest struct {
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
}

func recordedRequests(t *testing.T) []recordedRequest {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "sdk", "requests.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []recordedRequest
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r recordedRequest
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no recorded requests")
	}
	return out
}

// TestRecordedSDKRequestsAreAcceptedWhole replays what @posthog/mcp really sent (recorded bodies,
// gzipped again as posthog-node sends them) and checks every event is acknowledged exactly once,
// with the SDK's own uuid and timestamp untouched (its clock is the gateway's here).
func TestRecordedSDKRequestsAreAcceptedWhole(t *testing.T) {
	reqs := recordedRequests(t)
	var first struct {
		SentAt string `json:"sent_at"`
	}
	if err := json.Unmarshal(reqs[0].Body, &first); err != nil {
		t.Fatal(err)
	}
	sentAt, err := time.Parse(time.RFC3339Nano, first.SentAt)
	if err != nil {
		t.Fatalf("recorded sent_at %q: %v", first.SentAt, err)
	}
	f := newFixture(t, func(c *gateway.Config) {
		c.APIKeys = []string{"phc_fixture_project_key_0123456789"}
		c.Now = func() time.Time { return sentAt.Add(20 * time.Millisecond) }
	})
	want := map[string]map[string]string{} // event name -> uuid -> timestamp
	toolCalls := 0
	for i, r := range reqs {
		var body struct {
			Batch []struct {
				Event     string `json:"event"`
				UUID      string `json:"uuid"`
				Timestamp string `json:"timestamp"`
			} `json:"batch"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		res, resp := f.post(r.URL, gzipBytes(t, r.Body), "Content-Encoding", r.Headers["content-encoding"], "Content-Type", r.Headers["content-type"])
		if res.StatusCode != http.StatusOK || resp.Accepted+resp.Unrouted != len(body.Batch) || resp.Duplicates != 0 {
			t.Fatalf("request %d: %d %+v, want 200 with all %d events acknowledged", i, res.StatusCode, resp, len(body.Batch))
		}
		for _, e := range body.Batch {
			if want[e.Event] == nil {
				want[e.Event] = map[string]string{}
			}
			want[e.Event][e.UUID] = e.Timestamp
			if e.Event == ingest.EventToolCall {
				toolCalls++
			}
		}
	}
	for _, name := range []string{"$mcp_initialize", "$mcp_tools_list", ingest.EventToolCall, "$exception"} {
		if len(want[name]) == 0 {
			t.Errorf("the recording has no %s event", name)
		}
	}
	// Every kind the SDK sends goes to the tool-call topic, keyed by distinct_id (its session).
	var msgs []kafka.Message
	all := f.messages(ingest.TopicToolCalls)
	for _, m := range all {
		if env := envelopeOf(t, m); env.Event == ingest.EventToolCall {
			msgs = append(msgs, m)
		} else if _, ok := want[env.Event][env.UUID]; !ok {
			t.Errorf("published %s %s is not one the SDK sent", env.Event, env.UUID)
		}
	}
	if len(msgs) != toolCalls {
		t.Fatalf("%d tool calls published, want %d", len(msgs), toolCalls)
	}
	if events := len(want["$mcp_initialize"]) + len(want["$mcp_tools_list"]) + len(want["$exception"]) + toolCalls; len(all) != events {
		t.Errorf("%d messages on %s, want the %d SDK events", len(all), ingest.TopicToolCalls, events)
	}
	for _, m := range msgs {
		env := envelopeOf(t, m)
		ts, ok := want[ingest.EventToolCall][env.UUID]
		if !ok {
			t.Errorf("published uuid %s is not one the SDK sent", env.UUID)
			continue
		}
		if got, _ := time.Parse(time.RFC3339Nano, env.Timestamp); !got.Equal(mustTime(t, ts)) {
			t.Errorf("%s: timestamp %s, want the SDK's %s", env.UUID, env.Timestamp, ts)
		}
		if !bytes.Equal(env.Properties["$lib"], []byte(`"posthog-node-mcp"`)) {
			t.Errorf("%s: $lib %s", env.UUID, env.Properties["$lib"])
		}
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}
