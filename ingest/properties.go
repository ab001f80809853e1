package ingest

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/mcpulse/mcpulse/misuse"
)

// propertyReader reads a kind's typed properties from the pairs Parse found and records a
// FieldError for each property of the wrong type, so one pass reports every problem. A property
// it reads is held by a column and left out of Event.Extra; one it peeks at is kept there.
type propertyReader struct {
	d    *decodeState
	kind *Kind
	v    *ValidationError
}

func path(key string) string { return "properties." + key }

// raw returns the raw value of a property the kind reads (nil when absent) and marks it as
// held by a column.
func (p propertyReader) raw(key string) []byte {
	i := p.slot(key)
	if i < 0 {
		return nil
	}
	p.d.pairs[i].dropped = true
	return p.d.pairs[i].value
}

// peek returns the raw value of a property the kind reads (nil when absent), keeping it in
// Event.Extra.
func (p propertyReader) peek(key string) []byte {
	if i := p.slot(key); i >= 0 {
		return p.d.pairs[i].value
	}
	return nil
}

func (p propertyReader) slot(key string) int {
	i, ok := p.kind.index[key]
	if !ok {
		panic("ingest: kind " + p.kind.Name + " reads " + key + " without listing it in its reads")
	}
	return p.d.slots[i]
}

// text returns the string a property the kind reads holds, marking it as held by a column:
// a slice of the event's string arena when it is a plain string (decodeState.buildArena),
// else decoded on its own. present is false when the property is absent or null, ok false
// when it is not a string.
func (p propertyReader) text(key string) (s string, present, ok bool) {
	i := p.slot(key)
	if i < 0 {
		return "", false, true
	}
	pr := &p.d.pairs[i]
	pr.dropped = true
	if pr.arena >= 0 {
		return p.d.arena[pr.arena : int(pr.arena)+len(pr.value)-2], true, true
	}
	s, ok = stringValue(pr.value)
	return s, !isNull(pr.value), ok
}

// str reads an optional string property ("" when absent or null).
func (p propertyReader) str(key string) string {
	s, _, ok := p.text(key)
	if !ok {
		p.v.add(path(key), "must be a string")
	}
	return s
}

// requiredStr reads a string property that must be present and non-empty.
func (p propertyReader) requiredStr(key string) string {
	s, present, ok := p.text(key)
	if !present {
		p.v.add(path(key), "required")
		return ""
	}
	if !ok {
		p.v.add(path(key), "must be a string")
		return ""
	}
	if s == "" {
		p.v.add(path(key), "must not be empty")
	}
	return s
}

// boolean reads a bool given as JSON true/false or the strings "true"/"false" into *dst and
// returns dst; nil when absent or null.
func (p propertyReader) boolean(key string, dst *bool) *bool {
	raw := p.raw(key)
	if isNull(raw) {
		return nil
	}
	switch string(raw) {
	case "true", `"true"`:
		*dst = true
		return dst
	case "false", `"false"`:
		*dst = false
		return dst
	}
	p.v.add(path(key), `must be a boolean (true, false, "true" or "false")`)
	return nil
}

// number reads a finite JSON number into *dst and returns dst; nil when absent or null.
func (p propertyReader) number(key string, dst *float64) *float64 {
	raw := p.raw(key)
	if isNull(raw) {
		return nil
	}
	f, ok := numberValue(raw)
	if !ok || math.IsInf(f, 0) || math.IsNaN(f) {
		p.v.add(path(key), "must be a number")
		return nil
	}
	*dst = f
	return dst
}

// integer reads a non-negative whole JSON number into *dst and returns dst; nil when absent or
// null.
func (p propertyReader) integer(key string, dst *int64) *int64 {
	var f float64
	if p.number(key, &f) == nil {
		return nil
	}
	if f < 0 || f != math.Trunc(f) {
		p.v.add(path(key), "must be a non-negative integer")
		return nil
	}
	if f > 1<<53 { // beyond it, a JSON number no longer holds every integer exactly
		p.v.add(path(key), "must be at most 2^53 (9007199254740992)")
		return nil
	}
	*dst = int64(f)
	return dst
}

// diagnosticsReads are the properties diagnostics reads.
var diagnosticsReads = []string{
	"interview_recruitment_reason", "interview_recruitment_url_supported", "interview_recruitment_form_supported",
	"interview_recruitment_campaign_id", "interview_recruitment_completed_calls", "interview_recruitment_session_age_seconds",
}

// diagnostics reads the gate diagnostics into d (its optional values point into d). The
// campaign id is held by a column only when campaignColumn (a tool call's; a recruitment event
// has a campaign_id of its own): otherwise it is checked and kept in Event.Extra.
func (p propertyReader) diagnostics(d *Diagnostics, campaignColumn bool) {
	d.Reason = p.str("interview_recruitment_reason")
	d.URLSupported = p.boolean("interview_recruitment_url_supported", &d.values.urlSupported)
	d.FormSupported = p.boolean("interview_recruitment_form_supported", &d.values.formSupported)
	const campaign = "interview_recruitment_campaign_id"
	if campaignColumn {
		d.CampaignID = p.str(campaign)
	} else if _, ok := stringValue(p.peek(campaign)); !ok {
		p.v.add(path(campaign), "must be a string")
	}
	d.CompletedCalls = p.integer("interview_recruitment_completed_calls", &d.values.completedCalls)
	d.SessionAgeSeconds = p.number("interview_recruitment_session_age_seconds", &d.values.sessionAge)
}

// toolCallReads are the properties decodeToolCall reads.
var toolCallReads = append([]string{
	"$mcp_tool_name", "$mcp_duration_ms", "$mcp_client_name", "$mcp_client_version", "$mcp_exec_verb",
	"$mcp_exec_target_tool", "$mcp_mode", "$mcp_conversation_id", "$session_id", "source", "$mcp_source", "$mcp_error_type",
	"$mcp_is_error", "$mcp_ignored_keys", "$mcp_ignored_keys_total", propServerName, propServerVersion, propProtocolVersion,
	"$mcp_intent", "$mcp_intent_source", "$mcp_error_message", propParameters, propResponse,
}, diagnosticsReads...)

// decodeToolCall reads a $mcp_tool_call's properties (DESIGN.md §2).
func decodeToolCall(p *propertyReader, ev *Event) {
	t := &ToolCall{}
	t.ToolName = p.requiredStr("$mcp_tool_name")
	t.DurationMs = p.number("$mcp_duration_ms", &t.durationMs)
	t.ClientName = p.str("$mcp_client_name")
	t.ClientVersion = p.str("$mcp_client_version")
	t.ExecVerb = p.str("$mcp_exec_verb")
	t.ExecTargetTool = p.str("$mcp_exec_target_tool")
	t.Mode = p.str("$mcp_mode")
	t.ConversationID = p.str("$mcp_conversation_id")
	t.SessionID = p.str("$session_id")
	// `source`, or the MCP analytics SDK's name for it; when both are sent, $mcp_source is
	// checked and kept in properties.
	if t.Source = p.str("source"); t.Source == "" {
		t.Source = p.str("$mcp_source")
	} else if _, ok := stringValue(p.peek("$mcp_source")); !ok {
		p.v.add(path("$mcp_source"), "must be a string")
	}
	t.ErrorType = p.str("$mcp_error_type")
	p.diagnostics(&t.Diagnostics, true)
	p.boolean("$mcp_is_error", &t.IsError)
	problems := len(p.v.Problems)
	t.IgnoredKeysReported = !isNull(p.peek("$mcp_ignored_keys"))
	t.IgnoredKeys = p.ignoredKeys()
	listRefused := len(p.v.Problems) > problems // then the total has no list to agree with
	t.IgnoredKeysTotal = int64(len(t.IgnoredKeys))
	var n int64
	if p.integer("$mcp_ignored_keys_total", &n) != nil && !listRefused {
		switch listed := t.IgnoredKeysTotal; {
		case n < listed:
			p.v.add(path("$mcp_ignored_keys_total"), "%d is less than the %d keys listed", n, listed)
		case n > listed && listed < MaxIgnoredKeys:
			p.v.add(path("$mcp_ignored_keys_total"), "%d, but the list holds %d and is cut only when it reaches %d", n, listed, MaxIgnoredKeys)
		default:
			t.IgnoredKeysTotal = n
		}
	}
	if t.DurationMs != nil && *t.DurationMs < 0 {
		p.v.add(path("$mcp_duration_ms"), "must not be negative")
	}
	t.ServerName = p.str(propServerName)
	t.ServerVersion = p.str(propServerVersion)
	t.ProtocolVersion = p.str(propProtocolVersion)
	t.Intent = p.str("$mcp_intent")
	t.IntentSource = p.str("$mcp_intent_source")
	t.ErrorMessage = p.str("$mcp_error_message")
	t.Parameters, t.Response = p.peek(propParameters), p.peek(propResponse)
	if isNull(t.Parameters) {
		t.Parameters = nil
	}
	if isNull(t.Response) {
		t.Response = nil
	}
	ev.ToolCall = t
}

// ignoredKeys reads $mcp_ignored_keys: an array of at most MaxIgnoredKeys strings. Control
// characters are masked as '?' (the MCP server already does; a server that does not must not
// smuggle them into dashboards).
func (p propertyReader) ignoredKeys() []string {
	const key = "$mcp_ignored_keys"
	raw := p.raw(key)
	if isNull(raw) {
		return nil
	}
	items, ok := arrayItems(raw)
	if !ok {
		p.v.add(path(key), "must be an array of strings")
		return nil
	}
	if len(items) > MaxIgnoredKeys {
		p.v.add(path(key), "%d entries, at most %d allowed (report the rest in $mcp_ignored_keys_total)", len(items), MaxIgnoredKeys)
		return nil
	}
	keys := make([]string, 0, len(items))
	for i, item := range items {
		s, ok := stringValue(item)
		if !ok {
			p.v.add(path(key)+"["+itoa(i)+"]", "must be a string")
			continue
		}
		if s == "" {
			p.v.add(path(key)+"["+itoa(i)+"]", "must not be empty")
			continue
		}
		keys = append(keys, MaskControl(s))
	}
	return keys
}

// MaskControl is misuse.MaskControl: ignored-key paths get the same masking whichever source
// they came from.
func MaskControl(s string) string { return misuse.MaskControl(s) }

// replaceControl replaces every character isControl reports with the rune with.
func replaceControl(s string, with rune) string {
	if strings.IndexFunc(s, isControl) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return with
		}
		return r
	}, s)
}

func isControl(r rune) bool { return misuse.IsControl(r) }

// recruitmentReads are the properties decodeRecruitment reads; responseReads those
// decodeResponse reads.
var (
	recruitmentReads = append([]string{"campaign_id", "invitation_id", "feature_flag", "instance_url"}, diagnosticsReads...)
	responseReads    = append([]string{"response", "responded_at"}, recruitmentReads...)
)

// decodeRecruitment reads an invitation's or a booking-link open's properties.
func decodeRecruitment(p *propertyReader, ev *Event) {
	r := &Recruitment{}
	r.CampaignID = p.requiredStr("campaign_id")
	r.InvitationID = p.requiredStr("invitation_id")
	r.FeatureFlag = p.requiredStr("feature_flag")
	r.InstanceURL = p.str("instance_url")
	p.diagnostics(&r.Diagnostics, false)
	ev.Recruitment = r
}

// decodeResponse reads an invitation response's properties: the recruitment ones, the
// answer and responded_at (defaulting to the event's timestamp).
func decodeResponse(p *propertyReader, ev *Event) {
	decodeRecruitment(p, ev)
	r, ts := ev.Recruitment, ev.Timestamp
	switch resp := p.requiredStr("response"); resp {
	case ResponseAccept, ResponseDecline, ResponseCancel, "":
		r.Response = resp
	default:
		p.v.add(path("response"), "must be accept, decline or cancel, got %s", quoteForError(resp))
	}
	r.RespondedAt = ts
	if s := p.str("responded_at"); s != "" {
		t, err := parseTimestamp(s)
		switch {
		case errors.Is(err, errTimestampRange):
			p.v.add(path("responded_at"), "%v: %s", err, quoteForError(s))
		case err != nil:
			p.v.add(path("responded_at"), "not RFC 3339 with an offset: %s", quoteForError(s))
		default:
			r.RespondedAt = t
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
