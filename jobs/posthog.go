package jobs

import (
	"log/slog"

	"github.com/mcpulse/mcpulse/forward"
)

// SchemaCheckEvent is the PostHog event a schema check's summary is sent as.
const SchemaCheckEvent = forward.SchemaCheckEvent

// PostHogSummaries forwards schema-check summaries to a PostHog project: a thin adapter over
// forward.PostHog (summary properties only, the run id as the event uuid, delivery failures
// counted through posthog-go's callback, Close flushes).
type PostHogSummaries struct {
	*forward.PostHog
}

// NewPostHogSummaries connects to the PostHog instance at host (e.g. https://us.i.posthog.com)
// with a project API key.
func NewPostHogSummaries(host, apiKey string, log *slog.Logger) (*PostHogSummaries, error) {
	p, err := forward.New(host, apiKey, log)
	if err != nil {
		return nil, err
	}
	return &PostHogSummaries{PostHog: p}, nil
}

// SchemaSummary returns a SchedulerConfig.SchemaSummary sending each run through p.
func SchemaSummary(p *forward.PostHog) func(Run) {
	return func(run Run) { p.SchemaCheck(SchemaCheckOf(run)) }
}

// SchemaCheckOf is the forwarder's view of a run.
func SchemaCheckOf(run Run) forward.SchemaCheck {
	return forward.SchemaCheck{RunID: run.ID, Server: run.Server, StartedAt: run.StartedAt, Duration: run.Duration,
		Err: run.Err, Report: run.Report, Source: run.Source, ServerVersion: run.ServerVersion}
}

// Send queues one run's summary.
func (p *PostHogSummaries) Send(run Run) { p.SchemaCheck(SchemaCheckOf(run)) }
