package suppression_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/suppression"
)

func TestShowReportsRecordCooldownPendingKeysLastResetAndHistory(t *testing.T) {
	s := newOpsStack(t)
	ctx := context.Background()
	const dave = "user-dave\x1b]0;pwned\a" // a hostile distinct id: must not reach the terminal raw
	hash := opsHash(dave)

	// An earlier reset (through Reset, so the watermark and the audit are real), then a cancel.
	first := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	opsHistory(t, s.ch, dave, "response", "onboarding", "inv-1", "decline", first, &first)
	reset, err := suppression.Reset(ctx, s.resetOptions(dave))
	if err != nil {
		t.Fatal(err)
	}
	// The consumers would store the audit row; insert it as they do.
	msgs := opsAuditMessages(t, s.brokers)
	if len(msgs) != 1 {
		t.Fatalf("%d audit messages", len(msgs))
	}
	var ev struct {
		UUID        string    `json:"uuid"`
		At          time.Time `json:"at"`
		DeletedKeys []string  `json:"deleted_keys"`
	}
	if err := json.Unmarshal(msgs[0].Value, &ev); err != nil {
		t.Fatal(err)
	}
	b, err := s.ch.PrepareBatch(ctx, `INSERT INTO mcpulse.suppression_audit (audit_id, at, action, identity_hash, distinct_id,
instance_url, actor, reason, deleted_keys, previous_record, kafka_partition, kafka_offset)`)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Append(ev.UUID, ev.At, "suppression_reset", hash, dave, opsInstance, "alice", "ticket 1234", ev.DeletedKeys, "null", int32(0), int64(0)); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}

	cancelAt := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	opsHistory(t, s.ch, dave, "invitation_sent", "campaign\n2", "inv-2", "", cancelAt.Add(-time.Minute), nil)
	opsHistory(t, s.ch, dave, "response", "campaign\n2", "inv-2", "cancel", cancelAt, &cancelAt)
	opsPutRecord(t, s.rdb, dave, suppression.Record{CampaignID: "campaign\n2", Response: suppression.StateCooldown,
		RespondedAt: suppression.FormatTime(cancelAt)}, suppression.CooldownPeriod-time.Hour)
	pending := opsPutPending(t, s.rdb, dave, "inv-3", "inv-4")
	opsPutPending(t, s.rdb, "someone-else", "inv-5")

	rep, err := suppression.Show(ctx, suppression.ShowOptions{Redis: s.rdb, ClickHouse: s.ch, DistinctID: dave, ScanCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.IdentityHash != hash || rep.InstanceURL != opsInstance {
		t.Errorf("identity = %s %s", rep.IdentityHash, rep.InstanceURL)
	}
	if rep.Record == nil || rep.Record.Response != suppression.StateCooldown || rep.Record.CampaignID != "campaign\n2" ||
		rep.Record.RespondedAt != suppression.FormatTime(cancelAt) {
		t.Errorf("record = %+v", rep.Record)
	}
	if rep.TTL < suppression.CooldownPeriod-time.Hour-time.Minute || rep.TTL > suppression.CooldownPeriod-time.Hour ||
		rep.CooldownLeftMillis == nil || *rep.CooldownLeftMillis != rep.TTL.Milliseconds() {
		t.Errorf("TTL = %v (%v)", rep.TTL, rep.CooldownLeftMillis)
	}
	if strings.Join(rep.PendingKeys, ",") != strings.Join(pending, ",") {
		t.Errorf("pending = %q, want %q", rep.PendingKeys, pending)
	}
	if rep.LastReset == nil || rep.LastReset.ResetAt != reset.Watermark.ResetAt || rep.LastReset.Actor != "alice" || rep.LastReset.Reason != "ticket 1234" {
		t.Errorf("last reset = %+v", rep.LastReset)
	}
	if !rep.HistoryLoaded || len(rep.History) != 3 || rep.History[0].Response != "decline" || rep.History[1].Kind != "invitation_sent" ||
		rep.History[2].RespondedAt == nil || !rep.History[2].RespondedAt.Equal(cancelAt) {
		t.Errorf("history = %+v", rep.History)
	}
	if len(rep.Resets) != 1 || rep.Resets[0].AuditID != ev.UUID || rep.Resets[0].Actor != "alice" || len(rep.Resets[0].DeletedKeys) != 0 {
		t.Errorf("resets = %+v", rep.Resets)
	}

	// Text: untrusted strings escaped.
	var text strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	if strings.ContainsAny(out, "\x1b\a") || strings.Contains(out, "campaign\n2") {
		t.Errorf("control characters reached the terminal:\n%q", out)
	}
	covers, _ := reset.Watermark.Covers()
	for _, want := range []string{hash, `"user-dave\x1b]0;pwned\a"`, `"campaign\n2"`, "pending keys    2", "left (PTTL", `by "alice": "ticket 1234"`,
		"ignores       responses dated up to " + suppression.FormatTime(covers), "history         3 event(s)", "resets          1"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}

	// JSON: one object.
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"identity_hash", "record", "cooldown_left_ms", "pending_keys", "last_reset", "history", "resets"} {
		if obj[k] == nil {
			t.Errorf("JSON lacks %s: %s", k, data)
		}
	}
}

func TestShowUnknownIdentityAndWithoutClickHouse(t *testing.T) {
	s := newOpsStack(t)
	ctx := context.Background()
	rep, err := suppression.Show(ctx, suppression.ShowOptions{Redis: s.rdb, ClickHouse: s.ch, IdentityHash: strings.Repeat("c", 64)})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Unknown() || rep.Record != nil || rep.TTL != -2 || rep.CooldownLeftMillis != nil {
		t.Errorf("report = %+v", rep)
	}
	var text strings.Builder
	_ = rep.WriteText(&text)
	if !strings.Contains(text.String(), "record          none") || !strings.Contains(text.String(), "no suppression state or history") {
		t.Errorf("text:\n%s", text.String())
	}

	opsPutRecord(t, s.rdb, "user-e", suppression.Record{CampaignID: "c", Response: suppression.StateAccepted, RespondedAt: "2026-11-20T10:00:00.000Z"}, 0)
	rep, err = suppression.Show(ctx, suppression.ShowOptions{Redis: s.rdb, DistinctID: "user-e"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Record == nil || rep.TTL != -1 || rep.CooldownLeftMillis != nil || rep.HistoryLoaded {
		t.Errorf("report = %+v", rep)
	}

	if _, err := suppression.Show(ctx, suppression.ShowOptions{Redis: s.rdb, IdentityHash: "xyz"}); err == nil {
		t.Error("a bad hash was accepted")
	}
	if _, err := suppression.Show(ctx, suppression.ShowOptions{Redis: s.rdb}); err == nil {
		t.Error("no identity was accepted")
	}
}

// Events of one second (timestamps are whole seconds: an invitation and its answer sent in one
// request get the same receive time) are listed in the order they happen, invitation, link
// opened, response, whatever their uuids (the table's tie-break) say.
func TestShowHistoryOrdersEventsOfOneSecondByWhatHappensFirst(t *testing.T) {
	s := newOpsStack(t)
	ctx := context.Background()
	const erin = "user-erin"
	at := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	for i, kind := range []string{"response", "link_opened", "invitation_sent"} { // uuids ascending in this order
		b, err := s.ch.PrepareBatch(ctx, `INSERT INTO mcpulse.recruitment_events (uuid, timestamp, kind, distinct_id,
identity_hash, instance_url, campaign_id, invitation_id, response, responded_at)`)
		if err != nil {
			t.Fatal(err)
		}
		var response string
		var respondedAt *time.Time
		if kind == "response" {
			response, respondedAt = "decline", &at
		}
		id := fmt.Sprintf("00000000-0000-7000-8000-%012d", i+1)
		if err := b.Append(id, at, kind, erin, opsHash(erin), opsInstance, "c", "inv-1", response, respondedAt); err != nil {
			t.Fatal(err)
		}
		if err := b.Send(); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := suppression.Show(ctx, suppression.ShowOptions{Redis: s.rdb, ClickHouse: s.ch, DistinctID: erin})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range rep.History {
		kinds = append(kinds, ev.Kind)
	}
	if got := strings.Join(kinds, ","); got != "invitation_sent,link_opened,response" {
		t.Errorf("history kinds = %s, want invitation_sent,link_opened,response", got)
	}
}
