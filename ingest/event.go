// Package ingest holds mcpulse's event contract (DESIGN.md §2): the PostHog-style envelope,
// the table of event kinds with their validation and raw rows, the identity hash shared with the MCP servers,
// and a Kafka publisher.
package ingest

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/segmentio/encoding/json"

	"github.com/mcpulse/mcpulse/internal/safetext"
	"github.com/mcpulse/mcpulse/misuse"
)

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
	clock    bool // CheckClock's: class ClassClock
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

// Event is a decoded, validated event. Timestamps are UTC.
type Event struct {
	UUID       uuid.UUID
	Name       string
	Kind       *Kind // the entry of the table of kinds for Name
	DistinctID string
	Timestamp  time.Time
	// Properties is the envelope's properties object exactly as received (it shares the
	// bytes given to Parse).
	Properties json.RawMessage
	// Extra holds the properties that no column of the kind's raw table holds, as one compact
	// JSON object ({} when there are none): what the raw tables store in `properties`. Each
	// is copied from the received bytes, not re-encoded; a property whose key or value holds
	// invalid UTF-8 is re-encoded with U+FFFD for each invalid byte, as encoding/json decodes it.
	Extra json.RawMessage

	ToolCall    *ToolCall    // set for KindToolCall
	Recruitment *Recruitment // set for the three recruitment kinds
	ToolsList   *ToolsList   // set for KindToolsList
	Initialize  *Initialize  // set for KindInitialize
	Exception   *Exception   // set for KindException
	Feedback    *Feedback    // set for KindFeedback and KindMissingCapability
	Resource    *Resource    // set for KindResourcesList, KindResourceRead, KindPromptsList, KindPromptGet
	Identify    *Identify    // set for KindIdentify
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

	values struct { // what the pointers above point to, so that they cost no allocation
		urlSupported, formSupported bool
		completedCalls              int64
		sessionAge                  float64
	}
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
	// IgnoredKeysReported says the event carried $mcp_ignored_keys (even an empty list): the
	// MCP server reported them, nothing is derived.
	IgnoredKeysReported bool
	Diagnostics

	// Properties of the MCP analytics SDK (@posthog/mcp): the session's server and client
	// (ClientName and ClientVersion above), the agent's stated intent and the error message.
	ServerName      string // $mcp_server_name
	ServerVersion   string // $mcp_server_version
	ProtocolVersion string // $mcp_protocol_version
	Intent          string // $mcp_intent
	IntentSource    string // $mcp_intent_source
	ErrorMessage    string // $mcp_error_message
	// Parameters and Response are $mcp_parameters and $mcp_response as received (nil when
	// absent; they share the event's bytes and are not in Extra): what ignored keys are
	// derived from when the event reports none.
	Parameters json.RawMessage
	Response   json.RawMessage

	durationMs float64 // what DurationMs points to
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

// Parse decodes one JSON envelope and validates it against DESIGN.md §2, in one pass over
// the bytes: nothing is decoded twice and nothing is re-encoded (Event.Properties and
// Event.Extra are the received bytes). It returns a *ValidationError listing every problem
// (with field paths) when the JSON is well formed but the event breaks the contract (including
// a top-level field of the wrong type), and a plain "bad JSON: ..." error when data is not
// exactly one JSON object. An event of a name no kind has is valid: its Kind is KindOther.
//
// Top-level field and property names match exactly ("UUID" is not "uuid"). Unknown top-level
// fields are ignored; a repeated field or property keeps its last value.
func Parse(data []byte) (*Event, error) { return ParseIn(data, nil) }

// ToolCallSlot is the memory of one tool-call event (its Event and its ToolCall, about 650
// bytes), for ParseIn.
type ToolCallSlot struct {
	ev Event
	tc ToolCall
}

// event is the slot's event, its ToolCall set.
func (s *ToolCallSlot) event() *Event {
	s.ev.ToolCall = &s.tc
	return &s.ev
}

// ParseIn is Parse with the memory for a tool call given: a tool-call event is decoded into
// slot, which must be zero, any other kind into memory of its own (as by Parse, which is
// ParseIn with a nil slot). The event, and what refers into it (a row's DurationMs,
// CompletedCalls and SessionAgeSeconds point into it), use the slot until the caller zeroes
// it, so a caller reusing slots (a batch's, once it stored the batch's rows) saves an
// allocation per event.
func ParseIn(data []byte, slot *ToolCallSlot) (*Event, error) {
	d := getDecodeState()
	defer putDecodeState(d)
	if err := d.scan(data); err != nil {
		return nil, err
	}
	top := &d.top
	v := &d.problems
	problem := func(field, p string) { v.add(field, "%s", p) }

	// The kind first, so that one allocation holds every string the event keeps; the problems
	// are still reported in field order.
	var kind *Kind
	name, nameOK := "", true
	if d.topPlain(fieldEvent, top.Event) {
		if kind = byName[string(top.Event[1:len(top.Event)-1])]; kind != nil {
			name = kind.Event
		}
	}
	if kind == nil {
		name, nameOK = stringValue(top.Event)
		kind = KindOf(name)
	}
	ev := kind.newEvent(slot)
	ev.Kind = kind
	d.match()
	distinctAt := d.buildArena(ev.Kind, top.DistinctID)

	uuidText := stringContent(top.UUID)
	if !d.topPlain(fieldUUID, top.UUID) { // an escape: decode it first (rare)
		s, _ := stringValue(top.UUID)
		uuidText = []byte(s)
	}
	switch id, err := uuid.ParseBytes(uuidText); {
	case !isNull(top.UUID) && top.UUID[0] != '"':
		problem("uuid", "must be a string")
	case len(uuidText) == 0:
		v.add("uuid", "required")
	case len(uuidText) != 36:
		v.add("uuid", "not a UUID in canonical 8-4-4-4-12 form: %s", quoteForError(string(uuidText)))
	case err != nil:
		v.add("uuid", "not a UUID: %s", quoteForError(string(uuidText)))
	case id == uuid.Nil:
		v.add("uuid", "the nil UUID cannot be a deduplication key")
	default:
		ev.UUID = id
	}
	switch {
	case !nameOK:
		problem("event", "must be a string")
	case name == "":
		v.add("event", "required")
	default:
		ev.Name = safetext.Bound(name, safetext.MaxName) // a stored dimension (events_by_name_hourly)
	}
	// The identity hash must equal what JavaScript computes (DESIGN.md §3). Go decodes invalid
	// UTF-8 and unpaired UTF-16 surrogate escapes to U+FFFD, which JavaScript does not, so a
	// recruitment event carrying one would be hashed differently: refuse it instead. The same
	// goes for every kind's distinct_id: two different ids must never collapse into one person.
	distinctID, distinctOK := "", true
	if distinctAt >= 0 {
		distinctID = d.arena[distinctAt : distinctAt+len(top.DistinctID)-2]
	} else {
		distinctID, distinctOK = stringValue(top.DistinctID)
	}
	switch {
	case !distinctOK:
		problem("distinct_id", "must be a string")
	case d.topFlags[fieldDistinctID]&(flagEscape|flagNonASCII) != 0 && !jsExact(top.DistinctID):
		problem("distinct_id", notJSExact)
	default:
		switch n := utf8.RuneCountInString(distinctID); {
		case n == 0:
			v.add("distinct_id", "required")
		case n > MaxDistinctIDLength:
			v.add("distinct_id", "%d characters, at most %d allowed", n, MaxDistinctIDLength)
		}
		ev.DistinctID = distinctID
	}
	if p := d.last(keyInstanceURL); p != nil && p.flags&(flagEscape|flagNonASCII) != 0 && !jsExact(d.value(p)) {
		problem("properties.instance_url", notJSExact)
	}
	switch s, ok := d.timestampText(); {
	case !ok:
		problem("timestamp", "must be a string")
	case s == "":
		v.add("timestamp", "required")
	default:
		ts, err := parseTimestamp(s)
		switch {
		case errors.Is(err, errTimestampRange):
			v.add("timestamp", "%v: %s", err, quoteForError(s))
		case err != nil:
			v.add("timestamp", "not RFC 3339 with an offset: %s", quoteForError(s))
		default:
			ev.Timestamp = ts
		}
	}
	switch {
	case isNull(top.Properties):
		v.add("properties", "required (may be empty {})")
	case top.Properties[0] != '{':
		problem("properties", "must be a JSON object")
	default:
		ev.Properties = d.props
	}

	d.reader = propertyReader{d: d, kind: ev.Kind, v: v}
	ev.Kind.decode(&d.reader, ev)
	if len(v.Problems) > 0 {
		return nil, &ValidationError{Problems: slices.Clone(v.Problems)}
	}
	ev.Extra = d.extra()
	return ev, nil
}

// badJSON is Parse's error for data that is not one JSON value. encoding/json's error texts
// are the documented ones, so data is decoded again by it (only bad input pays for that).
func badJSON(data []byte) error {
	var top map[string]stdjson.RawMessage
	err := stdjson.Unmarshal(data, &top)
	if err == nil { // the two decoders disagree: keep the verdict, say so
		return fmt.Errorf("%w: not a valid JSON value", ErrBadJSON)
	}
	return fmt.Errorf("%w: %w", ErrBadJSON, err)
}

// Validate checks a decoded envelope and builds the Event; see Parse for the errors. A nil
// Properties map means the field was absent (an error); an empty one is fine.
func Validate(env *Envelope) (*Event, error) {
	data, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadJSON, err)
	}
	return Parse(data)
}

// MarshalJSON encodes the event as its wire envelope (DESIGN.md §2): uuid (canonical lowercase
// form), event, distinct_id, timestamp (RFC 3339 with nanoseconds as needed, UTC, "Z") and
// properties (the raw object, compacted; {} when Properties is empty). Strings are quoted as
// JavaScript's JSON.stringify quotes them ('<', '>', '&', U+2028 and U+2029 kept as is). Parse
// of the result yields the same UUID, Name, Kind, DistinctID, Timestamp, typed properties and
// Extra. It fails only when Properties is not valid JSON.
func (e Event) MarshalJSON() ([]byte, error) {
	props := bytes.TrimSpace(e.Properties)
	b := make([]byte, 0, len(props)+len(e.Name)+len(e.DistinctID)+128)
	b = append(b, `{"uuid":"`...)
	b = append(b, e.UUID.String()...)
	b = append(b, `","event":`...)
	b = AppendJSString(b, e.Name)
	b = append(b, `,"distinct_id":`...)
	b = AppendJSString(b, e.DistinctID)
	b = append(b, `,"timestamp":"`...)
	b = e.Timestamp.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","properties":`...)
	if len(props) == 0 {
		b = append(b, "{}"...)
	} else {
		buf := bytes.NewBuffer(b)
		if err := stdjson.Compact(buf, props); err != nil { // encoding/json keeps < > & as they are
			return nil, fmt.Errorf("properties: %w", err)
		}
		b = buf.Bytes()
	}
	return append(b, '}'), nil
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

// quoteForError renders an untrusted value for an error message: safetext.Quote, a short
// escaped prefix and the value's length.
func quoteForError(s string) string { return safetext.Quote(s) }

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
	v := &ValidationError{clock: true}
	v.add("properties.responded_at", "%s is %s ahead of the receiving clock (%s), more than the %s allowed: a response cannot come from the future",
		ev.Recruitment.RespondedAt.Format(time.RFC3339Nano), ahead.Round(time.Second), now.UTC().Format(time.RFC3339), MaxResponseClockSkew)
	return v
}
