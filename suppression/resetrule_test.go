package suppression_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/suppression"
)

// The reset rule (ResetCovers, DESIGN.md §3): an ops reset holds against every response the
// clock rule accepted before it, whatever date the response claims, through the consumers'
// script, reconcile and the contact-policy audit, against redeliveries, replays under a new
// uuid, clients whose clocks run fast or slow, and a consumer whose clock runs behind Redis's.
func TestResetHoldsAgainstEveryResponseTheClockRuleAccepts(t *testing.T) {
	t.Run("single node", func(t *testing.T) { testResetHolds(t, newPipelineOn(t, false)) })
	t.Run("three-node cluster", func(t *testing.T) { testResetHolds(t, newPipelineOn(t, true)) })
}

// sent is one event as published, so it can be redelivered as is or copied under a new uuid.
type sent struct {
	topic string
	value []byte
}

func (p *pipeline) sendRecruitment(event, distinctID, invitationID string, at time.Time, extra map[string]any) sent {
	p.t.Helper()
	props := map[string]any{"campaign_id": "onboarding", "invitation_id": invitationID, "feature_flag": "mcp-interviews"}
	for k, v := range extra {
		props[k] = v
	}
	value, err := json.Marshal(map[string]any{"uuid": p.uuid(), "event": event, "distinct_id": distinctID,
		"timestamp": at.Format(time.RFC3339Nano), "properties": props})
	if err != nil {
		p.t.Fatal(err)
	}
	s := sent{ingest.TopicRecruitment, value}
	p.resend(s)
	return s
}

func (p *pipeline) resend(s sent) {
	p.t.Helper()
	if err := p.pub.PublishRaw(context.Background(), s.topic, nil, s.value); err != nil {
		p.t.Fatal(err)
	}
}

// copyWithNewUUID publishes s again under a fresh uuid (what a replay from a log that lost the
// uuids, or a client that re-sends with a new one, does).
func (p *pipeline) copyWithNewUUID(s sent) {
	p.t.Helper()
	var m map[string]any
	if err := json.Unmarshal(s.value, &m); err != nil {
		p.t.Fatal(err)
	}
	m["uuid"] = p.uuid()
	value, _ := json.Marshal(m)
	p.resend(sent{s.topic, value})
}

// drainSkewed drains with a consumer whose clock is skew away from this machine's (and so
// from the Redis server's). It returns the consumer's stats.
func (p *pipeline) drainSkewed(skew time.Duration) consumers.Stats {
	p.t.Helper()
	c, err := consumers.New(consumers.Config{Brokers: p.stack.KafkaBrokers, Redis: p.rdb, ClickHouse: p.ch, DeadLetters: p.pub,
		BatchWait: 50 * time.Millisecond, IdleToDrain: 300 * time.Millisecond,
		Now: func() time.Time { return time.Now().Add(skew) }})
	if err != nil {
		p.t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.RunUntilDrained(ctx); err != nil || ctx.Err() != nil {
		p.t.Fatalf("drain: %v %v", err, ctx.Err())
	}
	return c.Stats()
}

func (p *pipeline) opsReset(distinctID string) *suppression.ResetReport {
	p.t.Helper()
	rep, err := suppression.Reset(context.Background(), suppression.ResetOptions{Redis: p.rdb, ClickHouse: p.ch, Publisher: p.pub,
		DistinctID: distinctID, InstanceURL: instance, Actor: "ops", Reason: "asked to be invited again"})
	if err != nil {
		p.t.Fatal(err)
	}
	return rep
}

func (p *pipeline) recordOf(distinctID string) *suppression.Record {
	p.t.Helper()
	rec, err := suppression.ReadRecord(context.Background(), p.rdb, ingest.IdentityHash(instance, distinctID))
	if err != nil {
		p.t.Fatal(err)
	}
	return rec
}

func testResetHolds(t *testing.T, p *pipeline) {
	ctx := context.Background()
	respond := func(who, answer string, at time.Time) sent {
		return p.sendRecruitment(ingest.EventInvitationResponse, who, "inv-"+who, at, map[string]any{"response": answer})
	}
	// Responses the clock rule accepts, received before the resets: clients 4m50s and 4m fast
	// (within the 5-minute margin), a client 10 minutes slow, and, through a consumer whose
	// clock runs 2 minutes behind Redis's, a decline dated 4m59s after that consumer's clock.
	now := time.Now()
	received := []sent{
		respond("fast-decline", "decline", now.Add(4*time.Minute+50*time.Second)),
		respond("fast-cancel", "cancel", now.Add(4*time.Minute)),
		respond("slow-decline", "decline", now.Add(-10*time.Minute)),
	}
	p.drain()
	received = append(received, respond("behind-consumer", "decline", time.Now().Add(-2*time.Minute+4*time.Minute+59*time.Second)))
	if st := p.drainSkewed(-2 * time.Minute); st.DeadLettered != 0 {
		t.Fatalf("the clock rule refused %d responses; the test needs them accepted", st.DeadLettered)
	}
	people := []string{"fast-decline", "fast-cancel", "slow-decline", "behind-consumer"}
	for _, who := range people {
		if p.recordOf(who) == nil {
			t.Fatalf("%s: no record before the reset", who)
		}
	}

	resetAt := map[string]time.Time{}
	for _, who := range people {
		rep := p.opsReset(who)
		at, ok := suppression.ParseTime(rep.Watermark.ResetAt)
		if !ok {
			t.Fatalf("%s: reset_at %q", who, rep.Watermark.ResetAt)
		}
		resetAt[who] = at
	}
	p.drain() // the consumers store the audit events

	check := func(stage string) {
		t.Helper()
		for _, who := range people {
			if rec := p.recordOf(who); rec != nil {
				t.Errorf("%s: %s came back (%s dated %s; reset at %s)", stage, who, rec.Response, rec.RespondedAt, suppression.FormatTime(resetAt[who]))
			}
		}
	}
	check("after the reset")

	// Reconcile, with no replay at all: nothing to restore, nothing wrong.
	rep, err := suppression.Reconcile(ctx, p.ch, p.rdb, time.Now(), false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Repairs() != 0 || rep.Live != 0 {
		t.Errorf("reconcile after the resets: %+v, want no live record and no repair", rep)
	}
	check("after reconcile")

	// Every response redelivered as is, and copied under a new uuid, through a consumer on
	// Redis's clock and one 2 minutes behind it; then reconcile again.
	for _, s := range received {
		p.resend(s)
		p.copyWithNewUUID(s)
	}
	st := p.drainSkewed(0)
	if got := st.Suppression[string(suppression.Written)]; got != 0 {
		t.Errorf("replays wrote %d records", got)
	}
	for _, s := range received {
		p.copyWithNewUUID(s)
	}
	p.drainSkewed(-2 * time.Minute)
	check("after replays")
	if rep, err := suppression.Reconcile(ctx, p.ch, p.rdb, time.Now(), false); err != nil || rep.Repairs() != 0 || rep.Live != 0 {
		t.Errorf("reconcile after the replays: %+v, %v; want no live record and no repair", rep, err)
	}
	check("after replays and reconcile")

	// The contact-policy audit agrees: an invitation after the reset, dated after every
	// response above, broke no suppression.
	for _, who := range people {
		p.sendRecruitment(ingest.EventInvitationSent, who, "again-"+who, resetAt[who].Add(suppression.ResetMargin+time.Minute), nil)
	}
	p.drain()
	audit, err := suppression.AuditContactPolicy(ctx, p.ch, now.Add(-time.Hour), time.Now(), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range audit.Violations {
		if v.Kind == suppression.ViolationSentWhileSuppressed {
			t.Errorf("audit: invitation %s counted as sent while %s", v.InvitationID, v.StateAtSend)
		}
	}

	// The reset does not swallow what comes after it: a decline dated past reset_at + the
	// margin, received by a consumer whose clock has moved on, suppresses again, and reconcile
	// keeps it.
	later := resetAt["fast-decline"].Add(suppression.ResetMargin + 3*time.Minute)
	respond("fast-decline", "decline", later)
	p.drainSkewed(suppression.ResetMargin)
	if rec := p.recordOf("fast-decline"); rec == nil || rec.Response != suppression.StateDeclined || rec.RespondedAt != suppression.FormatTime(later) {
		t.Fatalf("a decline dated after the reset's margin: record %+v, want declined at %s", rec, suppression.FormatTime(later))
	}
	if rep, err := suppression.Reconcile(ctx, p.ch, p.rdb, time.Now(), false); err != nil || rep.Repairs() != 0 || rep.Live != 1 {
		t.Errorf("reconcile after a later decline: %+v, %v; want one live record, no repair", rep, err)
	}
}
