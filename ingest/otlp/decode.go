// Package otlp turns OTLP/HTTP trace exports (OpenTelemetry Protocol 1.x, the
// opentelemetry-proto ExportTraceServiceRequest) into the PostHog-style MCP events the rest of
// mcpulse reads: each span of an MCP tool call, tools/list or initialize becomes the envelope
// the MCP analytics SDK (@posthog/mcp 0.16.3) would have sent for it ($mcp_tool_call,
// $mcp_tools_list, $mcp_initialize, and $exception beside a failed call), so that the Kafka
// topics, the consumers, the misuse derivation, the rollups and the dashboards need nothing
// new. Spans of anything else are counted and dropped.
//
// The wire format is decoded with the OpenTelemetry project's own generated types
// (go.opentelemetry.io/proto/otlp) and google.golang.org/protobuf: binary protobuf as is, and
// OTLP's JSON mapping with protojson once the trace and span ids, which OTLP/JSON writes as hex
// rather than protobuf-JSON's base64, are rewritten (HexIDsToBase64).
//
// Which attributes are read, per instrumentation, is the table in conventions.go.
package otlp

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/mcpulse/mcpulse/internal/safetext"
)

// Encoding is the body encoding of an OTLP/HTTP request and of its answer.
type Encoding int

// The encodings OTLP/HTTP defines (opentelemetry-proto docs/specification.md, "OTLP/HTTP").
const (
	// Protobuf is binary protobuf, Content-Type application/x-protobuf.
	Protobuf Encoding = iota
	// JSON is OTLP's JSON mapping, Content-Type application/json.
	JSON
)

// ContentType is the Content-Type an answer of encoding e is sent with.
func (e Encoding) ContentType() string {
	if e == JSON {
		return "application/json"
	}
	return "application/x-protobuf"
}

// ErrUnsupportedMediaType is returned (wrapped) by EncodingOf for a Content-Type other than
// protobuf or JSON; the gateway answers it with 415.
var ErrUnsupportedMediaType = errors.New("unsupported Content-Type")

// EncodingOf reads a request's Content-Type: application/x-protobuf (or application/protobuf)
// is Protobuf, application/json is JSON; anything else, or none, is ErrUnsupportedMediaType.
func EncodingOf(contentType string) (Encoding, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(contentType))
	}
	switch mt {
	case "application/x-protobuf", "application/protobuf":
		return Protobuf, nil
	case "application/json":
		return JSON, nil
	}
	return Protobuf, fmt.Errorf("%w %s: send application/x-protobuf or application/json", ErrUnsupportedMediaType, quote(contentType))
}

// TooManySpansError is Decode's error for a request holding more spans than its limit; it is
// found before any span is decoded, so a request of millions of empty spans (two bytes each in
// protobuf) costs a scan of its bytes, not their decoded form.
type TooManySpansError struct {
	// Spans is how many spans were counted before the limit was passed (Limit + 1), Limit the
	// limit.
	Spans, Limit int
}

func (e *TooManySpansError) Error() string {
	return fmt.Sprintf("more than %d spans in one request, at most %d: export smaller batches", e.Spans-1, e.Limit)
}

// Decode reads an ExportTraceServiceRequest in encoding e, holding at most maxSpans spans (a
// *TooManySpansError past it, counted before decoding; maxSpans <= 0 is no limit). The error
// says what is wrong and echoes at most a short, quoted prefix of bad input.
func Decode(e Encoding, body []byte, maxSpans int) (*coltracepb.ExportTraceServiceRequest, error) {
	req := &coltracepb.ExportTraceServiceRequest{}
	if e == Protobuf {
		if n := countProtoSpans(body, maxSpans); maxSpans > 0 && n > maxSpans {
			return nil, &TooManySpansError{Spans: n, Limit: maxSpans}
		}
		if err := proto.Unmarshal(body, req); err != nil {
			return nil, fmt.Errorf("bad OTLP protobuf: %s", shortErr(err))
		}
		return req, nil
	}
	data, err := hexIDsToBase64(body, maxSpans)
	if err != nil {
		var tooMany *TooManySpansError
		if errors.As(err, &tooMany) {
			return nil, err
		}
		return nil, fmt.Errorf("bad OTLP JSON: %s", shortErr(err))
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, req); err != nil {
		return nil, fmt.Errorf("bad OTLP JSON: %s", shortErr(err))
	}
	return req, nil
}

// Field numbers of the messages that hold spans (opentelemetry-proto trace/v1/trace.proto,
// collector/trace/v1/trace_service.proto).
const (
	fieldRequestResourceSpans = 1 // ExportTraceServiceRequest.resource_spans
	fieldResourceScopeSpans   = 2 // ResourceSpans.scope_spans
	fieldScopeSpans           = 2 // ScopeSpans.spans
)

// countProtoSpans counts the spans of a protobuf ExportTraceServiceRequest by walking its wire
// format (protowire), without decoding a span, and stops once the count passes limit (limit <=
// 0: counts all). Malformed input ends the count where it breaks; proto.Unmarshal reports it.
func countProtoSpans(b []byte, limit int) int {
	n := 0
	// each calls f with the value of every length-delimited field number num of message b.
	each := func(b []byte, num protowire.Number, f func([]byte) bool) {
		for len(b) > 0 {
			fn, typ, l := protowire.ConsumeTag(b)
			if l < 0 {
				return
			}
			b = b[l:]
			if fn == num && typ == protowire.BytesType {
				v, l := protowire.ConsumeBytes(b)
				if l < 0 || !f(v) {
					return
				}
				b = b[l:]
				continue
			}
			l = protowire.ConsumeFieldValue(fn, typ, b)
			if l < 0 {
				return
			}
			b = b[l:]
		}
	}
	each(b, fieldRequestResourceSpans, func(rs []byte) bool {
		each(rs, fieldResourceScopeSpans, func(ss []byte) bool {
			each(ss, fieldScopeSpans, func([]byte) bool {
				n++
				return limit <= 0 || n <= limit
			})
			return limit <= 0 || n <= limit
		})
		return limit <= 0 || n <= limit
	})
	return n
}

// idFields are the JSON names (lowerCamelCase and the proto names protojson also takes) of the
// bytes fields OTLP/JSON writes as hex: Span.trace_id, span_id, parent_span_id and
// Span.Link.trace_id, span_id (opentelemetry-proto docs/specification.md, "JSON Protobuf
// Encoding": "traceId and spanId ... MUST be represented as case-insensitive hex-encoded
// strings").
var idFields = map[string]bool{
	"traceId": true, "spanId": true, "parentSpanId": true,
	"trace_id": true, "span_id": true, "parent_span_id": true,
}

// HexIDsToBase64 rewrites an OTLP/JSON document so protojson can read it: every string value
// of a trace or span id field (idFields) that is hex of 8 or 16 bytes becomes base64, the
// encoding protobuf's JSON mapping gives bytes fields. Other values are copied unchanged
// (protojson then refuses what is neither). It errors on text that is not JSON.
func HexIDsToBase64(data []byte) ([]byte, error) { return hexIDsToBase64(data, 0) }

// hexIDsToBase64 is HexIDsToBase64 that also counts the spans (the objects of a "spans" array)
// as it reads, and stops with a *TooManySpansError once they pass maxSpans (<= 0: no limit).
func hexIDsToBase64(data []byte, maxSpans int) ([]byte, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	var out bytes.Buffer
	out.Grow(len(data))
	enc := jsontext.NewEncoder(&out)
	var lastName string
	spansDepth, spans := -1, 0 // the depth of the "spans" array being read, -1 outside one
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
		depth := dec.StackDepth()
		kind, n := dec.StackIndex(depth)
		isName := kind == '{' && n%2 == 1 && tok.Kind() == '"'
		switch tok.Kind() {
		case '[':
			if lastName == "spans" && spansDepth < 0 {
				spansDepth = depth
			}
		case ']':
			if depth < spansDepth {
				spansDepth = -1
			}
		case '{':
			if spansDepth >= 0 && depth == spansDepth+1 {
				if spans++; maxSpans > 0 && spans > maxSpans {
					return nil, &TooManySpansError{Spans: spans, Limit: maxSpans}
				}
			}
		}
		if tok.Kind() == '"' && !isName && kind == '{' && idFields[lastName] {
			s := tok.String()
			if b, err := hex.DecodeString(s); err == nil && (len(b) == 8 || len(b) == 16) {
				tok = jsontext.String(base64.StdEncoding.EncodeToString(b))
			}
		}
		if isName {
			lastName = tok.String()
		}
		if err := enc.WriteToken(tok); err != nil {
			return nil, err
		}
	}
	return out.Bytes(), nil
}

// EncodeResponse marshals an ExportTraceServiceResponse (or, for an error answer, a
// google.rpc.Status, as OTLP/HTTP's failure bodies are) in encoding e.
func EncodeResponse(e Encoding, m proto.Message) []byte {
	var b []byte
	var err error
	if e == JSON {
		b, err = protojson.Marshal(m)
	} else {
		b, err = proto.Marshal(m)
	}
	if err != nil {
		// Only a message holding invalid UTF-8 fails to marshal; messages here are built from
		// escaped text.
		b, _ = proto.Marshal(&status.Status{Message: "answer could not be encoded"})
	}
	return b
}

// StatusBody is the body of an OTLP/HTTP error answer: a google.rpc.Status with code (a gRPC
// code, as OTLP/HTTP asks) and message.
func StatusBody(e Encoding, code int32, message string) []byte {
	return EncodeResponse(e, &status.Status{Code: code, Message: message})
}

// shortErr is an error's text cut to 200 bytes, valid UTF-8 with control characters escaped:
// decoder errors quote pieces of the input.
func shortErr(err error) string {
	return clean(err.Error(), 200)
}

// quote is s for an error message: safetext.Quote, a short escaped prefix and its length.
func quote(s string) string { return safetext.Quote(s) }

// clean cuts s to n bytes at a rune boundary and escapes control and invalid bytes.
func clean(s string, n int) string {
	s = cutUTF8(s, n)
	q := fmt.Sprintf("%+q", s)
	return q[1 : len(q)-1]
}

func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
