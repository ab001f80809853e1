package consumers_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/suppression"
)

// gathered returns the sum of the series name{labels...} in reg (a histogram counts its
// observations), and whether any exists.
func gathered(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum, found := 0.0, false
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			found = true
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum, found
}

// seriesOf counts the series of the metric name in reg.
func seriesOf(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return len(f.GetMetric())
		}
	}
	return 0
}

func TestMetricsFollowAConsumeRun(t *testing.T) {
	h := newHarness(t)
	reg := prometheus.NewRegistry()
	h.publish(ingest.TopicToolCalls,
		toolCall(1, "alice", "create_issue"),
		toolCall(1, "alice", "create_issue"), // duplicate
		toolCall(2, "bob", "list_issues"),
		[]byte(`{"uuid": "not json`),
		envelope(uuidN(3), "$pageview\u202e", "", base, map[string]any{}),    // no distinct_id: dead-lettered
		envelope(uuidN(4), "$pageview\u202e", "eve", base, map[string]any{}), // another name: counted as other, its hostile name out of labels
	)
	h.publish(ingest.TopicRecruitment,
		invitation(10, "carol", "inv-1", base),
		response(11, "carol", "inv-1", "decline", base.Add(1)),
	)
	if err := h.pub.DeadLetter(context.Background(), ingest.DeadLetter{
		ID: "publish:events.jsonl:7", Payload: []byte(`{}`), Reason: "line 7: timestamp: required", Source: ingest.SourcePublish, Class: ingest.ClassInvalidTimestamp,
	}); err != nil {
		t.Fatal(err)
	}
	c := h.consumer(func(cfg *consumers.Config) { cfg.Registerer = reg })

	// Before the run: everything is still to be consumed.
	if lag, ok := gathered(t, reg, "mcpulse_consumer_lag", map[string]string{"topic": ingest.TopicToolCalls}); !ok || lag == 0 {
		t.Errorf("lag of %s before the run = %v (present %v), want > 0", ingest.TopicToolCalls, lag, ok)
	}
	h.drain(c)

	counters := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"mcpulse_consumer_events_stored_total", map[string]string{"kind": "tool_call"}, 2},
		{"mcpulse_consumer_events_stored_total", map[string]string{"kind": "invitation_sent"}, 1},
		{"mcpulse_consumer_events_stored_total", map[string]string{"kind": "response"}, 1},
		{"mcpulse_consumer_duplicates_total", map[string]string{"kind": "tool_call"}, 1},
		{"mcpulse_consumer_duplicates_total", map[string]string{"kind": "invitation_sent"}, 0},
		{"mcpulse_consumer_dead_lettered_total", map[string]string{"class": string(ingest.ClassBadJSON)}, 1},
		{"mcpulse_consumer_dead_lettered_total", map[string]string{"class": "invalid_distinct_id"}, 1},
		{"mcpulse_consumer_events_stored_total", map[string]string{"kind": "other"}, 1},
		// The publisher's dead letter and the consumer's two, read back from the topic.
		{"mcpulse_consumer_dead_letters_recorded_total", map[string]string{"class": "invalid_timestamp"}, 1},
		{"mcpulse_consumer_dead_letters_recorded_total", map[string]string{"class": string(ingest.ClassBadJSON)}, 1},
		{"mcpulse_consumer_dead_letters_recorded_total", map[string]string{"class": "invalid_distinct_id"}, 1},
		{"mcpulse_consumer_suppression_outcomes_total", map[string]string{"outcome": string(suppression.Written)}, 1},
		{"mcpulse_consumer_store_errors_total", map[string]string{"store": "redis"}, 0},
		{"mcpulse_consumer_lag", map[string]string{"topic": ingest.TopicToolCalls}, 0},
		{"mcpulse_consumer_lag", map[string]string{"topic": ingest.TopicDeadLetters}, 0},
		{"mcpulse_consumer_lag_errors_total", nil, 0},
	}
	for _, cc := range counters {
		got, ok := gathered(t, reg, cc.name, cc.labels)
		if cc.want == 0 && !ok && strings.HasSuffix(cc.name, "_errors_total") && cc.labels != nil {
			continue // a labelled error counter appears with its first error
		}
		if !ok || got != cc.want {
			t.Errorf("%s%v = %v (present %v), want %v", cc.name, cc.labels, got, ok, cc.want)
		}
	}
	s := c.Stats()
	if got, _ := gathered(t, reg, "mcpulse_consumer_messages_total", nil); got != float64(s.Messages) || got < 8 {
		t.Errorf("messages_total = %v, Stats().Messages = %d (want equal, at least 8)", got, s.Messages)
	}
	if got, _ := gathered(t, reg, "mcpulse_consumer_batches_committed_total", nil); got != float64(s.Batches) || got < 1 {
		t.Errorf("batches_committed_total = %v, Stats().Batches = %d (want equal, at least 1)", got, s.Batches)
	}
	for _, store := range []string{"redis", "clickhouse"} {
		if n, ok := gathered(t, reg, "mcpulse_consumer_store_write_seconds", map[string]string{"store": store}); !ok || n == 0 {
			t.Errorf("store_write_seconds{store=%q} has %v observations, want some", store, n)
		}
	}
	// The dedup windows of the partitions read hold their uuids; the rollup cache its cells.
	if got, _ := gathered(t, reg, "mcpulse_consumer_dedup_window_bytes", nil); got <= 0 {
		t.Errorf("dedup_window_bytes = %v, want the windows' memory", got)
	}
	if got, _ := gathered(t, reg, "mcpulse_consumer_rollup_cached_cells", nil); got < 1 {
		t.Errorf("rollup_cached_cells = %v, want the cells of the stored events", got)
	}
	// A rebalance happens when the member joins the group.
	if got, _ := gathered(t, reg, "mcpulse_consumer_rebalances_total", nil); got < 1 {
		t.Errorf("rebalances_total = %v, want at least 1 (the join)", got)
	}
	if n := seriesOf(t, reg, "mcpulse_consumer_dead_lettered_total"); n != 2 {
		t.Errorf("dead_lettered_total has %d series, want 2: bad_json and invalid_distinct_id only", n)
	}
	// A second consumer cannot register the same metrics on the same registry.
	if _, err := consumers.New(consumers.Config{Brokers: h.stack.KafkaBrokers, Redis: h.rdb, ClickHouse: h.ch, DeadLetters: h.pub, Registerer: reg}); err == nil {
		t.Error("a second consumer on the same registry: New succeeded, want a registration error")
	}
}
