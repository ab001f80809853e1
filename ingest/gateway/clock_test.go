package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/ingest/gateway"
)

// The receive time of every request in these tests.
var recvAt = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func clockFixture(t *testing.T) *fixture {
	return newFixture(t, func(c *gateway.Config) { c.Now = func() time.Time { return recvAt } })
}

func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// response is a PostHog-style invitation response dated at by its client's clock.
func response(n int, answer string, at time.Time) map[string]any {
	return map[string]any{
		"uuid": uuidN(n), "event": ingest.EventInvitationResponse, "distinct_id": fmt.Sprintf("user-%d", n),
		"timestamp": rfc(at),
		"properties": map[string]any{"campaign_id": "onboarding", "invitation_id": fmt.Sprintf("inv-%d", n),
			"feature_flag": "mcp-interviews", "response": answer, "responded_at": rfc(at)},
	}
}

// published decodes every message of topic, by uuid.
func published(t *testing.T, f *fixture, topic string) map[string]ingest.Envelope {
	t.Helper()
	out := map[string]ingest.Envelope{}
	for _, m := range f.messages(topic) {
		env := envelopeOf(t, m)
		out[env.UUID] = env
	}
	return out
}

func propTime(t *testing.T, env ingest.Envelope, name string) time.Time {
	t.Helper()
	var s string
	if err := json.Unmarshal(env.Properties[name], &s); err != nil {
		t.Fatalf("%s: property %s = %s: %v", env.UUID, name, env.Properties[name], err)
	}
	return mustTime(t, s)
}

func propString(env ingest.Envelope, name string) string {
	var s string
	_ = json.Unmarshal(env.Properties[name], &s)
	return s
}

// A client 10 minutes fast cancels: its cancel is accepted (not 400), and timestamp and
// responded_at are moved back by the same amount, to within a second of the truth; the raw
// values are kept.
func TestFastClientIsCorrectedWholeAndItsCancelAccepted(t *testing.T) {
	f := clockFixture(t)
	const fast = 10 * time.Minute
	trueAt := recvAt.Add(-5 * time.Second)
	ev := response(1, ingest.ResponseCancel, trueAt.Add(fast))
	res, r := f.post("/batch/", batchBody(t, rfc(recvAt.Add(fast)), ev, toolCallAt(2, trueAt.Add(fast))))
	if res.StatusCode != http.StatusOK || r.Accepted != 2 {
		t.Fatalf("%d %+v, want both events accepted", res.StatusCode, r)
	}
	got := published(t, f, ingest.TopicRecruitment)[uuidN(1)]
	ts, respondedAt := mustTime(t, got.Timestamp), propTime(t, got, "responded_at")
	if !ts.Equal(respondedAt) {
		t.Errorf("timestamp %s and responded_at %s corrected differently", ts, respondedAt)
	}
	if want := trueAt.Add(gateway.FastClockTolerance); !ts.Equal(want) {
		t.Errorf("timestamp %s, want %s (true time + the tolerance)", ts, want)
	}
	if propString(got, gateway.PropClientTimestamp) != rfc(trueAt.Add(fast)) ||
		propString(got, gateway.PropClientRespondedAt) != rfc(trueAt.Add(fast)) ||
		propString(got, gateway.PropClientSentAt) != rfc(recvAt.Add(fast)) ||
		propString(got, gateway.PropReceivedAt) != rfc(recvAt) {
		t.Errorf("raw values not kept: %v", got.Properties)
	}
	call := published(t, f, ingest.TopicToolCalls)[uuidN(2)]
	if !mustTime(t, call.Timestamp).Equal(ts) {
		t.Errorf("tool call %s and response %s of one request shifted differently", call.Timestamp, ts)
	}
}

// A client 10 minutes slow sends an invitation, then (another request) its response: the
// response is not dated before its invitation, and its cooldown is short by at most the
// transit allowance, not by 10 minutes.
func TestSlowClientKeepsOrderAndLosesAtMostTheAllowance(t *testing.T) {
	f := clockFixture(t)
	const slow = 10 * time.Minute
	inviteTrue, answerTrue := recvAt.Add(-20*time.Second), recvAt.Add(-10*time.Second)
	inv := invitation(1)
	inv["timestamp"] = rfc(inviteTrue.Add(-slow))
	if res, r := f.post("/batch/", batchBody(t, rfc(recvAt.Add(-slow)), inv)); res.StatusCode != http.StatusOK || r.Accepted != 1 {
		t.Fatalf("%d %+v", res.StatusCode, r)
	}
	resp := response(2, ingest.ResponseCancel, answerTrue.Add(-slow))
	resp["distinct_id"], resp["properties"].(map[string]any)["invitation_id"] = "user-1", "inv-1"
	if res, r := f.post("/batch/", batchBody(t, rfc(recvAt.Add(-slow)), resp)); res.StatusCode != http.StatusOK || r.Accepted != 1 {
		t.Fatalf("%d %+v", res.StatusCode, r)
	}
	got := published(t, f, ingest.TopicRecruitment)
	invAt := mustTime(t, got[uuidN(1)].Timestamp)
	respondedAt := propTime(t, got[uuidN(2)], "responded_at")
	if !respondedAt.After(invAt) {
		t.Errorf("response at %s dated before its invitation at %s", respondedAt, invAt)
	}
	if short := answerTrue.Sub(respondedAt); short < 0 || short > gateway.DefaultTransitAllowance {
		t.Errorf("responded_at %s is %s before the truth %s, want at most %s", respondedAt, short, answerTrue, gateway.DefaultTransitAllowance)
	}
	if ts := mustTime(t, got[uuidN(2)].Timestamp); !ts.Equal(respondedAt) {
		t.Errorf("timestamp %s and responded_at %s corrected differently", ts, respondedAt)
	}
}

// A request from a correct clock delivered 90 s late (a proxy, an SDK retry) keeps every time as
// sent: transit delay is not a slow clock.
func TestTransitDelayIsNotReadAsSkew(t *testing.T) {
	f := clockFixture(t)
	sent := recvAt.Add(-90 * time.Second)
	at := sent.Add(-2 * time.Second)
	res, r := f.post("/batch/", batchBody(t, rfc(sent), response(1, ingest.ResponseDecline, at), toolCallAt(2, at)))
	if res.StatusCode != http.StatusOK || r.Accepted != 2 {
		t.Fatalf("%d %+v", res.StatusCode, r)
	}
	for _, env := range []ingest.Envelope{published(t, f, ingest.TopicRecruitment)[uuidN(1)], published(t, f, ingest.TopicToolCalls)[uuidN(2)]} {
		if !mustTime(t, env.Timestamp).Equal(at) {
			t.Errorf("%s: timestamp %s, want %s as sent", env.UUID, env.Timestamp, rfc(at))
		}
		for _, p := range []string{gateway.PropClientTimestamp, gateway.PropReceivedAt, gateway.PropClientSentAt} {
			if _, ok := env.Properties[p]; ok {
				t.Errorf("%s: %s added although nothing was corrected", env.UUID, p)
			}
		}
	}
}

// An event dated more than 23 hours after its receipt (after the request's correction) is dated
// at its receipt, as PostHog's ingestion does, with the value sent kept; one dated within the
// bound keeps its date.
func TestTimestampFarInTheFutureIsDatedAtReceipt(t *testing.T) {
	f := clockFixture(t)
	far := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	near := recvAt.Add(22 * time.Hour)
	res, r := f.post("/batch/", batchBody(t, "", toolCallAt(1, far), toolCallAt(2, near)))
	if res.StatusCode != http.StatusOK || r.Accepted != 2 {
		t.Fatalf("%d %+v", res.StatusCode, r)
	}
	got := published(t, f, ingest.TopicToolCalls)
	farEnv, nearEnv := got[uuidN(1)], got[uuidN(2)]
	if !mustTime(t, farEnv.Timestamp).Equal(recvAt) {
		t.Errorf("event dated %s stored at %s, want its receipt %s", rfc(far), farEnv.Timestamp, rfc(recvAt))
	}
	var sent string
	if err := json.Unmarshal(farEnv.Properties[gateway.PropClientTimestamp], &sent); err != nil || sent != rfc(far) {
		t.Errorf("%s = %s (%v), want the timestamp sent, %s", gateway.PropClientTimestamp, farEnv.Properties[gateway.PropClientTimestamp], err, rfc(far))
	}
	if !mustTime(t, nearEnv.Timestamp).Equal(near) {
		t.Errorf("event dated 22 h ahead stored at %s, want %s as sent", nearEnv.Timestamp, rfc(near))
	}
	if _, ok := nearEnv.Properties[gateway.PropClientTimestamp]; ok {
		t.Errorf("%s added to an event within the bound", gateway.PropClientTimestamp)
	}
}

// PostHog's offset (ms before sending) dates an event: against sent_at (and its correction)
// when the request has one, against the receive time otherwise, and against the event's own
// timestamp + offset when that is the only clock reading. A bad offset is that event's 400.
func TestOffsetDatesTheEvent(t *testing.T) {
	f := clockFixture(t)
	withOffset := func(n int, offset any, ts *time.Time) map[string]any {
		ev := toolCall(n)
		delete(ev, "timestamp")
		if ts != nil {
			ev["timestamp"] = rfc(*ts)
		}
		ev["offset"] = offset
		return ev
	}
	// A correct clock, sent 2 s ago: the event happened 5 s before that.
	if res, r := f.post("/batch/", batchBody(t, rfc(recvAt.Add(-2*time.Second)), withOffset(1, 5000, nil))); res.StatusCode != 200 || r.Accepted != 1 {
		t.Fatalf("%d %+v", res.StatusCode, r)
	}
	// No sent_at: 1.5 s before receipt.
	if res, r := f.post("/batch/", batchBody(t, "", withOffset(2, 1500, nil))); res.StatusCode != 200 || r.Accepted != 1 {
		t.Fatalf("%d %+v", res.StatusCode, r)
	}
	// No sent_at, a clock 10 minutes fast: timestamp + offset is its reading at sending.
	fastTS := recvAt.Add(10*time.Minute - 3*time.Second)
	if res, r := f.post("/batch/", batchBody(t, "", withOffset(3, 3000, &fastTS))); res.StatusCode != 200 || r.Accepted != 1 {
		t.Fatalf("%d %+v", res.StatusCode, r)
	}
	// A slow client with sent_at: the offset counts from its corrected sending time.
	slowSent := recvAt.Add(-time.Hour)
	if res, r := f.post("/batch/", batchBody(t, rfc(slowSent), withOffset(4, 1000, nil))); res.StatusCode != 200 || r.Accepted != 1 {
		t.Fatalf("%d %+v", res.StatusCode, r)
	}
	got := published(t, f, ingest.TopicToolCalls)
	for n, want := range map[int]time.Time{
		1: recvAt.Add(-7 * time.Second),
		2: recvAt.Add(-1500 * time.Millisecond),
		3: recvAt.Add(-3*time.Second + gateway.FastClockTolerance),
		4: recvAt.Add(-gateway.DefaultTransitAllowance - time.Second),
	} {
		env := got[uuidN(n)]
		if !mustTime(t, env.Timestamp).Equal(want) {
			t.Errorf("event %d: timestamp %s, want %s", n, env.Timestamp, rfc(want))
		}
		if string(env.Properties[gateway.PropClientOffset]) == "" {
			t.Errorf("event %d: raw offset not kept", n)
		}
	}
	if got := propString(got[uuidN(3)], gateway.PropClientTimestamp); got != rfc(fastTS) {
		t.Errorf("event 3: raw timestamp %q, want %q", got, rfc(fastTS))
	}
	for _, bad := range []any{-5, "5000", 1e15} {
		res, r := f.post("/batch/", batchBody(t, "", withOffset(9, bad, nil)))
		if res.StatusCode != http.StatusBadRequest || len(r.Errors) != 1 || r.Errors[0].Problems[0].Path != "offset" {
			t.Errorf("offset %v: %d %+v, want 400 naming offset", bad, res.StatusCode, r)
		}
	}
}

// posthog-js sends its clock reading as ?_=<milliseconds>: it corrects like sent_at.
func TestPostHogJSUnderscoreIsSentAt(t *testing.T) {
	f := clockFixture(t)
	fast := recvAt.Add(time.Hour)
	ev := toolCallAt(1, fast.Add(-time.Second))
	ev["properties"].(map[string]any)["token"] = testKey
	res, r := f.post(fmt.Sprintf("/e/?_=%d", fast.UnixMilli()), mustJSON(t, []any{ev}))
	if res.StatusCode != http.StatusOK || r.Accepted != 1 {
		t.Fatalf("%d %+v", res.StatusCode, r)
	}
	got := published(t, f, ingest.TopicToolCalls)[uuidN(1)]
	if want := recvAt.Add(-time.Second + gateway.FastClockTolerance); !mustTime(t, got.Timestamp).Equal(want) {
		t.Errorf("timestamp %s, want %s", got.Timestamp, rfc(want))
	}
}

// A slow clock corrected across midnight keeps the batch's order and lands on the right day.
func TestSkewCorrectionAroundMidnightKeepsOrderAndDay(t *testing.T) {
	now := time.Date(2026, 11, 21, 0, 3, 0, 0, time.UTC)
	f := newFixture(t, func(c *gateway.Config) { c.Now = func() time.Time { return now } })
	// The client's clock is two hours behind: it sent at 22:03 on the 20th by its clock.
	sentAt := now.Add(-2 * time.Hour)
	var events []map[string]any
	for i, off := range []time.Duration{-40 * time.Second, -30 * time.Second, -20 * time.Second, -1 * time.Millisecond} {
		ev := toolCall(i + 1)
		ev["timestamp"] = sentAt.Add(off).In(time.FixedZone("client", -5*3600)).Format(time.RFC3339Nano)
		events = append(events, ev)
	}
	if res, r := f.post("/batch/", batchBody(t, sentAt.Format(time.RFC3339Nano), events...)); res.StatusCode != 200 || r.Accepted != 4 {
		t.Fatalf("%d %+v", res.StatusCode, r)
	}
	// sent_at 30 s behind: within the transit allowance, timestamps are kept as sent.
	small := toolCall(5)
	small["timestamp"] = now.Add(-35 * time.Second).Format(time.RFC3339Nano)
	if res, r := f.post("/batch/", batchBody(t, now.Add(-30*time.Second).Format(time.RFC3339Nano), small)); res.StatusCode != 200 || r.Accepted != 1 {
		t.Fatalf("%d %+v", res.StatusCode, r)
	}
	msgs := f.messages(ingest.TopicToolCalls)
	// Corrected by 2 h less the 150 s allowance.
	want := []string{"2026-11-20T23:59:50Z", "2026-11-21T00:00:00Z", "2026-11-21T00:00:10Z", "2026-11-21T00:00:29.999Z", "2026-11-21T00:02:25Z"}
	var got []string
	for _, m := range msgs {
		got = append(got, envelopeOf(t, m).Timestamp)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("timestamps %v, want %v", got, want)
	}
}

func toolCallAt(n int, at time.Time) map[string]any {
	ev := toolCall(n)
	ev["timestamp"] = rfc(at)
	return ev
}

// Only the times the contract reads are shifted: a responded_at property on a tool call is the
// client's data and stays as sent.
func TestOnlyContractTimesAreShifted(t *testing.T) {
	f := clockFixture(t)
	ev := toolCallAt(1, recvAt.Add(time.Hour))
	ev["properties"].(map[string]any)["responded_at"] = "2026-01-01T00:00:00Z"
	if res, r := f.post("/batch/", batchBody(t, rfc(recvAt.Add(time.Hour)), ev)); res.StatusCode != http.StatusOK || r.Accepted != 1 {
		t.Fatalf("%d %+v", res.StatusCode, r)
	}
	got := published(t, f, ingest.TopicToolCalls)[uuidN(1)]
	if s := propString(got, "responded_at"); s != "2026-01-01T00:00:00Z" {
		t.Errorf("a tool call's responded_at became %q", s)
	}
	if _, ok := got.Properties[gateway.PropClientRespondedAt]; ok {
		t.Error("raw responded_at kept for a property that was not corrected")
	}
	if ts := mustTime(t, got.Timestamp); !ts.Equal(recvAt.Add(gateway.FastClockTolerance)) {
		t.Errorf("timestamp %s not corrected", got.Timestamp)
	}
}

// The gateway's clock properties mean the gateway re-dated the event: a client cannot send them.
func TestClientCannotSendTheGatewaysClockProperties(t *testing.T) {
	f := clockFixture(t)
	ev := toolCallAt(1, recvAt.Add(-time.Second))
	for _, p := range []string{gateway.PropReceivedAt, gateway.PropClientTimestamp, gateway.PropClientSentAt, gateway.PropClientRespondedAt, gateway.PropClientOffset} {
		ev["properties"].(map[string]any)[p] = "2001-01-01T00:00:00Z"
	}
	if res, r := f.post("/batch/", batchBody(t, rfc(recvAt), ev)); res.StatusCode != http.StatusOK || r.Accepted != 1 {
		t.Fatalf("%d %+v", res.StatusCode, r)
	}
	got := published(t, f, ingest.TopicToolCalls)[uuidN(1)]
	for p, v := range got.Properties {
		if strings.HasPrefix(p, "$mcpulse_") {
			t.Errorf("client's %s = %s kept", p, v)
		}
	}
}
