// Package forward sends mcpulse's derived events to a PostHog project through posthog-go:
// suppression resets, schema-check summaries and, optionally, the events the
// gateway acknowledges without routing them.
//
// Every event carries a deterministic, valid uuid (the audit event's, the run's, the forwarded
// event's, or a name-based v5 uuid of the event), so a resent event is stored once by PostHog.
// Derived events carry summary properties only: posthog-go refuses messages over 500 kB, and
// raw schemas or previous suppression records have no business in an analytics project.
// Delivery failures are counted through posthog-go's Callback; Close flushes the queue.
package forward

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/posthog/posthog-go"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/ingest/gateway"
	"github.com/mcpulse/mcpulse/schemacheck"
)

// Event names of the derived events.
const (
	// SuppressionResetEvent is the event an ops suppression reset is sent as.
	SuppressionResetEvent = "mcpulse suppression reset"
	// SchemaCheckEvent is the event a schema check's summary is sent as.
	SchemaCheckEvent = "mcpulse schema check"
)

// maxViolations caps the violations a schema-check summary lists (the count is always sent).
const maxViolations = 20

// uuidNamespace derives the uuid of a derived event that has no valid one of its own.
var uuidNamespace = uuid.MustParse("b1f3a4d6-2c57-4e0e-8f59-3c0a6f1d92e4")

// PostHog wraps one posthog-go client. It is safe for concurrent use.
type PostHog struct {
	client posthog.Client
	log    *slog.Logger
	queued atomic.Int64
	failed atomic.Int64
	closed atomic.Bool
}

// New connects to the PostHog instance at host (e.g. https://us.i.posthog.com, or an mcpulse
// gateway's URL) with a project API key.
func New(host, apiKey string, log *slog.Logger) (*PostHog, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if strings.TrimSpace(host) == "" {
		return nil, errors.New("posthog: a host is required")
	}
	if apiKey == "" {
		return nil, errors.New("posthog: an API key is required")
	}
	p := &PostHog{log: log}
	// Bounded connects and responses, so that a hanging host cannot hold Close forever (a
	// failing send gives up as soon as the client is closed).
	transport := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: 10 * time.Second,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
	}
	client, err := posthog.NewWithConfig(apiKey, posthog.Config{
		Endpoint:  strings.TrimRight(host, "/"),
		Callback:  callback{p},
		Transport: transport,
		Logger:    logger{log},
	})
	if err != nil {
		return nil, fmt.Errorf("posthog: %w", err)
	}
	p.client = client
	return p, nil
}

// Failed is how many events were not queued or not delivered (counted through posthog-go's
// callback; complete once Close returned).
func (p *PostHog) Failed() int64 { return p.failed.Load() }

// Queued is how many events were handed to posthog-go.
func (p *PostHog) Queued() int64 { return p.queued.Load() }

// Close flushes the queued events and stops the client. A second Close is a no-op.
func (p *PostHog) Close() error {
	if !p.closed.CompareAndSwap(false, true) {
		return nil
	}
	return p.client.Close()
}

func (p *PostHog) enqueue(c posthog.Capture) {
	if p.closed.Load() {
		p.failed.Add(1)
		p.log.Warn("posthog: event dropped, the forwarder is closed", "event", c.Event)
		return
	}
	if err := p.client.Enqueue(c); err != nil {
		p.failed.Add(1)
		p.log.Warn("posthog: event not queued", "event", c.Event, "uuid", c.Uuid, "err", err)
		return
	}
	p.queued.Add(1)
}

// validUUID returns s in canonical form when it is a non-nil RFC 4122 uuid.
func validUUID(s string) (string, bool) {
	id, err := uuid.Parse(s)
	if err != nil || id == uuid.Nil || len(s) != 36 {
		return "", false
	}
	return id.String(), true
}

// derived is a v5 uuid over the parts, for derived events without a valid uuid of their own.
func derived(parts ...string) string {
	data, _ := json.Marshal(parts)
	return uuid.NewSHA1(uuidNamespace, data).String()
}

// SuppressionReset sends an ops suppression reset: identity hash, actor, reason and how many
// Redis keys were deleted, and whether a previous record existed — never its content. The
// distinct_id is the person's (when the operator gave it) or "identity:"+hash; the uuid is the
// audit event's, so a replayed audit event is stored once.
func (p *PostHog) SuppressionReset(a *ingest.AuditEvent) {
	if a == nil || a.Action != ingest.AuditActionReset {
		return
	}
	distinct := a.DistinctID
	if distinct == "" {
		distinct = "identity:" + a.IdentityHash
	}
	id, ok := validUUID(a.UUID)
	if !ok {
		id = derived(SuppressionResetEvent, a.IdentityHash, a.At.UTC().Format(time.RFC3339Nano))
	}
	prev := "none"
	if r := strings.TrimSpace(string(a.PreviousRecord)); r != "" && r != "null" {
		prev = "present"
	}
	props := posthog.NewProperties().
		Set("identity_hash", a.IdentityHash).
		Set("actor", a.Actor).
		Set("reason", a.Reason).
		Set("deleted_keys", len(a.DeletedKeys)).
		Set("previous_record", prev)
	if a.InstanceURL != "" {
		props.Set("instance_url", a.InstanceURL)
	}
	p.enqueue(posthog.Capture{Uuid: id, DistinctId: distinct, Event: SuppressionResetEvent, Timestamp: a.At.UTC(), Properties: props})
}

// SchemaCheck is one schema check's outcome, as SchemaCheck sends it.
type SchemaCheck struct {
	RunID     string // the run's uuid: the event's uuid
	Server    string
	StartedAt time.Time
	Duration  time.Duration
	Err       error               // the server could not be checked
	Report    *schemacheck.Report // nil when Err is set; only its figures are sent
	// Source is "server" (listed) or "traffic" (snapshots seen in traffic); ServerVersion is
	// the version a traffic run checked. Sent when set.
	Source        string
	ServerVersion string
}

// SchemaCheck sends a schema check's summary figures (no schemas, no per-tool results) with
// the run id as the uuid, under distinct_id "mcpulse-schemacheck:"+server.
func (p *PostHog) SchemaCheck(s SchemaCheck) {
	id, ok := validUUID(s.RunID)
	if !ok {
		id = derived(SchemaCheckEvent, s.Server, s.RunID, s.StartedAt.UTC().Format(time.RFC3339Nano))
	}
	props := posthog.NewProperties().
		Set("server", s.Server).
		Set("run_id", id).
		Set("duration_ms", s.Duration.Milliseconds()).
		Set("reached", s.Err == nil)
	if s.Source != "" {
		props.Set("source", s.Source)
	}
	if s.Source == "traffic" {
		props.Set("server_version", s.ServerVersion)
	}
	if s.Err != nil {
		props.Set("error", truncate(s.Err.Error(), 500))
	}
	if r := s.Report; r != nil {
		violations := r.Violations
		if violations == nil {
			violations = []string{}
		}
		if len(violations) > maxViolations {
			violations = violations[:maxViolations]
		}
		capped := make([]string, len(violations))
		for i, v := range violations {
			capped[i] = truncate(v, 300)
		}
		props.Set("ok", r.OK()).
			Set("tools", r.Tools).
			Set("oversized", r.Oversized).
			Set("max_oversized", r.MaxOversized).
			Set("char_limit", r.CharLimit).
			Set("nested_description_coverage", r.NestedDescriptionCoverage).
			Set("min_nested_coverage", r.MinNestedCoverage).
			Set("full_nested_description_coverage", r.FullNestedDescriptionCoverage).
			Set("name_failures", r.NameFailures).
			Set("name_rule", string(r.NameRule)).
			Set("truncated_tools", r.TruncatedTools).
			Set("violation_count", len(r.Violations)).
			Set("violations", capped)
	}
	p.enqueue(posthog.Capture{Uuid: id, DistinctId: "mcpulse-schemacheck:" + s.Server, Event: SchemaCheckEvent,
		Timestamp: s.StartedAt.UTC(), Properties: props})
}

// Unhandled forwards events the gateway acknowledged without routing them, unchanged: event
// name, distinct_id, timestamp and properties (posthog-go adds $lib and $lib_version when the
// event has none). The uuid is kept when valid, else derived as the gateway derives one
// (gateway.DeriveUUID). Suitable as gateway.Config.OnUnrouted.
func (p *PostHog) Unhandled(events ...ingest.Envelope) {
	for i := range events {
		env := &events[i]
		id, ok := validUUID(env.UUID)
		if !ok {
			id = gateway.DeriveUUID(env).String()
		}
		var ts time.Time
		if env.Timestamp != "" {
			if t, err := time.Parse(time.RFC3339Nano, env.Timestamp); err == nil {
				ts = t.UTC()
			}
		}
		props := make(posthog.Properties, len(env.Properties))
		for k, v := range env.Properties {
			props[k] = v // json.RawMessage: sent as is
		}
		p.enqueue(posthog.Capture{Uuid: id, DistinctId: env.DistinctID, Event: env.Event, Timestamp: ts, Properties: props})
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// callback counts posthog-go's delivery outcomes.
type callback struct{ p *PostHog }

func (callback) Success(posthog.APIMessage) {}

func (c callback) Failure(m posthog.APIMessage, err error) {
	c.p.failed.Add(1)
	attrs := []any{"err", err}
	if cm, ok := m.(posthog.CaptureInApi); ok {
		attrs = append(attrs, "event", cm.Event, "uuid", cm.Uuid)
	}
	c.p.log.Warn("posthog: event not delivered", attrs...)
}

// logger routes posthog-go's own logs to slog (its default writes to stderr).
type logger struct{ log *slog.Logger }

func (l logger) Debugf(format string, args ...any) {
	l.log.Debug("posthog-go: " + fmt.Sprintf(format, args...))
}
func (l logger) Logf(format string, args ...any) {
	l.log.Debug("posthog-go: " + fmt.Sprintf(format, args...))
}
func (l logger) Warnf(format string, args ...any) {
	l.log.Warn("posthog-go: " + fmt.Sprintf(format, args...))
}
func (l logger) Errorf(format string, args ...any) {
	l.log.Warn("posthog-go: " + fmt.Sprintf(format, args...))
}
