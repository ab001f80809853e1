package ingest

// The table of event kinds (DESIGN.md §2). Each kind is one entry, registered below: its
// `event` name, its short name (the value of the ClickHouse `kind` columns and of the `kind`
// metric labels), the Kafka topic and message key it is published with, the properties it
// reads and how they are validated, and the raw rows it stores. Everything else (the
// publisher, the gateway, the consumer, the demo) reads the table; nothing switches on a
// kind or sizes an array by the number of kinds.

// Kind is one entry of the table of event kinds. Kinds are compared by pointer: every Kind
// the package hands out is one of the registered entries (KindToolCall, ...).
type Kind struct {
	// Event is the `event` name of the kind (PostHog's own names, so existing PostHog
	// dashboards keep working).
	Event string
	// Name is the kind's short name: the value of the ClickHouse `kind` columns and of the
	// `kind` metric labels ("tool_call", "invitation_sent", ...).
	Name string
	// Topic is the Kafka topic events of the kind are published to.
	Topic string

	// key returns the Kafka message key of an event of the kind.
	key func(ev *Event, defaultInstanceURL string) []byte
	// reads are the property keys the kind's decode reads. A key read into a column is not
	// kept in Event.Extra; one only peeked at (propertyReader.peek) is.
	reads propKeySet
	// decode reads and validates the kind's properties into ev, recording every problem in p.
	decode func(p *propertyReader, ev *Event)
	// rows appends the raw rows an event of the kind stores.
	rows func(rs *Rows, ev *Event, at RowContext)
	// alloc, when set, allocates an Event together with the kind's own part (one allocation
	// instead of two), which decode then fills.
	alloc func() *Event
}

// newEvent allocates an event of the kind, a tool call in slot when one is given.
func (k *Kind) newEvent(slot *ToolCallSlot) *Event {
	if slot != nil && k == KindToolCall {
		return slot.event()
	}
	if k.alloc != nil {
		return k.alloc()
	}
	return &Event{}
}

// String returns the kind's Name ("unknown" for a nil Kind).
func (k *Kind) String() string {
	if k == nil {
		return "unknown"
	}
	return k.Name
}

var (
	kinds  []*Kind
	byName = map[string]*Kind{}
)

// register adds a kind to the table.
func register(k Kind) *Kind {
	if k.Name == "" || k.Topic == "" || k.key == nil || k.decode == nil || k.rows == nil {
		panic("ingest: incomplete kind " + k.Name)
	}
	if _, dup := byName[k.Event]; dup {
		panic("ingest: kind registered twice: " + k.Event + " (\"\" is the kind of every other name)")
	}
	p := &k
	kinds = append(kinds, p)
	byName[k.Event] = p
	return p
}

// Kinds returns every kind, in registration order. The slice is a copy.
func Kinds() []*Kind { return append([]*Kind(nil), kinds...) }

// KindOf maps an `event` name to its Kind: KindOther for a name none of the others has.
func KindOf(eventName string) *Kind {
	if k := byName[eventName]; k != nil {
		return k
	}
	return byName[""]
}

// Event names (DESIGN.md §2), as PostHog's MCP analytics SDK (@posthog/mcp,
// src/extensions/constants.ts) and PostHog's MCP server send them.
const (
	EventToolCall           = "$mcp_tool_call"
	EventInvitationSent     = "mcp interview invitation sent"
	EventBookingLinkOpened  = "mcp interview booking link opened"
	EventInvitationResponse = "mcp interview invitation responded"
	EventToolsList          = "$mcp_tools_list"
	EventInitialize         = "$mcp_initialize"
	EventException          = "$exception"
	EventFeedback           = "$mcp_feedback"
	EventMissingCapability  = "$mcp_missing_capability"
	EventResourcesList      = "$mcp_resources_list"
	EventResourceRead       = "$mcp_resource_read"
	EventPromptsList        = "$mcp_prompts_list"
	EventPromptGet          = "$mcp_prompt_get"
	EventIdentify           = "$identify"
)

// The kinds.
var (
	// KindToolCall is an MCP tool call, stored in tool_calls.
	KindToolCall = register(Kind{
		Event: EventToolCall, Name: "tool_call", Topic: TopicToolCalls,
		key: distinctIDKey, reads: keySet(toolCallReads...), decode: decodeToolCall, rows: toolCallRows,
		alloc: func() *Event { return new(ToolCallSlot).event() },
	})
	// KindInvitationSent is an interview invitation, stored in recruitment_events.
	KindInvitationSent = register(Kind{
		Event: EventInvitationSent, Name: "invitation_sent", Topic: TopicRecruitment,
		key: identityKey, reads: keySet(recruitmentReads...), decode: decodeRecruitment, rows: recruitmentRows, alloc: newRecruitmentEvent,
	})
	// KindBookingLinkOpened is an opened interview booking link, stored in recruitment_events.
	KindBookingLinkOpened = register(Kind{
		Event: EventBookingLinkOpened, Name: "link_opened", Topic: TopicRecruitment,
		key: identityKey, reads: keySet(recruitmentReads...), decode: decodeRecruitment, rows: recruitmentRows, alloc: newRecruitmentEvent,
	})
	// KindInvitationResponse is an answer to an invitation (accept, decline, cancel), stored
	// in recruitment_events and applied to the suppression records.
	KindInvitationResponse = register(Kind{
		Event: EventInvitationResponse, Name: "response", Topic: TopicRecruitment,
		key: identityKey, reads: keySet(responseReads...), decode: decodeResponse, rows: recruitmentRows, alloc: newRecruitmentEvent,
	})
	// KindToolsList is a tools/list result as the MCP analytics SDK captured it: one row per
	// listed tool in served_tool_schemas_in (the schemas served, per server name and version).
	KindToolsList = register(Kind{
		Event: EventToolsList, Name: "tools_list", Topic: TopicToolCalls,
		key: distinctIDKey, reads: keySet(toolsListReads...), decode: decodeToolsList, rows: toolsListRows,
	})
	// KindInitialize is an MCP session's initialize handshake, stored in mcp_initialize_events.
	KindInitialize = register(Kind{
		Event: EventInitialize, Name: "initialize", Topic: TopicToolCalls,
		key: distinctIDKey, reads: keySet(initializeReads...), decode: decodeInitialize, rows: initializeRows,
	})
	// KindException is an exception (PostHog error tracking's event; the MCP analytics SDK
	// sends one beside each failed tool call), stored in mcp_exceptions.
	KindException = register(Kind{
		Event: EventException, Name: "exception", Topic: TopicToolCalls,
		key: distinctIDKey, reads: keySet(exceptionReads...), decode: decodeException, rows: exceptionRows,
	})
	// KindFeedback is an agent's report through the SDK's send_feedback virtual tool
	// (collectFeedback), stored in mcp_feedback.
	KindFeedback = register(Kind{
		Event: EventFeedback, Name: "feedback", Topic: TopicToolCalls,
		key: distinctIDKey, reads: keySet(feedbackReads...), decode: decodeFeedback, rows: feedbackRows,
	})
	// KindMissingCapability is an agent's call of the SDK's get_more_tools virtual tool
	// (reportMissing): what it said was missing is $mcp_intent. Stored in mcp_feedback.
	KindMissingCapability = register(Kind{
		Event: EventMissingCapability, Name: "missing_capability", Topic: TopicToolCalls,
		key: distinctIDKey, reads: keySet(feedbackReads...), decode: decodeFeedback, rows: feedbackRows,
	})
	// KindResourcesList is a resources/list or resources/templates/list request, stored in
	// mcp_resource_prompt_events.
	KindResourcesList = register(Kind{
		Event: EventResourcesList, Name: "resources_list", Topic: TopicToolCalls,
		key: distinctIDKey, reads: keySet(resourceReads...), decode: resourceDecoder("", true), rows: resourceRows,
	})
	// KindResourceRead is a resources/read request (its uri, whether it failed), stored in
	// mcp_resource_prompt_events.
	KindResourceRead = register(Kind{
		Event: EventResourceRead, Name: "resource_read", Topic: TopicToolCalls,
		key: distinctIDKey, reads: keySet(resourceReads...), decode: resourceDecoder("uri", false), rows: resourceRows,
	})
	// KindPromptsList is a prompts/list request, stored in mcp_resource_prompt_events.
	KindPromptsList = register(Kind{
		Event: EventPromptsList, Name: "prompts_list", Topic: TopicToolCalls,
		key: distinctIDKey, reads: keySet(resourceReads...), decode: resourceDecoder("", true), rows: resourceRows,
	})
	// KindPromptGet is a prompts/get request (the prompt's name), stored in
	// mcp_resource_prompt_events.
	KindPromptGet = register(Kind{
		Event: EventPromptGet, Name: "prompt_get", Topic: TopicToolCalls,
		key: distinctIDKey, reads: keySet(resourceReads...), decode: resourceDecoder("name", false), rows: resourceRows,
	})
	// KindIdentify is a person's identification ($set / $set_once person properties; the SDK
	// sends one per identified session), stored in mcp_identify_events.
	KindIdentify = register(Kind{
		Event: EventIdentify, Name: "identify", Topic: TopicToolCalls,
		key: distinctIDKey, reads: keySet(identifyReads...), decode: decodeIdentify, rows: identifyRows,
	})
	// KindOther is every other event name ($mcp_custom, $pageview, ...):
	// counted per name in other_events, its properties not kept.
	KindOther = register(Kind{
		Name: "other", Topic: TopicToolCalls,
		key: distinctIDKey, decode: func(*propertyReader, *Event) {}, rows: otherRows,
	})
)

func newRecruitmentEvent() *Event {
	x := new(struct {
		Event
		Recruitment
	})
	x.Event.Recruitment = &x.Recruitment
	return &x.Event
}

// distinctIDKey keys an event by its distinct_id, so one person's (or, for the MCP analytics
// SDK without an identity, one session's) events stay on one partition in order: a session's
// tools/list comes before its tool calls, which derivation and unknown-tool detection use.
func distinctIDKey(ev *Event, _ string) []byte { return []byte(ev.DistinctID) }

// identityKey keys a recruitment event by IdentityHash(instance_url, distinct_id), with
// defaultInstanceURL standing in for a missing instance_url, so an identity's suppression
// updates stay on one partition.
func identityKey(ev *Event, defaultInstanceURL string) []byte {
	instance := defaultInstanceURL
	if ev.Recruitment != nil && ev.Recruitment.InstanceURL != "" {
		instance = ev.Recruitment.InstanceURL
	}
	return []byte(IdentityHash(instance, ev.DistinctID))
}

// MessageKey returns the Kafka message key of an event (DESIGN.md §2): distinct_id for the
// kinds on TopicToolCalls; for the recruitment kinds, IdentityHash(instance_url, distinct_id), with
// defaultInstanceURL standing in for a missing instance_url; nil for an event without a kind.
func MessageKey(ev *Event, defaultInstanceURL string) []byte {
	if ev.Kind == nil {
		return nil
	}
	return ev.Kind.key(ev, defaultInstanceURL)
}
