package demo

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/campaigns"
)

// campaignFlags are PostHog feature-flags API pages of the demo's mcp-interview-recruitment
// flag, one campaign per variant (the corpus's campaign ids), in the order they are "edited":
// all three campaigns valid; one campaign's copy changed; one campaign's booking URL turned
// http and another's release condition lost the exclusion cohort.
//
//go:embed campaignflags/*.json
var campaignFlags embed.FS

// campaignLintRuns are the demo's lint runs: the file linted and how long before the corpus's
// end the run happened.
var campaignLintRuns = []struct {
	file   string
	before time.Duration
}{
	{"1-launch.json", 30 * time.Hour},
	{"1-launch.json", 22 * time.Hour},
	{"2-copy-change.json", 14 * time.Hour},
	{"2-copy-change.json", 6 * time.Hour},
	{"3-broken.json", 3 * time.Hour},
	{"3-broken.json", time.Hour},
}

// RecordCampaignLint stores the demo's campaign flag lint runs before end (campaigns.Lint with
// the exclusion cohort 641799, then campaigns.Record, as the scheduler's campaigns_lint job
// does), so the recruitment dashboard's campaign-lint and payload-changes panels have data and
// the alerts campaign-cannot-recruit (sql-editor-research) and campaign-lost-exclusion
// (mcp-exec-study) fire within a day of end. Only mcp-interview-recruitment is recorded: the
// report's note that mcp-intent-prompt is missing is dropped, so the runs leave that flag's
// stored versions alone. It returns how many runs it stored.
func RecordCampaignLint(ctx context.Context, ch driver.Conn, end time.Time) (int, error) {
	for i, r := range campaignLintRuns {
		data, err := campaignFlags.ReadFile("campaignflags/" + r.file)
		if err != nil {
			return i, err
		}
		flags, _, err := campaigns.DecodeFlags(bytes.NewReader(data))
		if err != nil {
			return i, fmt.Errorf("demo campaign flags %s: %w", r.file, err)
		}
		rep := campaigns.Lint(flags, campaigns.Options{ExclusionCohort: 641799})
		rep.Missing = slices.DeleteFunc(rep.Missing, func(k string) bool { return k != campaigns.RecruitmentFlag })
		if _, err := campaigns.Record(ctx, ch, rep, flags, end.Add(-r.before), 0); err != nil {
			return i, fmt.Errorf("demo campaign flag lint: %w", err)
		}
	}
	return len(campaignLintRuns), nil
}
