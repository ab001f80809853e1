package gateway_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/posthog/posthog-go"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/ingest/gateway"
)

// posthog-go sends "uuid":"" unless the caller sets one: an empty uuid is an absent one, and
// gets the uuid a missing one would.
func TestEmptyUUIDCountsAsAbsent(t *testing.T) {
	f := newFixture(t, nil)
	empty, missing := toolCall(1), toolCall(1)
	empty["uuid"] = ""
	delete(missing, "uuid")
	for _, ev := range []map[string]any{empty, missing} {
		if res, r := f.post("/batch/", batchBody(t, "", ev)); res.StatusCode != http.StatusOK || r.Accepted != 1 {
			t.Fatalf("%d %+v, want accepted", res.StatusCode, r)
		}
	}
	msgs := f.messages(ingest.TopicToolCalls)
	if len(msgs) != 2 {
		t.Fatalf("%d messages, want 2", len(msgs))
	}
	a, b := envelopeOf(t, msgs[0]).UUID, envelopeOf(t, msgs[1]).UUID
	if a == "" || a != b {
		t.Errorf("uuids %q and %q, want one derived uuid for both", a, b)
	}
}

// PostHog capture treats every event it receives as its own: the same timestamp-less,
// uuid-less event sent in two requests, or twice in one, is stored as separate events.
func TestSeparateEventsWithoutUUIDOrTimestampStaySeparate(t *testing.T) {
	var now atomic.Int64
	now.Store(recvAt.UnixNano())
	f := newFixture(t, func(c *gateway.Config) { c.Now = func() time.Time { return time.Unix(0, now.Load()).UTC() } })
	bare := func() map[string]any {
		return map[string]any{"event": ingest.EventToolCall, "distinct_id": "user-1", "properties": map[string]any{"$mcp_tool_name": "search"}}
	}
	if res, r := f.post("/batch/", batchBody(t, "", bare())); res.StatusCode != http.StatusOK || r.Accepted != 1 {
		t.Fatalf("%d %+v", res.StatusCode, r)
	}
	now.Add(int64(3 * time.Second))
	if res, r := f.post("/batch/", batchBody(t, "", bare(), bare())); res.StatusCode != http.StatusOK || r.Accepted != 2 || r.Duplicates != 0 {
		t.Fatalf("%d %+v, want both events of the second request accepted", res.StatusCode, r)
	}
	seen := map[string]bool{}
	for _, m := range f.messages(ingest.TopicToolCalls) {
		if env := envelopeOf(t, m); env.Event == ingest.EventToolCall {
			seen[env.UUID] = true
		}
	}
	if len(seen) != 3 {
		t.Errorf("%d distinct uuids for 3 separate events, want 3", len(seen))
	}
}

// A retried batch gets the same uuids whatever its delay and clock correction: the SDK's own
// uuid (posthog-node), or one derived from the event as sent (posthog-go: a timestamp, no uuid),
// so the consumers collapse the copies.
func TestRetriedBatchKeepsItsUUIDs(t *testing.T) {
	var now atomic.Int64
	now.Store(recvAt.UnixNano())
	f := newFixture(t, func(c *gateway.Config) { c.Now = func() time.Time { return time.Unix(0, now.Load()).UTC() } })
	withUUID := toolCallAt(1, recvAt.Add(-time.Hour-time.Second))
	noUUID := toolCallAt(2, recvAt.Add(-time.Hour-time.Second))
	delete(noUUID, "uuid")
	body := batchBody(t, rfc(recvAt.Add(-time.Hour)), withUUID, noUUID) // a clock one hour slow
	var first []string
	for attempt, delay := range []time.Duration{0, 40 * time.Second, 10 * time.Minute} {
		now.Store(recvAt.Add(delay).UnixNano())
		if res, r := f.post("/batch/", body); res.StatusCode != http.StatusOK || r.Accepted != 2 {
			t.Fatalf("attempt %d: %d %+v", attempt, res.StatusCode, r)
		}
	}
	msgs := f.messages(ingest.TopicToolCalls)
	if len(msgs) != 6 {
		t.Fatalf("%d messages, want 6", len(msgs))
	}
	for i, m := range msgs {
		id := envelopeOf(t, m).UUID
		if i < 2 {
			first = append(first, id)
			continue
		}
		if id != first[i%2] {
			t.Errorf("attempt %d, event %d: uuid %s, want %s as on the first attempt", i/2, i%2, id, first[i%2])
		}
	}
	if first[0] != uuidN(1) {
		t.Errorf("the SDK's uuid was replaced: %s", first[0])
	}
}

// posthog-go on its default configuration (only the endpoint set, no Uuid on any message):
// every event is accepted and published exactly once, with distinct uuids.
func TestPostHogGoDefaultConfig(t *testing.T) {
	f := newFixture(t, nil)
	failures := &countingCallback{}
	client, err := posthog.NewWithConfig(testKey, posthog.Config{Endpoint: f.srv.URL, Callback: failures})
	if err != nil {
		t.Fatal(err)
	}
	const calls = 30
	for i := range calls {
		enqueue(t, client, posthog.Capture{DistinctId: fmt.Sprintf("go-user-%d", i%3), Event: ingest.EventToolCall,
			Properties: posthog.NewProperties().Set("$mcp_tool_name", "search").Set("$mcp_is_error", false)})
	}
	enqueue(t, client, posthog.Capture{DistinctId: "go-user-1", Event: ingest.EventInvitationSent,
		Properties: posthog.NewProperties().Set("campaign_id", "c").Set("invitation_id", "i-1").Set("feature_flag", "mcp-interviews")})
	enqueue(t, client, posthog.Identify{DistinctId: "go-user-1", Properties: posthog.NewProperties().Set("plan", "test")})
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	if n := failures.failed(); n != 0 {
		t.Fatalf("posthog-go reported %d failed messages", n)
	}
	seen := map[string]bool{}
	for _, m := range f.messages(ingest.TopicToolCalls) {
		if env := envelopeOf(t, m); env.Event == ingest.EventToolCall {
			seen[env.UUID] = true
		}
	}
	if len(seen) != calls {
		t.Errorf("%d distinct tool-call uuids published, want %d", len(seen), calls)
	}
	if n := len(f.messages(ingest.TopicRecruitment)); n != 1 {
		t.Errorf("%d recruitment messages, want 1", n)
	}
}
