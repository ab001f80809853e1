package suppression_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/stack"
	"github.com/mcpulse/mcpulse/suppression"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

const instance = "https://us.posthog.com"

// pipeline is a migrated embedded stack with a publisher; events go through the real consumer.
type pipeline struct {
	t     *testing.T
	env   *testenv.Env
	stack *stack.Stack
	ch    driver.Conn
	rdb   redis.UniversalClient
	pub   *ingest.Publisher
	n     int
}

func newPipeline(t *testing.T) *pipeline { return newPipelineOn(t, false) }

// newPipelineOn builds the pipeline on a single Redis node, or with cluster on a three-node
// Redis Cluster: the reconcile must behave the same on both.
func newPipelineOn(t *testing.T, cluster bool) *pipeline {
	t.Helper()
	e := testenv.New(t, testenv.Options{Cluster: cluster})
	return &pipeline{t: t, env: e, stack: e.Stack, ch: e.ClickHouse, rdb: e.Redis, pub: e.Publisher}
}

func (p *pipeline) send(topic string, value any) {
	p.t.Helper()
	data, err := json.Marshal(value)
	if err != nil {
		p.t.Fatal(err)
	}
	if err := p.pub.PublishRaw(context.Background(), topic, nil, data); err != nil {
		p.t.Fatal(err)
	}
}

func (p *pipeline) uuid() string {
	p.n++
	return fmt.Sprintf("0192f2a0-0000-7000-8000-%012d", p.n)
}

func (p *pipeline) recruitment(event, distinctID, invitationID string, at time.Time, extra map[string]any) {
	props := map[string]any{"campaign_id": "onboarding", "invitation_id": invitationID, "feature_flag": "mcp-interviews"}
	for k, v := range extra {
		props[k] = v
	}
	p.send(ingest.TopicRecruitment, map[string]any{"uuid": p.uuid(), "event": event, "distinct_id": distinctID,
		"timestamp": at.Format(time.RFC3339Nano), "properties": props})
}

func (p *pipeline) invite(distinctID, invitationID string, at time.Time) {
	p.recruitment(ingest.EventInvitationSent, distinctID, invitationID, at, nil)
}

func (p *pipeline) respond(distinctID, invitationID, answer string, at time.Time) {
	p.recruitment(ingest.EventInvitationResponse, distinctID, invitationID, at, map[string]any{"response": answer})
}

// reset does what an ops reset does to the stores: the watermark in Redis and the audit event.
func (p *pipeline) reset(distinctID string, at time.Time) {
	h := ingest.IdentityHash(instance, distinctID)
	value, _ := json.Marshal(map[string]string{"reset_at": suppression.FormatTime(at), "actor": "ops", "reason": "asked"})
	if err := p.rdb.Set(context.Background(), suppression.ResetKey(h), value, 0).Err(); err != nil {
		p.t.Fatal(err)
	}
	if err := p.rdb.Del(context.Background(), suppression.ResponseKey(h)).Err(); err != nil {
		p.t.Fatal(err)
	}
	p.send(ingest.TopicAudit, ingest.AuditEvent{UUID: p.uuid(), Action: ingest.AuditActionReset, At: at, IdentityHash: h,
		DistinctID: distinctID, InstanceURL: instance, Actor: "ops", Reason: "asked"})
}

func (p *pipeline) drain() {
	p.t.Helper()
	p.drainSkewed(0)
}

type heldRecord struct {
	record string
	ttl    time.Duration
}

func (p *pipeline) records() map[string]heldRecord {
	p.t.Helper()
	ctx := context.Background()
	out := map[string]heldRecord{}
	var mu sync.Mutex
	err := p.eachNode(ctx, func(ctx context.Context, node *redis.Client) error {
		iter := node.Scan(ctx, 0, suppression.ResponseKeyPattern, 100).Iterator()
		for iter.Next(ctx) {
			v, err := node.Get(ctx, iter.Val()).Result()
			if err != nil {
				return err
			}
			ttl, err := node.PTTL(ctx, iter.Val()).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			out[iter.Val()] = heldRecord{v, ttl}
			mu.Unlock()
		}
		return iter.Err()
	})
	if err != nil {
		p.t.Fatal(err)
	}
	return out
}

// eachNode runs fn on the single node, or on every master of a cluster.
func (p *pipeline) eachNode(ctx context.Context, fn func(context.Context, *redis.Client) error) error {
	return p.env.EachRedisNode(ctx, fn)
}

func TestFlushallThenReconcileRestoresExactlyTheLiveRecords(t *testing.T) {
	t.Run("single node", func(t *testing.T) { testFlushallThenReconcile(t, newPipelineOn(t, false)) })
	t.Run("three-node cluster", func(t *testing.T) { testFlushallThenReconcile(t, newPipelineOn(t, true)) })
}

func testFlushallThenReconcile(t *testing.T, p *pipeline) {
	now := time.Now().UTC().Truncate(time.Second)
	day := 24 * time.Hour
	p.invite("accepted", "i1", now.Add(-3*day))
	p.respond("accepted", "i1", "accept", now.Add(-3*day+time.Minute))
	p.invite("declined", "i2", now.Add(-2*day))
	p.respond("declined", "i2", "decline", now.Add(-2*day+time.Minute))
	p.invite("cooling", "i3", now.Add(-2*day))
	p.respond("cooling", "i3", "cancel", now.Add(-2*day+time.Minute))
	p.invite("cooled", "i4", now.Add(-9*day))
	p.respond("cooled", "i4", "cancel", now.Add(-9*day+time.Minute))
	p.invite("reset", "i5", now.Add(-3*day))
	p.respond("reset", "i5", "decline", now.Add(-3*day+time.Minute))
	p.invite("reset-then-accepted", "i6", now.Add(-4*day))
	p.respond("reset-then-accepted", "i6", "decline", now.Add(-4*day+time.Minute))
	p.drain()
	p.reset("reset", now.Add(-day))
	p.reset("reset-then-accepted", now.Add(-3*day))
	p.invite("reset-then-accepted", "i7", now.Add(-2*day))
	p.respond("reset-then-accepted", "i7", "accept", now.Add(-2*day+time.Minute))
	p.drain()

	before := p.records()
	if len(before) != 4 {
		t.Fatalf("records before the flush: %v, want 4 (accepted, declined, cooling, reset-then-accepted)", before)
	}
	ctx := context.Background()
	if err := p.eachNode(ctx, func(ctx context.Context, node *redis.Client) error { return node.FlushAll(ctx).Err() }); err != nil {
		t.Fatal(err)
	}

	dry, err := suppression.Reconcile(ctx, p.ch, p.rdb, time.Now(), true)
	if err != nil {
		t.Fatal(err)
	}
	if dry.Missing != 4 || dry.ResetsRestored != 2 || len(p.records()) != 0 {
		t.Fatalf("dry run: %+v, %d records; want 4 missing, 2 resets, nothing written", dry, len(p.records()))
	}

	rep, err := suppression.Reconcile(ctx, p.ch, p.rdb, time.Now(), false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Missing != 4 || rep.ResetsRestored != 2 || rep.Stale != 0 || rep.Wrong != 0 || rep.Live != 4 || rep.Identities != 6 {
		t.Errorf("report %+v, want 6 identities, 4 live and missing, 2 resets restored", rep)
	}
	after := p.records()
	for key, b := range before {
		a, ok := after[key]
		switch {
		case !ok:
			t.Errorf("%s not restored", key)
		case a.record != b.record:
			t.Errorf("%s restored as %s, was %s", key, a.record, b.record)
		case (b.ttl < 0) != (a.ttl < 0) || (b.ttl > 0 && (a.ttl > b.ttl+time.Second || a.ttl < b.ttl-time.Minute)):
			t.Errorf("%s TTL %s, was %s", key, a.ttl, b.ttl)
		}
	}
	if len(after) != len(before) {
		t.Errorf("%d records after reconcile, want %d", len(after), len(before))
	}
	for _, who := range []string{"reset", "reset-then-accepted"} {
		if n, _ := p.rdb.Exists(ctx, suppression.ResetKey(ingest.IdentityHash(instance, who))).Result(); n != 1 {
			t.Errorf("reset watermark of %s not restored", who)
		}
	}

	// A second run finds nothing to do; a record resurrected before its reset is wrong.
	again, err := suppression.Reconcile(ctx, p.ch, p.rdb, time.Now(), false)
	if err != nil {
		t.Fatal(err)
	}
	if again.Repairs() != 0 || again.Unchanged != 4 {
		t.Errorf("second reconcile %+v, want no repairs and 4 unchanged", again)
	}
	resurrected := `{"distinct_id":"reset","campaign_id":"onboarding","response":"do_not_ask_again","responded_at":"` + suppression.FormatTime(now.Add(-3*day+time.Minute)) + `"}`
	if err := p.rdb.Set(ctx, suppression.ResponseKey(ingest.IdentityHash(instance, "reset")), resurrected, 0).Err(); err != nil {
		t.Fatal(err)
	}
	fixed, err := suppression.Reconcile(ctx, p.ch, p.rdb, time.Now(), false)
	if err != nil {
		t.Fatal(err)
	}
	if fixed.Wrong != 1 || len(p.records()) != 4 {
		t.Errorf("reconcile of a resurrected record %+v, %d records; want 1 wrong deleted, 4 records", fixed, len(p.records()))
	}
}

func TestReplayAfterResetDoesNotResurrectButALaterResponseSuppressesAgain(t *testing.T) {
	t.Run("single node", func(t *testing.T) { testReplayAfterReset(t, newPipelineOn(t, false)) })
	t.Run("three-node cluster", func(t *testing.T) { testReplayAfterReset(t, newPipelineOn(t, true)) })
}

func testReplayAfterReset(t *testing.T, p *pipeline) {
	now := time.Now().UTC().Truncate(time.Second)
	p.invite("dana", "i1", now.Add(-time.Hour))
	p.respond("dana", "i1", "decline", now.Add(-time.Hour+time.Minute))
	p.drain()
	p.reset("dana", now.Add(-30*time.Minute))
	p.drain()

	// Replay everything from the start in a new consumer group.
	c, err := consumers.New(consumers.Config{GroupID: "replay", Brokers: p.stack.KafkaBrokers, Redis: p.rdb, ClickHouse: p.ch,
		DeadLetters: p.pub, BatchWait: 50 * time.Millisecond, IdleToDrain: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.RunUntilDrained(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if got := p.records(); len(got) != 0 {
		t.Fatalf("replay resurrected %v", got)
	}
	p.invite("dana", "i2", now.Add(-10*time.Minute))
	p.respond("dana", "i2", "accept", now.Add(-9*time.Minute))
	p.drain()
	rec, err := suppression.ReadRecord(ctx, p.rdb, ingest.IdentityHash(instance, "dana"))
	if err != nil || rec == nil || rec.Response != suppression.StateAccepted {
		t.Fatalf("record after a response later than the reset: %+v, %v; want accepted", rec, err)
	}
}

func TestContactPolicyAuditFindsInvitationsThatIgnoredSuppression(t *testing.T) {
	p := newPipeline(t)
	now := time.Now().UTC().Truncate(time.Second)
	day := 24 * time.Hour
	// ann declined, then was invited again anyway: a failed gate.
	p.invite("ann", "a1", now.Add(-10*day))
	p.respond("ann", "a1", "decline", now.Add(-10*day+time.Minute))
	p.invite("ann", "a2", now.Add(-day))
	// ben cancelled, was invited inside the cooldown (a violation and a repeat), then after it.
	p.invite("ben", "b1", now.Add(-20*day))
	p.respond("ben", "b1", "cancel", now.Add(-20*day+time.Minute))
	p.invite("ben", "b2", now.Add(-16*day))
	p.invite("ben", "b3", now.Add(-5*day))
	// cat was reset after declining, so a later invitation is fine.
	p.invite("cat", "c1", now.Add(-10*day))
	p.respond("cat", "c1", "decline", now.Add(-10*day+time.Minute))
	p.drain()
	p.reset("cat", now.Add(-3*day))
	p.invite("cat", "c2", now.Add(-2*day))
	p.drain()

	ctx := context.Background()
	a, err := suppression.AuditContactPolicy(ctx, p.ch, now.Add(-30*day), now, false)
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ kind, inv string }
	got := map[key]string{}
	for _, v := range a.Violations {
		got[key{v.Kind, v.InvitationID}] = v.StateAtSend + v.PreviousInvitationID
	}
	want := map[key]string{
		{suppression.ViolationSentWhileSuppressed, "a2"}: suppression.StateDeclined,
		{suppression.ViolationSentWhileSuppressed, "b2"}: suppression.StateCooldown,
		{suppression.ViolationRepeatWithin7Days, "b2"}:   "b1",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("violations %v, want %v", got, want)
	}
	if a.Invitations != 7 || a.ByCampaign["onboarding"].SentWhileSuppressed != 2 || a.ByCampaign["onboarding"].RepeatWithin7Days != 1 {
		t.Errorf("audit counts %+v, want 7 invitations, 2 sent while suppressed, 1 repeat", a.ByCampaign)
	}
	var stored uint64
	if err := p.ch.QueryRow(ctx, "SELECT count() FROM mcpulse.contact_policy_violations FINAL").Scan(&stored); err != nil || stored != 3 {
		t.Errorf("stored violations %d, %v; want 3", stored, err)
	}
}

// Redis compares responded_at and reset_at to the millisecond; so must the reconcile and the
// audit: a decline 1 ms after a reset stays, and a reply within the same second as its
// invitation is no violation.
func TestReconcileAndAuditKeepMillisecondOrder(t *testing.T) {
	p := newPipeline(t)
	sec := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	p.invite("ms-user", "m1", sec.Add(-time.Minute))
	p.respond("ms-user", "m1", "decline", sec.Add(-30*time.Second))
	p.drain()
	p.reset("ms-user", sec.Add(258*time.Millisecond))
	p.respond("ms-user", "m1", "accept", sec.Add(suppression.ResetMargin+259*time.Millisecond)) // 1 ms after the reset covers
	p.invite("quick", "q1", sec.Add(100*time.Millisecond))
	p.respond("quick", "q1", "decline", sec.Add(900*time.Millisecond))
	p.drain()
	if rec, _ := suppression.ReadRecord(context.Background(), p.rdb, ingest.IdentityHash(instance, "ms-user")); rec == nil || rec.Response != suppression.StateAccepted {
		t.Fatalf("the consumer did not apply the response 1 ms after what the reset covers: %+v", rec)
	}

	ctx := context.Background()
	before := p.records()
	if err := p.eachNode(ctx, func(ctx context.Context, node *redis.Client) error { return node.FlushAll(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
	rep, err := suppression.Reconcile(ctx, p.ch, p.rdb, time.Now(), false)
	if err != nil {
		t.Fatal(err)
	}
	after := p.records()
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("after FLUSHALL and reconcile %v, before %v (report %+v)", after, before, rep)
	}
	again, err := suppression.Reconcile(ctx, p.ch, p.rdb, time.Now(), true)
	if err != nil {
		t.Fatal(err)
	}
	if again.KeptNewer != 0 || again.Repairs() != 0 {
		t.Errorf("a dry run right after reconcile reports %+v, want nothing newer than ClickHouse and no repairs", again)
	}
	a, err := suppression.AuditContactPolicy(ctx, p.ch, sec.Add(-time.Hour), time.Now(), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range a.Violations {
		if v.InvitationID == "q1" {
			t.Errorf("a reply within the invitation's second is reported as %+v", v)
		}
	}
}
