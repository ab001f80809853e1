// Package gateway is mcpulse's HTTP ingest gateway: it speaks PostHog's capture API
// (POST /batch/, /capture/, /e/, /i/v0/e/) so an MCP server already sending analytics through a
// PostHog SDK adopts mcpulse by changing its host, and takes mcpulse envelopes on
// POST /v1/events, and OpenTelemetry traces on POST /v1/traces (OTLP/HTTP: the MCP spans become
// the same events, package ingest/otlp; see otlpTraces). Events are validated and published to
// Kafka with ingest.Publisher (the table of kinds, DESIGN.md §2, says where); valid events of
// names no kind has are published too, so the consumers count them per name, and are reported
// as unrouted (and forwarded, OnUnrouted).
//
// A request is answered only after Kafka acknowledged every event it enqueued: 200 when all
// events were accepted, 400 naming each bad event by index and field path (its valid events are
// still published and counted in "accepted"), 503 with Retry-After when Kafka did not
// acknowledge in time (nothing is claimed as accepted; a retry is harmless, the consumers
// deduplicate by uuid). A request whose body cannot be decoded (bad gzip, bad JSON, too large)
// publishes nothing.
package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/ingest"
)

// Gateway is the HTTP ingest gateway. Create it with New; it is safe for concurrent use.
type Gateway struct {
	cfg     Config
	pub     *ingest.Publisher
	log     *slog.Logger
	keys    [][32]byte // sha256 of each accepted API key, compared in constant time
	metrics *metrics
	handler http.Handler
}

// New validates cfg (after filling in defaults) and returns a Gateway publishing with pub.
func New(cfg Config, pub *ingest.Publisher) (*Gateway, error) {
	cfg.APIKeys = append([]string(nil), cfg.APIKeys...)
	cfg.Brokers = append([]string(nil), cfg.Brokers...)
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gateway configuration: %w", err)
	}
	if pub == nil {
		return nil, errors.New("gateway: a Publisher is required")
	}
	g := &Gateway{cfg: cfg, pub: pub, log: cfg.Logger, metrics: newMetrics()}
	for _, k := range cfg.APIKeys {
		g.keys = append(g.keys, sha256.Sum256([]byte(k)))
	}
	mux := http.NewServeMux()
	for _, p := range []string{"/batch/", "/capture/", "/e/", "/i/v0/e/"} {
		mux.Handle(p, g.ingestHandler(p, formPostHog))
		// PostHog SDKs are configured with a host and append the path; accept it without the
		// trailing slash too.
		mux.Handle(strings.TrimSuffix(p, "/"), g.ingestHandler(p, formPostHog))
	}
	mux.Handle("/v1/events", g.ingestHandler("/v1/events", formEnvelopes))
	mux.Handle(OTLPTracesPath, g.instrument(OTLPTracesPath, http.HandlerFunc(g.otlpTraces)))
	mux.Handle("/healthz", g.instrument("/healthz", http.HandlerFunc(g.healthz)))
	mux.Handle("/readyz", g.instrument("/readyz", http.HandlerFunc(g.readyz)))
	mux.Handle("/metrics", g.instrument("/metrics", promhttp.HandlerFor(g.metrics.reg, promhttp.HandlerOpts{})))
	g.handler = mux
	return g, nil
}

// Handler returns the gateway's HTTP handler (every endpoint).
func (g *Gateway) Handler() http.Handler { return g.handler }

// Registry returns the Prometheus registry behind /metrics.
func (g *Gateway) Registry() *prometheus.Registry { return g.metrics.reg }

// ListenAndServe listens on Config.Listen and serves until ctx ends, then stops accepting
// connections and drains in-flight requests (bounded by ShutdownTimeout).
func (g *Gateway) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", g.cfg.Listen)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	return g.Serve(ctx, ln)
}

// Serve is ListenAndServe on a listener of the caller's; it closes ln.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           g.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	g.log.Info("gateway: listening", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("gateway: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.ShutdownTimeout)
	defer cancel()
	g.log.Info("gateway: shutting down, draining in-flight requests")
	err := srv.Shutdown(sctx)
	<-errc
	if err != nil {
		return fmt.Errorf("gateway: draining in-flight requests: %w", err)
	}
	g.log.Info("gateway: stopped")
	return nil
}

func (g *Gateway) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}

// readyz answers 200 when a Kafka metadata request succeeds within ReadyTimeout.
func (g *Gateway) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), g.cfg.ReadyTimeout)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(g.cfg.Brokers...), Timeout: g.cfg.ReadyTimeout,
		Transport: &kafka.Transport{DialTimeout: g.cfg.ReadyTimeout, ClientID: "mcpulse-gateway"}}
	if _, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: ingest.ConsumedTopics}); err != nil {
		g.log.Warn("gateway: not ready: kafka metadata request failed", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "error": "kafka unreachable"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}

// statusRecorder remembers the status code for the request metrics.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (g *Gateway) instrument(endpoint string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if rec.code == 0 {
			rec.code = http.StatusOK
		}
		g.metrics.requests.WithLabelValues(endpoint, strconv.Itoa(rec.code)).Inc()
		g.metrics.duration.WithLabelValues(endpoint).Observe(time.Since(start).Seconds())
	})
}

// Response is the JSON body of an ingest endpoint's answer.
type Response struct {
	// Status is "ok" (200), "invalid" (400: some events or the request were bad),
	// "unauthorized" (401), "unavailable" (503) or "error" (other failures).
	Status string `json:"status"`
	// Accepted is how many events were acknowledged by Kafka (0 on 503).
	Accepted int `json:"accepted"`
	// Unrouted is how many valid events of other names ($pageview, ...) were acknowledged:
	// published to be counted per name (not in Accepted), and forwarded when configured.
	Unrouted int `json:"unrouted"`
	// Duplicates is how many events repeated an earlier uuid of the same request.
	Duplicates int `json:"duplicates"`
	// Errors lists the bad events by index in the request (at most MaxReportedErrors).
	Errors []EventError `json:"errors,omitempty"`
	// ErrorsOmitted is how many more bad events there were than Errors lists.
	ErrorsOmitted int `json:"errors_omitted,omitempty"`
	// Error is a request-level failure.
	Error string `json:"error,omitempty"`
}

// EventError is one bad event of a request.
type EventError struct {
	Index    int       `json:"index"`
	Problems []Problem `json:"problems"`
}

// Problem is one problem with an event: a field path ("" for the whole event) and what is
// wrong.
type Problem struct {
	Path    string `json:"path"`
	Problem string `json:"problem"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (g *Gateway) ingestHandler(endpoint string, form bodyForm) http.Handler {
	return g.instrument(endpoint, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeJSON(w, http.StatusMethodNotAllowed, Response{Status: "error", Error: "method not allowed: POST only"})
			return
		}
		code, resp, unrouted := g.ingest(r, form)
		if code == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(g.cfg.RetryAfter.Seconds()))))
		}
		writeJSON(w, code, resp)
		if len(unrouted) > 0 && g.cfg.OnUnrouted != nil {
			g.cfg.OnUnrouted(unrouted)
		}
	}))
}

// ingest handles one ingest request and returns the status and body of the answer, and the
// acknowledged unrouted events when Config.OnUnrouted is set.
func (g *Gateway) ingest(r *http.Request, form bodyForm) (int, Response, []ingest.Envelope) {
	code, resp, res := g.ingestRequest(r, form)
	if code != http.StatusOK && code != http.StatusBadRequest {
		return code, resp, nil
	}
	return code, resp, res.unroutedEvents
}

func (g *Gateway) ingestRequest(r *http.Request, form bodyForm) (int, Response, processed) {
	now := g.cfg.Now()
	unauthorized := func(msg string) (int, Response, processed) {
		return http.StatusUnauthorized, Response{Status: "unauthorized", Error: msg}, processed{}
	}
	fail := func(err error) (int, Response, processed) {
		var he *httpError
		if !errors.As(err, &he) {
			he = badRequest("%v", err)
		}
		status := "invalid"
		if he.Status == http.StatusRequestEntityTooLarge || he.Status == http.StatusUnsupportedMediaType {
			status = "error"
		}
		return he.Status, Response{Status: status, Error: he.Msg}, processed{}
	}
	// The query first, strictly: a parameter dropped by the parser could be the api_key.
	query, qerr := parseQuery(r.URL.RawQuery, "URL query")
	if qerr != nil {
		return fail(qerr)
	}
	// The keys outside the body first: a wrong one is refused before the body is even read.
	keys := g.newKeyCheck()
	if msg := keys.outsideBody(r, query); msg != "" {
		return unauthorized(msg)
	}
	if msg := keys.verdict(form); keys.unknown || (form == formEnvelopes && msg != "") {
		return unauthorized(msg)
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, g.cfg.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return http.StatusRequestEntityTooLarge, Response{Status: "error", Error: fmt.Sprintf("body exceeds %d bytes", g.cfg.MaxBodyBytes)}, processed{}
		}
		return http.StatusBadRequest, Response{Status: "error", Error: "reading body failed"}, processed{}
	}
	m := meta{
		ContentEncoding: r.Header.Get("Content-Encoding"),
		ContentType:     r.Header.Get("Content-Type"),
		Compression:     query.Get("compression"),
	}
	if form == formPostHog {
		// The body's keys before decoding it: those at the head of a gzip body before inflating
		// the rest, then every key of the JSON text in one pass that stops at an unknown one.
		if gz, err := gzipped(m, body); err == nil && gz {
			keys.inBody(inflatedHead(body, headBytes))
			if keys.unknown {
				return unauthorized(keys.verdict(form))
			}
		}
	}
	data, err := inflate(form, m, body, g.cfg.MaxDecompressedBytes)
	if err != nil {
		return fail(err)
	}
	if form == formPostHog {
		complete := keys.inBody(data)
		if keys.unknown {
			return unauthorized(keys.verdict(form))
		}
		if !complete {
			// Malformed JSON: parsePayload says where; the keys after the fault were not read,
			// so nothing of such a body is accepted.
			if _, err := parsePayload(form, data); err != nil {
				return fail(err)
			}
			return fail(badRequest("bad JSON: the body could not be read to its end"))
		}
	}
	if msg := keys.verdict(form); msg != "" {
		return unauthorized(msg)
	}
	p, err := parsePayload(form, data)
	if err != nil {
		return fail(err)
	}
	if len(p.Events) > g.cfg.MaxEvents {
		return http.StatusRequestEntityTooLarge, Response{Status: "error",
			Error: fmt.Sprintf("%d events in one request, at most %d: send smaller batches", len(p.Events), g.cfg.MaxEvents)}, processed{}
	}
	sentAt := p.SentAt
	if q := query.Get("_"); isNull(sentAt) && q != "" && form == formPostHog {
		sentAt = mustJSON(q) // posthog-js: milliseconds since the epoch when the request was sent
	}
	res := g.process(p, form, newRequestClock(now, sentAt, g.cfg.TransitAllowance))
	return g.publish(r, res)
}

// publish publishes a request's processed events and answers for them: 200, 400 naming the
// bad events (the valid ones published), or 503 when Kafka did not acknowledge in time.
func (g *Gateway) publish(r *http.Request, res processed) (int, Response, processed) {
	if len(res.events) > 0 {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), g.cfg.KafkaTimeout)
		err := g.pub.Publish(ctx, res.events...)
		cancel()
		if err != nil {
			// An event Kafka refuses for what it is (too large) is that event's error, never a
			// reason to retry; any other failure is a 503 the client retries (events already
			// acknowledged are deduplicated by uuid then).
			var pe *ingest.PublishError
			if !errors.As(err, &pe) {
				pe = &ingest.PublishError{Total: len(res.events)}
				for i := range res.events {
					pe.Failed = append(pe.Failed, ingest.MessageError{Index: i, Err: err})
				}
			}
			failed := map[int]bool{}
			retriable := 0
			for _, f := range pe.Failed {
				failed[f.Index] = true
				if !f.Permanent {
					retriable++
					continue
				}
				res.errors = append(res.errors, EventError{Index: res.requestIndex[f.Index], Problems: []Problem{{Problem: f.Err.Error()}}})
			}
			kept := res.events[:0]
			for i, ev := range res.events {
				if !failed[i] {
					kept = append(kept, ev)
				}
			}
			res.events = kept
			if retriable > 0 {
				g.log.Warn("gateway: kafka did not acknowledge events", "events", retriable, "err", err)
				g.metrics.unavailable.Add(float64(retriable))
				return http.StatusServiceUnavailable, Response{Status: "unavailable", Accepted: len(res.events),
					Error: "kafka did not acknowledge the events in time; retry later"}, processed{}
			}
			sort.Slice(res.errors, func(i, j int) bool { return res.errors[i].Index < res.errors[j].Index })
		}
	}
	resp := Response{Unrouted: res.unrouted, Duplicates: res.duplicates, Errors: res.errors}
	if len(resp.Errors) > MaxReportedErrors {
		resp.ErrorsOmitted = len(resp.Errors) - MaxReportedErrors
		resp.Errors = resp.Errors[:MaxReportedErrors]
	}
	others := 0
	for _, ev := range res.events {
		if ev.Kind == ingest.KindOther {
			others++ // counted as unrouted
			continue
		}
		g.metrics.accepted.WithLabelValues(ev.Kind.String()).Inc()
	}
	g.metrics.unrouted.Add(float64(res.unrouted))
	g.metrics.duplicates.Add(float64(res.duplicates))
	g.metrics.rejected.Add(float64(len(res.errors)))
	resp.Accepted = len(res.events) - others
	if len(res.errors) > 0 {
		resp.Status = "invalid"
		return http.StatusBadRequest, resp, res
	}
	resp.Status = "ok"
	return http.StatusOK, resp, res
}

// processed is a request's events sorted out.
type processed struct {
	events     []*ingest.Event // valid events, first of each uuid, in order (other names too)
	unrouted   int
	duplicates int
	// unroutedEvents are the unrouted events, collected only when Config.OnUnrouted is set.
	unroutedEvents []ingest.Envelope
	errors         []EventError
	// requestIndex[i] is events[i]'s index in the request.
	requestIndex []int
}

// uuidNamespace derives the uuid of an event sent without one (posthog-go does not fill it):
// a name-based (SHA-1, version 5) UUID over the event as sent, so a retried request gets the
// same uuid and is deduplicated.
var uuidNamespace = uuid.MustParse("6f1c8a52-4d3e-4c53-9b7e-6d63b0d4b9a1")

// process normalizes, dates and validates every event of a request.
func (g *Gateway) process(p *payload, form bodyForm, clk requestClock) processed {
	var res processed
	seen := map[uuid.UUID]bool{}
	for i, raw := range p.Events {
		ev, env, problems, unrouted := g.event(raw, form, clk, i)
		if len(problems) > 0 {
			res.errors = append(res.errors, EventError{Index: i, Problems: problems})
			continue
		}
		if unrouted {
			// Another name: forwarded when configured, and published too, so that the
			// consumers count it per name (ingest.KindOther); reported as unrouted, not accepted.
			res.unrouted++
			if g.cfg.OnUnrouted != nil {
				res.unroutedEvents = append(res.unroutedEvents, env)
			}
		}
		switch {
		case seen[ev.UUID]:
			if !unrouted {
				res.duplicates++
			}
		default:
			seen[ev.UUID] = true
			res.events = append(res.events, ev)
			res.requestIndex = append(res.requestIndex, i)
		}
	}
	return res
}

// event normalizes and validates one event (index is its place in the request). It returns the
// event (a routed kind), or the problems, or unrouted=true for a valid event of another name
// with its normalized envelope.
func (g *Gateway) event(raw json.RawMessage, form bodyForm, clk requestClock, index int) (*ingest.Event, ingest.Envelope, []Problem, bool) {
	ev, problems, unrouted, data := g.parseEvent(raw, form, clk, index)
	var env ingest.Envelope
	if unrouted && g.cfg.OnUnrouted != nil {
		// Parse accepted every top-level field's type, so this decodes.
		_ = json.Unmarshal(data, &env)
	}
	return ev, env, problems, unrouted
}

func (g *Gateway) parseEvent(raw json.RawMessage, form bodyForm, clk requestClock, index int) (*ingest.Event, []Problem, bool, []byte) {
	if form == formOTLP {
		return g.checkEvent(raw, clk)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		return nil, []Problem{{Path: "", Problem: "bad JSON: an event must be a JSON object"}}, false, nil
	}
	if form == formPostHog {
		props := normalizePostHog(top)
		if absentUUID(top["uuid"]) {
			// Derived from the event as sent (before the gateway adds anything), at the time it
			// was sent or, without one, received: a retried request gets the same uuid, separate
			// requests of a timestamp-less event stay separate, and so do such events within one
			// request (their index is part of it).
			at, idx := top["timestamp"], -1
			if isNull(at) {
				at, idx = mustJSON(clk.now.UTC().Format(time.RFC3339Nano)), index
			}
			top["uuid"] = mustJSON(derivedUUID(top["event"], top["distinct_id"], at, top["properties"], idx).String())
		}
		if props != nil {
			if problems := applyClock(top, props, clk); len(problems) > 0 {
				return nil, problems, false, nil
			}
			top["properties"] = mustJSON(props)
		}
	}
	data, err := json.Marshal(top)
	if err != nil {
		return nil, []Problem{{Path: "", Problem: "bad JSON: " + err.Error()}}, false, nil
	}
	return g.checkEvent(data, clk)
}

// checkEvent parses and validates an event's normalized JSON.
func (g *Gateway) checkEvent(data []byte, clk requestClock) (*ingest.Event, []Problem, bool, []byte) {
	ev, err := ingest.Parse(data)
	if err == nil {
		err = ingest.CheckClock(ev, clk.now)
	}
	var verr *ingest.ValidationError
	switch {
	case err == nil:
		return ev, nil, ev.Kind == ingest.KindOther, data
	case errors.As(err, &verr):
		problems := make([]Problem, len(verr.Problems))
		for i, p := range verr.Problems {
			problems[i] = Problem{Path: p.Path, Problem: p.Problem}
		}
		return nil, problems, false, data
	default:
		return nil, []Problem{{Path: "", Problem: err.Error()}}, false, data
	}
}

// absentUUID reports whether an event's uuid counts as absent: missing, null or "" (posthog-go
// sends "uuid":"" unless the caller sets one).
func absentUUID(raw json.RawMessage) bool {
	return isNull(raw) || string(raw) == `""`
}

// normalizePostHog maps what PostHog SDKs send onto the envelope: distinct_id from properties
// when absent at the top (posthog-js), an absent properties object as {}, and the project key
// (properties.token, api_key) removed so that it is never stored, and so are properties named
// like the gateway's own (PropReceivedAt, ...). It returns the properties
// (also set in top), or nil when properties is not an object (a type problem Parse reports).
func normalizePostHog(top map[string]json.RawMessage) map[string]json.RawMessage {
	delete(top, "api_key")
	props := map[string]json.RawMessage{}
	if raw, ok := top["properties"]; ok && !isNull(raw) {
		if json.Unmarshal(raw, &props) != nil {
			return nil
		}
	}
	if isNull(top["distinct_id"]) {
		if d, ok := props["distinct_id"]; ok && !isNull(d) {
			top["distinct_id"] = d
		} else if d, ok := props["$distinct_id"]; ok && !isNull(d) {
			top["distinct_id"] = d
		}
	}
	delete(props, "token")
	// posthog-go sends an identify's person properties as top-level $set (and $set_once); like
	// PostHog's capture, the gateway moves them into properties, where the identify kind
	// reads them (properties sent there win).
	for _, name := range []string{"$set", "$set_once"} {
		if v, ok := top[name]; ok {
			if _, has := props[name]; !has && !isNull(v) {
				props[name] = v
			}
			delete(top, name)
		}
	}
	// The gateway's own clock properties mean "the gateway re-dated this event": a client's
	// copy of one would pass for the gateway's word.
	for _, name := range gatewayProperties {
		delete(props, name)
	}
	top["properties"] = mustJSON(props)
	return props
}

// DeriveUUID is the uuid the gateway gives an event sent without one: a version 5 uuid over
// its event, distinct_id, timestamp and properties (an empty field counts as absent). The
// PostHog forwarder uses it for an unrouted event without a valid uuid.
func DeriveUUID(env *ingest.Envelope) uuid.UUID {
	top := map[string]json.RawMessage{}
	for name, v := range map[string]string{"event": env.Event, "distinct_id": env.DistinctID, "timestamp": env.Timestamp} {
		if v != "" {
			top[name] = mustJSON(v)
		}
	}
	if env.Properties != nil {
		top["properties"] = mustJSON(env.Properties)
	}
	return derivedUUID(top["event"], top["distinct_id"], top["timestamp"], top["properties"], -1)
}

// derivedUUID is the version 5 uuid over an event's name, distinct_id, time and properties (raw
// JSON) and, when index >= 0, its index in the request.
func derivedUUID(event, distinctID, at, properties json.RawMessage, index int) uuid.UUID {
	fields := map[string]json.RawMessage{"event": event, "distinct_id": distinctID, "timestamp": at, "properties": properties}
	if index >= 0 {
		fields["index"] = mustJSON(index)
	}
	data, _ := json.Marshal(fields)
	return uuid.NewSHA1(uuidNamespace, data)
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

func mustJSON(v any) json.RawMessage {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}
