package otlp

// The conventions recognised, and the attributes read from each. A span is an MCP span when
// one of them recognises it (Recognise); the others are counted as not MCP and dropped.
//
//	convention   recognised by                                  source
//	semconv      mcp.method.name (and no mcp.tool.name)         OpenTelemetry semantic conventions for MCP
//	                                                            (semantic-conventions-genai docs/gen-ai/mcp.md);
//	                                                            MCP Python SDK v2, FastMCP, Go servers that follow them
//	shinzo       mcp.method.name = tools/call and mcp.tool.name @shinzolabs/instrumentation-mcp 1.1 dist/instrumentation.js
//	traceloop    traceloop.span.kind = tool, or a span named    @traceloop/instrumentation-mcp 0.27 dist/index.js
//	             tools/list.mcp or initialize.mcp               (_wrapRequest, _extractCleanInput/Output)
//
// What each becomes (the @posthog/mcp 0.16.3 property it fills, src/extensions/posthog-events.ts):
//
//	property               semconv                                   shinzo                        traceloop
//	$mcp_tool_name         gen_ai.tool.name, else the span name's    mcp.tool.name                 traceloop.entity.name, else
//	                       target ("tools/call <tool>")                                            entity.input tool_name
//	$mcp_duration_ms       end − start of the span                   same                          same
//	$mcp_is_error          status ERROR or error.type set            status ERROR                  status ERROR or entity.output
//	                                                                                               is_error
//	$mcp_error_message     status message, else "error.type: code"   status message                status message
//	$mcp_error_type        error.type                                error.type (the JS error name) —
//	$session_id            mcp.session.id (span, then resource)      mcp.session.id (one per server —  (the trace id: the client
//	                                                                 process, not per MCP session)  session span roots a trace)
//	$mcp_server_name/      resource service.name/service.version     same                          serverInfo of the trace's
//	 _version                                                                                      initialize.mcp output, else
//	                                                                                               resource service.name/version
//	$mcp_client_name/      —                                         —                             clientInfo of the trace's
//	 _version                                                                                      initialize.mcp input
//	$mcp_protocol_version  mcp.protocol.version                      —                             the initialize result's
//	                                                                                               protocolVersion
//	$mcp_parameters        gen_ai.tool.call.arguments (opt-in JSON)  MarkerArgumentsValidated      entity.input arguments (raw,
//	                                                                 (mcp.request.argument.* are   as the agent sent them)
//	                                                                 seen after validation)
//	$mcp_response          gen_ai.tool.call.result when a JSON       —                             —
//	                       object
//	$mcp_tools_list        mcp.method.name = tools/list; tools from  —                             tools/list.mcp; names and
//	                       gen_ai.tool.definitions (opt-in JSON:                                   descriptions of entity.output
//	                       name, description, inputSchema or                                       (no schemas)
//	                       parameters)
//	$mcp_initialize        mcp.method.name = initialize              —                             initialize.mcp (input:
//	                                                                                               request params, output:
//	                                                                                               result)
//	$exception             beside each failed tool call: type = $mcp_error_type or "Error", value = $mcp_error_message
//
// Semconv CLIENT spans are not mapped (NotMCP reason "client span"): the server's own span is
// the measure, and a client and server both following the conventions would count each call
// twice. Traceloop spans are client spans by design and are mapped.

// Attribute names of the OpenTelemetry semantic conventions for MCP and GenAI
// (open-telemetry/semantic-conventions-genai docs/gen-ai/mcp.md, docs/registry/attributes).
const (
	AttrMCPMethodName      = "mcp.method.name"
	AttrMCPSessionID       = "mcp.session.id"
	AttrMCPProtocolVersion = "mcp.protocol.version"
	AttrGenAIToolName      = "gen_ai.tool.name"
	AttrGenAIOperationName = "gen_ai.operation.name"
	AttrGenAIToolArguments = "gen_ai.tool.call.arguments"
	AttrGenAIToolResult    = "gen_ai.tool.call.result"
	AttrGenAIToolDefs      = "gen_ai.tool.definitions"
	AttrErrorType          = "error.type"
	// AttrJSONRPCErrorCode is the JSON-RPC error code of the conventions' first MCP release;
	// AttrRPCResponseStatusCode its later name.
	AttrJSONRPCErrorCode      = "rpc.jsonrpc.error_code"
	AttrRPCResponseStatusCode = "rpc.response.status_code"
	// ErrorTypeToolError is error.type's value for a CallToolResult with isError true.
	ErrorTypeToolError = "tool_error"
)

// Resource attributes (OpenTelemetry semantic conventions, service.*).
const (
	AttrServiceName    = "service.name"
	AttrServiceVersion = "service.version"
)

// Attribute names of @shinzolabs/instrumentation-mcp 1.1 (dist/instrumentation.js,
// dist/telemetry.js getArgumentAttributes).
const (
	AttrShinzoToolName       = "mcp.tool.name"
	AttrShinzoArgumentPrefix = "mcp.request.argument."
)

// Attribute names of @traceloop/instrumentation-mcp 0.27 (@traceloop/ai-semantic-conventions
// SpanAttributes).
const (
	AttrTraceloopSpanKind    = "traceloop.span.kind"
	AttrTraceloopEntityName  = "traceloop.entity.name"
	AttrTraceloopEntityInput = "traceloop.entity.input"
	AttrTraceloopOutput      = "traceloop.entity.output"
	// Traceloop's span names of the other methods: "<method>.mcp".
	traceloopToolsList  = "tools/list.mcp"
	traceloopInitialize = "initialize.mcp"
)

// MCP method names (MCP specification, "Tools" and "Lifecycle").
const (
	MethodToolsCall  = "tools/call"
	MethodToolsList  = "tools/list"
	MethodInitialize = "initialize"
)

// Convention names one instrumentation's attribute set; it is the suffix of the mapped events'
// $mcp_source ("otlp_semconv", ...).
type Convention string

// The conventions.
const (
	ConventionSemconv   Convention = "semconv"
	ConventionShinzo    Convention = "shinzo"
	ConventionTraceloop Convention = "traceloop"
)

// Source is the $mcp_source of an event mapped from a span of convention c.
func (c Convention) Source() string { return "otlp_" + string(c) }
