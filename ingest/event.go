// Package ingest holds mcpulse's event contract (DESIGN.md §2): the PostHog-style envelope,
// the four event kinds and their validation, the identity hash shared with the MCP servers,
// and a Kafka publisher.
package ingest

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/segmentio/encoding/json"

	"github.com/mcpulse/mcpulse/misuse"
)

// Event names, as PostHog's MCP analytics SDK and PostHog's MCP server send them (DESIGN.md §2),
// so existing PostHog dashboards keep working.
const (
	EventToolCall           = "$mcp_tool_call"
	EventInvitationSent     = "mcp interview invitation sent"
	EventBookingLinkOpened  = "mcp interview booking link opened"
	EventInvitationResponse = "mcp interview invitation responded"
)

// Kind is one of the four event kinds mcpulse understands.
type Kind uint8

// The event kinds. KindUnknown is any other event name.
const (
	KindUnknown Kind = iota
	KindToolCall
	KindInvitationSent
	KindBookingLinkOpened
	KindInvitationResponse
)

// String returns the kind's short name: "tool_call", "invitation_sent", "link_opened",
// "response" or "unknown". These are the values of the ClickHouse `kind` columns.
func (k Kind) String() string {
	switch k {
	case KindToolCall:
		return "tool_call"
	case KindInvitationSent:
		return "invitation_sent"
	case KindBookingLinkOpened:
		return "link_opened"
	case KindInvitationResponse:
		return "response"
	}
	return "unknown"
}

// KindOf maps an `event` name to its Kind (KindUnknown for any other name).
func KindOf(eventName string) Kind {
	switch eventName {
	case EventToolCall:
		return KindToolCall
	case EventInvitationSent:
		return KindInvitationSent
	case EventBookingLinkOpened:
		return KindBookingLinkOpened
	case EventInvitationResponse:
		return KindInvitationResponse
	}
	return KindUnknown
}

// Topic returns the Kafka topic a kind is published to: TopicToolCalls for tool calls,
// TopicRecruitment for the three recruitment kinds, "" for KindUnknown.
func (k Kind) Topic() string {
	switch k {
	case KindToolCall:
		return TopicToolCalls
	case KindInvitationSent, KindBookingLinkOpened, KindInvitationResponse:
		return TopicRecruitment
	}
	return ""
}

// Limits from DESIGN.md §2.
const (
	// MaxDistinctIDLength is the longest accepted distinct_id, in characters (Unicode code points).
	MaxDistinctIDLength = 200
	// MaxIgnoredKeys is how many $mcp_ignored_keys entries an event carries at most; the MCP
	// server reports how many there were before the cap in $mcp_ignored_keys_total.
	MaxIgnoredKeys = misuse.MaxKeys
)

// Responses an invitation can get, as sent in the `response` property.
const (
	ResponseAccept  = "accept"
	ResponseDecline = "decline"
	ResponseCancel  = "cancel"
)

// Envelope is the wire shape of every event: PostHog's capture format, so a PostHog SDK can
// send it unchanged. Properties keeps every property as raw JSON; unknown ones are preserved.
type Envelope struct {
	UUID       string                     `json:"uuid"`
	Event      string                     `json:"event"`
	DistinctID string                     `json:"distinct_id"`
	Timestamp  string                     `json:"timestamp"`
	Properties map[string]json.RawMessage `json:"properties"`
}

// FieldError is one problem with an event, at a field path such as "distinct_id" or
// "properties.$mcp_ignored_keys[3]".
type FieldError struct {
	Path    string // dotted field path; array items as [i]
	Problem string // what is wrong, untrusted values Go-quoted
}

// String renders the problem as "path: problem".
func (f FieldError) String() string { return f.Path + ": " + f.Problem }

// ValidationError lists every problem found in one event, in field order. It is the error
// Parse returns for an event that decoded as JSON but breaks the contract.
type ValidationError struct {
	Problems []FieldError
}

// Error joins the problems on one line ("uuid: required; timestamp: not RFC 3339 ...").
func (v *ValidationError) Error() string {
	parts := make([]string, len(v.Problems))
	for i, p := range v.Problems {
		parts[i] = p.String()
	}
	return strings.Join(parts, "; ")
}

func (v *ValidationError) add(path, format string, args ...any) {
	v.Problems = append(v.Problems, FieldError{Path: path, Problem: fmt.Sprintf(format, args...)})
}

// ErrUnknownEvent is wrapped by the error Parse returns for a well-formed envelope whose
// `event` is none of the four kinds; the gateway acknowledges such events, the consumer
// dead-letters them.
var ErrUnknownEvent = errors.New("event is not one of the four mcpulse kinds")

// Event is a decoded, validated event. Timestamps are UTC.
type Event struct {
	UUID       uuid.UUID
	Name       string
	Kind       Kind
	DistinctID string
	Timestamp  time.Time
	// Properties is the envelope's properties object, every property kept (compact JSON
	// text, keys sorted, as encoding/json re-encodes it), stored whole in the raw tables.
	Properties json.RawMessage

	ToolCall    *ToolCall    // set when Kind == KindToolCall
	Recruitment *Recruitment // set for the three recruitment kinds
}

// Diagnostics are the interview-recruitment gate diagnostics a tool call (and an invitation,
// with reason "invited") carries. Nil pointers mean the property was absent or null; for the
// capability flags, null means "the request carried no capability metadata", not false
// (PostHog MCP guide).
type Diagnostics struct {
	Reason            string // interview_recruitment_reason; "" when absent
	URLSupported      *bool  // interview_recruitment_url_supported
	FormSupported     *bool  // interview_recruitment_form_supported
	CampaignID        string // interview_recruitment_campaign_id
	CompletedCalls    *int64
	SessionAgeSeconds *float64
}

// ToolCall holds the properties of a $mcp_tool_call event that mcpulse reads.
type ToolCall struct {
	ToolName       string // $mcp_tool_name
	IsError        bool   // $mcp_is_error (bool or "true"/"false"; absent = false)
	DurationMs     *float64
	ClientName     string
	ClientVersion  string
	ExecVerb       string
	ExecTargetTool string
	Mode           string
	ConversationID string
	SessionID      string
	Source         string
	ErrorType      string
	// IgnoredKeys are dotted paths of input keys the tool schema dropped (array items by
	// index), at most MaxIgnoredKeys, control characters masked as '?'.
	IgnoredKeys []string
	// IgnoredKeysTotal is how many ignored keys there were before the cap (≥ len(IgnoredKeys)).
	IgnoredKeysTotal int64
	Diagnostics
}

// EffectiveTool is the tool the call really ran: $mcp_exec_target_tool when $mcp_exec_verb is
// "call" and the target is not "unrecognized", else $mcp_tool_name (PostHog's own rule for
// exec-wrapped calls; DESIGN.md §4).
func (t *ToolCall) EffectiveTool() string {
	if t.ExecVerb == "call" && t.ExecTargetTool != "" && t.ExecTargetTool != "unrecognized" {
		return t.ExecTargetTool
	}
	return t.ToolName
}

// Recruitment holds the properties of the three recruitment kinds.
type Recruitment struct {
	CampaignID   string
	InvitationID string
	FeatureFlag  string
	// InstanceURL is the public base URL of the PostHog instance the user authenticated
	// against; "" when the event lacks it (the consumer then uses its configured default).
	InstanceURL string
	// Response is "accept", "decline" or "cancel" for KindInvitationResponse, else "".
	Response string
	// RespondedAt is responded_at, defaulting to the event timestamp (responses only).
	RespondedAt time.Time
	Diagnostics
}

// Parse decodes one JSON envelope and validates it against DESIGN.md §2. It returns a
// *ValidationError listing every problem (with field paths) when the JSON is well formed but
// the event breaks the contract (including a top-level field of the wrong type), an error
// wrapping ErrUnknownEvent (and no other problem) for a valid envelope of another event name,
// and a plain "bad JSON: ..." error when data is not exactly one JSON object.
//
// Top-level field names match exactly ("UUID" is not "uuid"; encoding/json's case-insensitive
// struct matching is deliberately not used). Unknown top-level fields are ignored; a repeated
// field keeps its last value.
func Parse(data []byte) (*Event, error) {
	var top map[string]json.RawMessage
	// segmentio/encoding/json is the fast path (same results); a refused event is decoded
	// again by encoding/json, whose error texts are the documented ones.
	if json.Unmarshal(data, &top) != nil {
		top = nil
		if err := stdjson.Unmarshal(data, &top); err != nil {
			var typeErr *json.UnmarshalTypeError
			if errors.As(err, &typeErr) && typeErr.Field == "" {
				return nil, fmt.Errorf("bad JSON: an event must be a JSON object, got %s", typeErr.Value)
			}
			return nil, fmt.Errorf("bad JSON: %w", err)
		}
	}
	if top == nil {
		return nil, errors.New("bad JSON: an event must be a JSON object, got null")
	}
	env := &Envelope{}
	typeProblems := map[string]string{}
	for _, f := range []struct {
		name string
		dst  *string
	}{
		{"uuid", &env.UUID}, {"event", &env.Event}, {"distinct_id", &env.DistinctID}, {"timestamp", &env.Timestamp},
	} {
		raw, ok := top[f.name]
		if !ok || isNull(raw) {
			continue // reported as required by validate
		}
		if err := json.Unmarshal(raw, f.dst); err != nil {
			typeProblems[f.name] = "must be a string"
		}
	}
	if raw, ok := top["properties"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &env.Properties); err != nil {
			typeProblems["properties"] = "must be a JSON object"
		}
	}
	// The identity hash must equal what JavaScript computes (DESIGN.md §3). Go decodes invalid
	// UTF-8 and unpaired UTF-16 surrogate escapes to U+FFFD, which JavaScript does not, so a
	// recruitment event carrying one would be hashed differently: refuse it instead.
	// The same goes for every kind's distinct_id: two different ids must never collapse into one
	// person.
	if typeProblems["distinct_id"] == "" && !jsExact(top["distinct_id"]) {
		typeProblems["distinct_id"] = notJSExact
	}
	if !jsExact(env.Properties["instance_url"]) {
		typeProblems["properties.instance_url"] = notJSExact
	}
	return validate(env, typeProblems)
}

// Validate checks a decoded envelope and builds the Event; see Parse for the errors. A nil
// Properties map means the field was absent (an error); an empty one is fine.
func Validate(env *Envelope) (*Event, error) { return validate(env, nil) }

// validate is Validate with the type problems Parse found while decoding the top-level fields
// (field name → problem); a field with a type problem is reported once, with that problem.
func validate(env *Envelope, typeProblems map[string]string) (*Event, error) {
	v := &ValidationError{}
	ev := &Event{Name: env.Event, Kind: KindOf(env.Event), DistinctID: env.DistinctID}

	switch {
	case typeProblems["uuid"] != "":
		v.add("uuid", "%s", typeProblems["uuid"])
	case env.UUID == "":
		v.add("uuid", "required")
	case len(env.UUID) != 36:
		v.add("uuid", "not a UUID in canonical 8-4-4-4-12 form: %s", quoteForError(env.UUID))
	default:
		id, err := uuid.Parse(env.UUID)
		switch {
		case err != nil:
			v.add("uuid", "not a UUID: %s", quoteForError(env.UUID))
		case id == uuid.Nil:
			v.add("uuid", "the nil UUID cannot be a deduplication key")
		}
		ev.UUID = id
	}
	switch {
	case typeProblems["event"] != "":
		v.add("event", "%s", typeProblems["event"])
	case env.Event == "":
		v.add("event", "required")
	}
	switch n := utf8.RuneCountInString(env.DistinctID); {
	case typeProblems["distinct_id"] != "":
		v.add("distinct_id", "%s", typeProblems["distinct_id"])
	case n == 0:
		v.add("distinct_id", "required")
	case n > MaxDistinctIDLength:
		v.add("distinct_id", "%d characters, at most %d allowed", n, MaxDistinctIDLength)
	}
	if p := typeProblems["properties.instance_url"]; p != "" {
		v.add("properties.instance_url", "%s", p)
	}
	switch ts, err := parseTimestamp(env.Timestamp); {
	case typeProblems["timestamp"] != "":
		v.add("timestamp", "%s", typeProblems["timestamp"])
	case env.Timestamp == "":
		v.add("timestamp", "required")
	case errors.Is(err, errTimestampRange):
		v.add("timestamp", "%v: %s", err, quoteForError(env.Timestamp))
	case err != nil:
		v.add("timestamp", "not RFC 3339 with an offset: %s", quoteForError(env.Timestamp))
	default:
		ev.Timestamp = ts
	}
	switch {
	case typeProblems["properties"] != "":
		v.add("properties", "%s", typeProblems["properties"])
	case env.Properties == nil:
		v.add("properties", "required (may be empty {})")
	}

	props := propertyReader{props: env.Properties, v: v}
	switch ev.Kind {
	case KindToolCall:
		ev.ToolCall = props.toolCall()
	case KindInvitationSent, KindBookingLinkOpened, KindInvitationResponse:
		ev.Recruitment = props.recruitment(ev.Kind, ev.Timestamp)
	}
	if len(v.Problems) > 0 {
		return nil, v
	}
	if ev.Kind == KindUnknown {
		return nil, fmt.Errorf("%w: %s", ErrUnknownEvent, quoteForError(env.Event))
	}
	raw, err := json.Marshal(env.Properties)
	if err != nil {
		return nil, fmt.Errorf("properties: %w", err)
	}
	ev.Properties = raw
	return ev, nil
}

// MarshalJSON encodes the event as its wire envelope (DESIGN.md §2): uuid (canonical lowercase
// form), event, distinct_id, timestamp (RFC 3339 with nanoseconds as needed, UTC, "Z") and
// properties (the raw object; {} when Properties is empty). Parse of the result yields the same
// UUID, Name, Kind, DistinctID, Timestamp and properties. It fails only when Properties is not
// valid JSON.
func (e Event) MarshalJSON() ([]byte, error) {
	props := e.Properties
	if len(bytes.TrimSpace(props)) == 0 {
		props = json.RawMessage("{}")
	}
	return json.Marshal(struct {
		UUID       string          `json:"uuid"`
		Event      string          `json:"event"`
		DistinctID string          `json:"distinct_id"`
		Timestamp  string          `json:"timestamp"`
		Properties json.RawMessage `json:"properties"`
	}{e.UUID.String(), e.Name, e.DistinctID, e.Timestamp.UTC().Format(time.RFC3339Nano), props})
}

var errTimestampRange = errors.New("out of range: ClickHouse DateTime stores 1970-01-01T00:00:00Z to 2105-12-31T23:59:59Z")

// The instants a ClickHouse DateTime column holds (an unsigned 32-bit count of seconds); a
// timestamp outside them would wrap around silently and land in the wrong hour and day.
var (
	minTimestamp = time.Unix(0, 0).UTC()
	maxTimestamp = time.Date(2106, 1, 1, 0, 0, 0, 0, time.UTC)
)

// parseTimestamp accepts RFC 3339 with a numeric offset or Z (fractional seconds optional,
// introduced by '.', not the ',' Go's parser also takes) and returns it in UTC. The UTC instant
// must fall in years 0000–9999, so that it can be written back as RFC 3339.
func parseTimestamp(s string) (time.Time, error) {
	if strings.IndexByte(s, ',') >= 0 {
		return time.Time{}, errors.New("comma in timestamp")
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	t = t.UTC()
	if t.Before(minTimestamp) || !t.Before(maxTimestamp) {
		return time.Time{}, errTimestampRange
	}
	return t, nil
}

// quoteForError renders an untrusted value for an error message: Go-quoted (control
// characters escaped) and cut to 80 bytes.
func quoteForError(s string) string {
	if len(s) > 80 {
		cut := 80
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "…"
	}
	return strconv.Quote(s)
}

const notJSExact = "holds invalid UTF-8 or an unpaired UTF-16 surrogate, which Go cannot keep as JavaScript does: the identity hash would differ from the MCP server's and distinct ids could collapse"

// jsExact reports whether a raw JSON string decodes in Go to exactly the string JavaScript's
// JSON.parse gives: valid UTF-8 and every \uD800-\uDFFF escape part of a surrogate pair.
// Anything that is not a JSON string (absent, null, another type) is reported as exact; type
// problems are found elsewhere.
func jsExact(raw json.RawMessage) bool {
	if len(raw) == 0 || raw[0] != '"' {
		return true
	}
	if !utf8.Valid(raw) {
		return false
	}
	pendingHigh := false
	for i := 1; i < len(raw)-1; i++ {
		if raw[i] != '\\' {
			if pendingHigh {
				return false
			}
			continue
		}
		i++
		if raw[i] != 'u' {
			if pendingHigh {
				return false
			}
			continue
		}
		if i+4 >= len(raw) {
			return false
		}
		n, err := strconv.ParseUint(string(raw[i+1:i+5]), 16, 16)
		if err != nil {
			return false
		}
		i += 4
		switch {
		case n >= 0xD800 && n <= 0xDBFF:
			if pendingHigh {
				return false
			}
			pendingHigh = true
		case n >= 0xDC00 && n <= 0xDFFF:
			if !pendingHigh {
				return false
			}
			pendingHigh = false
		default:
			if pendingHigh {
				return false
			}
		}
	}
	return !pendingHigh
}

// MaxResponseClockSkew is how far an invitation response's responded_at (its timestamp when it
// has none) may be ahead of the clock that checks it (CheckClock).
const MaxResponseClockSkew = 5 * time.Minute

// CheckClock reports what is wrong with a parsed event given the current time now, which Parse
// cannot know: an invitation response dated more than MaxResponseClockSkew after now. The
// suppression precedence (DESIGN.md §3) keeps the record with the latest responded_at and
// ignores responses older than an ops reset, so a response from the future would outrank
// every reset made before its date, and a cancel would stretch its 7-day cooldown by the same
// amount. It returns a *ValidationError naming properties.responded_at, or nil. An event it
// accepts stays accepted at every later time, so a replay never turns it away.
func CheckClock(ev *Event, now time.Time) error {
	if ev.Kind != KindInvitationResponse || ev.Recruitment == nil {
		return nil
	}
	ahead := ev.Recruitment.RespondedAt.Sub(now)
	if ahead <= MaxResponseClockSkew {
		return nil
	}
	v := &ValidationError{}
	v.add("properties.responded_at", "%s is %s ahead of the receiving clock (%s), more than the %s allowed: a response cannot come from the future",
		ev.Recruitment.RespondedAt.Format(time.RFC3339Nano), ahead.Round(time.Second), now.UTC().Format(time.RFC3339), MaxResponseClockSkew)
	return v
}
