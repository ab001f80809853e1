package gen

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// client is an MCP client as it names itself in the initialize handshake.
type client struct {
	name     string // "" for calls without client info
	versions []string
	weight   float64
	urlP     float64 // chance the client supports URL elicitation, when it says
	formP    float64 // chance it supports form elicitation
	convP    float64 // chance a session has a conversation id
}

var clients = []client{
	{"claude-code", []string{"2.0.14", "2.0.22", "2.0.31"}, 0.36, 0.95, 0.10, 0.95},
	{"cursor", []string{"1.7.44", "1.7.52", "2.0.1"}, 0.25, 0.80, 0.50, 0.50},
	{"claude-ai", []string{"0.1.0"}, 0.15, 1.00, 0.90, 1.00},
	{"vscode", []string{"1.105.1", "1.106.0"}, 0.12, 0.90, 0.85, 0.70},
	{"codex", []string{"0.46.0", "0.50.0"}, 0.10, 0.30, 0.05, 0.80},
	{"", nil, 0.02, 0.5, 0.5, 0.3},
}

// campaign is an interview recruitment campaign and the feature flag gating it.
type campaign struct {
	id, flag string
	weight   float64
}

var campaigns = []campaign{
	{"onboarding-2026q4", "mcp-interview-onboarding", 0.5},
	{"sql-editor-research", "sql-editor-interviews", 0.3},
	{"mcp-exec-study", "mcp-exec-study-recruit", 0.2},
}

// gateReasons are DESIGN.md §2's recruitment gate reasons with a realistic skew (most calls
// stop at the cheap early gates); unknownReasons are gates a newer MCP server may report.
var (
	gateReasons = []struct {
		reason string
		weight float64
	}{
		{"insufficient_tool_calls", 24}, {"session_too_young", 14}, {"suppressed", 11},
		{"not_product_call", 10}, {"eligible", 8}, {"missing_conversation", 5}, {"url_unsupported", 5},
		{"flag_disabled", 4}, {"continuation", 3}, {"surface_excluded", 3}, {"legacy_protocol", 2},
		{"task_bound", 2}, {"internal_run", 1.5}, {"invited", 1}, {"request_state_present", 1},
		{"reservation_conflict", 0.5}, {"flag_unavailable", 0.5}, {"invalid_configuration", 0.3},
		{"configuration_unavailable", 0.3}, {"redis_error", 0.3},
	}
	unknownReasons = []string{"new_gate_xyz", "quota_exceeded_v2"}
	reasonWeights  []float64
	campWeights    []float64
	clientWeights  []float64
)

func init() {
	for _, r := range gateReasons {
		reasonWeights = append(reasonWeights, r.weight)
	}
	for _, c := range campaigns {
		campWeights = append(campWeights, c.weight)
	}
	for _, c := range clients {
		clientWeights = append(clientWeights, c.weight)
	}
}

var errorTypes = []string{"tool_error", "validation_error", "api_error", "timeout", "permission_denied", "rate_limited", "not_found"}

// session is one agent session: a run of tool calls by one user through one client.
type session struct {
	u              *user
	c              *client
	version        string
	conversationID string
	sessionID      string
	campaignID     string
	url, form      tri
	start          time.Time
	server         string // the MCP server of the session's first direct call
}

// toolCalls generates n tool calls as sessions of consecutive calls.
func (g *generator) toolCalls(n int) []*event {
	out := make([]*event, 0, max(n, 0))
	for len(out) < n {
		s := g.newSession()
		calls := 1 + int(g.rng.ExpFloat64()*8)
		t := s.start
		for i := 0; i < calls && len(out) < n && t.Before(g.end); i++ {
			out = append(out, g.toolCall(s, i, t))
			t = t.Add(time.Duration((1 + g.rng.ExpFloat64()*45) * float64(time.Second))).Truncate(time.Millisecond)
		}
	}
	return out
}

func (g *generator) newSession() *session {
	c := &clients[g.pick(clientWeights)]
	s := &session{u: g.users[g.rng.IntN(len(g.users))], c: c, start: g.timeIn(g.start, g.end, true)}
	if len(c.versions) > 0 {
		s.version = c.versions[g.rng.IntN(len(c.versions))]
	}
	if g.chance(c.convP) {
		s.conversationID = g.newUUID(s.start)
	}
	s.sessionID = g.newUUID(s.start)
	if g.chance(0.65) {
		s.campaignID = campaigns[g.pick(campWeights)].id
	}
	// Capability flags: mostly both unknown together ("no capability metadata"), sometimes one.
	switch r := g.rng.Float64(); {
	case r < NullCapabilityRate-0.03:
		s.url, s.form = triNull, triNull
	default:
		s.url, s.form = boolTri(g.chance(c.urlP)), boolTri(g.chance(c.formP))
		if r < NullCapabilityRate {
			s.form = triNull
		} else if r < NullCapabilityRate+0.03 {
			s.url = triNull
		}
	}
	return s
}

func boolTri(b bool) tri {
	if b {
		return triTrue
	}
	return triFalse
}

// toolCall generates the i-th call of session s at time t.
func (g *generator) toolCall(s *session, i int, t time.Time) *event {
	e := &event{seq: g.nextSeq(), name: evToolCall, distinctID: s.u.id, ts: t}
	e.uuid = g.newUUID(t)
	e.tsText = formatTS(t, g.zone(), true)
	tc := &toolCallRec{
		clientName:     s.c.name,
		clientVersion:  s.version,
		conversationID: s.conversationID,
		sessionID:      s.sessionID,
		mode:           "tools",
		sessionStart:   s.start,
	}
	e.tool = tc

	// What is called: a tool directly, or through PostHog's exec.
	var schemaTool *tool // whose schema the arguments follow
	errRate := ToolErrorRate
	if g.chance(ExecShare) {
		tc.toolName, tc.mode, tc.source = execToolName, "cli", "posthog"
		target := g.cat.execOK[g.rng.IntN(len(g.cat.execOK))]
		switch r := g.rng.Float64(); {
		case r < 0.72:
			tc.execVerb, tc.execTarget = "call", target.Name
			schemaTool = target
		case r < 0.76:
			tc.execVerb, tc.execTarget = "call", "unrecognized"
			errRate = 0.7
			schemaTool = g.cat.exec
		case r < 0.90:
			tc.execVerb, tc.execTarget = "info", target.Name
			schemaTool = g.cat.exec
		default:
			tc.execVerb = "search"
			schemaTool = g.cat.exec
		}
	} else {
		schemaTool = g.pickDirectTool()
		// Sessions mostly stay on one MCP server.
		for try := 0; try < 6 && s.server != "" && schemaTool.Server != s.server && g.chance(0.8); try++ {
			schemaTool = g.pickDirectTool()
		}
		if s.server == "" {
			s.server = schemaTool.Server
		}
		tc.toolName, tc.source = schemaTool.Name, schemaTool.Server
	}

	tc.schemaTool = schemaTool
	tc.isError = g.chance(errRate)
	switch {
	case g.chance(0.03):
		tc.isErrorForm = 1
	case !tc.isError && g.chance(0.02):
		tc.isErrorForm = 2
	}
	d := math.Exp(5 + g.rng.NormFloat64()*1.1)
	if tc.isError && g.chance(0.3) {
		d = 30_000 + g.rng.Float64()*30_000 // timeouts
	}
	if g.chance(0.6) {
		tc.durationMs = strconv.Itoa(int(d))
	} else {
		tc.durationMs = strconv.FormatFloat(math.Round(d*1000)/1000, 'f', -1, 64)
	}

	if tc.isError {
		tc.errorType = errorTypes[g.rng.IntN(len(errorTypes))]
		tc.ignoredForm = 3 // error calls report no ignored keys
	} else {
		args := g.genArgs(schemaTool.Schema)
		if tc.execVerb == "info" || tc.execVerb == "search" || tc.execTarget == "unrecognized" {
			args = map[string]any{"command": execCommand(tc.execVerb, tc.execTarget)}
		}
		if g.chance(MisplacedKeyRate) {
			g.injectMistakes(schemaTool.Schema, args)
		}
		if g.chance(ClientInjectedKeyRate) {
			if g.chance(0.6) {
				args["_meta"] = map[string]any{"progressToken": float64(g.rng.IntN(1000))}
			} else {
				args["toolCallId"] = "toolu_" + strconv.FormatUint(g.rng.Uint64(), 36)
			}
		}
		tc.ignored, tc.ignoredTotal = ignoredKeys(schemaTool.Schema, args)
		if g.cfg.Shape == ShapeSDK {
			tc.args, _ = json.Marshal(args) // generated values: always encodable
		}
		switch {
		case len(tc.ignored) == 0 && g.chance(0.1):
			tc.ignoredForm = 2
		case len(tc.ignored) > 0 && tc.ignoredTotal == len(tc.ignored) && g.chance(0.3):
			tc.ignoredForm = 1
		}
	}

	if g.chance(DiagnosticsRate) {
		dg := &diagRec{
			campaignID:     s.campaignID,
			url:            s.url,
			form:           s.form,
			nullAsAbsent:   g.chance(0.2),
			completedCalls: int64(i),
			sessionAge:     strconv.FormatFloat(math.Round(t.Sub(s.start).Seconds()*1000)/1000, 'f', -1, 64),
		}
		if g.chance(UnknownReasonRate) {
			dg.reason = unknownReasons[g.rng.IntN(len(unknownReasons))]
		} else {
			dg.reason = gateReasons[g.pick(reasonWeights)].reason
		}
		tc.diag = dg
	}
	return e
}

func (g *generator) pickDirectTool() *tool {
	for {
		r := g.rng.Float64() * g.cat.cum[len(g.cat.cum)-1]
		lo, hi := 0, len(g.cat.cum)-1
		for lo < hi {
			mid := (lo + hi) / 2
			if g.cat.cum[mid] > r {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		if t := g.cat.tools[lo]; t != g.cat.exec {
			return t
		}
	}
}

// execCommand is the CLI-style command an exec call without a schema-checked target carries.
func execCommand(verb, target string) string {
	switch verb {
	case "search":
		return "search feature.?flag"
	case "info":
		return "info " + target
	}
	return "call " + target + " {}"
}
