package gateway_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/ingest/gateway"
)

// TestPostHogMCPLandsExactlyOnce runs the real @posthog/mcp (posthog-node underneath, default
// options but the host) in two MCP servers driven by the official MCP client, against the
// gateway: every event the SDK sends ($mcp_initialize, $mcp_tools_list, $mcp_tool_call,
// $exception) is acknowledged exactly once, none refused, routed or not.
func TestPostHogMCPLandsExactlyOnce(t *testing.T) {
	var mu sync.Mutex
	var unrouted []ingest.Envelope
	f := newFixture(t, func(c *gateway.Config) {
		c.OnUnrouted = func(evs []ingest.Envelope) {
			mu.Lock()
			defer mu.Unlock()
			unrouted = append(unrouted, evs...)
		}
	})
	calls, _ := runMCPClient(t, f.srv.URL, testKey)
	failed := 0
	for _, c := range calls {
		if c.Expect.Error != "" {
			failed++
		}
	}
	byName := map[string]map[string]bool{} // event name -> uuids
	add := func(env ingest.Envelope) {
		if byName[env.Event] == nil {
			byName[env.Event] = map[string]bool{}
		}
		if byName[env.Event][env.UUID] {
			t.Errorf("%s %s published twice", env.Event, env.UUID)
		}
		byName[env.Event][env.UUID] = true
	}
	for _, topic := range ingest.AllTopics {
		for _, m := range f.messages(topic) {
			var env ingest.Envelope
			if json.Unmarshal(m.Value, &env) == nil && env.Event != "" {
				add(env)
			}
		}
	}
	mu.Lock()
	for _, env := range unrouted {
		add(env)
	}
	mu.Unlock()
	want := map[string]int{"$mcp_initialize": len(mcpServerNames), "$mcp_tools_list": len(mcpServerNames),
		ingest.EventToolCall: len(calls), "$exception": failed}
	for name, n := range want {
		if got := len(byName[name]); got != n {
			t.Errorf("%s: %d events landed, want %d", name, got, n)
		}
	}
	for name := range byName {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected event %s (%d)", name, len(byName[name]))
		}
	}
	if m := scrape(t, f); !strings.Contains(m, "\nmcpulse_gateway_events_rejected_total 0\n") {
		t.Errorf("events were rejected:\n%s", m)
	}
}
