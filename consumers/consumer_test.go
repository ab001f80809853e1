package consumers_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/demo/report"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/suppression"
)

func TestDuplicateDeliveriesChangeNoCount(t *testing.T) {
	h := newHarness(t)
	// The same uuid twice in one batch and once more in a later batch.
	h.publish(ingest.TopicToolCalls, toolCall(1, "alice", "create_issue", "titel"), toolCall(1, "alice", "create_issue", "titel"), toolCall(2, "bob", "create_issue"))
	c := h.consumer(nil)
	h.drain(c)
	h.publish(ingest.TopicToolCalls, toolCall(1, "alice", "create_issue", "titel"), toolCall(3, "carol", "list_issues"))
	h.drain(c)
	c.Close()

	// And again after a consumer restart, through a new member of the group.
	h.publish(ingest.TopicToolCalls, toolCall(2, "bob", "create_issue"), toolCall(3, "carol", "list_issues"))
	c2 := h.consumer(nil)
	h.drain(c2)

	if got := h.count("SELECT count() FROM mcpulse.tool_calls FINAL"); got != 3 {
		t.Errorf("tool_calls rows = %d, want 3", got)
	}
	if got := h.count("SELECT sum(successful_calls) FROM mcpulse.v_ignored_key_rates_hourly"); got != 3 {
		t.Errorf("successful calls in rollup = %d, want 3", got)
	}
	if got := h.count("SELECT sum(calls_with_ignored_keys) FROM mcpulse.v_ignored_key_rates_hourly"); got != 1 {
		t.Errorf("calls with ignored keys = %d, want 1", got)
	}
	if got := h.count("SELECT sum(occurrences) FROM mcpulse.v_ignored_keys_hourly WHERE key_path = 'titel'"); got != 1 {
		t.Errorf("occurrences of titel = %d, want 1", got)
	}
	if got := c.Stats().Duplicates + c2.Stats().Duplicates; got != 4 {
		t.Errorf("duplicates dropped = %d, want 4", got)
	}
}

func TestMalformedEventsGoToDeadLettersAndNeighboursAreStored(t *testing.T) {
	h := newHarness(t)
	h.publish(ingest.TopicToolCalls,
		toolCall(1, "alice", "create_issue"),
		[]byte(`{"uuid": "not json`),
		envelope(uuidN(2), ingest.EventToolCall, "bob", base, map[string]any{"$mcp_tool_name": 42}),
		toolCall(3, "carol", "list_issues"),
	)
	h.publish(ingest.TopicRecruitment,
		envelope(uuidN(4), ingest.EventInvitationResponse, "dave", base, map[string]any{"campaign_id": "c", "invitation_id": "i", "feature_flag": "f", "response": "maybe"}),
	)
	c := h.consumer(nil)
	h.drain(c)

	if got := h.count("SELECT count() FROM mcpulse.tool_calls FINAL"); got != 2 {
		t.Errorf("tool_calls rows = %d, want 2 (the valid neighbours)", got)
	}
	if got := h.count("SELECT count() FROM mcpulse.dead_letters FINAL"); got != 3 {
		t.Errorf("dead_letters rows = %d, want 3", got)
	}
	rows, err := h.ch.Query(context.Background(), "SELECT dead_letter_id, source_topic, reason FROM mcpulse.dead_letters FINAL ORDER BY dead_letter_id")
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for rows.Next() {
		var id, src, reason string
		if err := rows.Scan(&id, &src, &reason); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(id, src+"/") {
			t.Errorf("dead letter id %q does not name its source topic %q", id, src)
		}
		reasons = append(reasons, reason)
	}
	joined := strings.Join(reasons, "\n")
	for _, w := range []string{"bad JSON", "properties.$mcp_tool_name: must be a string", "properties.response: must be accept, decline or cancel"} {
		if !strings.Contains(joined, w) {
			t.Errorf("dead letter reasons %q lack %q", joined, w)
		}
	}

	// The DLQ topic holds each bad event with its reason and source headers.
	dlq := 0
	for p := 0; p < 4; p++ {
		conn, err := kafka.DialLeader(context.Background(), "tcp", h.stack.KafkaBrokers[0], ingest.TopicDeadLetters, p)
		if err != nil {
			t.Fatal(err)
		}
		first, last, err := conn.ReadOffsets()
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		dlq += int(last - first)
	}
	if dlq != 3 {
		t.Errorf("DLQ topic holds %d messages, want 3", dlq)
	}
	if s := c.Stats(); s.DeadLettered != 3 || s.Stored["tool_call"] != 2 {
		t.Errorf("stats = %+v, want 3 dead-lettered and 2 tool calls stored", s)
	}
}

func TestConsumerStoppedMidStreamLosesAndDoublesNothing(t *testing.T) {
	h := newHarness(t)
	const n = 3000
	var values [][]byte
	for i := 1; i <= n; i++ {
		values = append(values, toolCall(i, "user-"+string(rune('a'+i%7)), []string{"create_issue", "list_issues", "get_me"}[i%3], "extra"))
	}
	h.publish(ingest.TopicToolCalls, values...)

	// Stop the first member after its first committed batches, mid-stream.
	c := h.consumer(func(cfg *consumers.Config) { cfg.BatchSize = 500 })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for c.Stats().Batches < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.Close()
	if got := h.count("SELECT count() FROM mcpulse.tool_calls FINAL"); got >= n {
		t.Fatalf("the first member stored all %d events before it was stopped; the test proves nothing", got)
	}

	c2 := h.consumer(func(cfg *consumers.Config) { cfg.BatchSize = 700 })
	h.drain(c2)
	if got := h.count("SELECT count() FROM mcpulse.tool_calls FINAL"); got != n {
		t.Errorf("tool_calls rows = %d, want %d", got, n)
	}
	if got := h.count("SELECT sum(successful_calls) FROM mcpulse.v_ignored_key_rates_hourly"); got != n {
		t.Errorf("successful calls in rollup = %d, want %d", got, n)
	}
	if got := h.count("SELECT sum(occurrences) FROM mcpulse.v_ignored_keys_hourly"); got != n {
		t.Errorf("ignored key occurrences = %d, want %d", got, n)
	}
}

func TestReplayingTheTopicsFromTheStartChangesNothing(t *testing.T) {
	h := newHarness(t)
	var values [][]byte
	for i := 1; i <= 200; i++ {
		values = append(values, toolCall(i, "user", "create_issue", "titel"))
	}
	h.publish(ingest.TopicToolCalls, values...)
	h.publish(ingest.TopicRecruitment, invitation(1000, "dora", "inv-1", base), response(1001, "dora", "inv-1", "decline", base.Add(time.Minute)))
	h.drain(h.consumer(nil))
	before := h.snapshot()

	// A new group reads every message again: all of them were stored already.
	h.drain(h.consumer(func(cfg *consumers.Config) { cfg.GroupID = "replay" }))
	if after := h.snapshot(); after != before {
		t.Errorf("replay changed the stores:\nbefore %+v\nafter  %+v", before, after)
	}
	if before.toolCalls != 200 || before.recruitment != 2 || before.declined != 1 {
		t.Errorf("snapshot %+v, want 200 tool calls, 2 recruitment events, 1 decline", before)
	}
}

// A new group reads in small batches offsets that the first group counted in small batches,
// then past them: the rollups keep the first group's totals for the offsets it counted (the
// totals as of the new group's start are recorded nowhere) and add only the calls beyond them,
// also in the batch that reaches past the first group's end.
func TestANewGroupCountsOnlyPastWhatTheRollupsCounted(t *testing.T) {
	h := newHarness(t)
	var first, later [][]byte
	for i := 1; i <= 200; i++ {
		first = append(first, toolCall(i, "user", "create_issue", "titel"))
	}
	for i := 201; i <= 230; i++ {
		later = append(later, toolCall(i, "user", "create_issue", "titel"))
	}
	h.publish(ingest.TopicToolCalls, first...)
	h.drain(h.consumer(func(cfg *consumers.Config) { cfg.BatchSize = 50 }))
	if got := h.count("SELECT toUInt64(sum(calls)) FROM mcpulse.v_tool_call_stats_hourly"); got != 200 {
		t.Fatalf("first group: rollup counts %d calls, want 200", got)
	}
	h.publish(ingest.TopicToolCalls, later...)
	h.drain(h.consumer(func(cfg *consumers.Config) { cfg.GroupID, cfg.BatchSize = "replay", 64 }))
	if got := h.count("SELECT toUInt64(sum(calls)) FROM mcpulse.v_tool_call_stats_hourly"); got != 230 {
		t.Errorf("after the new group: rollup counts %d calls, want 230", got)
	}
	if got := h.count("SELECT toUInt64(sum(occurrences)) FROM mcpulse.v_ignored_keys_hourly"); got != 230 {
		t.Errorf("after the new group: %d ignored key occurrences, want 230", got)
	}
}

type snapshot struct {
	toolCalls, recruitment, successful, withIgnored, invitations, declined, answered int64
	record                                                                           string
}

func (h *harness) snapshot() snapshot {
	h.t.Helper()
	rec, err := h.rdb.Get(context.Background(), suppression.ResponseKey(ingest.IdentityHash("https://us.posthog.com", "dora"))).Result()
	if err != nil {
		h.t.Fatalf("suppression record: %v", err)
	}
	return snapshot{
		toolCalls:   h.count("SELECT count() FROM mcpulse.tool_calls FINAL"),
		recruitment: h.count("SELECT count() FROM mcpulse.recruitment_events FINAL"),
		successful:  h.count("SELECT sum(successful_calls) FROM mcpulse.v_ignored_key_rates_hourly"),
		withIgnored: h.count("SELECT sum(calls_with_ignored_keys) FROM mcpulse.v_ignored_key_rates_hourly"),
		invitations: h.count("SELECT sum(invitations) FROM mcpulse.v_recruitment_funnel_daily"),
		declined:    h.count("SELECT sum(declined) FROM mcpulse.v_recruitment_funnel_daily"),
		answered:    h.count("SELECT toUInt64(sum(invitations - unanswered)) FROM mcpulse.v_recruitment_funnel_daily"),
		record:      rec,
	}
}

// Keys MCP clients add on their own stay in the raw row but are not agent mistakes.
func TestClientInjectedKeysStayRawButAreNotCounted(t *testing.T) {
	h := newHarness(t)
	h.publish(ingest.TopicToolCalls,
		toolCall(1, "alice", "create_issue", "_meta", "_meta.progressToken", "toolCallId"),
		toolCall(2, "bob", "create_issue", "toolCallId", "titel"),
	)
	h.drain(h.consumer(nil))
	if got := h.count("SELECT sum(length(ignored_keys)) FROM mcpulse.tool_calls FINAL"); got != 5 {
		t.Errorf("raw ignored keys = %d, want all 5 kept", got)
	}
	if got := h.count("SELECT sum(calls_with_ignored_keys) FROM mcpulse.v_ignored_key_rates_hourly"); got != 1 {
		t.Errorf("calls with ignored keys = %d, want 1 (only bob's titel is an agent mistake)", got)
	}
	if got := h.count("SELECT count() FROM mcpulse.v_ignored_keys_hourly"); got != 1 {
		t.Errorf("ignored key paths in the rollup = %d, want 1", got)
	}
}

// The uuid is the deduplication key whatever the timestamp: a producer that re-stamps a retried
// event must not get it counted twice, even in another hour and another batch.
func TestDuplicateWithAnotherTimestampInALaterBatchIsDropped(t *testing.T) {
	h := newHarness(t)
	props := map[string]any{"$mcp_tool_name": "create_issue", "$mcp_client_name": "cursor"}
	h.publish(ingest.TopicToolCalls, envelope(uuidN(7), ingest.EventToolCall, "ann", time.Date(2026, 11, 28, 10, 59, 59, 0, time.UTC), props))
	c := h.consumer(nil)
	h.drain(c)
	h.publish(ingest.TopicToolCalls, envelope(uuidN(7), ingest.EventToolCall, "ann", time.Date(2026, 11, 28, 11, 0, 1, 0, time.UTC), props))
	h.drain(c)
	if got := h.count("SELECT count() FROM mcpulse.tool_calls FINAL"); got != 1 {
		t.Errorf("tool_calls rows = %d, want 1", got)
	}
	if got := h.count("SELECT sum(successful_calls) FROM mcpulse.v_ignored_key_rates_hourly"); got != 1 {
		t.Errorf("successful calls in rollup = %d, want 1", got)
	}
	if got := c.Stats().Duplicates; got != 1 {
		t.Errorf("duplicates dropped = %d, want 1", got)
	}
}

// publishSpreadCalls publishes tool calls 1..n (spreadToolCall).
func (h *harness) publishSpreadCalls(n int) {
	var calls [][]byte
	for i := 1; i <= n; i++ {
		calls = append(calls, spreadToolCall(i))
	}
	h.publish(ingest.TopicToolCalls, calls...)
}

// refuse makes the embedded broker answer the next n requests of key with respond's error
// response (kfake control functions), then handle them normally again. It returns the count of
// requests refused so far.
func (h *harness) refuse(key kmsg.Key, n int32, respond func(kmsg.Request) kmsg.Response) *atomic.Int32 {
	cluster := h.stack.KafkaCluster()
	refused := new(atomic.Int32)
	cluster.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if refused.Load() >= n {
			cluster.DropControl()
			return nil, nil, false
		}
		refused.Add(1)
		cluster.KeepControl()
		return respond(req), nil, true
	})
	return refused
}

// A coordinator that refuses joins (as one still loading its groups after a restart does)
// makes kafka-go's consumer group report each refusal while it keeps trying to rejoin. The
// consumer keeps waiting for a generation instead of stopping, and stores every event once the
// coordinator accepts the member.
func TestRefusedGroupJoinsAreRetriedAndNothingIsLost(t *testing.T) {
	h := newHarness(t)
	h.publishSpreadCalls(30)
	const refusals = 4
	refused := h.refuse(kmsg.JoinGroup, refusals, func(req kmsg.Request) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp
	})

	c := h.consumer(nil)
	h.drain(c)
	if got := refused.Load(); got != refusals {
		t.Fatalf("the coordinator refused %d joins, want %d", got, refusals)
	}
	if got := c.Stats().FetchRetries; got < 1 {
		t.Errorf("fetch retries = %d, want at least 1 (the group reports each refused join)", got)
	}
	if got := h.count("SELECT count() FROM mcpulse.tool_calls FINAL"); got != 30 {
		t.Errorf("tool_calls rows = %d, want 30", got)
	}
}

// A commit the coordinator keeps refusing ends the member's generation: it rejoins, reads the
// partitions again from their committed offsets and commits then. Without that, the stored
// but uncommitted batch would hold its partitions' lag until new traffic arrived.
func TestCommitThatKeepsFailingIsReadAgainInTheNextGeneration(t *testing.T) {
	h := newHarness(t)
	h.publishSpreadCalls(30)
	const refusals = 16 // four generations of commitAttempts (and more than a Reader retries)
	refused := h.refuse(kmsg.OffsetCommit, refusals, func(req kmsg.Request) kmsg.Response {
		commit := req.(*kmsg.OffsetCommitRequest)
		resp := commit.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range commit.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.CoordinatorNotAvailable.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	})

	c := h.consumer(func(cfg *consumers.Config) { cfg.RetryBackoff = 20 * time.Millisecond })
	h.drain(c) // bounded by a minute: fails if the refused batch is never committed
	if got := refused.Load(); got != refusals {
		t.Fatalf("the coordinator refused %d commits, want %d", got, refusals)
	}
	if got := h.count("SELECT count() FROM mcpulse.tool_calls FINAL"); got != 30 {
		t.Errorf("tool_calls rows = %d, want 30", got)
	}
	if got := h.count("SELECT sum(successful_calls) FROM mcpulse.v_ignored_key_rates_hourly"); got != 30 {
		t.Errorf("successful calls in the rollup = %d, want 30 (the batch read twice counts once)", got)
	}
}

// A response dated after the consumer's clock (beyond ingest.MaxResponseClockSkew) would
// outrank every ops reset made before its date and stretch a cancel's cooldown, so it is
// dead-lettered with its reason; its neighbours, including one just inside the skew, are stored.
func TestResponseFromTheFutureIsDeadLettered(t *testing.T) {
	h := newHarness(t)
	future := envelope(uuidN(1), ingest.EventInvitationResponse, "erin", endToEndNow.Add(-time.Hour),
		recruitmentProps("inv-erin", map[string]any{"response": "decline", "responded_at": "2099-01-01T00:00:00Z"}))
	h.publish(ingest.TopicRecruitment,
		future,
		response(2, "frank", "inv-frank", "cancel", endToEndNow.Add(ingest.MaxResponseClockSkew)),
		response(3, "gina", "inv-gina", "cancel", endToEndNow.Add(ingest.MaxResponseClockSkew+time.Second)),
	)
	c := h.consumer(func(cfg *consumers.Config) { cfg.Now = func() time.Time { return endToEndNow } })
	h.drain(c)

	if got := h.count("SELECT count() FROM mcpulse.recruitment_events FINAL"); got != 1 {
		t.Errorf("recruitment_events rows = %d, want 1 (frank's, inside the skew)", got)
	}
	var reasons []string
	rows, err := h.ch.Query(context.Background(), "SELECT reason FROM mcpulse.dead_letters FINAL ORDER BY reason")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		reasons = append(reasons, r)
	}
	if len(reasons) != 2 {
		t.Fatalf("dead letters %q, want erin's and gina's", reasons)
	}
	for _, r := range reasons {
		if !strings.Contains(r, "properties.responded_at: ") || !strings.Contains(r, "ahead of the receiving clock") {
			t.Errorf("dead letter reason %q does not say the response is from the future", r)
		}
	}
	if !strings.Contains(reasons[0]+reasons[1], "2099-01-01T00:00:00Z is ") {
		t.Errorf("dead letter reasons %q do not quote erin's responded_at", reasons)
	}
	if got := c.Stats().Suppression[string(suppression.Written)]; got != 1 {
		t.Errorf("suppression records written = %d, want 1 (frank's)", got)
	}
}

// Many small batches, so the prepare stage adds one batch's events to the rollups while the
// store stage adds another's tool calls: every rollup equals its recomputation from the raw
// rows (the two stages once shared a key buffer and wrote calls into wrong cells).
func TestRollupsOfManyPipelinedBatchesEqualTheRawRows(t *testing.T) {
	h := newHarness(t)
	var calls [][]byte
	tools := []string{"create_issue", "list_issues", "search_code", "get_file_contents"}
	for n := 1; n <= 6000; n++ {
		var ignored []string
		if n%5 == 0 {
			ignored = []string{"titel", fmt.Sprintf("labels.%d", n%3)}
		}
		calls = append(calls, envelope(uuidN(n), ingest.EventToolCall, fmt.Sprintf("user-%d", n%97), base.Add(time.Duration(n)*17*time.Second),
			map[string]any{"$mcp_tool_name": tools[n%len(tools)], "$mcp_client_name": []string{"cursor", "claude-code"}[n%2],
				"$mcp_is_error": n%9 == 0, "$mcp_duration_ms": float64(n%700) * 1.5, "$mcp_ignored_keys": ignored, "$mcp_ignored_keys_total": len(ignored)}))
	}
	h.publish(ingest.TopicToolCalls, calls...)
	c := h.consumer(func(cfg *consumers.Config) { cfg.BatchSize = 400 })
	h.drain(c)
	if got := h.count("SELECT sum(calls) FROM mcpulse.v_tool_call_stats_hourly"); got != 6000 {
		t.Errorf("calls in the rollup = %d, want 6000", got)
	}
	mismatches, err := report.RollupMismatches(context.Background(), h.ch)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range mismatches {
		if i == 10 {
			t.Errorf("... and %d more", len(mismatches)-i)
			break
		}
		t.Error(m)
	}
	if s := c.Stats(); s.StoreRetries != 0 || s.Batches < 10 {
		t.Errorf("%d store retries over %d batches, want none over many", s.StoreRetries, s.Batches)
	}
}
