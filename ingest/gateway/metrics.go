package gateway

import "github.com/prometheus/client_golang/prometheus"

// metrics are the gateway's Prometheus metrics, on a registry of its own (so that several
// gateways, in tests, do not collide).
type metrics struct {
	reg         *prometheus.Registry
	requests    *prometheus.CounterVec   // by endpoint and status code
	duration    *prometheus.HistogramVec // by endpoint
	accepted    *prometheus.CounterVec   // events acknowledged by Kafka, by kind
	rejected    prometheus.Counter       // invalid events (answered in a 400's errors)
	unrouted    prometheus.Counter       // valid events of other names, acknowledged only
	duplicates  prometheus.Counter       // events repeating a uuid within their request
	unavailable prometheus.Counter       // events not acknowledged by Kafka in time (503)
	otlpSpans   *prometheus.CounterVec   // OTLP spans by outcome (otlp.Outcome)
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpulse_gateway_requests_total", Help: "HTTP requests by endpoint and status code.",
		}, []string{"endpoint", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mcpulse_gateway_request_duration_seconds", Help: "HTTP request latency by endpoint.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"endpoint"}),
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpulse_gateway_events_accepted_total", Help: "Events acknowledged by Kafka, by kind.",
		}, []string{"kind"}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpulse_gateway_events_rejected_total", Help: "Invalid events answered with a 400.",
		}),
		unrouted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpulse_gateway_events_unrouted_total", Help: "Valid events of other names ($pageview, ...) acknowledged (published to be counted per name, forwarded when configured).",
		}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpulse_gateway_events_duplicate_total", Help: "Events repeating a uuid within one request, published once.",
		}),
		unavailable: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpulse_gateway_events_unacknowledged_total", Help: "Events Kafka did not acknowledge in time (answered 503).",
		}),
		otlpSpans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpulse_gateway_otlp_spans_total",
			Help: "OTLP spans received on /v1/traces by outcome: mapped (an MCP tool call, tools/list or initialize, published), not_mcp and other_method (another MCP method, or a semantic-convention client span: dropped), rejected (malformed, or its event refused).",
		}, []string{"outcome"}),
	}
	m.reg.MustRegister(m.requests, m.duration, m.accepted, m.rejected, m.unrouted, m.duplicates, m.unavailable, m.otlpSpans,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}
