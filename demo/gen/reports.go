package gen

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/mcpulse/mcpulse/ingest"
)

// The MCP analytics SDK's events besides tool calls, listings, handshakes and exceptions, as
// @posthog/mcp 0.16.3 sends them (src/extensions/feedback.ts, tools.ts, instrumentation.ts
// traceResourceRequest, internal.ts handleIdentify, posthog-events.ts): an agent's reports
// through the SDK's virtual tools (get_more_tools: $mcp_missing_capability; send_feedback:
// $mcp_feedback), resources and prompts requests, and $identify. They go beside the sessions'
// tool calls in both shapes (they are the SDK's only form of these facts). Every choice draws
// from its own random generator, after the calls are made, so the calls stay as they were.

// Event names of the reports and requests (the SDK's constants.ts).
const (
	evFeedback          = "$mcp_feedback"
	evMissingCapability = "$mcp_missing_capability"
	evResourcesList     = "$mcp_resources_list"
	evResourceRead      = "$mcp_resource_read"
	evPromptsList       = "$mcp_prompts_list"
	evPromptGet         = "$mcp_prompt_get"
	evIdentify          = "$identify"
)

// The SDK's virtual tools (tools.ts GET_MORE_TOOLS_NAME, feedback.ts SEND_FEEDBACK_TOOL_NAME),
// which the servers that report (reportsServer) list beside their own.
const (
	VirtualToolGetMoreTools = "get_more_tools"
	VirtualToolSendFeedback = "send_feedback"
)

// ReportsServer is the server whose SDK has reportMissing and collectFeedback on: its sessions
// send missing capabilities and feedback, and its listings hold the virtual tools.
const ReportsServer = "posthog"

// Shares of the sessions (a session is its first call) that send each kind.
const (
	resourcesSessionRate = 0.3  // list the resources, then read one to three
	promptsSessionRate   = 0.2  // list the prompts, then get one
	identifySessionRate  = 0.25 // identified ($identify with $set)
	missingSessionRate   = 0.3  // of reportsServer's sessions: report a missing capability
	feedbackSessionRate  = 0.25 // of reportsServer's sessions: leave feedback
)

// demoResources are the resources the demo's servers serve, each read failing at its share.
var demoResources = []struct {
	uri      string
	failRate float64
}{
	{"posthog://docs/hogql-reference", 0},
	{"posthog://projects/current/event-schema", 0.1},
	{"file:///srv/reports/weekly.csv", 0.5},
	{"posthog://insights/deleted-insight", 1},
}

var demoPrompts = []string{"weekly-report", "triage-error", "explain-funnel"}

// missingCapabilities are what agents say is missing: the same need written with other case
// and blanks (grouped as one), and some of them in a send_feedback report of type
// missing_capability.
var missingCapabilities = []string{
	"No tool to delete several cohorts in one call.",
	"no tool to delete several cohorts in one call.  ",
	"Needs a tool to export a dashboard as PDF.",
	"No way to schedule a recurring query from the tools listed.",
}

var feedbackReports = []struct {
	kind, summary, details, sentiment, about string
	completed                                tri
}{
	{"issue", "query-trends rejects relative date ranges with an unclear error.", "Tried date_from '-7d'; got 'Invalid input'.", "negative", "query-trends", triTrue},
	{"issue", "execute-sql times out on a 90-day range without saying so.", "", "negative", "execute-sql", triFalse},
	{"praise", "The funnel tool explained the drop-off clearly.", "", "positive", "query-funnel", triTrue},
	{"missing_capability", "No tool to export a dashboard as PDF.", "Had to describe the charts instead.", "mixed", "", triAbsent},
	{"other", "Tool descriptions could mention the project they act on.", "", "neutral", "", triAbsent},
}

// reportRec is a report or request event's content.
type reportRec struct {
	server, version       string
	sessionID             string
	client, clientVersion string
	subject               string // the uri, prompt name or missing capability; the feedback's index as text
	isError               bool
	errorMessage          string
	feedback              int // index in feedbackReports, for $mcp_feedback
	listed                int // entries of a listing's result
}

// reportsPass returns n report and request events in the calls' sessions: each session, in
// random order, sends each kind at its rate; once every session had its turn, the
// sessions read resources again, one read each, until there are n.
func (g *generator) reportsPass(events []*event, n int) ([]*event, error) {
	seed := uint64(g.cfg.Seed)
	main := g.rng
	g.rng = rand.New(rand.NewPCG(seed^0x7265706f72747321, seed+0x6167656e74)) // "reports!", "agent"
	defer func() { g.rng = main }()

	seen := map[string]bool{}
	var firsts []*event // each session's first call
	for _, e := range events {
		if tc := e.tool; tc != nil && tc.sessionID != "" && !seen[tc.sessionID] {
			seen[tc.sessionID] = true
			firsts = append(firsts, e)
		}
	}
	if len(firsts) == 0 {
		return nil, fmt.Errorf("no tool-call session to send %d SDK reports in: generate more events", n)
	}
	// In random order, so that the sessions that send reports span the corpus.
	g.rng.Shuffle(len(firsts), func(i, j int) { firsts[i], firsts[j] = firsts[j], firsts[i] })
	out := make([]*event, 0, n)
	for pass := 0; len(out) < n; pass++ {
		for _, e := range firsts {
			if len(out) >= n {
				break
			}
			g.sessionReports(e, pass, n, &out)
		}
	}
	return out, nil
}

// sessionReports appends the reports and requests of the session whose first call is e, at
// most up to n events in all: every kind at its rate on the first pass, one resource read on
// later ones.
func (g *generator) sessionReports(e *event, pass, n int, out *[]*event) {
	tc := e.tool
	server, version := tc.schemaTool.Server, ""
	if sc := tc.sdk; sc != nil {
		server, version = sc.server.name, sc.version
	}
	sessionID := tc.sessionID
	if tc.sdk != nil {
		sessionID = tc.sdk.sessionID
	}
	base := reportRec{server: server, version: version, sessionID: sessionID, client: tc.clientName, clientVersion: tc.clientVersion}
	// Between the session's handshake (two and one second before its first call) and the call.
	at, k := e.ts.Add(-900*time.Millisecond), 0
	if pass > 0 {
		at = e.ts.Add(time.Duration(pass) * 7 * time.Millisecond)
	}
	add := func(name string, r reportRec) {
		if len(*out) >= n {
			return
		}
		ts := at.Add(time.Duration(k) * 40 * time.Millisecond)
		k++
		if ts.Before(g.cfg.End.Add(-g.cfg.Span)) || !ts.Before(g.cfg.End) {
			ts = e.ts
		}
		x := &event{seq: g.nextSeq(), name: name, distinctID: e.distinctID, ts: ts, uuid: g.newUUID(ts), report: &r}
		x.tsText = formatTS(ts, time.UTC, true)
		*out = append(*out, x)
	}
	if pass > 0 {
		add(evResourceRead, g.resourceRead(base))
		return
	}
	if g.chance(identifySessionRate) {
		add(evIdentify, base)
	}
	if g.chance(resourcesSessionRate) {
		r := base
		r.listed = len(demoResources)
		add(evResourcesList, r)
		for range 1 + g.rng.IntN(3) {
			add(evResourceRead, g.resourceRead(base))
		}
	}
	if g.chance(promptsSessionRate) {
		r := base
		r.listed = len(demoPrompts)
		add(evPromptsList, r)
		r = base
		r.subject = demoPrompts[g.rng.IntN(len(demoPrompts))]
		add(evPromptGet, r)
	}
	if server == ReportsServer {
		if g.chance(missingSessionRate) {
			r := base
			r.subject = missingCapabilities[g.rng.IntN(len(missingCapabilities))]
			add(evMissingCapability, r)
		}
		if g.chance(feedbackSessionRate) {
			r := base
			r.feedback = g.rng.IntN(len(feedbackReports))
			r.subject = feedbackReports[r.feedback].kind
			add(evFeedback, r)
		}
	}
}

// resourceRead is a read of one of demoResources in base's session, failed at its rate.
func (g *generator) resourceRead(base reportRec) reportRec {
	res := demoResources[g.rng.IntN(len(demoResources))]
	base.subject = res.uri
	if g.chance(res.failRate) {
		base.isError = true
		base.errorMessage = "MCP error -32002: Resource not found: " + res.uri
	}
	return base
}

// reportProperties appends the properties of a report or request event.
func (e *event) reportProperties(p []kv) []kv {
	r := e.report
	p = append(p, sv("$mcp_source", sdkSource), sv("$session_id", r.sessionID))
	if e.name != evIdentify {
		p = append(p, kv{k: "$process_person_profile", v: "false"})
	}
	p = append(p, sv("$mcp_server_name", r.server))
	if r.version != "" {
		p = append(p, sv("$mcp_server_version", r.version))
	}
	if r.client != "" {
		p = append(p, sv("$mcp_client_name", r.client), sv("$mcp_client_version", r.clientVersion))
	}
	p = append(p, sv("$mcp_protocol_version", sdkProtocols[r.client]), kv{k: "$mcp_duration_ms", v: "3"})
	request := func(method, params string) kv {
		return kv{k: "$mcp_parameters", v: `{"request":{"id":3,"jsonrpc":"2.0","method":"` + method + `","params":` + params + `}}`}
	}
	switch e.name {
	case evIdentify:
		p = append(p, sv("$mcp_resource_name", "Unknown"),
			kv{k: "$set", v: `{"plan":"team","role":` + string(ingest.AppendJSString(nil, []string{"engineer", "analyst", "founder"}[len(e.distinctID)%3])) + `}`})
	case evResourcesList, evPromptsList:
		method, field, prefix := "resources/list", "resources", "posthog://docs/page-"
		if e.name == evPromptsList {
			method, field, prefix = "prompts/list", "prompts", "prompt-"
		}
		items := make([]byte, 0, 64*r.listed)
		for i := range r.listed {
			if i > 0 {
				items = append(items, ',')
			}
			items = append(items, `{"name":"`+prefix+strconv.Itoa(i)+`"}`...)
		}
		p = append(p, kv{k: "$mcp_is_error", v: "false"}, request(method, "{}"),
			kv{k: "$mcp_response", v: `{"` + field + `":[` + string(items) + `]}`})
	case evResourceRead:
		uri := string(ingest.AppendJSString(nil, r.subject))
		p = append(p, sv("$mcp_resource_name", r.subject), kv{k: "$mcp_is_error", v: strconv.FormatBool(r.isError)})
		if r.isError {
			p = append(p, sv("$mcp_error_type", "McpError"), sv("$mcp_error_message", r.errorMessage))
		}
		p = append(p, request("resources/read", `{"uri":`+uri+`}`))
	case evPromptGet:
		p = append(p, kv{k: "$mcp_is_error", v: "false"}, request("prompts/get", `{"name":`+string(ingest.AppendJSString(nil, r.subject))+`}`))
	case evMissingCapability:
		p = append(p, sv("$mcp_resource_name", VirtualToolGetMoreTools), sv("$mcp_intent", r.subject),
			sv("$mcp_intent_source", "context_parameter"), kv{k: "$mcp_is_error", v: "false"},
			request("tools/call", `{"name":"`+VirtualToolGetMoreTools+`","arguments":{"context":`+string(ingest.AppendJSString(nil, r.subject))+`}}`))
	case evFeedback:
		f := feedbackReports[r.feedback]
		intent := f.summary
		if f.details != "" {
			intent += "\n\n" + f.details
		}
		p = append(p, sv("$mcp_resource_name", VirtualToolSendFeedback), sv("$mcp_intent", intent),
			sv("$mcp_intent_source", "context_parameter"), kv{k: "$mcp_is_error", v: "false"},
			sv("$mcp_feedback_type", f.kind), sv("$mcp_feedback_summary", f.summary), sv("$mcp_feedback_sentiment", f.sentiment))
		if f.details != "" {
			p = append(p, sv("$mcp_feedback_details", f.details))
		}
		if f.about != "" {
			p = append(p, sv("$mcp_feedback_tool", f.about))
		}
		if f.completed != triAbsent {
			p = append(p, kv{k: "$mcp_feedback_task_completed", v: f.completed.raw()})
		}
	}
	return appendLib(p)
}
