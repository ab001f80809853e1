package ingest_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/ingest"
)

const testUUID = "0190d2a4-7b1e-7c3a-9f00-0123456789ab"

// envelope builds an event JSON object from a base valid event of the given kind with the
// top-level fields and properties overridden (a nil value deletes the key).
func envelope(t testing.TB, kind *ingest.Kind, top map[string]any, props map[string]any) []byte {
	t.Helper()
	base := map[string]any{
		"uuid":        testUUID,
		"distinct_id": "user-1",
		"timestamp":   "2026-03-01T12:00:00.123+02:00",
		"event":       "$pageview",
	}
	if kind != nil && kind.Event != "" {
		base["event"] = kind.Event
	}
	p := map[string]any{}
	for k, v := range minimalProperties[kind] {
		p[k] = v
	}
	for k, v := range props {
		if v == nil {
			delete(p, k)
		} else {
			p[k] = v
		}
	}
	base["properties"] = p
	for k, v := range top {
		if v == nil {
			delete(base, k)
		} else {
			base[k] = v
		}
	}
	b, err := json.Marshal(base)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// minimalProperties are the required properties of each kind, valid (nil: an unknown event).
var minimalProperties = map[*ingest.Kind]map[string]any{
	ingest.KindToolCall:           {"$mcp_tool_name": "query-run"},
	ingest.KindInvitationSent:     {"campaign_id": "c1", "invitation_id": "inv-1", "feature_flag": "mcp-interviews"},
	ingest.KindBookingLinkOpened:  {"campaign_id": "c1", "invitation_id": "inv-1", "feature_flag": "mcp-interviews"},
	ingest.KindInvitationResponse: {"campaign_id": "c1", "invitation_id": "inv-1", "feature_flag": "mcp-interviews", "response": "accept"},
}

// null marks a property that must be sent as JSON null (a nil map value deletes the key).
var null = json.RawMessage("null")

func TestParseValidKinds(t *testing.T) {
	ts := time.Date(2026, 3, 1, 10, 0, 0, 123e6, time.UTC)
	for _, kind := range ingest.Kinds() {
		t.Run(kind.Name, func(t *testing.T) {
			ev, err := ingest.Parse(envelope(t, kind, nil, nil))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if ev.Kind != kind || ev.UUID.String() != testUUID || ev.DistinctID != "user-1" || !ev.Timestamp.Equal(ts) || ev.Timestamp.Location() != time.UTC {
				t.Fatalf("got %+v", ev)
			}
			payloads := map[*ingest.Kind]bool{
				ingest.KindToolCall: ev.ToolCall != nil, ingest.KindInvitationSent: ev.Recruitment != nil,
				ingest.KindBookingLinkOpened: ev.Recruitment != nil, ingest.KindInvitationResponse: ev.Recruitment != nil,
				ingest.KindToolsList: ev.ToolsList != nil, ingest.KindInitialize: ev.Initialize != nil,
				ingest.KindException: ev.Exception != nil, ingest.KindOther: true,
				ingest.KindFeedback: ev.Feedback != nil, ingest.KindMissingCapability: ev.Feedback != nil,
				ingest.KindResourcesList: ev.Resource != nil, ingest.KindResourceRead: ev.Resource != nil,
				ingest.KindPromptsList: ev.Resource != nil, ingest.KindPromptGet: ev.Resource != nil,
				ingest.KindIdentify: ev.Identify != nil,
			}
			set := 0
			for _, p := range []bool{ev.ToolCall != nil, ev.Recruitment != nil, ev.ToolsList != nil, ev.Initialize != nil, ev.Exception != nil,
				ev.Feedback != nil, ev.Resource != nil, ev.Identify != nil} {
				if p {
					set++
				}
			}
			if have, known := payloads[kind]; !known || !have || (kind == ingest.KindOther) != (set == 0) || set > 1 {
				t.Fatalf("kind payload of %s: %+v (a new kind needs its case here)", kind.Name, ev)
			}
			var rows ingest.Rows
			rows.Append(ev, ingest.RowContext{})
			if kind != ingest.KindToolsList && rows.Len() != 1 {
				t.Fatalf("%d raw rows, want 1", rows.Len())
			}
			if ev.Kind.Topic == "" {
				t.Fatal("no topic")
			}
		})
	}
}

func TestParseToolCallProperties(t *testing.T) {
	// The list is cut at 20 keys; the total says how many there were.
	keys := []string{"filters.0.typo", "a\u2028b", "c\u0007d\u0085e\u2029"}
	for i := len(keys); i < ingest.MaxIgnoredKeys; i++ {
		keys = append(keys, fmt.Sprintf("extra%d", i))
	}
	ev, err := ingest.Parse(envelope(t, ingest.KindToolCall, nil, map[string]any{
		"$mcp_is_error":                         "true",
		"$mcp_duration_ms":                      12.5,
		"$mcp_client_name":                      "claude-code",
		"$mcp_exec_verb":                        "call",
		"$mcp_exec_target_tool":                 "insight-create",
		"$mcp_ignored_keys":                     keys,
		"$mcp_ignored_keys_total":               25,
		"interview_recruitment_reason":          "some_future_gate",
		"interview_recruitment_url_supported":   null,
		"interview_recruitment_form_supported":  "false",
		"interview_recruitment_completed_calls": 3,
		"custom":                                map[string]any{"kept": true},
	}))
	if err != nil {
		t.Fatal(err)
	}
	tc := ev.ToolCall
	if !tc.IsError || tc.DurationMs == nil || *tc.DurationMs != 12.5 || tc.EffectiveTool() != "insight-create" {
		t.Fatalf("tool call: %+v", tc)
	}
	if want := []string{"filters.0.typo", "a?b", "c?d?e?"}; !reflect.DeepEqual(tc.IgnoredKeys[:3], want) {
		t.Fatalf("ignored keys masked: got %q, want %q", tc.IgnoredKeys, want)
	}
	if tc.IgnoredKeysTotal != 25 {
		t.Fatalf("total %d", tc.IgnoredKeysTotal)
	}
	if tc.URLSupported != nil {
		t.Fatalf("null url_supported must stay nil (unknown), got %v", *tc.URLSupported)
	}
	if tc.FormSupported == nil || *tc.FormSupported {
		t.Fatalf(`"false" form_supported: got %v`, tc.FormSupported)
	}
	if tc.Reason != "some_future_gate" {
		t.Fatalf("unknown reason must be kept, got %q", tc.Reason)
	}
	if tc.CompletedCalls == nil || *tc.CompletedCalls != 3 {
		t.Fatalf("completed calls %v", tc.CompletedCalls)
	}
	if !strings.Contains(string(ev.Properties), `"custom":{"kept":true}`) {
		t.Fatalf("unknown property not kept: %s", ev.Properties)
	}

	// Absent flags also stay nil, absent $mcp_is_error is false, total defaults to the count.
	ev, err = ingest.Parse(envelope(t, ingest.KindToolCall, nil, map[string]any{"$mcp_ignored_keys": []string{"x"}}))
	if err != nil {
		t.Fatal(err)
	}
	if ev.ToolCall.IsError || ev.ToolCall.URLSupported != nil || ev.ToolCall.FormSupported != nil || ev.ToolCall.IgnoredKeysTotal != 1 {
		t.Fatalf("defaults: %+v", ev.ToolCall)
	}
}

func TestParseRespondedAt(t *testing.T) {
	ev, err := ingest.Parse(envelope(t, ingest.KindInvitationResponse, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Recruitment.RespondedAt.Equal(ev.Timestamp) {
		t.Fatalf("responded_at default: %v, timestamp %v", ev.Recruitment.RespondedAt, ev.Timestamp)
	}
	ev, err = ingest.Parse(envelope(t, ingest.KindInvitationResponse, nil, map[string]any{
		"responded_at": "2026-03-02T00:00:00-05:00", "response": "cancel", "instance_url": "https://eu.posthog.com",
	}))
	if err != nil {
		t.Fatal(err)
	}
	r := ev.Recruitment
	if want := time.Date(2026, 3, 2, 5, 0, 0, 0, time.UTC); !r.RespondedAt.Equal(want) || r.RespondedAt.Location() != time.UTC {
		t.Fatalf("responded_at %v", r.RespondedAt)
	}
	if r.Response != "cancel" || r.InstanceURL != "https://eu.posthog.com" || r.CampaignID != "c1" {
		t.Fatalf("recruitment %+v", r)
	}
}

// CheckClock refuses a response dated beyond MaxResponseClockSkew after the checking clock
// (responded_at, or the timestamp without one) and nothing else.
func TestCheckClockRefusesResponsesFromTheFuture(t *testing.T) {
	respondedAt := time.Date(2026, 3, 2, 5, 0, 0, 0, time.UTC) // the response below
	response := mustParse(t, envelope(t, ingest.KindInvitationResponse, nil, map[string]any{"responded_at": "2026-03-02T00:00:00-05:00"}))
	noRespondedAt := mustParse(t, envelope(t, ingest.KindInvitationResponse, nil, nil)) // 2026-03-01T10:00:00.123Z
	toolCall := mustParse(t, envelope(t, ingest.KindToolCall, nil, nil))
	for _, c := range []struct {
		name string
		ev   *ingest.Event
		now  time.Time
		want string // "" = accepted
	}{
		{"long past", response, respondedAt.Add(24 * time.Hour), ""},
		{"at the skew", response, respondedAt.Add(-ingest.MaxResponseClockSkew), ""},
		{"beyond the skew", response, respondedAt.Add(-ingest.MaxResponseClockSkew - time.Millisecond),
			"properties.responded_at: 2026-03-02T05:00:00Z is 5m0s ahead of the receiving clock (2026-03-02T04:54:59Z), more than the 5m0s allowed"},
		{"timestamp as responded_at", noRespondedAt, noRespondedAt.Timestamp.Add(-time.Hour),
			"properties.responded_at: 2026-03-01T10:00:00.123Z is 1h0m0s ahead"},
		{"not a response", toolCall, toolCall.Timestamp.AddDate(-50, 0, 0), ""},
	} {
		err := ingest.CheckClock(c.ev, c.now)
		var verr *ingest.ValidationError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", c.name, err)
		case c.want != "" && (!errors.As(err, &verr) || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%s: %v, want a *ValidationError starting %q", c.name, err, c.want)
		}
	}
}

func TestParseProblems(t *testing.T) {
	tool, inv, resp := ingest.KindToolCall, ingest.KindInvitationSent, ingest.KindInvitationResponse
	many := make([]string, 21)
	for i := range many {
		many[i] = "k"
	}
	cases := []struct {
		name  string
		kind  *ingest.Kind
		top   map[string]any
		props map[string]any
		want  []string // "path: problem" prefixes, in order
	}{
		{"uuid missing", tool, map[string]any{"uuid": nil}, nil, []string{"uuid: required"}},
		{"uuid empty", tool, map[string]any{"uuid": ""}, nil, []string{"uuid: required"}},
		{"uuid null", tool, map[string]any{"uuid": null}, nil, []string{"uuid: required"}},
		{"uuid not canonical", tool, map[string]any{"uuid": "0190d2a47b1e7c3a9f000123456789ab"}, nil, []string{"uuid: not a UUID in canonical"}},
		{"uuid bad hex", tool, map[string]any{"uuid": "0190d2a4-7b1e-7c3a-9f00-0123456789zz"}, nil, []string{"uuid: not a UUID"}},
		{"uuid nil", tool, map[string]any{"uuid": "00000000-0000-0000-0000-000000000000"}, nil, []string{"uuid: the nil UUID"}},
		{"uuid number", tool, map[string]any{"uuid": 5}, nil, []string{"uuid: must be a string"}},
		{"uuid key case matters", tool, map[string]any{"uuid": nil, "UUID": testUUID}, nil, []string{"uuid: required"}},
		{"event missing", tool, map[string]any{"event": nil}, nil, []string{"event: required"}},
		{"event object", tool, map[string]any{"event": map[string]any{}}, nil, []string{"event: must be a string"}},
		{"distinct_id missing", tool, map[string]any{"distinct_id": nil}, nil, []string{"distinct_id: required"}},
		{"distinct_id too long", tool, map[string]any{"distinct_id": strings.Repeat("é", 201)}, nil, []string{"distinct_id: 201 characters, at most 200"}},
		{"distinct_id number", tool, map[string]any{"distinct_id": 42}, nil, []string{"distinct_id: must be a string"}},
		{"timestamp missing", tool, map[string]any{"timestamp": nil}, nil, []string{"timestamp: required"}},
		{"timestamp no offset", tool, map[string]any{"timestamp": "2026-03-01T12:00:00"}, nil, []string{"timestamp: not RFC 3339"}},
		{"timestamp comma fraction", tool, map[string]any{"timestamp": "2026-03-01T12:00:00,5Z"}, nil, []string{"timestamp: not RFC 3339"}},
		{"timestamp year 10000 in UTC", tool, map[string]any{"timestamp": "9999-12-31T23:30:00-01:00"}, nil, []string{"timestamp: out of range"}},
		{"timestamp before 1970 (ClickHouse DateTime would wrap)", tool, map[string]any{"timestamp": "1969-12-31T23:59:59Z"}, nil, []string{"timestamp: out of range"}},
		{"timestamp in 2106 (ClickHouse DateTime would wrap)", tool, map[string]any{"timestamp": "2106-01-01T00:00:00Z"}, nil, []string{"timestamp: out of range"}},
		{"timestamp year -1 in UTC", tool, map[string]any{"timestamp": "0000-01-01T00:30:00+01:00"}, nil, []string{"timestamp: out of range"}},
		{"timestamp unix number", tool, map[string]any{"timestamp": 1767225600}, nil, []string{"timestamp: must be a string"}},
		{"properties missing", tool, map[string]any{"properties": nil}, nil, []string{"properties: required", "properties.$mcp_tool_name: required"}},
		{"properties array", inv, map[string]any{"properties": []int{1}}, nil, []string{"properties: must be a JSON object", "properties.campaign_id: required", "properties.invitation_id: required", "properties.feature_flag: required"}},
		{"tool name missing", tool, nil, map[string]any{"$mcp_tool_name": nil}, []string{"properties.$mcp_tool_name: required"}},
		{"tool name empty", tool, nil, map[string]any{"$mcp_tool_name": ""}, []string{"properties.$mcp_tool_name: must not be empty"}},
		{"tool name number", tool, nil, map[string]any{"$mcp_tool_name": 1}, []string{"properties.$mcp_tool_name: must be a string"}},
		{"is_error yes", tool, nil, map[string]any{"$mcp_is_error": "yes"}, []string{"properties.$mcp_is_error: must be a boolean"}},
		{"is_error 1", tool, nil, map[string]any{"$mcp_is_error": 1}, []string{"properties.$mcp_is_error: must be a boolean"}},
		{"duration string", tool, nil, map[string]any{"$mcp_duration_ms": "12"}, []string{"properties.$mcp_duration_ms: must be a number"}},
		{"client name number", tool, nil, map[string]any{"$mcp_client_name": 3}, []string{"properties.$mcp_client_name: must be a string"}},
		{"ignored keys not array", tool, nil, map[string]any{"$mcp_ignored_keys": "a,b"}, []string{"properties.$mcp_ignored_keys: must be an array of strings"}},
		{"ignored keys item", tool, nil, map[string]any{"$mcp_ignored_keys": []any{"a", 3, ""}}, []string{"properties.$mcp_ignored_keys[1]: must be a string", "properties.$mcp_ignored_keys[2]: must not be empty"}},
		{"ignored keys over cap", tool, nil, map[string]any{"$mcp_ignored_keys": many}, []string{"properties.$mcp_ignored_keys: 21 entries, at most 20"}},
		{"ignored total below count", tool, nil, map[string]any{"$mcp_ignored_keys": []string{"a", "b"}, "$mcp_ignored_keys_total": 1}, []string{"properties.$mcp_ignored_keys_total: 1 is less than the 2 keys listed"}},
		{"ignored keys over cap with their total", tool, nil, map[string]any{"$mcp_ignored_keys": many, "$mcp_ignored_keys_total": 21}, []string{"properties.$mcp_ignored_keys: 21 entries, at most 20"}},
		{"ignored total above a short list", tool, nil, map[string]any{"$mcp_ignored_keys": []string{"x"}, "$mcp_ignored_keys_total": 5}, []string{"properties.$mcp_ignored_keys_total: 5, but the list holds 1 and is cut only when it reaches 20"}},
		{"completed calls beyond 2^53", tool, nil, map[string]any{"interview_recruitment_completed_calls": 1e18}, []string{"properties.interview_recruitment_completed_calls: must be at most 2^53"}},
		{"ignored total fraction", tool, nil, map[string]any{"$mcp_ignored_keys_total": 1.5}, []string{"properties.$mcp_ignored_keys_total: must be a non-negative integer"}},
		{"url_supported maybe", tool, nil, map[string]any{"interview_recruitment_url_supported": "maybe"}, []string{"properties.interview_recruitment_url_supported: must be a boolean"}},
		{"completed calls negative", tool, nil, map[string]any{"interview_recruitment_completed_calls": -1}, []string{"properties.interview_recruitment_completed_calls: must be a non-negative integer"}},
		{"session age string", tool, nil, map[string]any{"interview_recruitment_session_age_seconds": "10"}, []string{"properties.interview_recruitment_session_age_seconds: must be a number"}},
		{"campaign missing", inv, nil, map[string]any{"campaign_id": nil}, []string{"properties.campaign_id: required"}},
		{"invitation empty", ingest.KindBookingLinkOpened, nil, map[string]any{"invitation_id": ""}, []string{"properties.invitation_id: must not be empty"}},
		{"flag number", inv, nil, map[string]any{"feature_flag": 1}, []string{"properties.feature_flag: must be a string"}},
		{"instance_url number", inv, nil, map[string]any{"instance_url": 1}, []string{"properties.instance_url: must be a string"}},
		{"response missing", resp, nil, map[string]any{"response": nil}, []string{"properties.response: required"}},
		{"response unknown", resp, nil, map[string]any{"response": "maybe"}, []string{`properties.response: must be accept, decline or cancel, got "maybe"`}},
		{"responded_at out of range", resp, nil, map[string]any{"responded_at": "0000-01-01T00:00:00+00:01"}, []string{"properties.responded_at: out of range"}},
		{"responded_at bad", resp, nil, map[string]any{"responded_at": "yesterday"}, []string{`properties.responded_at: not RFC 3339 with an offset: "yesterday"`}},
		{
			"several at once, all reported in field order", tool,
			map[string]any{"uuid": nil, "distinct_id": "", "timestamp": "soon"},
			map[string]any{"$mcp_tool_name": nil, "$mcp_is_error": "yes", "$mcp_ignored_keys": []any{7}},
			[]string{"uuid: required", "distinct_id: required", "timestamp: not RFC 3339", "properties.$mcp_tool_name: required", "properties.$mcp_is_error: must be a boolean", "properties.$mcp_ignored_keys[0]: must be a string"},
		},
		{"unknown event with a problem is a validation error", nil, map[string]any{"uuid": nil}, nil, []string{"uuid: required"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, err := ingest.Parse(envelope(t, c.kind, c.top, c.props))
			var verr *ingest.ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("Parse: got event %+v, error %v; want a *ValidationError", ev, err)
			}
			if ev != nil {
				t.Fatal("event returned with an error")
			}
			got := make([]string, len(verr.Problems))
			for i, p := range verr.Problems {
				got[i] = p.String()
			}
			if len(got) != len(c.want) {
				t.Fatalf("problems:\n got %q\nwant %q", got, c.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], c.want[i]) {
					t.Fatalf("problem %d:\n got %q\nwant prefix %q (all: %q)", i, got[i], c.want[i], got)
				}
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error is not one line: %q", err)
			}
		})
	}
}

// An event of any other name is valid (counted per name), its properties unread.
func TestParseOtherEvent(t *testing.T) {
	ev, err := ingest.Parse(envelope(t, nil, nil, map[string]any{"anything": 1, "$mcp_tool_name": 5}))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Kind != ingest.KindOther || ev.Name != "$pageview" || ingest.KindOf("$mcp_custom") != ingest.KindOther {
		t.Fatalf("kind %v, name %q", ev.Kind, ev.Name)
	}
	if string(ev.Extra) != `{"$mcp_tool_name":5,"anything":1}` {
		t.Fatalf("Extra %s, want every property", ev.Extra)
	}
	if string(ingest.MessageKey(ev, "")) != "user-1" || ev.Kind.Topic != ingest.TopicToolCalls {
		t.Fatalf("routed to %s keyed %q", ev.Kind.Topic, ingest.MessageKey(ev, ""))
	}
}

func TestParseBadJSON(t *testing.T) {
	for _, in := range []string{``, `{`, `[]`, `null`, `"x"`, `{"uuid":1}}`, `{} {}`, `{"a":1,}`, "\xff"} {
		ev, err := ingest.Parse([]byte(in))
		var verr *ingest.ValidationError
		if err == nil || errors.As(err, &verr) || ev != nil {
			t.Errorf("Parse(%q): event %v, error %v; want a bad JSON error", in, ev, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "bad JSON: ") {
			t.Errorf("Parse(%q): error %q does not start with \"bad JSON: \"", in, err)
		}
	}
}

func TestValidateEnvelope(t *testing.T) {
	env := &ingest.Envelope{UUID: testUUID, Event: ingest.EventBookingLinkOpened, DistinctID: "d", Timestamp: "2026-01-01T00:00:00Z",
		Properties: map[string]json.RawMessage{"campaign_id": json.RawMessage(`"c"`), "invitation_id": json.RawMessage(`"i"`), "feature_flag": json.RawMessage(`"f"`)}}
	ev, err := ingest.Validate(env)
	if err != nil || ev.Kind != ingest.KindBookingLinkOpened {
		t.Fatalf("Validate: %v %v", ev, err)
	}
	env.Properties = nil
	if _, err := ingest.Validate(env); err == nil || !strings.HasPrefix(err.Error(), "properties: required") {
		t.Fatalf("nil properties: %v", err)
	}
}

func TestEventMarshalJSONRoundTrip(t *testing.T) {
	for _, kind := range ingest.Kinds() {
		in := envelope(t, kind, map[string]any{"distinct_id": "a\u2028<b>&\"c\"", "timestamp": "2026-03-01T23:59:59.987654321-07:30"},
			map[string]any{"extra": []any{1, "two", nil}})
		ev, err := ingest.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		var wire map[string]any
		if err := json.Unmarshal(out, &wire); err != nil {
			t.Fatal(err)
		}
		if wire["timestamp"] != "2026-03-02T07:29:59.987654321Z" || wire["uuid"] != testUUID || wire["event"] != ev.Name {
			t.Fatalf("envelope %s", out)
		}
		again, err := ingest.Parse(out)
		if err != nil {
			t.Fatalf("re-Parse %s: %v", out, err)
		}
		if again.UUID != ev.UUID || again.Kind != ev.Kind || again.DistinctID != ev.DistinctID || !again.Timestamp.Equal(ev.Timestamp) ||
			string(again.Properties) != string(ev.Properties) || !reflect.DeepEqual(again.ToolCall, ev.ToolCall) || !reflect.DeepEqual(again.Recruitment, ev.Recruitment) {
			t.Fatalf("round trip changed the event:\n%+v\n%+v", ev, again)
		}
	}
	// Empty properties marshal as {}.
	out, err := json.Marshal(&ingest.Event{Name: "x"})
	if err != nil || !strings.Contains(string(out), `"properties":{}`) {
		t.Fatalf("%s %v", out, err)
	}
}

func TestMaskControl(t *testing.T) {
	for in, want := range map[string]string{
		"plain.key": "plain.key", "a\x00b": "a?b", "a\x1fb\x7f": "a?b?", "\u0085x\u009f": "?x?",
		"line\u2028sep\u2029": "line?sep?", "tab\there": "tab?here", "é✓": "é✓",
	} {
		if got := ingest.MaskControl(in); got != want {
			t.Errorf("MaskControl(%q) = %q, want %q", in, got, want)
		}
	}
}

// Extra keeps exactly the properties no column holds, copied from the input (compacted), with
// a repeated key's last value; the typed properties match keys exactly, escapes decoded.
func TestParseExtraHoldsOnlyPropertiesNoColumnHolds(t *testing.T) {
	for _, c := range []struct {
		name, props, extra string
	}{
		{"tool call",
			`{ "$mcp_tool_name" : "t", "custom" : { "a" : [1, 2] }, "dup": 1, "\u0073ource": "x", "dup": 2, "$lib":"posthog-node",` +
				` "bad` + "\xff" + `": "v` + "\xfe" + `", "interview_recruitment_campaign_id": "c", "Source": "kept: case matters" }`,
			`{"custom":{"a":[1,2]},"dup":2,"$lib":"posthog-node","bad\ufffd":"v` + "\uFFFD" + `","Source":"kept: case matters"}`},
		{"invitation",
			`{"campaign_id":"c1","invitation_id":"i","feature_flag":"f","interview_recruitment_campaign_id":"c2","interview_recruitment_reason":"invited"}`,
			`{"interview_recruitment_campaign_id":"c2"}`},
		{"nothing left", `{"campaign_id":"c1","invitation_id":"i","feature_flag":"f"}`, `{}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			event := ingest.EventToolCall
			if c.name != "tool call" {
				event = ingest.EventInvitationSent
			}
			in := `{"uuid":"` + testUUID + `","event":"` + event + `","distinct_id":"d","timestamp":"2026-01-01T00:00:00Z","properties":` + c.props + `}`
			ev, err := ingest.Parse([]byte(in))
			if err != nil {
				t.Fatal(err)
			}
			if string(ev.Extra) != c.extra {
				t.Errorf("Extra\n got %s\nwant %s", ev.Extra, c.extra)
			}
			if string(ev.Properties) != c.props {
				t.Errorf("Properties %s, want the object as received", ev.Properties)
			}
			if ev.ToolCall != nil && (ev.ToolCall.Source != "x" || ev.ToolCall.CampaignID != "c") {
				t.Errorf("tool call %+v: source from the escaped key and campaign id expected", ev.ToolCall)
			}
		})
	}
}

// Every refused event has a class from the fixed set, whatever its text says; an untrusted
// header reads as one of the set.
func TestDeadLetterClasses(t *testing.T) {
	parse := func(in []byte) error { _, err := ingest.Parse(in); return err }
	future := mustParse(t, envelope(t, ingest.KindInvitationResponse, nil, map[string]any{"responded_at": "2099-01-01T00:00:00Z"}))
	for _, c := range []struct {
		err  error
		want ingest.DeadLetterClass
	}{
		{parse([]byte(`{"uuid": "x`)), ingest.ClassBadJSON},
		{parse([]byte(`[1]`)), ingest.ClassBadJSON},
		{parse(envelope(t, ingest.KindToolCall, map[string]any{"uuid": nil, "timestamp": "x"}, nil)), ingest.ClassInvalidUUID},
		{parse(envelope(t, ingest.KindToolCall, map[string]any{"event": 42}, nil)), ingest.ClassInvalidEvent},
		{parse(envelope(t, ingest.KindToolCall, map[string]any{"distinct_id": ""}, nil)), ingest.ClassInvalidDistinctID},
		{parse(envelope(t, ingest.KindToolCall, map[string]any{"timestamp": "soon"}, nil)), ingest.ClassInvalidTimestamp},
		{parse(envelope(t, ingest.KindToolCall, nil, map[string]any{"$mcp_tool_name": 1})), ingest.ClassInvalidProperties},
		{parse(envelope(t, ingest.KindToolCall, map[string]any{"properties": nil}, nil)), ingest.ClassInvalidProperties},
		{ingest.CheckClock(future, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), ingest.ClassClock},
		{fmt.Errorf("x: %w", ingest.ErrNotEncodable), ingest.ClassNotEncodable},
		{errors.New("something else"), ingest.ClassOther},
	} {
		if got := ingest.ClassOf(c.err); got != c.want {
			t.Errorf("ClassOf(%v) = %q, want %q", c.err, got, c.want)
		}
	}
	for header, want := range map[string]ingest.DeadLetterClass{"": "", "bad_json": ingest.ClassBadJSON, "store_refused": ingest.ClassStoreRefused, "x\u202e": ingest.ClassOther} {
		if got := ingest.ParseDeadLetterClass(header); got != want {
			t.Errorf("ParseDeadLetterClass(%q) = %q, want %q", header, got, want)
		}
	}
}
