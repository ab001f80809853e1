package jobs

import (
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/posthog/posthog-go"
)

// SchemaCheckEvent is the PostHog event a schema check's summary is sent as.
const SchemaCheckEvent = "mcpulse schema check"

// PostHogSummaries forwards schema-check summaries to a PostHog project through posthog-go:
// summary properties only (posthog-go refuses oversized messages, so no raw schemas), the run
// id as the event uuid so a resent summary is stored once, delivery failures counted through
// posthog-go's callback. Close flushes what is queued.
type PostHogSummaries struct {
	client posthog.Client
	failed atomic.Int64
	log    *slog.Logger
}

// NewPostHogSummaries connects to the PostHog instance at host (e.g. https://us.i.posthog.com)
// with a project API key.
func NewPostHogSummaries(host, apiKey string, log *slog.Logger) (*PostHogSummaries, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &PostHogSummaries{log: log}
	client, err := posthog.NewWithConfig(apiKey, posthog.Config{Endpoint: host, Callback: p})
	if err != nil {
		return nil, fmt.Errorf("posthog: %w", err)
	}
	p.client = client
	return p, nil
}

// Send queues one run's summary.
func (p *PostHogSummaries) Send(run Run) {
	props := posthog.NewProperties().
		Set("server", run.Server).
		Set("run_id", run.ID).
		Set("duration_ms", run.Duration.Milliseconds()).
		Set("reached", run.Err == nil)
	if run.Err != nil {
		props.Set("error", run.Err.Error())
	}
	if r := run.Report; r != nil {
		props.Set("ok", r.OK()).
			Set("tools", r.Tools).
			Set("oversized", r.Oversized).
			Set("max_oversized", r.MaxOversized).
			Set("char_limit", r.CharLimit).
			Set("nested_description_coverage", r.NestedDescriptionCoverage).
			Set("min_nested_coverage", r.MinNestedCoverage).
			Set("full_nested_description_coverage", r.FullNestedDescriptionCoverage).
			Set("name_failures", r.NameFailures).
			Set("violations", r.Violations)
	}
	err := p.client.Enqueue(posthog.Capture{
		Uuid: run.ID, DistinctId: "mcpulse-schemacheck:" + run.Server, Event: SchemaCheckEvent,
		Timestamp: run.StartedAt, Properties: props,
	})
	if err != nil {
		p.failed.Add(1)
		p.log.Warn("posthog: summary not queued", "server", run.Server, "err", err)
	}
}

// Failed is how many summaries PostHog did not accept.
func (p *PostHogSummaries) Failed() int64 { return p.failed.Load() }

// Success implements posthog.Callback.
func (p *PostHogSummaries) Success(posthog.APIMessage) {}

// Failure implements posthog.Callback: the failure is counted and logged.
func (p *PostHogSummaries) Failure(_ posthog.APIMessage, err error) {
	p.failed.Add(1)
	p.log.Warn("posthog: summary not delivered", "err", err)
}

// Close flushes queued summaries and stops the client.
func (p *PostHogSummaries) Close() error { return p.client.Close() }
