package ingest

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/encoding/json"

	"github.com/mcpulse/mcpulse/misuse"
)

// propertyReader reads typed properties and records a FieldError for each property of the
// wrong type, so one pass reports every problem.
type propertyReader struct {
	props map[string]json.RawMessage
	v     *ValidationError
}

func path(key string) string { return "properties." + key }

func isNull(raw json.RawMessage) bool {
	return raw == nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// str reads an optional string property ("" when absent or null).
func (p propertyReader) str(key string) string {
	raw, ok := p.props[key]
	if !ok || isNull(raw) {
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		p.v.add(path(key), "must be a string")
		return ""
	}
	return s
}

// requiredStr reads a string property that must be present and non-empty.
func (p propertyReader) requiredStr(key string) string {
	raw, ok := p.props[key]
	if !ok || isNull(raw) {
		p.v.add(path(key), "required")
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		p.v.add(path(key), "must be a string")
		return ""
	}
	if s == "" {
		p.v.add(path(key), "must not be empty")
	}
	return s
}

// boolean reads a bool given as JSON true/false or the strings "true"/"false"; nil when absent
// or null.
func (p propertyReader) boolean(key string) *bool {
	raw, ok := p.props[key]
	if !ok || isNull(raw) {
		return nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err == nil {
		return &b
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		switch s {
		case "true":
			b = true
			return &b
		case "false":
			return &b
		}
	}
	p.v.add(path(key), `must be a boolean (true, false, "true" or "false")`)
	return nil
}

// number reads a finite JSON number; nil when absent or null.
func (p propertyReader) number(key string) *float64 {
	raw, ok := p.props[key]
	if !ok || isNull(raw) {
		return nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		p.v.add(path(key), "must be a number")
		return nil
	}
	return &f
}

// integer reads a non-negative whole JSON number; nil when absent or null.
func (p propertyReader) integer(key string) *int64 {
	f := p.number(key)
	if f == nil {
		return nil
	}
	if *f < 0 || *f != math.Trunc(*f) {
		p.v.add(path(key), "must be a non-negative integer")
		return nil
	}
	if *f > 1<<53 { // beyond it, a JSON number no longer holds every integer exactly
		p.v.add(path(key), "must be at most 2^53 (9007199254740992)")
		return nil
	}
	n := int64(*f)
	return &n
}

func (p propertyReader) diagnostics() Diagnostics {
	return Diagnostics{
		Reason:            p.str("interview_recruitment_reason"),
		URLSupported:      p.boolean("interview_recruitment_url_supported"),
		FormSupported:     p.boolean("interview_recruitment_form_supported"),
		CampaignID:        p.str("interview_recruitment_campaign_id"),
		CompletedCalls:    p.integer("interview_recruitment_completed_calls"),
		SessionAgeSeconds: p.number("interview_recruitment_session_age_seconds"),
	}
}

func (p propertyReader) toolCall() *ToolCall {
	t := &ToolCall{
		ToolName:       p.requiredStr("$mcp_tool_name"),
		DurationMs:     p.number("$mcp_duration_ms"),
		ClientName:     p.str("$mcp_client_name"),
		ClientVersion:  p.str("$mcp_client_version"),
		ExecVerb:       p.str("$mcp_exec_verb"),
		ExecTargetTool: p.str("$mcp_exec_target_tool"),
		Mode:           p.str("$mcp_mode"),
		ConversationID: p.str("$mcp_conversation_id"),
		SessionID:      p.str("$session_id"),
		Source:         p.str("source"),
		ErrorType:      p.str("$mcp_error_type"),
		Diagnostics:    p.diagnostics(),
	}
	if b := p.boolean("$mcp_is_error"); b != nil {
		t.IsError = *b
	}
	problems := len(p.v.Problems)
	t.IgnoredKeys = p.ignoredKeys()
	listRefused := len(p.v.Problems) > problems // then the total has no list to agree with
	t.IgnoredKeysTotal = int64(len(t.IgnoredKeys))
	if n := p.integer("$mcp_ignored_keys_total"); n != nil && !listRefused {
		switch listed := t.IgnoredKeysTotal; {
		case *n < listed:
			p.v.add(path("$mcp_ignored_keys_total"), "%d is less than the %d keys listed", *n, listed)
		case *n > listed && listed < MaxIgnoredKeys:
			p.v.add(path("$mcp_ignored_keys_total"), "%d, but the list holds %d and is cut only when it reaches %d", *n, listed, MaxIgnoredKeys)
		default:
			t.IgnoredKeysTotal = *n
		}
	}
	if t.DurationMs != nil && *t.DurationMs < 0 {
		p.v.add(path("$mcp_duration_ms"), "must not be negative")
	}
	return t
}

// ignoredKeys reads $mcp_ignored_keys: an array of at most MaxIgnoredKeys strings. Control
// characters are masked as '?' (the MCP server already does; a server that does not must not
// smuggle them into dashboards).
func (p propertyReader) ignoredKeys() []string {
	const key = "$mcp_ignored_keys"
	raw, ok := p.props[key]
	if !ok || isNull(raw) {
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		p.v.add(path(key), "must be an array of strings")
		return nil
	}
	if len(items) > MaxIgnoredKeys {
		p.v.add(path(key), "%d entries, at most %d allowed (report the rest in $mcp_ignored_keys_total)", len(items), MaxIgnoredKeys)
		return nil
	}
	keys := make([]string, 0, len(items))
	for i, item := range items {
		var s string
		if err := json.Unmarshal(item, &s); err != nil {
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

func (p propertyReader) recruitment(kind Kind, ts time.Time) *Recruitment {
	r := &Recruitment{
		CampaignID:   p.requiredStr("campaign_id"),
		InvitationID: p.requiredStr("invitation_id"),
		FeatureFlag:  p.requiredStr("feature_flag"),
		InstanceURL:  p.str("instance_url"),
		Diagnostics:  p.diagnostics(),
	}
	if kind != KindInvitationResponse {
		return r
	}
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
	return r
}

func itoa(i int) string { return strconv.Itoa(i) }
