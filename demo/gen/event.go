package gen

import (
	"strconv"
	"time"

	"github.com/mcpulse/mcpulse/ingest"
)

// Event names (DESIGN.md §2), from the table of kinds.
var (
	evToolCall = ingest.KindToolCall.Event
	evInvite   = ingest.KindInvitationSent.Event
	evOpen     = ingest.KindBookingLinkOpened.Event
	evResponse = ingest.KindInvitationResponse.Event
)

// event is one generated valid event: what its line says, in typed form.
type event struct {
	seq        int
	uuid       string
	name       string
	distinctID string
	ts         time.Time // UTC
	tsText     string    // as written (RFC 3339, possibly with a non-UTC offset)

	tool *toolCallRec
	rec  *recruitRec
	sdk  *sdkExtra // an SDK session event ($mcp_initialize, $mcp_tools_list, $exception)
	// report is an SDK report or request ($mcp_feedback, $mcp_resource_read, $identify, ...).
	report *reportRec
}

// tri is an optional boolean property: absent, JSON null, false or true.
type tri uint8

const (
	triAbsent tri = iota
	triNull
	triFalse
	triTrue
)

func (t tri) raw() string {
	switch t {
	case triNull:
		return "null"
	case triFalse:
		return "false"
	case triTrue:
		return "true"
	}
	return ""
}

// isKnown tells whether the flag has a value (neither absent nor null).
func (t tri) isKnown() bool { return t == triFalse || t == triTrue }

// diagRec holds the interview_recruitment_* diagnostics of a tool call or invitation.
type diagRec struct {
	reason         string
	url, form      tri
	nullAsAbsent   bool // write null flags by omitting them
	campaignID     string
	completedCalls int64  // -1: absent
	sessionAge     string // JSON number text; "" absent
}

// toolCallRec holds a tool call's properties.
type toolCallRec struct {
	toolName       string
	isError        bool
	isErrorForm    uint8  // 0: JSON bool, 1: "true"/"false" string, 2: absent (only when false)
	durationMs     string // JSON number text
	clientName     string // "" absent
	clientVersion  string
	mode           string
	execVerb       string
	execTarget     string
	conversationID string
	sessionID      string
	source         string
	errorType      string
	// errorMessage is $mcp_error_message of a failed call, in an MCP SDK's own wording ("" absent);
	// validation and unknownTool say which misuse it shows (validation_* and unknown_tool).
	errorMessage string
	validation   bool
	unknownTool  bool
	ignored      []string // as reported: masked, sorted, capped
	ignoredTotal int
	ignoredForm  uint8 // 0: keys+total, 1: keys only (total == len), 2: empty array, 3: absent
	diag         *diagRec

	schemaTool   *tool     // whose schema the arguments follow
	sessionStart time.Time // when the call's session started
	args         []byte    // the arguments (JSON), kept for the SDK shape until sdkPass
	sdk          *sdkCall  // set for the SDK shape
}

// effectiveTool is DESIGN.md §4's rule, restated: the exec target when the verb is `call` and
// the target is a real tool, else the tool name.
func (t *toolCallRec) effectiveTool() string {
	if t.execVerb == "call" && t.execTarget != "" && t.execTarget != "unrecognized" {
		return t.execTarget
	}
	return t.toolName
}

// recruitRec holds the properties of an invitation, a booking-link open or a response.
type recruitRec struct {
	campaignID   string
	invitationID string
	featureFlag  string
	instanceURL  string // "" absent (the consumer assumes the default instance)
	response     string // responses only
	respondedAt  time.Time
	respondedTxt string    // "" when responded_at is absent (defaults to the timestamp)
	sentAt       time.Time // the invitation's send time (funnel cohort)
	diag         *diagRec
	// protocol and client are an invitation's $mcp_protocol_version and $mcp_client_name
	// ("" absent): the SDK's session properties, which tell its protocol path.
	protocol, client string
	// The invitation context the contact-policy audit reads besides client ("" / triAbsent:
	// not written): $mcp_conversation_id, interview_recruitment_surface, _task_bound and
	// _request_id. Only contact-policy cases carry them.
	conversationID, surface, requestID string
	taskBound                          tri
}

// kv is one property: key and raw JSON value, or a string to quote when str.
type kv struct {
	k, v string
	str  bool
}

// sv is a string-valued property.
func sv(k, v string) kv { return kv{k, v, true} }

// properties renders the event's properties in a stable order.
func (e *event) properties() []kv { return e.appendProperties(make([]kv, 0, 24)) }

// appendProperties appends the event's properties to p.
func (e *event) appendProperties(p []kv) []kv {
	if e.sdk != nil {
		return e.sdkExtraProperties(p)
	}
	if e.report != nil {
		return e.reportProperties(p)
	}
	if t := e.tool; t != nil && t.sdk != nil {
		return e.sdkToolCallProperties(p)
	}
	if t := e.tool; t != nil {
		p = append(p, sv("$mcp_tool_name", t.toolName))
		switch t.isErrorForm {
		case 0:
			p = append(p, kv{k: "$mcp_is_error", v: strconv.FormatBool(t.isError)})
		case 1:
			p = append(p, sv("$mcp_is_error", strconv.FormatBool(t.isError)))
		}
		p = append(p, kv{k: "$mcp_duration_ms", v: t.durationMs})
		if t.clientName != "" {
			p = append(p, sv("$mcp_client_name", t.clientName), sv("$mcp_client_version", t.clientVersion))
		}
		p = append(p, sv("$mcp_mode", t.mode))
		if t.execVerb != "" {
			p = append(p, sv("$mcp_exec_verb", t.execVerb))
		}
		if t.execTarget != "" {
			p = append(p, sv("$mcp_exec_target_tool", t.execTarget))
		}
		if t.conversationID != "" {
			p = append(p, sv("$mcp_conversation_id", t.conversationID))
		}
		// The agent's stated intent, picked by the event's sequence number (no draw from the
		// generator's random source, so the rest of the corpus is unchanged); one call in five
		// gives none.
		if i := e.seq % (len(sdkIntents) + len(sdkIntents)/4); i < len(sdkIntents) {
			p = append(p, sv("$mcp_intent", sdkIntents[i]))
		}
		p = append(p, sv("$session_id", t.sessionID), sv("source", t.source))
		if t.errorType != "" {
			p = append(p, sv("$mcp_error_type", t.errorType))
		}
		if t.errorMessage != "" {
			p = append(p, sv("$mcp_error_message", t.errorMessage))
		}
		switch t.ignoredForm {
		case 0, 1:
			if len(t.ignored) > 0 {
				p = append(p, kv{k: "$mcp_ignored_keys", v: jsonStringArray(t.ignored)})
				if t.ignoredForm == 0 {
					p = append(p, kv{k: "$mcp_ignored_keys_total", v: strconv.Itoa(t.ignoredTotal)})
				}
			}
		case 2:
			p = append(p, kv{k: "$mcp_ignored_keys", v: "[]"}, kv{k: "$mcp_ignored_keys_total", v: "0"})
		}
		p = appendDiag(p, t.diag)
		p = append(p, kv{k: "$lib", v: `"posthog-node"`})
		return p
	}
	r := e.rec
	p = append(p,
		sv("campaign_id", r.campaignID),
		sv("invitation_id", r.invitationID),
		sv("feature_flag", r.featureFlag))
	if r.instanceURL != "" {
		p = append(p, sv("instance_url", r.instanceURL))
	}
	if r.client != "" {
		p = append(p, sv("$mcp_client_name", r.client))
	}
	if r.protocol != "" {
		p = append(p, sv("$mcp_protocol_version", r.protocol))
	}
	if e.name == evResponse {
		p = append(p, sv("response", r.response))
		if r.respondedTxt != "" {
			p = append(p, sv("responded_at", r.respondedTxt))
		}
	}
	p = appendDiag(p, r.diag)
	if r.conversationID != "" {
		p = append(p, sv("$mcp_conversation_id", r.conversationID))
	}
	if r.surface != "" {
		p = append(p, sv("interview_recruitment_surface", r.surface))
	}
	if r.taskBound != triAbsent {
		p = append(p, kv{k: "interview_recruitment_task_bound", v: r.taskBound.raw()})
	}
	if r.requestID != "" {
		p = append(p, sv("interview_recruitment_request_id", r.requestID))
	}
	return p
}

func appendDiag(p []kv, d *diagRec) []kv {
	if d == nil {
		return p
	}
	if d.reason != "" {
		p = append(p, sv("interview_recruitment_reason", d.reason))
	}
	for _, f := range [...]struct {
		key string
		v   tri
	}{{"interview_recruitment_url_supported", d.url}, {"interview_recruitment_form_supported", d.form}} {
		if f.v == triAbsent || (f.v == triNull && d.nullAsAbsent) {
			continue
		}
		p = append(p, kv{k: f.key, v: f.v.raw()})
	}
	if d.campaignID != "" {
		p = append(p, sv("interview_recruitment_campaign_id", d.campaignID))
	}
	if d.completedCalls >= 0 {
		p = append(p, kv{k: "interview_recruitment_completed_calls", v: strconv.FormatInt(d.completedCalls, 10)})
	}
	if d.sessionAge != "" {
		p = append(p, kv{k: "interview_recruitment_session_age_seconds", v: d.sessionAge})
	}
	return p
}

// appendEvent appends one envelope as compact JSON (no newline). Empty uuid, event or
// timestamp text are written as given; raw values in props are written verbatim.
func appendEvent(b []byte, uuid, name, distinctID, ts string, props []kv) []byte {
	b = append(b, `{"uuid":`...)
	b = ingest.AppendJSString(b, uuid)
	b = append(b, `,"event":`...)
	b = ingest.AppendJSString(b, name)
	b = append(b, `,"distinct_id":`...)
	b = ingest.AppendJSString(b, distinctID)
	b = append(b, `,"timestamp":`...)
	b = ingest.AppendJSString(b, ts)
	b = append(b, `,"properties":{`...)
	for i, p := range props {
		if i > 0 {
			b = append(b, ',')
		}
		b = ingest.AppendJSString(b, p.k)
		b = append(b, ':')
		if p.str {
			b = ingest.AppendJSString(b, p.v)
		} else {
			b = append(b, p.v...)
		}
	}
	return append(b, "}}"...)
}

func jsonStringArray(items []string) string {
	b := []byte{'['}
	for i, s := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = ingest.AppendJSString(b, s)
	}
	return string(append(b, ']'))
}

// formatTS writes t (UTC) in zone, RFC 3339, with milliseconds when ms.
func formatTS(t time.Time, zone *time.Location, ms bool) string {
	layout := "2006-01-02T15:04:05"
	if ms {
		layout += ".000"
	}
	if zone == nil || zone == time.UTC {
		return t.UTC().Format(layout + "Z07:00")
	}
	return t.In(zone).Format(layout + "-07:00") // "+00:00" for a zero offset
}

// offsets are the non-UTC zones some clients stamp events with (the pipeline must bucket by
// UTC whatever the offset).
var offsets = []*time.Location{
	time.FixedZone("", 2*3600),
	time.FixedZone("", -7*3600),
	time.FixedZone("", 5*3600+1800),
	time.FixedZone("", -3*3600-1800),
	time.FixedZone("", 9*3600),
	time.FixedZone("", 0), // "+00:00" rather than "Z"
}

// zone returns UTC most of the time, else one of offsets.
func (g *generator) zone() *time.Location {
	if g.chance(0.9) {
		return time.UTC
	}
	return offsets[g.rng.IntN(len(offsets))]
}
