package forward_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/forward"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// The consumers hand each stored audit event to AuditStored; forwarded with SuppressionReset,
// a reset reaches the PostHog project, and a replay of the audit topic (another consumer
// group) forwards it again under the same uuid, so PostHog stores it once.
func TestConsumedResetsAreForwarded(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	r := newReceiver(t, nil)
	p, err := forward.New(r.srv.URL, receiverKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := ingest.AuditEvent{UUID: "0192f2a0-0000-7000-8000-00000000f001", Action: ingest.AuditActionReset, At: at,
		IdentityHash: strings.Repeat("ef", 32), DistinctID: "user-7", Actor: "ops", Reason: "asked to be contacted again",
		DeletedKeys: []string{"a", "b"}, PreviousRecord: json.RawMessage("null")}
	value, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.Publisher.PublishRaw(ctx, ingest.TopicAudit, []byte(a.IdentityHash), value); err != nil {
		t.Fatal(err)
	}
	for _, group := range []string{"forward-test-1", "forward-test-2"} {
		c, err := consumers.New(consumers.Config{Brokers: e.Stack.KafkaBrokers, Redis: e.Redis, ClickHouse: e.ClickHouse,
			DeadLetters: e.Publisher, GroupID: group, BatchWait: 100 * time.Millisecond, IdleToDrain: 500 * time.Millisecond,
			AuditStored: func(audits []*ingest.AuditEvent) {
				for _, a := range audits {
					p.SuppressionReset(a)
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.RunUntilDrained(ctx); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if p.Failed() != 0 || p.Queued() != 2 {
		t.Errorf("queued %d, failed %d; want 2 and 0", p.Queued(), p.Failed())
	}
	got := r.events()
	if len(got) != 2 {
		t.Fatalf("received %d events, want the reset twice (consumed by two groups)", len(got))
	}
	for _, ev := range got {
		if ev.UUID != a.UUID || ev.Event != forward.SuppressionResetEvent || ev.DistinctID != "user-7" ||
			string(ev.Properties["deleted_keys"]) != "2" || string(ev.Properties["previous_record"]) != `"none"` {
			t.Errorf("forwarded reset: %+v", ev)
		}
	}
}
