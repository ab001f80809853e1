package ingest

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/mcpulse/mcpulse/internal/safetext"
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

func path(key propKey) string { return "properties." + key.String() }

// raw returns the raw value of a property the kind reads (nil when absent) and marks it as
// held by a column.
func (p propertyReader) raw(key propKey) []byte {
	i := p.slot(key)
	if i < 0 {
		return nil
	}
	p.d.pairs[i].dropped = true
	return p.d.value(&p.d.pairs[i])
}

// peek returns the raw value of a property the kind reads (nil when absent), keeping it in
// Event.Extra.
func (p propertyReader) peek(key propKey) []byte {
	if i := p.slot(key); i >= 0 {
		return p.d.value(&p.d.pairs[i])
	}
	return nil
}

// slot returns the index in the pairs of the last property named key, -1 when absent.
func (p propertyReader) slot(key propKey) int {
	if !p.kind.reads.has(key) {
		panic("ingest: kind " + p.kind.Name + " reads " + key.String() + " without listing it in its reads")
	}
	return int(p.d.slots[key]) - 1
}

// text returns the string a property the kind reads holds, marking it as held by a column:
// a slice of the event's string arena when it is a plain string (decodeState.buildArena),
// else decoded on its own. present is false when the property is absent or null, ok false
// when it is not a string.
func (p propertyReader) text(key propKey) (s string, present, ok bool) {
	i := p.slot(key)
	if i < 0 {
		return "", false, true
	}
	pr := &p.d.pairs[i]
	pr.dropped = true
	if pr.arena >= 0 {
		return p.d.arena[pr.arena : int(pr.arena)+pr.valEnd-pr.valStart-2], true, true
	}
	value := p.d.value(pr)
	s, ok = stringValue(value)
	return s, !isNull(value), ok
}

// str reads an optional string property ("" when absent or null).
func (p propertyReader) str(key propKey) string {
	s, _, ok := p.text(key)
	if !ok {
		p.v.add(path(key), "must be a string")
	}
	return s
}

// name reads an optional string property that is a stored dimension or shown as a label (a
// tool, client or server name or version, a mode, a source): safetext.Bound to
// safetext.MaxName bytes, so a long value is kept cut and marked, not refused.
func (p propertyReader) name(key propKey) string {
	return safetext.Bound(p.str(key), safetext.MaxName)
}

// message reads an optional string property that is a stored free text (an error message, an
// intent): safetext.Bound to safetext.MaxText bytes.
func (p propertyReader) message(key propKey) string {
	return safetext.Bound(p.str(key), safetext.MaxText)
}

// requiredStr reads a string property that must be present and non-empty.
func (p propertyReader) requiredStr(key propKey) string {
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
func (p propertyReader) boolean(key propKey, dst *bool) *bool {
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
func (p propertyReader) number(key propKey, dst *float64) *float64 {
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
func (p propertyReader) integer(key propKey, dst *int64) *int64 {
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
var diagnosticsReads = []propKey{
	keyRecruitmentReason, keyURLSupported, keyFormSupported,
	keyDiagCampaignID, keyCompletedCalls, keySessionAge,
}

// diagnostics reads the gate diagnostics into d (its optional values point into d). The
// campaign id is held by a column only when campaignColumn (a tool call's; a recruitment event
// has a campaign_id of its own): otherwise it is checked and kept in Event.Extra.
func (p propertyReader) diagnostics(d *Diagnostics, campaignColumn bool) {
	d.Reason = p.str(keyRecruitmentReason)
	d.URLSupported = p.boolean(keyURLSupported, &d.values.urlSupported)
	d.FormSupported = p.boolean(keyFormSupported, &d.values.formSupported)
	if campaignColumn {
		d.CampaignID = p.str(keyDiagCampaignID)
	} else if _, ok := stringValue(p.peek(keyDiagCampaignID)); !ok {
		p.v.add(path(keyDiagCampaignID), "must be a string")
	}
	d.CompletedCalls = p.integer(keyCompletedCalls, &d.values.completedCalls)
	d.SessionAgeSeconds = p.number(keySessionAge, &d.values.sessionAge)
}

// toolCallReads are the properties decodeToolCall reads.
var toolCallReads = append([]propKey{
	keyToolName, keyDurationMs, keyClientName, keyClientVersion, keyExecVerb,
	keyExecTargetTool, keyMode, keyConversationID, keySessionID, keySource, keyMCPSource, keyErrorType,
	keyIsError, keyIgnoredKeys, keyIgnoredKeysTotal, keyServerName, keyServerVersion, keyProtocolVersion,
	keyIntent, keyIntentSource, keyErrorMessage, keyParameters, keyResponse,
}, diagnosticsReads...)

// decodeToolCall reads a $mcp_tool_call's properties (DESIGN.md §2).
func decodeToolCall(p *propertyReader, ev *Event) {
	t := ev.ToolCall // allocated with ev (Kind.alloc, or the caller's ToolCallSlot)
	if t == nil {
		t = &ToolCall{}
	}
	t.ToolName = safetext.Bound(p.requiredStr(keyToolName), safetext.MaxName)
	t.DurationMs = p.number(keyDurationMs, &t.durationMs)
	t.ClientName = p.name(keyClientName)
	t.ClientVersion = p.name(keyClientVersion)
	t.ExecVerb = p.name(keyExecVerb)
	t.ExecTargetTool = p.name(keyExecTargetTool)
	t.Mode = p.name(keyMode)
	t.ConversationID = p.str(keyConversationID)
	t.SessionID = p.str(keySessionID)
	// `source`, or the MCP analytics SDK's name for it; when both are sent, $mcp_source is
	// checked and kept in properties.
	if t.Source = p.name(keySource); t.Source == "" {
		t.Source = p.name(keyMCPSource)
	} else if _, ok := stringValue(p.peek(keyMCPSource)); !ok {
		p.v.add(path(keyMCPSource), "must be a string")
	}
	t.ErrorType = p.name(keyErrorType)
	p.diagnostics(&t.Diagnostics, true)
	p.boolean(keyIsError, &t.IsError)
	problems := len(p.v.Problems)
	t.IgnoredKeysReported = !isNull(p.peek(keyIgnoredKeys))
	t.IgnoredKeys = p.ignoredKeys()
	listRefused := len(p.v.Problems) > problems // then the total has no list to agree with
	t.IgnoredKeysTotal = int64(len(t.IgnoredKeys))
	var n int64
	if p.integer(keyIgnoredKeysTotal, &n) != nil && !listRefused {
		switch listed := t.IgnoredKeysTotal; {
		case n < listed:
			p.v.add(path(keyIgnoredKeysTotal), "%d is less than the %d keys listed", n, listed)
		case n > listed && listed < MaxIgnoredKeys:
			p.v.add(path(keyIgnoredKeysTotal), "%d, but the list holds %d and is cut only when it reaches %d", n, listed, MaxIgnoredKeys)
		default:
			t.IgnoredKeysTotal = n
		}
	}
	if t.DurationMs != nil && *t.DurationMs < 0 {
		p.v.add(path(keyDurationMs), "must not be negative")
	}
	t.ServerName = p.name(keyServerName)
	t.ServerVersion = p.name(keyServerVersion)
	t.ProtocolVersion = p.name(keyProtocolVersion)
	t.Intent = p.message(keyIntent)
	t.IntentSource = p.name(keyIntentSource)
	t.ErrorMessage = p.message(keyErrorMessage)
	// Read, not peeked: what they hold is in the derived columns (ignored keys, their source,
	// error class), so Extra leaves them out; a misused call's row keeps $mcp_parameters
	// (ToolCallProperties).
	t.Parameters, t.Response = p.raw(keyParameters), p.raw(keyResponse)
	if isNull(t.Parameters) {
		t.Parameters = nil
	}
	if isNull(t.Response) {
		t.Response = nil
	}
	ev.ToolCall = t
}

// ignoredKeys reads $mcp_ignored_keys: an array of at most MaxIgnoredKeys strings, each made a
// stored path by misuse.KeyPath: control characters masked as '?' (the MCP server already
// does; a server that does not must not smuggle them into dashboards) and the length bounded.
func (p propertyReader) ignoredKeys() []string {
	key := keyIgnoredKeys
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
		keys = append(keys, misuse.KeyPath(s))
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
	recruitmentReads = append([]propKey{keyCampaignID, keyInvitationID, keyFeatureFlag, keyInstanceURL}, diagnosticsReads...)
	responseReads    = append([]propKey{keyResponseText, keyRespondedAt}, recruitmentReads...)
)

// decodeRecruitment reads an invitation's or a booking-link open's properties.
func decodeRecruitment(p *propertyReader, ev *Event) {
	r := ev.Recruitment // allocated with ev (Kind.alloc)
	if r == nil {
		r = &Recruitment{}
	}
	r.CampaignID = p.requiredStr(keyCampaignID)
	r.InvitationID = p.requiredStr(keyInvitationID)
	r.FeatureFlag = p.requiredStr(keyFeatureFlag)
	r.InstanceURL = p.str(keyInstanceURL)
	p.diagnostics(&r.Diagnostics, false)
	ev.Recruitment = r
}

// decodeResponse reads an invitation response's properties: the recruitment ones, the
// answer and responded_at (defaulting to the event's timestamp).
func decodeResponse(p *propertyReader, ev *Event) {
	decodeRecruitment(p, ev)
	r, ts := ev.Recruitment, ev.Timestamp
	switch resp := p.requiredStr(keyResponseText); resp {
	case ResponseAccept, ResponseDecline, ResponseCancel, "":
		r.Response = resp
	default:
		p.v.add(path(keyResponseText), "must be accept, decline or cancel, got %s", quoteForError(resp))
	}
	r.RespondedAt = ts
	if s := p.str(keyRespondedAt); s != "" {
		t, err := parseTimestamp(s)
		switch {
		case errors.Is(err, errTimestampRange):
			p.v.add(path(keyRespondedAt), "%v: %s", err, quoteForError(s))
		case err != nil:
			p.v.add(path(keyRespondedAt), "not RFC 3339 with an offset: %s", quoteForError(s))
		default:
			r.RespondedAt = t
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
