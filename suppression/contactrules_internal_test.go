package suppression

import (
	"testing"
	"time"
)

// The thresholds are the payload version's in force at the invitation: the greatest
// first_seen at or before it; an absent field takes its default, and a removed variant, an
// unreadable payload or out-of-range thresholds give the defaults.
func TestThresholdsOfThePayloadVersionInForce(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	pv := payloadVersions{
		"f\x00a": {
			{firstSeen: t0, payload: `{"message":"m","booking_url":"https://x","min_completed_tool_calls":5}`},
			{firstSeen: t0.Add(time.Hour), payload: `"{\"min_completed_tool_calls\":0,\"min_session_age_seconds\":30}"`},
			{firstSeen: t0.Add(2 * time.Hour), payload: `{"min_completed_tool_calls":1001}`},
			{firstSeen: t0.Add(3 * time.Hour), removed: true},
		},
		"f\x00true": {{firstSeen: t0, payload: `{"min_session_age_seconds":0}`}},
	}
	for _, c := range []struct {
		flag, variant string
		at            time.Time
		calls, age    int64
	}{
		{"f", "a", t0.Add(-time.Second), 3, 120},
		{"f", "a", t0, 5, 120},
		{"f", "a", t0.Add(90 * time.Minute), 0, 30},
		{"f", "a", t0.Add(150 * time.Minute), 3, 120},
		{"f", "a", t0.Add(4 * time.Hour), 3, 120},
		{"f", "b", t0.Add(time.Hour), 3, 120},
		{"f", BooleanCampaign, t0.Add(time.Hour), 3, 0},
	} {
		th := pv.thresholdsAt(c.flag, c.variant, c.at)
		if th.calls != c.calls || th.ageSecs != c.age {
			t.Errorf("%s/%s at %s: %+v, want %d calls and %d s", c.flag, c.variant, c.at, th, c.calls, c.age)
		}
	}
}

// The recount counts successful product calls up to the invitation's second, from the first
// product call, and starts again after 24 hours without one.
func TestRecountRestartsAfterTheCounterExpires(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Unix()
	inv := &contactInvitation{did: "d", props: invitationProps{client: "c", conversation: "v"}}
	w := &warmup{calls: map[string][]warmCall{warmKey("d", "c", "v"): {
		{at: t0, product: true, ok: true},
		{at: t0 + 10, product: true, ok: true},
		{at: t0 + 10 + 25*3600, product: true, ok: false},
		{at: t0 + 20 + 25*3600, product: false, ok: true},
		{at: t0 + 30 + 25*3600, product: true, ok: true},
		{at: t0 + 100 + 25*3600, product: true, ok: true},
	}}}
	inv.at = time.Unix(t0+100+25*3600, 500e6)
	calls, age := w.recount(inv)
	if calls != 2 || age != 90.5 {
		t.Errorf("recount %d calls over %v s, want 2 over 90.5 (since the call after the gap)", calls, age)
	}
	inv.at = time.Unix(t0+5, 0)
	if calls, age := w.recount(inv); calls != 1 || age != 5 {
		t.Errorf("early recount %d calls over %v s, want 1 over 5", calls, age)
	}
	inv.at = time.Unix(t0+10+3*24*3600, 0)
	if calls, age := w.recount(inv); calls != 0 || age != 0 {
		t.Errorf("recount after the counter expired %d over %v, want 0", calls, age)
	}
}
