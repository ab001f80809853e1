package ingest

// Kafka topic names (DESIGN.md §1–§2). They are a contract with the MCP servers and the
// consumers, so they are constants rather than configuration.
const (
	// TopicToolCalls carries $mcp_tool_call events, keyed by distinct_id.
	TopicToolCalls = "mcp_tool_calls"
	// TopicRecruitment carries invitation, link-open and response events, keyed by identity hash.
	TopicRecruitment = "mcp_recruitment"
	// TopicDeadLetters receives events the pipeline could not accept, with headers
	// HeaderError (a one-line reason), HeaderErrorClass (its DeadLetterClass), HeaderSourceTopic
	// and HeaderDeadLetterID; the message
	// key is the dead letter's ID and the value the bad payload.
	TopicDeadLetters = "mcpulse_dlq"
	// TopicAudit carries ops audit events (suppression resets).
	TopicAudit = "mcpulse_audit"
)

// Dead-letter message headers (DESIGN.md §2).
const (
	// HeaderError is the one-line reason an event was dead-lettered.
	HeaderError = "mcpulse-error"
	// HeaderSourceTopic names the topic the bad event was read from, or "publish" / "gateway"
	// when it was rejected before reaching a topic.
	HeaderSourceTopic = "mcpulse-source-topic"
	// HeaderDeadLetterID is a deterministic identifier of the dead letter, such as
	// "publish:<input name>:<line>:<payload hash>" or "<topic>/<partition>/<offset>": the consumers store dead
	// letters keyed by it, so a dead letter sent twice is counted once.
	HeaderDeadLetterID = "mcpulse-dead-letter-id"
)

// AllTopics lists every topic mcpulse uses, in a stable order; the embedded stack creates them.
var AllTopics = []string{TopicToolCalls, TopicRecruitment, TopicDeadLetters, TopicAudit}

// ConsumedTopics lists the topics the consumer group "mcpulse-consumers" reads.
var ConsumedTopics = []string{TopicToolCalls, TopicRecruitment}
