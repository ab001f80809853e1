package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/campaigns"
	"github.com/mcpulse/mcpulse/internal/safetext"
)

// DefaultCampaignsLintSchedule is the schedule of the campaign flag lint when a flag source is
// given and no schedule is.
const DefaultCampaignsLintSchedule = "@every 15m"

// CampaignsLint is the scheduled campaign flag lint: read the flags of Source (a file, or
// PostHog's feature-flags API), lint them (campaigns.Lint) and store the run
// (campaigns.Record: every payload version seen, one lint-run row per flag and variant, runs
// past Retention deleted). The alert rules campaign-cannot-recruit and campaign-lost-exclusion
// and the recruitment dashboard read what it stores.
type CampaignsLint struct {
	Source     campaigns.Source
	ClickHouse driver.Conn
	// Retention is how long lint runs are kept. Default: campaigns.DefaultRetention (30 days).
	Retention time.Duration
	// Getenv reads the personal API key's variable. Default: os.Getenv.
	Getenv func(string) string
	Logger *slog.Logger
	Now    func() time.Time
	// Timeout bounds one run, the API's pages included. Default: 2m.
	Timeout time.Duration
}

func (j *CampaignsLint) setDefaults() {
	if j.Getenv == nil {
		j.Getenv = os.Getenv
	}
	if j.Logger == nil {
		j.Logger = slog.New(slog.DiscardHandler)
	}
	if j.Now == nil {
		j.Now = time.Now
	}
	if j.Timeout == 0 {
		j.Timeout = 2 * time.Minute
	}
}

// RunOnce reads, lints and stores one run at j.Now(). Flags that cannot be read store nothing
// (a failed read says nothing about the campaigns) and return the error; so does a store
// failure.
func (j *CampaignsLint) RunOnce(ctx context.Context) (campaigns.Report, campaigns.RecordResult, error) {
	j.setDefaults()
	ctx, cancel := context.WithTimeout(ctx, j.Timeout)
	defer cancel()
	now := j.Now()
	flags, err := j.Source.Load(ctx, nil, j.Getenv)
	if err != nil {
		return campaigns.Report{}, campaigns.RecordResult{}, fmt.Errorf("campaign flags from %s: %w", safetext.Escape(j.Source.String()), err)
	}
	rep := campaigns.Lint(flags, j.Source.Options())
	res, err := campaigns.Record(context.WithoutCancel(ctx), j.ClickHouse, rep, flags, now, j.Retention)
	if err != nil {
		return rep, res, fmt.Errorf("store the campaign flag lint: %w", err)
	}
	return rep, res, nil
}

// lintAndLog runs RunOnce and logs the outcome: an error line when it failed, a warning naming
// each campaign that will not recruit or lacks its exclusion, and an info line with the counts.
func (j *CampaignsLint) lintAndLog() error {
	j.setDefaults()
	start := time.Now()
	rep, res, err := j.RunOnce(context.Background())
	if err != nil {
		j.Logger.Error("campaign flag lint failed", "err", err, "took", time.Since(start))
		return err
	}
	for _, f := range rep.Flags {
		if f.Flag != campaigns.RecruitmentFlag || !f.Active {
			continue
		}
		for _, v := range f.Variants {
			if !v.WillRecruit || !campaigns.ExclusionOK(v.Problems) {
				j.Logger.Warn("campaign flag lint: campaign in trouble", "campaign", safetext.Escape(v.CampaignID),
					"will_recruit", v.WillRecruit, "exclusion_ok", campaigns.ExclusionOK(v.Problems))
			}
		}
	}
	j.Logger.Info("campaign flag lint", "errors", rep.Errors, "warnings", rep.Warnings, "missing", rep.Missing,
		"new_payload_versions", res.NewVersions, "removed_variants", res.Removed, "expired_rows", res.Expired, "took", time.Since(start))
	return nil
}

// CampaignsLintOnce runs the campaign flag lint once (cfg.CampaignsLint; nil does nothing), with
// the scheduler's ClickHouse, logger, clock and timeout where the job sets none.
func CampaignsLintOnce(cfg SchedulerConfig) error {
	cfg.setDefaults()
	if cfg.CampaignsLint == nil {
		return nil
	}
	j := *cfg.CampaignsLint
	if j.ClickHouse == nil {
		j.ClickHouse = cfg.ClickHouse
	}
	if j.Logger == nil {
		j.Logger = cfg.Logger
	}
	if j.Now == nil {
		j.Now = cfg.Now
	}
	if j.Timeout == 0 {
		j.Timeout = cfg.Timeout
	}
	if j.Getenv == nil {
		j.Getenv = cfg.Getenv
	}
	return j.lintAndLog()
}
