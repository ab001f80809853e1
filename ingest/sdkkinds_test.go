package ingest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/ingest"
)

// sdkShaped returns one SDK-shaped event of testdata/sdk, parsed, and its raw rows.
func sdkShaped(t *testing.T, name string) (*ingest.Event, ingest.Rows) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "sdk", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := ingest.Parse(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var rows ingest.Rows
	rows.Append(ev, ingest.RowContext{Partition: 2, Offset: 40})
	if rows.Len() != 1 {
		t.Fatalf("%s: %d rows, want 1", name, rows.Len())
	}
	return ev, rows
}

// sessionOf checks the SDK's session properties every fixture carries.
func sessionOf(t *testing.T, s ingest.Session) {
	t.Helper()
	if s.SessionID != "mcp-session-7f3c9a1e" || s.ServerName != "posthog-mcp" || s.ServerVersion != "2.14.0" ||
		s.ClientName != "claude-code" || s.ClientVersion != "2.0.31" || s.ProtocolVersion != "2025-06-18" {
		t.Errorf("session %+v", s)
	}
}

func TestParseSDKMissingCapability(t *testing.T) {
	ev, rows := sdkShaped(t, "missing_capability")
	if ev.Kind != ingest.KindMissingCapability || ev.Feedback == nil {
		t.Fatalf("kind %s, feedback %v", ev.Kind, ev.Feedback)
	}
	sessionOf(t, ev.Feedback.Session)
	r := rows.Feedback[0]
	if r.Kind != "missing_capability" || r.ToolName != "get_more_tools" || r.FeedbackType != "" ||
		!strings.HasPrefix(r.Intent, "Needs a tool to delete several cohorts") || r.IntentSource != "context_parameter" ||
		r.LLMModel != "claude-opus-4-8" || r.IsError != 0 || r.DurationMs == nil || *r.DurationMs != 1 || r.TaskCompleted != nil {
		t.Errorf("row %+v", r)
	}
	// The captured request and result are kept in properties; the columns' properties are not.
	keys := extraKeys(t, ev)
	for _, k := range []string{"$mcp_parameters", "$mcp_response", "$lib", "$mcp_llm_model_source"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("properties lack %s", k)
		}
	}
	for _, k := range []string{"$mcp_intent", "$mcp_resource_name", "$session_id", "$mcp_server_name"} {
		if _, ok := keys[k]; ok {
			t.Errorf("properties keep %s, which a column holds", k)
		}
	}
}

func TestParseSDKFeedback(t *testing.T) {
	ev, rows := sdkShaped(t, "feedback")
	if ev.Kind != ingest.KindFeedback {
		t.Fatalf("kind %s", ev.Kind)
	}
	sessionOf(t, ev.Feedback.Session)
	r := rows.Feedback[0]
	if r.Kind != "feedback" || r.ToolName != "send_feedback" || r.FeedbackType != "issue" ||
		r.Summary != "query-trends rejects relative date ranges with an unclear error." ||
		r.Sentiment != "negative" || r.FeedbackTool != "query-trends" || r.TaskCompleted == nil || *r.TaskCompleted != 1 ||
		!strings.HasPrefix(r.FrictionPoints, "date_from '-7d'") || !strings.HasPrefix(r.SuggestedImprovement, "Accept relative") {
		t.Errorf("row %+v", r)
	}
	// The SDK's redaction marker is kept as sent.
	if !strings.Contains(r.Details, "[redacted]") || !strings.Contains(r.Intent, "\n\n") {
		t.Errorf("details %q, intent %q", r.Details, r.Intent)
	}
	// A host's declared extra has no column: it stays in properties.
	if _, ok := extraKeys(t, ev)["$mcp_feedback_team"]; !ok {
		t.Errorf("properties %s lack the declared extra", ev.Extra)
	}
}

func TestParseSDKResourcesAndPrompts(t *testing.T) {
	for _, c := range []struct {
		file   string
		kind   *ingest.Kind
		method string
		name   string
		listed int64 // -1: not a listing
		failed bool
	}{
		{"resources_list", ingest.KindResourcesList, "resources/list", "", 2, false},
		{"resource_read_error", ingest.KindResourceRead, "resources/read", "posthog://projects/1/schema", -1, true},
		{"prompts_list", ingest.KindPromptsList, "prompts/list", "", 1, false},
		// No $mcp_resource_name: the name comes from the captured request.
		{"prompt_get", ingest.KindPromptGet, "prompts/get", "weekly-report", -1, false},
	} {
		ev, rows := sdkShaped(t, c.file)
		if ev.Kind != c.kind || ev.Resource == nil {
			t.Errorf("%s: kind %s", c.file, ev.Kind)
			continue
		}
		sessionOf(t, ev.Resource.Session)
		r := rows.Resources[0]
		if r.Kind != c.kind.Name || r.Method != c.method || r.Name != c.name || (r.IsError == 1) != c.failed || r.DurationMs == nil {
			t.Errorf("%s: row %+v", c.file, r)
		}
		if (c.listed < 0) != (r.ListedCount == nil) || (r.ListedCount != nil && int64(*r.ListedCount) != c.listed) {
			t.Errorf("%s: listed %v, want %d", c.file, r.ListedCount, c.listed)
		}
		if c.failed && (r.ErrorType != "McpError" || !strings.Contains(r.ErrorMessage, "Resource not found")) {
			t.Errorf("%s: error %q %q", c.file, r.ErrorType, r.ErrorMessage)
		}
		if _, ok := extraKeys(t, ev)["$mcp_parameters"]; !ok {
			t.Errorf("%s: the captured request is not kept in properties", c.file)
		}
	}
}

func TestParseSDKIdentify(t *testing.T) {
	ev, rows := sdkShaped(t, "identify")
	if ev.Kind != ingest.KindIdentify {
		t.Fatalf("kind %s", ev.Kind)
	}
	sessionOf(t, ev.Identify.Session)
	r := rows.Identify[0]
	if r.DistinctID != "user_2f9c" || r.ResourceName != "Unknown" ||
		r.SetProperties != `{"email":"ada@example.com","plan":"team","org":"acme"}` ||
		r.SetOnceProperties != `{"first_mcp_client":"claude-code"}` || r.KafkaPartition != 2 || r.KafkaOffset != 40 {
		t.Errorf("row %+v", r)
	}
	keys := extraKeys(t, ev)
	if _, ok := keys["$set"]; ok {
		t.Error("properties keep $set, which a column holds")
	}
	if !strings.Contains(string(keys["$mcp_parameters"]), `"token":"[redacted]"`) {
		t.Errorf("the SDK's redaction marker is not kept as sent: %s", keys["$mcp_parameters"])
	}
}

// The new kinds' typed properties are refused like any other of the wrong type (the event is
// dead-lettered, naming the property), and an identify without person properties is valid.
func TestParseSDKKindsRefuseWrongTypes(t *testing.T) {
	for _, c := range []struct {
		kind  *ingest.Kind
		props map[string]any
		path  string
	}{
		{ingest.KindFeedback, map[string]any{"$mcp_feedback_summary": 3}, "properties.$mcp_feedback_summary"},
		{ingest.KindFeedback, map[string]any{"$mcp_feedback_task_completed": "maybe"}, "properties.$mcp_feedback_task_completed"},
		{ingest.KindMissingCapability, map[string]any{"$mcp_intent": []string{"x"}}, "properties.$mcp_intent"},
		{ingest.KindResourceRead, map[string]any{"$mcp_resource_name": false}, "properties.$mcp_resource_name"},
		{ingest.KindPromptGet, map[string]any{"$mcp_duration_ms": "fast"}, "properties.$mcp_duration_ms"},
		{ingest.KindIdentify, map[string]any{"$set": "plan=team"}, "properties.$set"},
		{ingest.KindIdentify, map[string]any{"$set_once": []int{1}}, "properties.$set_once"},
	} {
		_, err := ingest.Parse(envelope(t, c.kind, nil, c.props))
		if err == nil || !strings.Contains(err.Error(), c.path) {
			t.Errorf("%s %v: error %v, want one naming %s", c.kind.Name, c.props, err, c.path)
		}
	}
	ev, err := ingest.Parse(envelope(t, ingest.KindIdentify, nil, map[string]any{"$set": null}))
	if err != nil || ev.Identify.Set != "" {
		t.Errorf("identify with $set null: %v, %+v", err, ev)
	}
}

// What the real @posthog/mcp 0.16.3 sent (testdata/sdk/record/record.js: reportMissing,
// collectFeedback and identify on, an identified session) lands in the kinds with the values the
// recorder's client sent, the SDK's redaction of an email in feedback text kept as sent.
func TestParseRecordedSDKReports(t *testing.T) {
	const session = "ses_01a24215-027b-71cc-9606-338bd2d93786"
	check := func(name string, kind *ingest.Kind, s ingest.Session) ingest.Rows {
		t.Helper()
		ev, rows := sdkShaped(t, "recorded_"+name)
		if ev.Kind != kind || ev.DistinctID != "user_2f9c" {
			t.Fatalf("%s: kind %s, distinct_id %q", name, ev.Kind, ev.DistinctID)
		}
		if s.SessionID != session || s.ServerName != "mcpulse-fixture-reports" || s.ServerVersion != "2.1.0" ||
			s.ClientName != "mcpulse-fixture-client" || s.ClientVersion != "1.0.0" {
			t.Errorf("%s: session %+v", name, s)
		}
		return rows
	}
	ev, _ := sdkShaped(t, "recorded_missing_capability")
	r := check("missing_capability", ingest.KindMissingCapability, ev.Feedback.Session).Feedback[0]
	if r.ToolName != "get_more_tools" || r.Intent != "Needs a tool to delete several cohorts in one call; only single-cohort deletion exists." ||
		r.ProtocolVersion != "2025-11-25" {
		t.Errorf("missing capability %+v", r)
	}
	ev, _ = sdkShaped(t, "recorded_feedback")
	r = check("feedback", ingest.KindFeedback, ev.Feedback.Session).Feedback[0]
	if r.ToolName != "send_feedback" || r.FeedbackType != "issue" || r.FeedbackTool != "get-sum" || r.Sentiment != "negative" ||
		r.TaskCompleted == nil || *r.TaskCompleted != 1 || r.Summary != "get-sum rejects numbers given as strings with an unclear error." ||
		r.Details != `Sent a: "2" as the user typed it; contact [redacted] for the transcript.` {
		t.Errorf("feedback %+v", r)
	}
	ev, _ = sdkShaped(t, "recorded_resources_list")
	l := check("resources_list", ingest.KindResourcesList, ev.Resource.Session).Resources[0]
	if l.Method != "resources/list" || l.ListedCount == nil || *l.ListedCount != 1 || l.IsError != 0 {
		t.Errorf("resources list %+v", l)
	}
	ev, _ = sdkShaped(t, "recorded_resource_read")
	l = check("resource_read", ingest.KindResourceRead, ev.Resource.Session).Resources[0]
	if l.Name != "posthog://docs/hogql-reference" || l.IsError != 0 || l.ListedCount != nil {
		t.Errorf("resource read %+v", l)
	}
	ev, _ = sdkShaped(t, "recorded_resource_read_error")
	l = check("resource_read_error", ingest.KindResourceRead, ev.Resource.Session).Resources[0]
	if l.Name != "posthog://insights/42" || l.IsError != 1 || l.ErrorType != "Error" || l.ErrorMessage != "Insight 42 not found" {
		t.Errorf("failed resource read %+v", l)
	}
	ev, _ = sdkShaped(t, "recorded_identify")
	id := check("identify", ingest.KindIdentify, ev.Identify.Session).Identify[0]
	if id.SetProperties != `{"plan":"team","email":"ada@example.com"}` || id.ResourceName != "Unknown" {
		t.Errorf("identify %+v", id)
	}
}
