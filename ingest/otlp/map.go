package otlp

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/misuse"
)

// Outcome says what became of one span.
type Outcome string

// The outcomes (the values of the gateway's mcpulse_gateway_otlp_spans_total{outcome}).
const (
	// OutcomeMapped: an MCP span, mapped to one or two events.
	OutcomeMapped Outcome = "mapped"
	// OutcomeNotMCP: no recognised convention says it is an MCP span; dropped.
	OutcomeNotMCP Outcome = "not_mcp"
	// OutcomeOtherMethod: an MCP span of a method mcpulse has no event kind for (ping,
	// notifications, resources/*, prompts/*, ...), or a semconv client span; dropped.
	OutcomeOtherMethod Outcome = "other_method"
	// OutcomeRejected: an MCP span too malformed to map (bad ids, no tool name, an end before
	// its start); reported in the answer's partial_success.
	OutcomeRejected Outcome = "rejected"
)

// Result is what Map made of one export request.
type Result struct {
	// Events are the envelopes, as JSON objects, in span order (a failed tool call is followed
	// by its $exception).
	Events []json.RawMessage
	// Spans holds, for each of Events, the index of the span it was made from (in request
	// order); a span's first event is its own, a failed call's $exception follows it.
	Spans []int
	// Counts is the number of spans per outcome.
	Counts map[Outcome]int
	// Rejections say why each rejected span was rejected, in span order (at most
	// maxRejections kept; Counts[OutcomeRejected] has the total).
	Rejections []string
}

// SpanID is the hex id of the i-th span of req in request order (Result.Spans), "" past the end.
func SpanID(req *coltracepb.ExportTraceServiceRequest, i int) string {
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			if spans := ss.GetSpans(); i < len(spans) {
				return hex.EncodeToString(spans[i].GetSpanId())
			} else {
				i -= len(spans)
			}
		}
	}
	return ""
}

// maxRejections bounds Result.Rejections.
const maxRejections = 10

// SpanCount is the number of spans of req (the gateway's events-per-request limit counts them).
func SpanCount(req *coltracepb.ExportTraceServiceRequest) int {
	n := 0
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			n += len(ss.GetSpans())
		}
	}
	return n
}

// uuidNamespace is the namespace of the version 5 uuids of mapped events.
var uuidNamespace = uuid.MustParse("0e3f1d52-8c1a-4b7e-9f3d-2a6c5b8e7d10")

// EventUUID is the uuid of the event named event mapped from the span (traceID, spanID): a
// version 5 uuid over the three, so a retried export maps to the same uuids (the consumers
// deduplicate by uuid) and a span's tool call and exception differ.
func EventUUID(traceID, spanID []byte, event string) uuid.UUID {
	b := make([]byte, 0, len(traceID)+len(spanID)+len(event))
	b = append(append(append(b, traceID...), spanID...), event...)
	return uuid.NewSHA1(uuidNamespace, b)
}

// traceInfo is what a trace's initialize span (Traceloop's initialize.mcp) says of its
// session, for the trace's other spans.
type traceInfo struct {
	serverName, serverVersion, clientName, clientVersion, protocolVersion string
}

// Map turns the MCP spans of req into envelopes (see conventions.go for which attributes go
// where). distinct_id is the span's MCP session id ($session_id) when it has one, else
// "otel-trace:<trace id hex>": stable across retries, and one per client session for
// Traceloop, whose session span roots each session's trace.
func Map(req *coltracepb.ExportTraceServiceRequest) Result {
	res := Result{Counts: map[Outcome]int{}}
	traces := map[string]*traceInfo{}
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				if sp.GetName() == traceloopInitialize {
					traces[string(sp.GetTraceId())] = traceloopInitInfo(attrs(sp.GetAttributes()))
				}
			}
		}
	}
	spanIndex := 0
	for _, rs := range req.GetResourceSpans() {
		resource := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				m := mapper{span: sp, a: attrs(sp.GetAttributes()), resource: resource, trace: traces[string(sp.GetTraceId())]}
				events, outcome, why := m.run()
				res.Counts[outcome]++
				if outcome == OutcomeRejected && len(res.Rejections) < maxRejections {
					res.Rejections = append(res.Rejections, fmt.Sprintf("span %s %s: %s", hex.EncodeToString(sp.GetSpanId()), quote(sp.GetName()), why))
				}
				for range events {
					res.Spans = append(res.Spans, spanIndex)
				}
				res.Events = append(res.Events, events...)
				spanIndex++
			}
		}
	}
	return res
}

// attrMap is a span's or resource's attributes by key (the first of a repeated key).
type attrMap map[string]*commonpb.AnyValue

func attrs(kvs []*commonpb.KeyValue) attrMap {
	m := make(attrMap, len(kvs))
	for _, kv := range kvs {
		if _, dup := m[kv.GetKey()]; !dup {
			m[kv.GetKey()] = kv.GetValue()
		}
	}
	return m
}

// str is the attribute as text: a string as is, a number or bool formatted; "" when absent.
func (m attrMap) str(key string) string {
	v, ok := m[key]
	if !ok || v == nil {
		return ""
	}
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	}
	return ""
}

func (m attrMap) has(key string) bool { _, ok := m[key]; return ok }

// jsonValue is an AnyValue as JSON (arrays and key-value lists as JSON arrays and objects,
// bytes as base64 text).
func jsonValue(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_DoubleValue:
		if math.IsNaN(x.DoubleValue) || math.IsInf(x.DoubleValue, 0) {
			return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64) // JSON has no NaN
		}
		return x.DoubleValue
	case *commonpb.AnyValue_BytesValue:
		return x.BytesValue
	case *commonpb.AnyValue_ArrayValue:
		out := make([]any, 0, len(x.ArrayValue.GetValues()))
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, jsonValue(e))
		}
		return out
	case *commonpb.AnyValue_KvlistValue:
		out := map[string]any{}
		for _, kv := range x.KvlistValue.GetValues() {
			out[kv.GetKey()] = jsonValue(kv.GetValue())
		}
		return out
	}
	return nil
}

// mapper maps one span.
type mapper struct {
	span     *tracepb.Span
	a        attrMap
	resource attrMap
	trace    *traceInfo
}

// kind is what one span is, once recognised.
type spanKind struct {
	conv   Convention
	method string
}

// recognise says which convention the span follows and its MCP method ("" conv: not MCP).
func (m *mapper) recognise() spanKind {
	if method := m.a.str(AttrMCPMethodName); method != "" {
		if method == MethodToolsCall && m.a.has(AttrShinzoToolName) && !m.a.has(AttrGenAIToolName) {
			return spanKind{ConventionShinzo, method}
		}
		return spanKind{ConventionSemconv, method}
	}
	switch name := m.span.GetName(); {
	case m.a.str(AttrTraceloopSpanKind) == "tool" && strings.HasSuffix(name, ".tool"):
		return spanKind{ConventionTraceloop, MethodToolsCall}
	case name == traceloopToolsList:
		return spanKind{ConventionTraceloop, MethodToolsList}
	case name == traceloopInitialize:
		return spanKind{ConventionTraceloop, MethodInitialize}
	}
	return spanKind{}
}

func (m *mapper) run() ([]json.RawMessage, Outcome, string) {
	k := m.recognise()
	switch {
	case k.conv == "":
		return nil, OutcomeNotMCP, ""
	case k.conv == ConventionSemconv && m.span.GetKind() == tracepb.Span_SPAN_KIND_CLIENT:
		return nil, OutcomeOtherMethod, ""
	case k.method != MethodToolsCall && k.method != MethodToolsList && k.method != MethodInitialize:
		return nil, OutcomeOtherMethod, ""
	}
	if n := len(m.span.GetTraceId()); n != 16 || isZero(m.span.GetTraceId()) {
		return nil, OutcomeRejected, fmt.Sprintf("trace id of %d bytes, want 16 not all zero", n)
	}
	if n := len(m.span.GetSpanId()); n != 8 || isZero(m.span.GetSpanId()) {
		return nil, OutcomeRejected, fmt.Sprintf("span id of %d bytes, want 8 not all zero", n)
	}
	start, end := m.span.GetStartTimeUnixNano(), m.span.GetEndTimeUnixNano()
	if start == 0 || end == 0 {
		return nil, OutcomeRejected, "start or end time missing"
	}
	if end < start {
		return nil, OutcomeRejected, "ends before it starts"
	}
	if end > 1<<63-1 {
		return nil, OutcomeRejected, "end time out of range"
	}
	props := m.session(k.conv)
	props["$mcp_source"] = k.conv.Source()
	props["$mcp_duration_ms"] = float64(end-start) / 1e6
	props["$otel_trace_id"] = hex.EncodeToString(m.span.GetTraceId())
	props["$otel_span_id"] = hex.EncodeToString(m.span.GetSpanId())
	switch k.method {
	case MethodToolsList:
		m.toolsList(k.conv, props)
		return []json.RawMessage{m.envelope(ingest.EventToolsList, props)}, OutcomeMapped, ""
	case MethodInitialize:
		m.initialize(k.conv, props)
		return []json.RawMessage{m.envelope(ingest.EventInitialize, props)}, OutcomeMapped, ""
	}
	tool := m.toolName(k.conv)
	if tool == "" {
		return nil, OutcomeRejected, "a tools/call span without a tool name"
	}
	props["$mcp_tool_name"] = tool
	m.toolCall(k.conv, tool, props)
	out := []json.RawMessage{m.envelope(ingest.EventToolCall, props)}
	if props["$mcp_is_error"] == true {
		typ, _ := props["$mcp_error_type"].(string)
		if typ == "" {
			typ = "Error"
		}
		msg, _ := props["$mcp_error_message"].(string)
		exc := map[string]any{"$exception_list": []any{map[string]any{"type": typ, "value": msg}}, "$exception_level": "error", "$mcp_tool_name": tool}
		for _, key := range []string{"$session_id", "$mcp_server_name", "$mcp_server_version", "$mcp_client_name", "$mcp_client_version",
			"$mcp_protocol_version", "$mcp_source", "$otel_trace_id", "$otel_span_id"} {
			if v, ok := props[key]; ok {
				exc[key] = v
			}
		}
		out = append(out, m.envelope(ingest.EventException, exc))
	}
	return out, OutcomeMapped, ""
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// session fills the session properties every mapped event carries.
func (m *mapper) session(conv Convention) map[string]any {
	p := map[string]any{}
	set := func(key, v string) {
		if v != "" {
			p[key] = v
		}
	}
	set("$mcp_server_name", m.resource.str(AttrServiceName))
	set("$mcp_server_version", m.resource.str(AttrServiceVersion))
	switch conv {
	case ConventionTraceloop:
		set("$session_id", hex.EncodeToString(m.span.GetTraceId()))
		if t := m.trace; t != nil {
			set("$mcp_server_name", t.serverName)
			set("$mcp_server_version", t.serverVersion)
			set("$mcp_client_name", t.clientName)
			set("$mcp_client_version", t.clientVersion)
			set("$mcp_protocol_version", t.protocolVersion)
		}
	default:
		sid := m.a.str(AttrMCPSessionID)
		if sid == "" {
			sid = m.resource.str(AttrMCPSessionID)
		}
		set("$session_id", sid)
		set("$mcp_protocol_version", m.a.str(AttrMCPProtocolVersion))
	}
	return p
}

// envelope is the event's JSON: its uuid from the span, timestamp the span's end (when the
// SDK would have captured it), distinct_id the session id or the trace.
func (m *mapper) envelope(event string, props map[string]any) json.RawMessage {
	distinct, _ := props["$session_id"].(string)
	if distinct == "" {
		distinct = "otel-trace:" + hex.EncodeToString(m.span.GetTraceId())
	}
	env := map[string]any{
		"uuid":        EventUUID(m.span.GetTraceId(), m.span.GetSpanId(), event).String(),
		"event":       event,
		"distinct_id": distinct,
		"timestamp":   time.Unix(0, int64(m.span.GetEndTimeUnixNano())).UTC().Format(time.RFC3339Nano),
		"properties":  props,
	}
	b, err := json.Marshal(env)
	if err != nil {
		// Only NaN or an infinity fails, and jsonValue writes those as text.
		panic(err)
	}
	return b
}

// toolName is the called tool's name by convention.
func (m *mapper) toolName(conv Convention) string {
	switch conv {
	case ConventionShinzo:
		return m.a.str(AttrShinzoToolName)
	case ConventionTraceloop:
		if n := m.a.str(AttrTraceloopEntityName); n != "" {
			return n
		}
		var in struct {
			ToolName string `json:"tool_name"`
		}
		_ = json.Unmarshal([]byte(m.a.str(AttrTraceloopEntityInput)), &in)
		return in.ToolName
	}
	if n := m.a.str(AttrGenAIToolName); n != "" {
		return n
	}
	// The conventions' span name: "{mcp.method.name} {target}".
	if _, target, ok := strings.Cut(m.span.GetName(), " "); ok {
		return strings.TrimSpace(target)
	}
	return ""
}

// parameters is $mcp_parameters as @posthog/mcp captures a tools/call request.
func parameters(tool string, arguments any) map[string]any {
	params := map[string]any{"name": tool}
	if arguments != nil {
		params["arguments"] = arguments
	}
	return map[string]any{"request": map[string]any{"method": MethodToolsCall, "params": params}}
}

// rawJSON is s as a JSON value when it is JSON text, else s as a JSON string (which the
// misuse derivation reports as arguments_invalid).
func rawJSON(s string) any {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	return s
}

func (m *mapper) toolCall(conv Convention, tool string, p map[string]any) {
	status := m.span.GetStatus()
	isError := status.GetCode() == tracepb.Status_STATUS_CODE_ERROR
	msg := status.GetMessage()
	errType := m.a.str(AttrErrorType)
	switch conv {
	case ConventionSemconv:
		if errType != "" {
			isError = true
		}
		if msg == "" && isError {
			code := m.a.str(AttrJSONRPCErrorCode)
			if code == "" {
				code = m.a.str(AttrRPCResponseStatusCode)
			}
			switch {
			case code != "":
				msg = "MCP error " + code
			case errType != "":
				msg = errType
			}
		}
		// An empty value is no arguments recorded (a Go SDK call without arguments), not
		// arguments that are not JSON.
		if args := m.a.str(AttrGenAIToolArguments); strings.TrimSpace(args) != "" {
			p["$mcp_parameters"] = parameters(tool, rawJSON(args))
		}
		if r := m.a.str(AttrGenAIToolResult); strings.HasPrefix(strings.TrimSpace(r), "{") && json.Valid([]byte(r)) {
			p["$mcp_response"] = json.RawMessage(r)
		}
	case ConventionShinzo:
		// The handler's arguments, after the SDK validated them: undeclared keys are gone.
		p["$mcp_parameters"] = parameters(tool, misuse.MarkerArgumentsValidated)
		if args := m.shinzoArguments(); len(args) > 0 {
			p["$mcp_validated_arguments"] = args
		}
	case ConventionTraceloop:
		var in struct {
			Arguments json.RawMessage `json:"arguments"`
		}
		if raw := m.a.str(AttrTraceloopEntityInput); raw != "" && json.Unmarshal([]byte(raw), &in) == nil {
			// _extractCleanInput leaves arguments out when the agent sent none (or an
			// empty value): the call had no arguments.
			var args any
			if len(in.Arguments) > 0 {
				args = in.Arguments
			}
			p["$mcp_parameters"] = parameters(tool, args)
		}
		var out struct {
			IsError *bool `json:"is_error"`
		}
		if raw := m.a.str(AttrTraceloopOutput); raw != "" && json.Unmarshal([]byte(raw), &out) == nil && out.IsError != nil && *out.IsError {
			isError = true
		}
	}
	p["$mcp_is_error"] = isError
	if isError {
		if msg != "" {
			p["$mcp_error_message"] = msg
		}
		if errType != "" {
			p["$mcp_error_type"] = errType
		}
	}
}

// maxArgumentDepth is how many levels shinzoArguments nests a dotted path into: the MCP
// analytics SDK keeps 10 levels of what it captures, and past it the rest of the path stays
// one key, so a key of a million dots costs one map, not a million nested ones (whose JSON
// encoding would recurse a million deep).
const maxArgumentDepth = 10

// shinzoArguments rebuilds the object of mcp.request.argument.<path> attributes (dotted paths
// of nested objects, at most maxArgumentDepth deep; arrays stay whole).
func (m *mapper) shinzoArguments() map[string]any {
	out := map[string]any{}
	for _, kv := range m.span.GetAttributes() {
		path, ok := strings.CutPrefix(kv.GetKey(), AttrShinzoArgumentPrefix)
		if !ok || path == "" {
			continue
		}
		parts := strings.SplitN(path, ".", maxArgumentDepth)
		obj := out
		for _, part := range parts[:len(parts)-1] {
			next, ok := obj[part].(map[string]any)
			if !ok {
				next = map[string]any{}
				obj[part] = next
			}
			obj = next
		}
		obj[parts[len(parts)-1]] = jsonValue(kv.GetValue())
	}
	return out
}

// toolsList fills a $mcp_tools_list's properties: the listed names and, where the span carries
// them, descriptions and input schemas.
func (m *mapper) toolsList(conv Convention, p map[string]any) {
	type tool struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"inputSchema,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	}
	var tools []tool
	switch conv {
	case ConventionTraceloop:
		var out struct {
			Tools []tool `json:"tools"`
		}
		_ = json.Unmarshal([]byte(m.a.str(AttrTraceloopOutput)), &out)
		tools = out.Tools
	default:
		_ = json.Unmarshal([]byte(m.a.str(AttrGenAIToolDefs)), &tools)
	}
	names := []string{}
	listed := []map[string]any{}
	for _, t := range tools {
		if t.Name == "" {
			continue
		}
		names = append(names, t.Name)
		schema := t.InputSchema
		if len(schema) == 0 {
			schema = t.Parameters // gen_ai.tool.definitions' function-style entries
		}
		if len(schema) == 0 || string(schema) == "null" {
			// Listed, but without a schema (Traceloop's spans never carry one): named in
			// $mcp_listed_tool_names only, so that it neither stores an empty served schema
			// nor replaces a schema learnt from another source.
			continue
		}
		e := map[string]any{"name": t.Name, "inputSchema": schema}
		if t.Description != "" {
			e["description"] = t.Description
		}
		listed = append(listed, e)
	}
	p["$mcp_listed_tool_names"] = names
	p["$mcp_response"] = map[string]any{"tools": listed} // only the tools with a schema
	p["$mcp_parameters"] = map[string]any{"request": map[string]any{"method": MethodToolsList}}
	p["$mcp_is_error"] = m.span.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR
}

// initialize fills a $mcp_initialize's properties.
func (m *mapper) initialize(conv Convention, p map[string]any) {
	request := map[string]any{"method": MethodInitialize}
	switch conv {
	case ConventionTraceloop:
		if in := m.a.str(AttrTraceloopEntityInput); json.Valid([]byte(in)) {
			request["params"] = json.RawMessage(in)
		}
		if out := m.a.str(AttrTraceloopOutput); json.Valid([]byte(out)) {
			p["$mcp_response"] = json.RawMessage(out)
		}
	default:
		if v := m.a.str(AttrMCPProtocolVersion); v != "" {
			request["params"] = map[string]any{"protocolVersion": v}
		}
	}
	p["$mcp_parameters"] = map[string]any{"request": request}
}

// traceloopInitInfo reads the session of a Traceloop initialize.mcp span: its input is the
// initialize request's params, its output the result.
func traceloopInitInfo(a attrMap) *traceInfo {
	var in struct {
		ClientInfo struct{ Name, Version string } `json:"clientInfo"`
	}
	var out struct {
		ProtocolVersion string                         `json:"protocolVersion"`
		ServerInfo      struct{ Name, Version string } `json:"serverInfo"`
	}
	_ = json.Unmarshal([]byte(a.str(AttrTraceloopEntityInput)), &in)
	_ = json.Unmarshal([]byte(a.str(AttrTraceloopOutput)), &out)
	return &traceInfo{serverName: out.ServerInfo.Name, serverVersion: out.ServerInfo.Version,
		clientName: in.ClientInfo.Name, clientVersion: in.ClientInfo.Version, protocolVersion: out.ProtocolVersion}
}
