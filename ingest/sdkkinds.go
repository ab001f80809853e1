package ingest

import (
	"time"

	"github.com/google/uuid"

	"github.com/mcpulse/mcpulse/internal/safetext"
)

// The MCP analytics SDK's (@posthog/mcp 0.16.3) events besides tool calls, listings,
// initializes and exceptions: feedback and missing capabilities (the agent's reports through
// the SDK's virtual tools, src/extensions/feedback.ts and tools.ts), resources and prompts
// requests (src/extensions/instrumentation.ts, traceResourceRequest), and $identify
// (src/extensions/internal.ts, handleIdentify). Every one carries the session properties
// (posthog-events.ts, addCommonEventProperties). Their free text is the SDK's, already
// sanitized by it (credentials, personal data and URLs rewritten, cut at 2,048 characters with
// "..."): it is stored as sent, markers included, and shown escaped like any caller's string.

// Feedback holds a $mcp_feedback or $mcp_missing_capability event: an agent's report through
// one of the SDK's virtual tools.
type Feedback struct {
	Session
	ConversationID string // $mcp_conversation_id
	// ToolName is $mcp_resource_name: the virtual tool the agent called (send_feedback,
	// get_more_tools, or the names the server configured instead).
	ToolName string
	// Type is $mcp_feedback_type: missing_capability, issue, praise or other ("" for a
	// $mcp_missing_capability, whose type is its event).
	Type                 string
	Summary              string // $mcp_feedback_summary: one sentence
	Details              string // $mcp_feedback_details
	FrictionPoints       string // $mcp_feedback_friction_points
	SuggestedImprovement string // $mcp_feedback_suggested_improvement
	Sentiment            string // $mcp_feedback_sentiment: positive, neutral, negative, mixed
	// AboutTool is $mcp_feedback_tool: the existing tool the feedback is about.
	AboutTool     string
	TaskCompleted *bool // $mcp_feedback_task_completed; nil when absent
	// Intent is $mcp_intent: for a missing capability, the agent's description of what it
	// needed (get_more_tools' `context` argument); for feedback, its summary and details.
	Intent       string
	IntentSource string // $mcp_intent_source
	LLMModel     string // $mcp_llm_model
	IsError      bool   // $mcp_is_error
	DurationMs   *float64

	taskCompleted bool
	durationMs    float64
}

var feedbackReads = append([]propKey{keyConversationID, keyResourceName, keyFeedbackType, keyFeedbackSummary,
	keyFeedbackDetails, keyFeedbackFrictionPoints, keyFeedbackSuggestedImprovement, keyFeedbackSentiment,
	keyFeedbackTool, keyFeedbackTaskCompleted, keyIntent, keyIntentSource, keyLLMModel, keyIsError, keyDurationMs},
	sdkCommonReads...)

func decodeFeedback(p *propertyReader, ev *Event) {
	f := &Feedback{}
	p.session(&f.Session)
	f.ConversationID = p.str(keyConversationID)
	f.ToolName = p.name(keyResourceName)
	f.Type = p.name(keyFeedbackType)
	f.Summary = p.str(keyFeedbackSummary)
	f.Details = p.str(keyFeedbackDetails)
	f.FrictionPoints = p.str(keyFeedbackFrictionPoints)
	f.SuggestedImprovement = p.str(keyFeedbackSuggestedImprovement)
	f.Sentiment = p.name(keyFeedbackSentiment)
	f.AboutTool = p.name(keyFeedbackTool)
	f.TaskCompleted = p.boolean(keyFeedbackTaskCompleted, &f.taskCompleted)
	f.Intent = p.str(keyIntent)
	f.IntentSource = p.name(keyIntentSource)
	f.LLMModel = p.name(keyLLMModel)
	var isError bool
	if p.boolean(keyIsError, &isError) != nil {
		f.IsError = isError
	}
	f.DurationMs = p.number(keyDurationMs, &f.durationMs)
	ev.Feedback = f
}

// FeedbackRow is one row of mcpulse.mcp_feedback: a $mcp_feedback or $mcp_missing_capability.
type FeedbackRow struct {
	UUID                 uuid.UUID `ch:"uuid"`
	Timestamp            time.Time `ch:"timestamp"`
	Kind                 string    `ch:"kind"` // Kind.Name: feedback or missing_capability
	DistinctID           string    `ch:"distinct_id"`
	SessionID            string    `ch:"session_id"`
	ConversationID       string    `ch:"conversation_id"`
	ToolName             string    `ch:"tool_name"`
	FeedbackType         string    `ch:"feedback_type"`
	Summary              string    `ch:"summary"`
	Details              string    `ch:"details"`
	FrictionPoints       string    `ch:"friction_points"`
	SuggestedImprovement string    `ch:"suggested_improvement"`
	Sentiment            string    `ch:"sentiment"`
	FeedbackTool         string    `ch:"feedback_tool"`
	TaskCompleted        *uint8    `ch:"task_completed"`
	Intent               string    `ch:"intent"`
	IntentSource         string    `ch:"intent_source"`
	LLMModel             string    `ch:"llm_model"`
	IsError              uint8     `ch:"is_error"`
	DurationMs           *float64  `ch:"duration_ms"`
	ServerName           string    `ch:"server_name"`
	ServerVersion        string    `ch:"server_version"`
	ClientName           string    `ch:"client_name"`
	ClientVersion        string    `ch:"client_version"`
	ProtocolVersion      string    `ch:"protocol_version"`
	Properties           string    `ch:"properties"` // Event.Extra
	KafkaPartition       int32     `ch:"kafka_partition"`
	KafkaOffset          int64     `ch:"kafka_offset"`
	InsertedAt           time.Time `ch:"inserted_at"`
}

func feedbackRows(rs *Rows, ev *Event, at RowContext) {
	f := ev.Feedback
	rs.Feedback = append(rs.Feedback, FeedbackRow{
		UUID: ev.UUID, Timestamp: ev.Timestamp, Kind: ev.Kind.Name, DistinctID: ev.DistinctID, SessionID: f.SessionID,
		ConversationID: f.ConversationID, ToolName: f.ToolName, FeedbackType: f.Type, Summary: f.Summary, Details: f.Details,
		FrictionPoints: f.FrictionPoints, SuggestedImprovement: f.SuggestedImprovement, Sentiment: f.Sentiment,
		FeedbackTool: f.AboutTool, TaskCompleted: optionalFlag(f.TaskCompleted), Intent: f.Intent, IntentSource: f.IntentSource,
		LLMModel: f.LLMModel, IsError: flag(f.IsError), DurationMs: f.DurationMs,
		ServerName: f.ServerName, ServerVersion: f.ServerVersion, ClientName: f.ClientName, ClientVersion: f.ClientVersion,
		ProtocolVersion: f.ProtocolVersion,
		Properties:      string(ev.Extra), KafkaPartition: at.Partition, KafkaOffset: at.Offset, InsertedAt: at.InsertedAt,
	})
}

// Resource holds a resources or prompts request as the SDK captured it: $mcp_resources_list
// (resources/list and resources/templates/list), $mcp_resource_read, $mcp_prompts_list or
// $mcp_prompt_get.
type Resource struct {
	Session
	ConversationID string // $mcp_conversation_id
	// Method is $mcp_parameters.request.method (resources/list, resources/templates/list,
	// resources/read, prompts/list, prompts/get; "" when not captured).
	Method string
	// Name is what the request addressed: $mcp_resource_name (the uri for a read, the
	// prompt's name for a get), else the captured request's params.uri / params.name; ""
	// for a listing.
	Name string
	// Listed is, for a listing, how many entries its captured result holds
	// ($mcp_response.resources, .resourceTemplates or .prompts; the SDK keeps at most 100 of
	// an array); nil when the result is not captured.
	Listed     *uint32
	IsError    bool   // $mcp_is_error
	ErrorType  string // $mcp_error_type
	ErrorMsg   string // $mcp_error_message
	DurationMs *float64

	listed     uint32
	durationMs float64
}

var resourceReads = append([]propKey{keyConversationID, keyResourceName, keyParameters, keyResponse, keyIsError,
	keyErrorType, keyErrorMessage, keyDurationMs}, sdkCommonReads...)

// resourceDecoder returns the decode of a resources or prompts kind: nameParam is the request
// parameter the request addresses its subject by ("uri", "name"; "" for a listing), listing
// whether the captured result is a listing to count.
func resourceDecoder(nameParam string, listing bool) func(*propertyReader, *Event) {
	return func(p *propertyReader, ev *Event) {
		r := &Resource{}
		p.session(&r.Session)
		r.ConversationID = p.str(keyConversationID)
		r.Name = p.str(keyResourceName)
		var isError bool
		if p.boolean(keyIsError, &isError) != nil {
			r.IsError = isError
		}
		r.ErrorType = p.name(keyErrorType)
		r.ErrorMsg = p.message(keyErrorMessage)
		r.DurationMs = p.number(keyDurationMs, &r.durationMs)
		// Peeked: the captured request and listing stay in properties.
		request := objectValue(p.peek(keyParameters), "request")
		r.Method, _ = stringValue(objectValue(request, "method"))
		if r.Name == "" && nameParam != "" {
			r.Name, _ = stringValue(objectValue(objectValue(request, "params"), nameParam))
		}
		// A resource's uri is a path rather than a name: bounded as a key path is.
		r.Name = safetext.Bound(r.Name, safetext.MaxKeyPath)
		r.Method = safetext.Bound(r.Method, safetext.MaxName)
		if listing {
			result := p.peek(keyResponse)
			for _, field := range []string{"resources", "resourceTemplates", "prompts"} {
				if items, ok := arrayItems(objectValue(result, field)); ok {
					r.listed += uint32(min(len(items), 1<<31))
					r.Listed = &r.listed
				}
			}
		}
		ev.Resource = r
	}
}

// ResourceRow is one row of mcpulse.mcp_resource_prompt_events.
type ResourceRow struct {
	UUID            uuid.UUID `ch:"uuid"`
	Timestamp       time.Time `ch:"timestamp"`
	Kind            string    `ch:"kind"` // Kind.Name: resources_list, resource_read, prompts_list, prompt_get
	DistinctID      string    `ch:"distinct_id"`
	SessionID       string    `ch:"session_id"`
	ConversationID  string    `ch:"conversation_id"`
	Method          string    `ch:"method"`
	Name            string    `ch:"name"`
	ListedCount     *uint32   `ch:"listed_count"`
	IsError         uint8     `ch:"is_error"`
	ErrorType       string    `ch:"error_type"`
	ErrorMessage    string    `ch:"error_message"`
	DurationMs      *float64  `ch:"duration_ms"`
	ServerName      string    `ch:"server_name"`
	ServerVersion   string    `ch:"server_version"`
	ClientName      string    `ch:"client_name"`
	ClientVersion   string    `ch:"client_version"`
	ProtocolVersion string    `ch:"protocol_version"`
	Properties      string    `ch:"properties"` // Event.Extra
	KafkaPartition  int32     `ch:"kafka_partition"`
	KafkaOffset     int64     `ch:"kafka_offset"`
	InsertedAt      time.Time `ch:"inserted_at"`
}

func resourceRows(rs *Rows, ev *Event, at RowContext) {
	r := ev.Resource
	rs.Resources = append(rs.Resources, ResourceRow{
		UUID: ev.UUID, Timestamp: ev.Timestamp, Kind: ev.Kind.Name, DistinctID: ev.DistinctID, SessionID: r.SessionID,
		ConversationID: r.ConversationID, Method: r.Method, Name: r.Name, ListedCount: r.Listed, IsError: flag(r.IsError),
		ErrorType: r.ErrorType, ErrorMessage: r.ErrorMsg, DurationMs: r.DurationMs,
		ServerName: r.ServerName, ServerVersion: r.ServerVersion, ClientName: r.ClientName, ClientVersion: r.ClientVersion,
		ProtocolVersion: r.ProtocolVersion,
		Properties:      string(ev.Extra), KafkaPartition: at.Partition, KafkaOffset: at.Offset, InsertedAt: at.InsertedAt,
	})
}

// Identify holds a $identify event: the person a distinct_id is, and properties to set on it.
type Identify struct {
	Session
	// ResourceName is $mcp_resource_name: what the request that identified the session named
	// (a tool, a prompt, a uri; the SDK's "Unknown" when nothing).
	ResourceName string
	// Set and SetOnce are the $set and $set_once objects as JSON text ("" when absent).
	Set, SetOnce string
}

var identifyReads = append([]propKey{keyResourceName, keyPersonSet, keyPersonSetOnce}, sdkCommonReads...)

func decodeIdentify(p *propertyReader, ev *Event) {
	id := &Identify{}
	p.session(&id.Session)
	id.ResourceName = safetext.Bound(p.str(keyResourceName), safetext.MaxKeyPath)
	id.Set = p.object(keyPersonSet)
	id.SetOnce = p.object(keyPersonSetOnce)
	ev.Identify = id
}

// object reads an optional JSON object property as its text ("" when absent or null).
func (p propertyReader) object(key propKey) string {
	raw := p.raw(key)
	if isNull(raw) {
		return ""
	}
	if raw[0] != '{' {
		p.v.add(path(key), "must be an object")
		return ""
	}
	return string(raw)
}

// IdentifyRow is one row of mcpulse.mcp_identify_events.
type IdentifyRow struct {
	UUID              uuid.UUID `ch:"uuid"`
	Timestamp         time.Time `ch:"timestamp"`
	DistinctID        string    `ch:"distinct_id"`
	SessionID         string    `ch:"session_id"`
	ResourceName      string    `ch:"resource_name"`
	SetProperties     string    `ch:"set_properties"`
	SetOnceProperties string    `ch:"set_once_properties"`
	ServerName        string    `ch:"server_name"`
	ServerVersion     string    `ch:"server_version"`
	ClientName        string    `ch:"client_name"`
	ClientVersion     string    `ch:"client_version"`
	ProtocolVersion   string    `ch:"protocol_version"`
	Properties        string    `ch:"properties"` // Event.Extra
	KafkaPartition    int32     `ch:"kafka_partition"`
	KafkaOffset       int64     `ch:"kafka_offset"`
	InsertedAt        time.Time `ch:"inserted_at"`
}

func identifyRows(rs *Rows, ev *Event, at RowContext) {
	id := ev.Identify
	rs.Identify = append(rs.Identify, IdentifyRow{
		UUID: ev.UUID, Timestamp: ev.Timestamp, DistinctID: ev.DistinctID, SessionID: id.SessionID,
		ResourceName: id.ResourceName, SetProperties: id.Set, SetOnceProperties: id.SetOnce,
		ServerName: id.ServerName, ServerVersion: id.ServerVersion, ClientName: id.ClientName, ClientVersion: id.ClientVersion,
		ProtocolVersion: id.ProtocolVersion,
		Properties:      string(ev.Extra), KafkaPartition: at.Partition, KafkaOffset: at.Offset, InsertedAt: at.InsertedAt,
	})
}
