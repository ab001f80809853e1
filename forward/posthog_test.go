package forward_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/mcpulse/mcpulse/forward"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/ingest/gateway"
	"github.com/mcpulse/mcpulse/schemacheck"
)

const receiverKey = "phc_receiver_project_key_0123"

// receiver is an mcpulse gateway on kfake standing in for the PostHog project: every event
// mcpulse forwards is acknowledged by it as unrouted and handed to its OnUnrouted hook.
type receiver struct {
	gw  *gateway.Gateway
	srv *httptest.Server
	mu  sync.Mutex
	got []ingest.Envelope
}

func newReceiver(t *testing.T, onUnrouted func([]ingest.Envelope)) *receiver {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, ingest.AllTopics...), kfake.DefaultNumPartitions(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	log := slog.New(slog.DiscardHandler)
	pub, err := ingest.NewPublisher(ingest.PublisherConfig{Brokers: c.ListenAddrs(), WriteTimeout: time.Second, CloseTimeout: time.Second, MaxAttempts: 2, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	r := &receiver{}
	r.gw, err = gateway.New(gateway.Config{APIKeys: []string{receiverKey}, Brokers: c.ListenAddrs(), KafkaTimeout: 3 * time.Second, Logger: log,
		OnUnrouted: func(evs []ingest.Envelope) {
			r.mu.Lock()
			r.got = append(r.got, evs...)
			r.mu.Unlock()
			if onUnrouted != nil {
				onUnrouted(evs)
			}
		}}, pub)
	if err != nil {
		t.Fatal(err)
	}
	r.srv = httptest.NewServer(r.gw.Handler())
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) events() []ingest.Envelope {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ingest.Envelope(nil), r.got...)
}

// unroutedMetric reads mcpulse_gateway_events_unrouted_total.
func (r *receiver) unroutedMetric(t *testing.T) float64 {
	t.Helper()
	mfs, err := r.gw.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "mcpulse_gateway_events_unrouted_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no unrouted metric")
	return 0
}

var at = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func raw(v any) json.RawMessage {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}

// mcpulse's own posthog-go forwarding is received by a gateway: a suppression reset, a schema
// check summary and two unhandled events arrive exactly once, with their uuids and names, and
// nothing failed.
func TestForwardingReceivedByGateway(t *testing.T) {
	r := newReceiver(t, nil)
	p, err := forward.New(r.srv.URL, receiverKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	hash := strings.Repeat("ab", 32)
	reset := &ingest.AuditEvent{UUID: "0192f2a0-0000-7000-8000-00000000a001", Action: ingest.AuditActionReset, At: at,
		IdentityHash: hash, Actor: "ops@example.com", Reason: "user asked", DeletedKeys: []string{"k1", "k2", "k3"},
		PreviousRecord: raw(map[string]any{"state": "declined", "secret_note": "do not forward"})}
	p.SuppressionReset(reset)
	p.SchemaCheck(forward.SchemaCheck{RunID: "0192f2a0-0000-7000-8000-00000000b001", Server: "posthog", StartedAt: at, Duration: 1500 * time.Millisecond,
		Source: "traffic", ServerVersion: "1.4.0",
		Report: &schemacheck.Report{Tools: 40, Oversized: 2, MaxOversized: 44, Violations: []string{"oversized: 2 > 1"},
			NameRule: schemacheck.NameRuleMCP, TruncatedTools: 3, PerTool: []schemacheck.ToolResult{{}}}})
	identify := ingest.Envelope{UUID: "0192f2a0-0000-7000-8000-00000000c001", Event: "$groupidentify", DistinctID: "user-1",
		Timestamp: "2026-11-29T11:00:00.5Z", Properties: map[string]json.RawMessage{"$set": raw(map[string]any{"plan": "pro"})}}
	listed := ingest.Envelope{UUID: "not-a-uuid", Event: "$screen", DistinctID: "user-2",
		Timestamp: "2026-11-29T11:00:01Z", Properties: map[string]json.RawMessage{"tools": raw(12)}}
	p.Unhandled(identify, listed)

	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Close did not return")
	}
	if p.Failed() != 0 {
		t.Errorf("Failed() = %d, want 0", p.Failed())
	}

	listedUUID := gateway.DeriveUUID(&listed).String()
	want := map[string]string{ // uuid → event
		reset.UUID:                             forward.SuppressionResetEvent,
		"0192f2a0-0000-7000-8000-00000000b001": forward.SchemaCheckEvent,
		identify.UUID:                          "$groupidentify",
		listedUUID:                             "$screen",
	}
	got := r.events()
	if len(got) != len(want) {
		t.Fatalf("receiver acknowledged %d events, want %d: %+v", len(got), len(want), got)
	}
	if m := r.unroutedMetric(t); m != float64(len(want)) {
		t.Errorf("receiver's unrouted counter = %v, want %d", m, len(want))
	}
	byUUID := map[string]ingest.Envelope{}
	for _, e := range got {
		if want[e.UUID] != e.Event {
			t.Errorf("unexpected event %s %q", e.UUID, e.Event)
		}
		byUUID[e.UUID] = e
	}

	rs := byUUID[reset.UUID]
	if rs.DistinctID != "identity:"+hash || rs.Timestamp != "2026-11-29T12:00:00Z" {
		t.Errorf("reset: distinct_id %q timestamp %q", rs.DistinctID, rs.Timestamp)
	}
	for k, v := range map[string]string{"identity_hash": `"` + hash + `"`, "actor": `"ops@example.com"`, "reason": `"user asked"`,
		"deleted_keys": "3", "previous_record": `"present"`} {
		if string(rs.Properties[k]) != v {
			t.Errorf("reset property %s = %s, want %s", k, rs.Properties[k], v)
		}
	}
	for k, v := range rs.Properties {
		if bytes.Contains(v, []byte("declined")) || bytes.Contains(v, []byte("secret_note")) || k == "deleted_key_names" {
			t.Errorf("reset forwards the previous record's content: %s = %s", k, v)
		}
	}

	sc := byUUID["0192f2a0-0000-7000-8000-00000000b001"]
	if sc.DistinctID != "mcpulse-schemacheck:posthog" || string(sc.Properties["tools"]) != "40" || string(sc.Properties["ok"]) != "false" ||
		string(sc.Properties["source"]) != `"traffic"` || string(sc.Properties["server_version"]) != `"1.4.0"` ||
		string(sc.Properties["name_rule"]) != `"mcp"` || string(sc.Properties["truncated_tools"]) != "3" {
		t.Errorf("schema check: %+v", sc)
	}
	if _, ok := sc.Properties["per_tool"]; ok {
		t.Error("schema check forwards per-tool results")
	}

	id := byUUID[identify.UUID]
	if id.DistinctID != "user-1" || id.Timestamp != "2026-11-29T11:00:00.5Z" || string(id.Properties["$set"]) != `{"plan":"pro"}` {
		t.Errorf("$groupidentify not forwarded unchanged: %+v", id)
	}
	ls := byUUID[listedUUID]
	if ls.DistinctID != "user-2" || ls.Timestamp != "2026-11-29T11:00:01Z" || string(ls.Properties["tools"]) != "12" {
		t.Errorf("$screen not forwarded unchanged: %+v", ls)
	}
}

// A gateway with OnUnrouted = forwarder.Unhandled hands the events it does not route to the
// PostHog project (here a second gateway) after answering, with the uuids it acknowledged them
// under.
func TestGatewayForwardsUnrouted(t *testing.T) {
	downstream := newReceiver(t, nil)
	p, err := forward.New(downstream.srv.URL, receiverKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	upstream := newReceiver(t, func(evs []ingest.Envelope) { p.Unhandled(evs...) })
	body := raw(map[string]any{"api_key": receiverKey, "batch": []any{
		map[string]any{"event": "$groupidentify", "distinct_id": "user-9", "timestamp": "2026-11-29T10:00:00Z",
			"properties": map[string]any{"token": receiverKey, "$set": map[string]any{"email_domain": "example.com"}}},
		map[string]any{"uuid": "0192f2a0-0000-7000-8000-00000000d001", "event": "$pageview", "distinct_id": "user-9",
			"timestamp": "2026-11-29T10:00:01Z", "properties": map[string]any{}},
	}})
	res, err := http.Post(upstream.srv.URL+"/batch/", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("upstream answered %d", res.StatusCode)
	}
	// The hook runs after the answer is written: wait until both events were handed over.
	for deadline := time.Now().Add(5 * time.Second); p.Queued() < 2 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if p.Failed() != 0 {
		t.Errorf("Failed() = %d", p.Failed())
	}
	up, down := upstream.events(), downstream.events()
	if len(up) != 2 || len(down) != 2 {
		t.Fatalf("upstream acknowledged %d, downstream received %d; want 2 and 2", len(up), len(down))
	}
	for i := range up {
		if up[i].UUID != down[i].UUID || up[i].Event != down[i].Event || up[i].Timestamp != down[i].Timestamp {
			t.Errorf("event %d: acknowledged %+v, forwarded %+v", i, up[i], down[i])
		}
		if _, ok := down[i].Properties["token"]; ok {
			t.Errorf("event %d: the upstream project key was forwarded", i)
		}
	}
}

// A PostHog host that refuses connections: every event is counted as failed once Close
// returned, Close is bounded, nothing panics.
func TestForwardingFailuresCounted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p, err := forward.New("http://"+addr, receiverKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.SuppressionReset(&ingest.AuditEvent{UUID: "0192f2a0-0000-7000-8000-00000000a002", Action: ingest.AuditActionReset, At: at,
		IdentityHash: strings.Repeat("cd", 32), Actor: "ops", Reason: "test"})
	p.SchemaCheck(forward.SchemaCheck{RunID: "0192f2a0-0000-7000-8000-00000000b002", Server: "down", StartedAt: at, Err: errors.New("connection refused")})
	p.Unhandled(ingest.Envelope{UUID: "0192f2a0-0000-7000-8000-00000000c002", Event: "$groupidentify", DistinctID: "u", Timestamp: "2026-11-29T11:00:00Z"})
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Close did not return within 15s")
	}
	t.Logf("Close took %s", time.Since(start))
	if p.Failed() != 3 {
		t.Errorf("Failed() = %d, want 3", p.Failed())
	}
	// After Close: dropped and counted, no panic; a second Close is harmless.
	p.SchemaCheck(forward.SchemaCheck{RunID: "0192f2a0-0000-7000-8000-00000000b003", Server: "late", StartedAt: at})
	if p.Failed() != 4 {
		t.Errorf("Failed() after a send on a closed forwarder = %d, want 4", p.Failed())
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// An oversized unhandled event is refused by posthog-go and counted, not sent.
func TestOversizedCounted(t *testing.T) {
	r := newReceiver(t, nil)
	p, err := forward.New(r.srv.URL, receiverKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Unhandled(ingest.Envelope{UUID: "0192f2a0-0000-7000-8000-00000000e001", Event: "$big", DistinctID: "u", Timestamp: "2026-11-29T11:00:00Z",
		Properties: map[string]json.RawMessage{"blob": raw(strings.Repeat("x", 600_000))}})
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if p.Failed() != 1 || len(r.events()) != 0 {
		t.Errorf("Failed() = %d, received %d; want 1 and 0", p.Failed(), len(r.events()))
	}
}
