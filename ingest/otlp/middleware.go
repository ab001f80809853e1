package otlp

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// ServerMiddleware traces what a server built with the official Go MCP SDK answers
// (initialize, tools/list, tools/call; other methods pass untraced) as SERVER spans following
// the OpenTelemetry semantic conventions for MCP, the convention this package maps first
// (conventions.go): span name "<method>" or "tools/call <tool>", mcp.method.name,
// mcp.session.id and mcp.protocol.version of the session, gen_ai.tool.name and
// gen_ai.operation.name "execute_tool" with the opt-in gen_ai.tool.call.arguments (the raw
// arguments) for a call, the opt-in gen_ai.tool.definitions (the page's tools with their input
// schemas) for a tools/list. A failed call has status ERROR with its message, and error.type
// "tool_error" for an error result, the JSON-RPC code (also as rpc.response.status_code) for a
// protocol error, "_OTHER" for any other error. Add it with Server.AddReceivingMiddleware;
// export the spans with the OpenTelemetry SDK's OTLP/HTTP exporter to the gateway's /v1/traces.
func ServerMiddleware(tracer trace.Tracer) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case MethodToolsCall, MethodToolsList, MethodInitialize:
			default:
				return next(ctx, method, req)
			}
			name := method
			attrs := []attribute.KeyValue{attribute.String(AttrMCPMethodName, method)}
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && p != nil {
				name += " " + p.Name
				attrs = append(attrs, attribute.String(AttrGenAIToolName, p.Name), attribute.String(AttrGenAIOperationName, "execute_tool"))
				if len(p.Arguments) > 0 {
					attrs = append(attrs, attribute.String(AttrGenAIToolArguments, string(p.Arguments)))
				}
			}
			ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
			defer span.End()
			res, err := next(ctx, method, req)
			// The session's id and protocol are known once initialize has been answered.
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss.ID() != "" {
				span.SetAttributes(attribute.String(AttrMCPSessionID, ss.ID()))
				if ip := ss.InitializeParams(); ip != nil && ip.ProtocolVersion != "" {
					span.SetAttributes(attribute.String(AttrMCPProtocolVersion, ip.ProtocolVersion))
				}
			}
			var werr *jsonrpc.Error
			switch {
			case errors.As(err, &werr):
				code := strconv.FormatInt(werr.Code, 10)
				span.SetAttributes(attribute.String(AttrErrorType, code), attribute.String(AttrRPCResponseStatusCode, code))
				span.SetStatus(codes.Error, werr.Message)
			case err != nil:
				span.SetAttributes(attribute.String(AttrErrorType, "_OTHER"))
				span.SetStatus(codes.Error, err.Error())
			}
			switch r := res.(type) {
			case *mcp.CallToolResult:
				if r != nil && r.IsError {
					msg := ""
					if len(r.Content) > 0 {
						if tc, ok := r.Content[0].(*mcp.TextContent); ok {
							msg = tc.Text
						}
					}
					span.SetAttributes(attribute.String(AttrErrorType, ErrorTypeToolError))
					span.SetStatus(codes.Error, msg)
				}
			case *mcp.ListToolsResult:
				if r != nil {
					if defs, err := json.Marshal(r.Tools); err == nil {
						span.SetAttributes(attribute.String(AttrGenAIToolDefs, string(defs)))
					}
				}
			}
			return res, err
		}
	}
}
