package live

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/posthog/posthog-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// callOutcome is what a tools/call answered: the error message of a failed call (an error
// result's text, or the protocol error) and whether it failed.
func callOutcome(res mcp.Result, err error) (failed bool, message string) {
	if err != nil {
		return true, err.Error()
	}
	r, ok := res.(*mcp.CallToolResult)
	if !ok || !r.IsError {
		return false, ""
	}
	var texts []string
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, t.Text)
		}
	}
	return true, strings.Join(texts, "\n")
}

// sessionFacts are the session properties every event of a session carries.
type sessionFacts struct {
	id, client, clientVersion, protocol string
}

func factsOf(req mcp.Request) sessionFacts {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok {
		return sessionFacts{}
	}
	f := sessionFacts{id: ss.ID()}
	if p := ss.InitializeParams(); p != nil {
		f.protocol = p.ProtocolVersion
		if p.ClientInfo != nil {
			f.client, f.clientVersion = p.ClientInfo.Name, p.ClientInfo.Version
		}
	}
	return f
}

// postHogReporter captures a server's tools/list and tools/call with posthog-go, with the
// properties the MCP analytics SDK (@posthog/mcp 0.16.3, src/extensions/posthog-events.ts)
// gives them: the request as $mcp_parameters ({"request": {"method", "params"}}), a listing's
// page as $mcp_response ({"tools", "nextCursor"}) and its names as $mcp_listed_tool_names, the
// session's properties, distinct_id the session id (the SDK's default without an identity).
func postHogReporter(client posthog.Client, name, version string) func(*mcp.Server) {
	return func(s *mcp.Server) {
		s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				start := time.Now()
				res, err := next(ctx, method, req)
				f := factsOf(req)
				props := posthog.NewProperties().
					Set("$mcp_source", "posthog_mcp_analytics").
					Set("$mcp_server_name", name).Set("$mcp_server_version", version).
					Set("$mcp_client_name", f.client).Set("$mcp_client_version", f.clientVersion).
					Set("$mcp_protocol_version", f.protocol).Set("$session_id", f.id)
				var event string
				switch method {
				case "tools/list":
					params, _ := req.GetParams().(*mcp.ListToolsParams)
					r, ok := res.(*mcp.ListToolsResult)
					if err != nil || !ok {
						return res, err
					}
					event = "$mcp_tools_list"
					reqParams := map[string]any{}
					if params != nil && params.Cursor != "" {
						reqParams["cursor"] = params.Cursor
					}
					names := make([]string, 0, len(r.Tools))
					for _, t := range r.Tools {
						names = append(names, t.Name)
					}
					response := map[string]any{"tools": r.Tools}
					if r.NextCursor != "" {
						response["nextCursor"] = r.NextCursor
					}
					props.Set("$mcp_parameters", map[string]any{"request": map[string]any{"method": method, "params": reqParams}}).
						Set("$mcp_response", response).Set("$mcp_listed_tool_names", names)
				case "tools/call":
					params, _ := req.GetParams().(*mcp.CallToolParamsRaw)
					if params == nil {
						return res, err
					}
					event = "$mcp_tool_call"
					failed, message := callOutcome(res, err)
					props.Set("$mcp_tool_name", params.Name).Set("$mcp_is_error", failed).
						Set("$mcp_duration_ms", float64(time.Since(start).Microseconds())/1000).
						Set("$mcp_parameters", map[string]any{"request": map[string]any{
							"method": method, "params": map[string]any{"name": params.Name, "arguments": params.Arguments}}})
					if failed {
						props.Set("$mcp_error_type", "Error").Set("$mcp_error_message", message)
					}
				default:
					return res, err
				}
				if e := client.Enqueue(posthog.Capture{DistinctId: f.id, Event: event, Timestamp: start, Properties: props}); e != nil {
					return res, errors.Join(err, e)
				}
				return res, err
			}
		})
	}
}

// semconvReporter traces a server's initialize, tools/list and tools/call as SERVER spans
// following the OpenTelemetry semantic conventions for MCP (semantic-conventions-genai,
// docs/gen-ai/mcp.md): span name "<method> [<tool>]", mcp.method.name, mcp.session.id,
// mcp.protocol.version, gen_ai.tool.name and gen_ai.operation.name "execute_tool" for a call,
// with the opt-in gen_ai.tool.call.arguments; error.type "tool_error" for an error result, the
// JSON-RPC code for a protocol error (rpc.jsonrpc.error_code), the span status ERROR either
// way with the message. A tools/list span carries the page's tools, with their input schemas,
// in the opt-in gen_ai.tool.definitions.
func semconvReporter(tracer trace.Tracer) func(*mcp.Server) {
	return func(s *mcp.Server) {
		s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				name := method
				var attrs []attribute.KeyValue
				call, _ := req.GetParams().(*mcp.CallToolParamsRaw)
				switch {
				case method == "tools/call" && call != nil:
					name += " " + call.Name
					attrs = append(attrs, attribute.String("gen_ai.tool.name", call.Name),
						attribute.String("gen_ai.operation.name", "execute_tool"),
						attribute.String("gen_ai.tool.call.arguments", string(call.Arguments)))
				case method == "tools/list", method == "initialize":
				default:
					return next(ctx, method, req)
				}
				ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
				defer span.End()
				res, err := next(ctx, method, req)
				f := factsOf(req)
				if init, ok := req.GetParams().(*mcp.InitializeParams); ok && init != nil {
					f.protocol = init.ProtocolVersion
				}
				attrs = append(attrs, attribute.String("mcp.method.name", method), attribute.String("mcp.session.id", f.id))
				if f.protocol != "" {
					attrs = append(attrs, attribute.String("mcp.protocol.version", f.protocol))
				}
				if r, ok := res.(*mcp.ListToolsResult); ok && err == nil {
					if defs, e := json.Marshal(r.Tools); e == nil {
						attrs = append(attrs, attribute.String("gen_ai.tool.definitions", string(defs)))
					}
				}
				if method == "tools/call" {
					if failed, message := callOutcome(res, err); failed {
						if err == nil {
							attrs = append(attrs, attribute.String("error.type", "tool_error"))
						} else if code, ok := jsonrpcCode(err); ok {
							attrs = append(attrs, attribute.String("error.type", code), attribute.String("rpc.jsonrpc.error_code", code))
						} else {
							attrs = append(attrs, attribute.String("error.type", "_OTHER"))
						}
						span.SetStatus(codes.Error, message)
					}
				}
				span.SetAttributes(attrs...)
				return res, err
			}
		})
	}
}

// jsonrpcCode is the JSON-RPC error code of a protocol error, as text.
func jsonrpcCode(err error) (string, bool) {
	var w *jsonrpc.Error
	if errors.As(err, &w) {
		return strconv.FormatInt(w.Code, 10), true
	}
	return "", false
}
