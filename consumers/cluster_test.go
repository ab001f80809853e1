package consumers_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/demo/report"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/suppression"
)

// Redis Cluster conformance: a consumer end-to-end run gives the same results on a
// three-master cluster as on a single server (DESIGN.md §3: the hash tags keep an identity's
// keys, and an hour's dedup claims, in one slot). The precedence cases run on both in package
// suppression (testdata/precedence.yaml).

// TestConsumerEndToEnd runs the same scenario against a single redis-server and a cluster.
func TestConsumerEndToEnd(t *testing.T) {
	for _, backend := range []struct {
		name string
		new  func(*testing.T) *harness
	}{
		{"single node", newHarness},
		{"three-master cluster", newClusterHarness},
	} {
		t.Run(backend.name, func(t *testing.T) {
			t.Parallel()
			testConsumerEndToEnd(t, backend.new(t))
		})
	}
}

// endToEndNow is the consumers' pinned clock: a day after base, so cooldowns are live.
var endToEndNow = base.Add(24 * time.Hour)

// spreadToolCall is tool call n, timestamped 12 minutes after call n-1, so 50 calls span ten
// UTC hours.
func spreadToolCall(n int) []byte {
	return envelope(uuidN(n), ingest.EventToolCall, fmt.Sprintf("user-%d", n%7), base.Add(time.Duration(n-1)*12*time.Minute),
		map[string]any{"$mcp_tool_name": "create_issue", "$mcp_client_name": "claude-code", "$mcp_is_error": false})
}

func person(i int) string { return fmt.Sprintf("person-%d", i) }

func testConsumerEndToEnd(t *testing.T, h *harness) {
	ctx := context.Background()
	at := func(hours int) time.Time { return base.Add(time.Duration(hours) * time.Hour) }
	pin := func(cfg *consumers.Config) { cfg.Now = func() time.Time { return endToEndNow } }

	// Phase 1: 40 tool calls, the first five delivered twice; twelve invitations answered
	// (decline, accept, cancel in turn), one answer delivered twice.
	var calls [][]byte
	for n := 1; n <= 40; n++ {
		calls = append(calls, spreadToolCall(n))
	}
	for n := 1; n <= 5; n++ {
		calls = append(calls, spreadToolCall(n))
	}
	h.publish(ingest.TopicToolCalls, calls...)
	answers := []string{"decline", "accept", "cancel"}
	var recruitment [][]byte
	for i := range 12 {
		inv := fmt.Sprintf("inv-%d", i)
		recruitment = append(recruitment, invitation(1000+i, person(i), inv, at(0)), response(2000+i, person(i), inv, answers[i%3], at(1)))
	}
	recruitment = append(recruitment, response(2001, person(1), "inv-1", "accept", at(1)))
	h.publish(ingest.TopicRecruitment, recruitment...)
	c := h.consumer(pin)
	h.drain(c)

	// A node that restarts (or a replica promoted by a failover) has an empty script cache,
	// possibly between loading the scripts and running them: empty every node's cache right
	// before the next EVALSHA pipeline (the suppression updates). The batch must still be
	// stored at the first attempt.
	flush := &flushScriptsBeforeEvalSha{rdb: h.rdb}
	flush.left.Store(1)
	h.rdb.AddHook(flush)

	// Phase 2, the same member: ten new calls and five earlier ones again; late cancels after
	// the declines (kept), a newer decline replacing a cooldown, a newer cooldown replacing an
	// older one, a replay of a decline under a new uuid (older), an answer delivered again.
	calls = nil
	for n := 41; n <= 50; n++ {
		calls = append(calls, spreadToolCall(n))
	}
	for n := 6; n <= 10; n++ {
		calls = append(calls, spreadToolCall(n))
	}
	h.publish(ingest.TopicToolCalls, calls...)
	recruitment = nil
	for _, i := range []int{0, 3, 6, 9} {
		recruitment = append(recruitment, response(3000+i, person(i), fmt.Sprintf("inv-%d", i), "cancel", at(2)))
	}
	recruitment = append(recruitment,
		response(3102, person(2), "inv-2", "decline", at(3)),
		response(3105, person(5), "inv-5", "cancel", at(4)),
		response(4000, person(0), "inv-0", "decline", at(1)),
		response(2001, person(1), "inv-1", "accept", at(1)),
	)
	h.publish(ingest.TopicRecruitment, recruitment...)
	h.drain(c)
	c.Close()
	if left := flush.left.Load(); left > 0 {
		t.Fatalf("%d of the script cache flushes did not happen; the test proves nothing", left)
	}

	// Phase 3, a new member of the group: only redeliveries.
	calls = nil
	for n := 11; n <= 15; n++ {
		calls = append(calls, spreadToolCall(n))
	}
	h.publish(ingest.TopicToolCalls, calls...)
	h.publish(ingest.TopicRecruitment, response(2003, person(3), "inv-3", "decline", at(1)))
	c2 := h.consumer(pin)
	h.drain(c2)

	s1, s2 := c.Stats(), c2.Stats()
	if got := s1.Duplicates + s2.Duplicates; got != 18 {
		t.Errorf("duplicates dropped = %d, want 18", got)
	}
	if got := s1.Stored["tool_call"] + s2.Stored["tool_call"]; got != 50 {
		t.Errorf("tool calls stored = %d, want 50", got)
	}
	if got := s1.Stored["response"] + s2.Stored["response"]; got != 19 {
		t.Errorf("responses stored = %d, want 19", got)
	}
	if got := s1.StoreRetries + s2.StoreRetries; got != 0 {
		t.Errorf("store retries = %d, want 0 (a flushed script cache must not fail a batch)", got)
	}
	wantOutcomes := map[suppression.Outcome]int64{suppression.Written: 14, suppression.KeptPermanent: 4, suppression.Older: 1,
		suppression.Expired: 0, suppression.BeforeReset: 0}
	for k, want := range wantOutcomes {
		if got := s1.Suppression[string(k)] + s2.Suppression[string(k)]; got != want {
			t.Errorf("suppression outcome %s = %d, want %d", k, got, want)
		}
	}
	if got := h.count("SELECT count() FROM mcpulse.tool_calls FINAL"); got != 50 {
		t.Errorf("tool_calls rows = %d, want 50", got)
	}
	if got := h.count("SELECT count() FROM mcpulse.recruitment_events FINAL"); got != 31 {
		t.Errorf("recruitment_events rows = %d, want 31", got)
	}
	if got := h.count("SELECT sum(successful_calls) FROM mcpulse.v_ignored_key_rates_hourly"); got != 50 {
		t.Errorf("successful calls in rollup = %d, want 50", got)
	}

	// The suppression records, with the cooldowns' TTLs counted from the pinned clock.
	for i := range 12 {
		wantState, wantAt, wantTTL := []string{suppression.StateDeclined, suppression.StateAccepted, suppression.StateCooldown}[i%3], at(1), time.Duration(0)
		switch {
		case i == 2:
			wantState, wantAt = suppression.StateDeclined, at(3)
		case i == 5:
			wantAt = at(4)
		}
		if wantState == suppression.StateCooldown {
			wantTTL = wantAt.Add(suppression.CooldownPeriod).Sub(endToEndNow)
		}
		hash := ingest.IdentityHash("https://us.posthog.com", person(i))
		rec, err := suppression.ReadRecord(ctx, h.rdb, hash)
		if err != nil {
			t.Fatal(err)
		}
		if rec == nil || rec.Response != wantState || rec.RespondedAt != suppression.FormatTime(wantAt) || rec.DistinctID != person(i) || rec.CampaignID != "onboarding" {
			t.Errorf("%s: record %+v, want %s at %s", person(i), rec, wantState, suppression.FormatTime(wantAt))
			continue
		}
		ttl, err := h.rdb.PTTL(ctx, suppression.ResponseKey(hash)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if wantTTL == 0 && ttl >= 0 || wantTTL > 0 && (ttl > wantTTL || ttl < wantTTL-time.Minute) {
			t.Errorf("%s: TTL %s, want %s", person(i), ttl, wantTTL)
		}
	}

	// On the cluster the run touched every master: the records are spread.
	if _, ok := h.rdb.(*redis.ClusterClient); ok {
		if n := mastersHolding(t, h.rdb, suppression.ResponseKeyPattern); n != 3 {
			t.Errorf("suppression records on %d masters, want 3", n)
		}
	}
	// Every rollup equals its recomputation from the raw tables.
	mismatches, err := report.RollupMismatches(ctx, h.ch)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mismatches {
		t.Error(m)
	}
	// Tool calls leave nothing per event in Redis: dedup is the consumer's, per partition.
	if n := mastersHolding(t, h.rdb, "mcpulse:dedup:*"); n != 0 {
		t.Errorf("dedup keys on %d Redis masters, want none", n)
	}
}

// mastersHolding is how many masters hold a key matching pattern (1 or 0 for a single server).
func mastersHolding(t *testing.T, rdb redis.UniversalClient, pattern string) int {
	t.Helper()
	has := func(ctx context.Context, node redis.Cmdable) (bool, error) {
		keys, _, err := node.Scan(ctx, 0, pattern, 100000).Result()
		return len(keys) > 0, err
	}
	ctx := context.Background()
	cluster, ok := rdb.(*redis.ClusterClient)
	if !ok {
		found, err := has(ctx, rdb)
		if err != nil {
			t.Fatal(err)
		}
		if found {
			return 1
		}
		return 0
	}
	var n atomic.Int64
	if err := cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		found, err := has(ctx, node)
		if found {
			n.Add(1)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return int(n.Load())
}

// flushScriptsBeforeEvalSha is a go-redis hook that empties every node's script cache right
// before each of the next `left` pipelines that start with EVALSHA.
type flushScriptsBeforeEvalSha struct {
	rdb  redis.UniversalClient
	left atomic.Int32
}

func (f *flushScriptsBeforeEvalSha) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *flushScriptsBeforeEvalSha) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (f *flushScriptsBeforeEvalSha) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() == "evalsha" && f.left.Add(-1) >= 0 {
			if err := f.rdb.ScriptFlush(ctx).Err(); err != nil {
				return err
			}
		}
		return next(ctx, cmds)
	}
}
