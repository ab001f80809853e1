package gateway

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"strconv"
	"strings"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc/codes"

	"github.com/mcpulse/mcpulse/ingest/otlp"
)

// OTLPTracesPath is the OTLP/HTTP traces endpoint (opentelemetry-proto
// docs/specification.md, "OTLP/HTTP Request": the default URL path /v1/traces), which an
// exporter reaches with OTEL_EXPORTER_OTLP_ENDPOINT=http://<gateway> or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://<gateway>/v1/traces.
const OTLPTracesPath = "/v1/traces"

// otlpTraces serves POST /v1/traces: an ExportTraceServiceRequest in binary protobuf
// (application/x-protobuf) or OTLP/JSON (application/json), gzip or not, authorized by
// Authorization: Bearer <api key> (OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20<key>).
// The capture API's limits apply: MaxBodyBytes as sent, MaxDecompressedBytes inflated,
// MaxEvents spans per request. Its MCP spans become events (package ingest/otlp) that are
// validated and published like the capture API's; the rest are counted and dropped.
//
// The answer is an ExportTraceServiceResponse in the request's encoding: 200, with
// partial_success.rejected_spans counting the MCP spans too malformed to map or whose event
// the gateway refused and its error_message saying why (no partial_success when none was);
// headers Mcpulse-Spans-Mapped, -Dropped (not MCP spans, or methods without an event kind) and
// -Rejected count the request's spans;
// 400, 401, 413 or 415 with a google.rpc.Status saying what is wrong with the request (nothing
// of it published); 503 with Retry-After when Kafka did not acknowledge in time (retry; the
// events' uuids come from the spans' ids, so the consumers deduplicate).
func (g *Gateway) otlpTraces(w http.ResponseWriter, r *http.Request) {
	enc, encErr := otlp.EncodingOf(r.Header.Get("Content-Type"))
	fail := func(code int, grpcCode codes.Code, msg string) {
		if code == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(g.cfg.RetryAfter.Seconds()))))
		}
		w.Header().Set("Content-Type", enc.ContentType())
		w.WriteHeader(code)
		_, _ = w.Write(otlp.StatusBody(enc, int32(grpcCode), msg))
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		fail(http.StatusMethodNotAllowed, codes.Unimplemented, "method not allowed: POST only")
		return
	}
	q, qerr := parseQuery(r.URL.RawQuery, "URL query")
	if qerr != nil {
		fail(qerr.Status, codes.InvalidArgument, qerr.Msg)
		return
	}
	keys := g.newKeyCheck()
	if msg := keys.outsideBody(r, q); msg != "" {
		fail(http.StatusUnauthorized, codes.Unauthenticated, msg)
		return
	}
	if msg := keys.verdict(formEnvelopes); msg != "" {
		fail(http.StatusUnauthorized, codes.Unauthenticated, msg)
		return
	}
	if encErr != nil {
		fail(http.StatusUnsupportedMediaType, codes.InvalidArgument, encErr.Error())
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, g.cfg.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			fail(http.StatusRequestEntityTooLarge, codes.ResourceExhausted, fmt.Sprintf("body exceeds %d bytes", g.cfg.MaxBodyBytes))
			return
		}
		fail(http.StatusBadRequest, codes.InvalidArgument, "reading body failed")
		return
	}
	m := meta{ContentEncoding: r.Header.Get("Content-Encoding"), ContentType: r.Header.Get("Content-Type")}
	data, err := inflate(formEnvelopes, m, body, g.cfg.MaxDecompressedBytes)
	if err != nil {
		var he *httpError
		if !errors.As(err, &he) {
			he = badRequest("%v", err)
		}
		code := codes.InvalidArgument
		if he.Status == http.StatusRequestEntityTooLarge {
			code = codes.ResourceExhausted
		}
		fail(he.Status, code, he.Msg)
		return
	}
	req, err := otlp.Decode(enc, data, g.cfg.MaxEvents)
	if err != nil {
		var tooMany *otlp.TooManySpansError
		if errors.As(err, &tooMany) {
			fail(http.StatusRequestEntityTooLarge, codes.ResourceExhausted, err.Error())
			return
		}
		fail(http.StatusBadRequest, codes.InvalidArgument, err.Error())
		return
	}
	mapped := otlp.Map(req)
	res := g.process(&payload{Events: mapped.Events}, formOTLP, newRequestClock(g.cfg.Now(), nil, g.cfg.TransitAllowance))
	code, resp, _ := g.publish(r, res)
	if code == http.StatusServiceUnavailable {
		fail(code, codes.Unavailable, resp.Error)
		return
	}
	// A span whose own event (its first) the gateway refused is rejected, with the reason; a
	// failed call's $exception refused beside a stored call leaves its span mapped.
	counts := maps.Clone(mapped.Counts)
	notes := append([]string(nil), mapped.Rejections...)
	for _, e := range resp.Errors {
		span := mapped.Spans[e.Index]
		if e.Index > 0 && mapped.Spans[e.Index-1] == span {
			continue
		}
		counts[otlp.OutcomeMapped]--
		counts[otlp.OutcomeRejected]++
		if len(notes) < 10 {
			var why []string
			for _, p := range e.Problems {
				why = append(why, strings.TrimPrefix(p.Path+": ", ": ")+p.Problem)
			}
			notes = append(notes, fmt.Sprintf("span %s: %s", otlp.SpanID(req, span), strings.Join(why, "; ")))
		}
	}
	rejected := counts[otlp.OutcomeRejected]
	if rejected > 0 {
		notes = append([]string{fmt.Sprintf("%d MCP spans rejected", rejected)}, notes...)
	}
	for outcome, n := range counts {
		g.metrics.otlpSpans.WithLabelValues(string(outcome)).Add(float64(n))
	}
	// The counts go in headers: exporters log any partial_success as a failed export (the
	// OpenTelemetry Go SDK's otlptracehttp returns it as an error), so dropping the spans that
	// are not MCP spans, which is the normal case, must not look like one.
	w.Header().Set("Mcpulse-Spans-Mapped", strconv.Itoa(counts[otlp.OutcomeMapped]))
	w.Header().Set("Mcpulse-Spans-Dropped", strconv.Itoa(counts[otlp.OutcomeNotMCP]+counts[otlp.OutcomeOtherMethod]))
	w.Header().Set("Mcpulse-Spans-Rejected", strconv.Itoa(rejected))
	out := &coltracepb.ExportTraceServiceResponse{}
	if rejected > 0 {
		out.PartialSuccess = &coltracepb.ExportTracePartialSuccess{RejectedSpans: int64(rejected), ErrorMessage: strings.Join(notes, "; ")}
	}
	w.Header().Set("Content-Type", enc.ContentType())
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(otlp.EncodeResponse(enc, out))
}
