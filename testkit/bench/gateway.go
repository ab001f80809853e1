package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/ingest/gateway"
)

// GatewayConfig configures RunGateway.
type GatewayConfig struct {
	// Events is how many tool calls each path takes per run: as capture-API events (POST
	// /batch/) and as OTLP spans (POST /v1/traces).
	Events int
	// Batch is how many events (or spans) one request carries.
	Batch int
	// Clients is how many requests are in flight at once.
	Clients int
	// Runs is how many times both paths are measured; the order alternates.
	Runs int
}

// GatewayRun is one run's figures.
type GatewayRun struct {
	CaptureEventsPerSec float64 `json:"capture_events_per_sec"`
	OTLPSpansPerSec     float64 `json:"otlp_spans_per_sec"`
	// Ratio is OTLPSpansPerSec ÷ CaptureEventsPerSec.
	Ratio float64 `json:"ratio"`
	// CaptureCPUMicros and OTLPCPUMicros are the CPU time this process (gateway, Kafka and
	// clients alike) spent per event on each path, in µs: a figure the machine's other load
	// disturbs far less than a rate. CPURatio is capture's ÷ OTLP's (above 1: OTLP is cheaper).
	CaptureCPUMicros float64 `json:"capture_cpu_us_per_event"`
	OTLPCPUMicros    float64 `json:"otlp_cpu_us_per_event"`
	CPURatio         float64 `json:"cpu_ratio"`
	// OTLPFirst says the OTLP path ran first in this run.
	OTLPFirst bool `json:"otlp_first"`
}

// GatewayResult is RunGateway's outcome.
type GatewayResult struct {
	Config GatewayConfig `json:"config"`
	// CaptureBodyBytes and OTLPBodyBytes are the mean request body sizes.
	CaptureBodyBytes int          `json:"capture_body_bytes"`
	OTLPBodyBytes    int          `json:"otlp_body_bytes"`
	Runs             []GatewayRun `json:"runs"`
	// MedianRatio is the median of the runs' ratios, MedianCPURatio of their CPU ratios.
	MedianRatio    float64 `json:"median_ratio"`
	MedianCPURatio float64 `json:"median_cpu_ratio"`
}

// RunGateway measures the gateway's two ingest paths for the same tool calls, over loopback
// to an in-process gateway publishing to an in-process Kafka (kfake), every request answered
// only after Kafka acknowledged its events: the capture API (POST /batch/, tool calls shaped
// as @posthog/mcp sends them: name, duration, session, server and client, $mcp_parameters with
// the arguments) and OTLP/HTTP (POST /v1/traces, binary protobuf, the same calls as SERVER
// spans following the OpenTelemetry semantic conventions for MCP, arguments in
// gen_ai.tool.call.arguments). events/s = events ÷ (first request sent → last answer).
func RunGateway(ctx context.Context, cfg GatewayConfig) (*GatewayResult, error) {
	if cfg.Events < 1 || cfg.Batch < 1 || cfg.Clients < 1 || cfg.Runs < 1 {
		return nil, fmt.Errorf("bench gateway: events, batch, clients and runs must be at least 1")
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, ingest.AllTopics...), kfake.DefaultNumPartitions(3))
	if err != nil {
		return nil, err
	}
	defer cluster.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	pub, err := ingest.NewPublisher(ingest.PublisherConfig{Brokers: cluster.ListenAddrs(), Logger: quiet})
	if err != nil {
		return nil, err
	}
	defer pub.Close()
	const key = "bench-gateway-key"
	gw, err := gateway.New(gateway.Config{APIKeys: []string{key}, Brokers: cluster.ListenAddrs(), Logger: quiet}, pub)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- gw.Serve(sctx, ln) }()
	defer func() { stop(); <-served }()
	base := "http://" + ln.Addr().String()

	capture, spans, err := gatewayBodies(cfg, key)
	if err != nil {
		return nil, err
	}
	res := &GatewayResult{Config: cfg, CaptureBodyBytes: meanLen(capture), OTLPBodyBytes: meanLen(spans)}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Clients}}
	post := func(url, ctype string, bodies [][]byte) (float64, error) {
		return postAll(ctx, client, url, ctype, key, bodies, cfg.Clients, cfg.Events)
	}
	// One untimed pass of each warms the connections, the topics and the allocator.
	if _, err := post(base+"/batch/", "application/json", capture[:1]); err != nil {
		return nil, err
	}
	if _, err := post(base+gateway.OTLPTracesPath, "application/x-protobuf", spans[:1]); err != nil {
		return nil, err
	}
	var ratios, cpuRatios []float64
	for i := range cfg.Runs {
		run := GatewayRun{OTLPFirst: i%2 == 1}
		order := []bool{run.OTLPFirst, !run.OTLPFirst}
		for _, otlp := range order {
			cpu0 := selfCPU()
			if otlp {
				run.OTLPSpansPerSec, err = post(base+gateway.OTLPTracesPath, "application/x-protobuf", spans)
				run.OTLPCPUMicros = (selfCPU() - cpu0) * 1e6 / float64(cfg.Events)
			} else {
				run.CaptureEventsPerSec, err = post(base+"/batch/", "application/json", capture)
				run.CaptureCPUMicros = (selfCPU() - cpu0) * 1e6 / float64(cfg.Events)
			}
			if err != nil {
				return nil, err
			}
		}
		run.Ratio = run.OTLPSpansPerSec / run.CaptureEventsPerSec
		run.CPURatio = run.CaptureCPUMicros / run.OTLPCPUMicros
		ratios, cpuRatios = append(ratios, run.Ratio), append(cpuRatios, run.CPURatio)
		res.Runs = append(res.Runs, run)
	}
	res.MedianRatio, res.MedianCPURatio = median(ratios), median(cpuRatios)
	return res, nil
}

func median(xs []float64) float64 {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	if len(xs)%2 == 0 {
		return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	return xs[len(xs)/2]
}

// Print writes the result as a table.
func (r *GatewayResult) Print(w io.Writer) {
	fmt.Fprintf(w, "gateway ingest, %d tool calls per path per run, %d per request, %d clients (mean body: capture %d B JSON, OTLP %d B protobuf)\n",
		r.Config.Events, r.Config.Batch, r.Config.Clients, r.CaptureBodyBytes, r.OTLPBodyBytes)
	fmt.Fprintf(w, "%-4s %21s %13s %7s %16s %14s %9s\n", "run", "capture API events/s", "OTLP spans/s", "ratio",
		"capture CPU µs/ev", "OTLP CPU µs/ev", "CPU ratio")
	for i, run := range r.Runs {
		first := "capture first"
		if run.OTLPFirst {
			first = "OTLP first"
		}
		fmt.Fprintf(w, "%-4d %21.0f %13.0f %7.3f %16.1f %14.1f %9.3f  (%s)\n", i+1, run.CaptureEventsPerSec, run.OTLPSpansPerSec, run.Ratio,
			run.CaptureCPUMicros, run.OTLPCPUMicros, run.CPURatio, first)
	}
	fmt.Fprintf(w, "median ratio OTLP ÷ capture API: %.3f events/s, %.3f CPU per event (capture ÷ OTLP)\n", r.MedianRatio, r.MedianCPURatio)
}

func meanLen(bodies [][]byte) int {
	n := 0
	for _, b := range bodies {
		n += len(b)
	}
	return n / len(bodies)
}

// gatewayBodies builds the requests of both paths for the same calls: call i is tool
// "tool-<i%8>" of session "session-<i%50>", 1 to 40 ms long, with three arguments.
func gatewayBodies(cfg GatewayConfig, key string) (capture, spans [][]byte, err error) {
	start := time.Now().Add(-time.Hour).Truncate(time.Second)
	for first := 0; first < cfg.Events; first += cfg.Batch {
		n := min(cfg.Batch, cfg.Events-first)
		events := make([]map[string]any, 0, n)
		otel := make([]*tracepb.Span, 0, n)
		for i := first; i < first+n; i++ {
			tool, session := fmt.Sprintf("tool-%d", i%8), fmt.Sprintf("session-%d", i%50)
			args := fmt.Sprintf(`{"query":"call %d","limit":%d,"filters":{"kind":"k%d"}}`, i, i%100, i%5)
			at := start.Add(time.Duration(i) * time.Millisecond)
			dur := time.Duration(1+i%40) * time.Millisecond
			events = append(events, map[string]any{
				"event": ingest.EventToolCall, "distinct_id": session, "timestamp": at.Add(dur).UTC().Format(time.RFC3339Nano),
				"uuid": fmt.Sprintf("0193b000-0000-7000-8000-%012d", i),
				"properties": map[string]any{
					"$mcp_tool_name": tool, "$mcp_duration_ms": dur.Milliseconds(), "$mcp_is_error": false, "$session_id": session,
					"$mcp_server_name": "bench-server", "$mcp_server_version": "1.0.0", "$mcp_protocol_version": "2025-11-25",
					"$mcp_parameters": map[string]any{"request": map[string]any{"method": "tools/call",
						"params": map[string]any{"name": tool, "arguments": json.RawMessage(args)}}},
				},
			})
			tid, sid := make([]byte, 16), make([]byte, 8)
			binary.BigEndian.PutUint64(tid[8:], uint64(i)+1)
			binary.BigEndian.PutUint64(sid, uint64(i)+1)
			otel = append(otel, &tracepb.Span{
				TraceId: tid, SpanId: sid, Name: "tools/call " + tool, Kind: tracepb.Span_SPAN_KIND_SERVER,
				StartTimeUnixNano: uint64(at.UnixNano()), EndTimeUnixNano: uint64(at.Add(dur).UnixNano()),
				Attributes: []*commonpb.KeyValue{
					strAttr("mcp.method.name", "tools/call"), strAttr("gen_ai.tool.name", tool), strAttr("gen_ai.operation.name", "execute_tool"),
					strAttr("mcp.session.id", session), strAttr("mcp.protocol.version", "2025-11-25"), strAttr("gen_ai.tool.call.arguments", args),
				},
			})
		}
		body, err := json.Marshal(map[string]any{"api_key": key, "batch": events})
		if err != nil {
			return nil, nil, err
		}
		capture = append(capture, body)
		req := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
			Resource:   &resourcepb.Resource{Attributes: []*commonpb.KeyValue{strAttr("service.name", "bench-server"), strAttr("service.version", "1.0.0")}},
			ScopeSpans: []*tracepb.ScopeSpans{{Spans: otel}},
		}}}
		pb, err := proto.Marshal(req)
		if err != nil {
			return nil, nil, err
		}
		spans = append(spans, pb)
	}
	return capture, spans, nil
}

func strAttr(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// postAll sends every body to url from clients goroutines and returns events ÷ elapsed
// seconds; any answer but 200 is an error.
func postAll(ctx context.Context, client *http.Client, url, ctype, key string, bodies [][]byte, clients, events int) (float64, error) {
	next := make(chan []byte)
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	var taken atomic.Int64 // events (spans) the gateway answered it took
	begin := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for body := range next {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				req.Header.Set("Content-Type", ctype)
				req.Header.Set("Authorization", "Bearer "+key)
				res, err := client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				answer, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("POST %s: %d %.200q", url, res.StatusCode, answer)
					return
				}
				// What the gateway took: the spans mapped (OTLP), else the events accepted.
				n, err := strconv.Atoi(res.Header.Get("Mcpulse-Spans-Mapped"))
				if err != nil {
					var ack struct{ Accepted int }
					if err := json.Unmarshal(answer, &ack); err != nil {
						errs <- fmt.Errorf("POST %s: answer %.200q: %w", url, answer, err)
						return
					}
					n = ack.Accepted
				}
				taken.Add(int64(n))
			}
		}()
	}
	var failed error
feed:
	for _, b := range bodies {
		select {
		case next <- b:
		case failed = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if failed == nil {
		select {
		case failed = <-errs:
		default:
		}
	}
	if failed != nil {
		return 0, failed
	}
	elapsed := time.Since(begin)
	if len(bodies) == 1 {
		return 0, nil // the warm-up
	}
	if int(taken.Load()) != events {
		return 0, fmt.Errorf("POST %s: the gateway took %d of the %d events: a rate over events it refused would mean nothing", url, taken.Load(), events)
	}
	return float64(events) / elapsed.Seconds(), nil
}
