package ingest

import (
	"bytes"
	stdjson "encoding/json"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/mcpulse/mcpulse/intents/details"
	"github.com/mcpulse/mcpulse/misuse"
)

// The raw rows each kind stores (DESIGN.md §4): one struct per raw table, whose `ch` tags
// name the table's columns. A kind's entry in the table of kinds appends its events' rows to
// a Rows; the consumer fills what needs the stores (the invitation send time, the misuse
// columns) per table, then inserts each slice.

// RowContext is what a raw row holds besides its event: where the consumer read it, when,
// and the deployment's defaults.
type RowContext struct {
	Partition int32 // Kafka partition the event was read from
	Offset    int64 // its offset there
	// InsertedAt is the time Kafka gives the event's message (its record timestamp, UTC, to
	// the second), not the time of the insert: a batch read again after a crash must build
	// the very same rows, so that ClickHouse drops the replayed block (DESIGN.md §5, "Replays
	// dedup at insert").
	InsertedAt time.Time
	// DefaultInstanceURL stands in for a recruitment event's missing instance_url.
	DefaultInstanceURL string
	// Keys tells the ignored keys MCP clients inject on their own (not counted as mistakes).
	Keys *KeyFilter
}

// Rows are the raw rows of a batch of events, one slice per raw table.
type Rows struct {
	ToolCalls     []ToolCallRow     // mcpulse.tool_calls
	Recruitment   []RecruitmentRow  // mcpulse.recruitment_events
	ServedSchemas []ServedSchemaRow // mcpulse.served_tool_schemas_in
	Initialize    []InitializeRow   // mcpulse.mcp_initialize_events
	Exceptions    []ExceptionRow    // mcpulse.mcp_exceptions
	OtherEvents   []OtherEventRow   // mcpulse.other_events
	Feedback      []FeedbackRow     // mcpulse.mcp_feedback
	Resources     []ResourceRow     // mcpulse.mcp_resource_prompt_events
	Identify      []IdentifyRow     // mcpulse.mcp_identify_events
	ToolsLists    []ToolsListRow    // mcpulse.tools_list_events
}

// Append appends the raw rows of ev (an event Parse returned) to rs.
func (rs *Rows) Append(ev *Event, at RowContext) { ev.Kind.rows(rs, ev, at) }

// Len is the number of rows in rs, over every table.
func (rs *Rows) Len() int {
	return len(rs.ToolCalls) + len(rs.Recruitment) + len(rs.ServedSchemas) + len(rs.Initialize) + len(rs.Exceptions) + len(rs.OtherEvents) +
		len(rs.Feedback) + len(rs.Resources) + len(rs.Identify) + len(rs.ToolsLists)
}

// Filtered returns a copy of rs holding only the rows of the events keep accepts (by uuid),
// in order; rs is not modified.
func (rs *Rows) Filtered(keep func(uuid.UUID) bool) Rows {
	return Rows{
		ToolCalls:     filterRows(rs.ToolCalls, func(r *ToolCallRow) bool { return keep(r.UUID) }),
		Recruitment:   filterRows(rs.Recruitment, func(r *RecruitmentRow) bool { return keep(r.UUID) }),
		ServedSchemas: filterRows(rs.ServedSchemas, func(r *ServedSchemaRow) bool { return keep(r.EventUUID) }),
		Initialize:    filterRows(rs.Initialize, func(r *InitializeRow) bool { return keep(r.UUID) }),
		Exceptions:    filterRows(rs.Exceptions, func(r *ExceptionRow) bool { return keep(r.UUID) }),
		OtherEvents:   filterRows(rs.OtherEvents, func(r *OtherEventRow) bool { return keep(r.UUID) }),
		Feedback:      filterRows(rs.Feedback, func(r *FeedbackRow) bool { return keep(r.UUID) }),
		Resources:     filterRows(rs.Resources, func(r *ResourceRow) bool { return keep(r.UUID) }),
		Identify:      filterRows(rs.Identify, func(r *IdentifyRow) bool { return keep(r.UUID) }),
		ToolsLists:    filterRows(rs.ToolsLists, func(r *ToolsListRow) bool { return keep(r.UUID) }),
	}
}

func filterRows[T any](rows []T, keep func(*T) bool) []T {
	out := make([]T, 0, len(rows))
	for i := range rows {
		if keep(&rows[i]) {
			out = append(out, rows[i])
		}
	}
	return out
}

// ToolCallRow is one row of mcpulse.tool_calls.
type ToolCallRow struct {
	UUID               uuid.UUID `ch:"uuid"`
	Timestamp          time.Time `ch:"timestamp"`
	DistinctID         string    `ch:"distinct_id"`
	ToolName           string    `ch:"tool_name"` // ToolCall.EffectiveTool
	RawToolName        string    `ch:"raw_tool_name"`
	ExecVerb           string    `ch:"exec_verb"`
	ExecTargetTool     string    `ch:"exec_target_tool"`
	ClientName         string    `ch:"client_name"`
	ClientVersion      string    `ch:"client_version"`
	Mode               string    `ch:"mode"`
	ConversationID     string    `ch:"conversation_id"`
	SessionID          string    `ch:"session_id"`
	Source             string    `ch:"source"`
	IsError            uint8     `ch:"is_error"`
	ErrorType          string    `ch:"error_type"`
	DurationMs         *float64  `ch:"duration_ms"`
	IgnoredKeys        []string  `ch:"ignored_keys"`
	IgnoredKeysTotal   uint32    `ch:"ignored_keys_total"`
	CountedIgnoredKeys []string  `ch:"counted_ignored_keys"` // IgnoredKeys less the client-injected ones
	RecruitmentReason  string    `ch:"recruitment_reason"`
	URLSupported       *uint8    `ch:"url_supported"`
	FormSupported      *uint8    `ch:"form_supported"`
	CampaignID         string    `ch:"campaign_id"`
	CompletedCalls     *int64    `ch:"completed_calls"`
	SessionAgeSeconds  *float64  `ch:"session_age_seconds"`
	Properties         string    `ch:"properties"` // ToolCallProperties
	KafkaPartition     int32     `ch:"kafka_partition"`
	KafkaOffset        int64     `ch:"kafka_offset"`
	InsertedAt         time.Time `ch:"inserted_at"`
	ServerName         string    `ch:"server_name"`
	ServerVersion      string    `ch:"server_version"`
	ProtocolVersion    string    `ch:"protocol_version"`
	Intent             string    `ch:"intent"`
	IntentSource       string    `ch:"intent_source"`
	ErrorMessage       string    `ch:"error_message"`
	// IgnoredKeysSource is misuse.Source: reported, response, schema or not_measurable. The
	// row builder fills reported only; the consumer derives the others.
	IgnoredKeysSource string `ch:"ignored_keys_source"`
	// IgnoredKeysReason is misuse.Reason: why not measurable, "" when measurable.
	IgnoredKeysReason string `ch:"ignored_keys_reason"`
	ErrorClass        string `ch:"error_class"` // misuse.ClassifyError of ErrorMessage, for a failed call
	// UnknownTool is 1 when the server version's listed tools are known and do not hold the
	// called tool (the consumer fills it).
	UnknownTool uint8 `ch:"unknown_tool"`
	// FoldedToolName, FoldedClientName and FoldedKeyPaths hold what the consumer's cardinality
	// caps folded into an overflow bucket (consumers/cardinality): the tool or client name that
	// ToolName or ClientName replaced, the counted ignored-key paths CountedIgnoredKeys lost; ""
	// and empty when nothing was folded.
	FoldedToolName   string   `ch:"folded_tool_name"`
	FoldedClientName string   `ch:"folded_client_name"`
	FoldedKeyPaths   []string `ch:"folded_key_paths"`
	// IntentDetails are the kinds of identifying detail Intent holds (intents/details.Find:
	// email, ip_address, ...; each once), IntentMasked is Intent with each replaced by its
	// kind's placeholder (Intent itself when it holds none). Migration 0043.
	IntentDetails []string `ch:"intent_details"`
	IntentMasked  string   `ch:"intent_masked"`
}

func toolCallRows(rs *Rows, ev *Event, at RowContext) {
	t := ev.ToolCall
	rs.ToolCalls = append(rs.ToolCalls, ToolCallRow{
		UUID: ev.UUID, Timestamp: ev.Timestamp, DistinctID: ev.DistinctID,
		ToolName: t.EffectiveTool(), RawToolName: t.ToolName, ExecVerb: t.ExecVerb, ExecTargetTool: t.ExecTargetTool,
		ClientName: t.ClientName, ClientVersion: t.ClientVersion, Mode: t.Mode, ConversationID: t.ConversationID,
		SessionID: t.SessionID, Source: t.Source, IsError: flag(t.IsError), ErrorType: t.ErrorType, DurationMs: t.DurationMs,
		IgnoredKeys: nonNil(t.IgnoredKeys), IgnoredKeysTotal: uint32(min(t.IgnoredKeysTotal, 1<<32-1)),
		CountedIgnoredKeys: nonNil(at.Keys.Counted(t.IgnoredKeys)),
		RecruitmentReason:  t.Reason, URLSupported: optionalFlag(t.URLSupported), FormSupported: optionalFlag(t.FormSupported),
		CampaignID: t.CampaignID, CompletedCalls: t.CompletedCalls, SessionAgeSeconds: t.SessionAgeSeconds,
		Properties: string(ev.Extra), KafkaPartition: at.Partition, KafkaOffset: at.Offset, InsertedAt: at.InsertedAt,
		ServerName: t.ServerName, ServerVersion: t.ServerVersion, ProtocolVersion: t.ProtocolVersion,
		Intent: t.Intent, IntentSource: t.IntentSource, ErrorMessage: t.ErrorMessage, FoldedKeyPaths: []string{},
	})
	row := &rs.ToolCalls[len(rs.ToolCalls)-1]
	row.IntentDetails = []string{}
	if t.Intent != "" {
		masked, kinds := details.Mask(t.Intent)
		row.IntentMasked = masked
		for _, k := range kinds {
			row.IntentDetails = append(row.IntentDetails, string(k))
		}
	}
	if t.IgnoredKeysReported {
		row.IgnoredKeysSource = string(misuse.SourceReported)
	}
	if t.IsError {
		row.ErrorClass = string(misuse.ClassifyError(t.ErrorMessage))
	}
	if row.Misused() {
		row.Properties = ToolCallProperties(ev, row)
	}
}

// Misused reports whether a tool call's row shows that the agent called the tool wrongly:
// ignored keys, an error classified as a validation error or an unknown tool, or a tool the
// server version does not list.
func (r *ToolCallRow) Misused() bool {
	switch misuse.ErrorClass(r.ErrorClass) {
	case misuse.ClassValidationType, misuse.ClassValidationRequired, misuse.ClassValidationUnknownKey,
		misuse.ClassValidationOther, misuse.ClassUnknownTool:
		return true
	}
	return r.IgnoredKeysTotal > 0 || r.UnknownTool != 0
}

// ToolCallProperties is what tool_calls.properties stores for the call ev as its row r says:
// Event.Extra, plus, when r.Misused(), the call's $mcp_parameters (the SDK's capture of the
// request, arguments included: what an analyst reads to see what the agent sent). Every call
// holds its $mcp_parameters and $mcp_response in the derived columns (ignored keys, their
// source, the error class), so a call used rightly stores neither. The value is compacted, and
// re-encoded with U+FFFD for each invalid UTF-8 byte, as Extra is.
func ToolCallProperties(ev *Event, r *ToolCallRow) string {
	params := ev.ToolCall.Parameters
	if len(params) == 0 || !r.Misused() {
		return string(ev.Extra)
	}
	var b bytes.Buffer
	b.Grow(len(ev.Extra) + len(propParameters) + len(params) + 4)
	b.Write(ev.Extra[:len(ev.Extra)-1])
	if len(ev.Extra) > 2 {
		b.WriteByte(',')
	}
	b.WriteString(`"` + propParameters + `":`)
	if utf8.Valid(params) {
		_ = stdjson.Compact(&b, params) // valid JSON: Parse checked it
	} else {
		var v any
		_ = stdjson.Unmarshal(params, &v)
		val, err := stdjson.Marshal(v)
		if err != nil {
			val = []byte("null")
		}
		b.Write(val)
	}
	b.WriteByte('}')
	return b.String()
}

// RecruitmentRow is one row of mcpulse.recruitment_events.
type RecruitmentRow struct {
	UUID         uuid.UUID  `ch:"uuid"`
	Timestamp    time.Time  `ch:"timestamp"`
	Kind         string     `ch:"kind"` // Kind.Name
	DistinctID   string     `ch:"distinct_id"`
	IdentityHash string     `ch:"identity_hash"`
	InstanceURL  string     `ch:"instance_url"` // RowContext.DefaultInstanceURL when the event has none
	CampaignID   string     `ch:"campaign_id"`
	InvitationID string     `ch:"invitation_id"`
	FeatureFlag  string     `ch:"feature_flag"`
	Response     string     `ch:"response"`
	RespondedAt  *time.Time `ch:"responded_at"` // responses only
	// InvitationSentAt is the send time of the invitation the event refers to, when known
	// (the funnel's cohort day); the consumer fills it.
	InvitationSentAt  *time.Time `ch:"invitation_sent_at"`
	RecruitmentReason string     `ch:"recruitment_reason"`
	URLSupported      *uint8     `ch:"url_supported"`
	FormSupported     *uint8     `ch:"form_supported"`
	CompletedCalls    *int64     `ch:"completed_calls"`
	SessionAgeSeconds *float64   `ch:"session_age_seconds"`
	Properties        string     `ch:"properties"` // Event.Extra
	KafkaPartition    int32      `ch:"kafka_partition"`
	KafkaOffset       int64      `ch:"kafka_offset"`
	InsertedAt        time.Time  `ch:"inserted_at"`
	TimestampMs       int64      `ch:"timestamp_ms"`
	RespondedAtMs     *int64     `ch:"responded_at_ms"` // responses only
}

func recruitmentRows(rs *Rows, ev *Event, at RowContext) {
	r := ev.Recruitment
	row := RecruitmentRow{
		UUID: ev.UUID, Timestamp: ev.Timestamp, Kind: ev.Kind.Name, DistinctID: ev.DistinctID,
		InstanceURL: r.InstanceURL, CampaignID: r.CampaignID, InvitationID: r.InvitationID, FeatureFlag: r.FeatureFlag,
		Response: r.Response, RecruitmentReason: r.Reason, URLSupported: optionalFlag(r.URLSupported),
		FormSupported: optionalFlag(r.FormSupported), CompletedCalls: r.CompletedCalls, SessionAgeSeconds: r.SessionAgeSeconds,
		Properties: string(ev.Extra), KafkaPartition: at.Partition, KafkaOffset: at.Offset, InsertedAt: at.InsertedAt,
		TimestampMs: ev.Timestamp.UnixMilli(),
	}
	if row.InstanceURL == "" {
		row.InstanceURL = at.DefaultInstanceURL
	}
	row.IdentityHash = IdentityHash(row.InstanceURL, ev.DistinctID)
	if r.Response != "" {
		respondedAt, ms := r.RespondedAt, r.RespondedAt.UnixMilli()
		row.RespondedAt, row.RespondedAtMs = &respondedAt, &ms
	}
	rs.Recruitment = append(rs.Recruitment, row)
}

func flag(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func optionalFlag(b *bool) *uint8 {
	if b == nil {
		return nil
	}
	v := flag(*b)
	return &v
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
