package jobs

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/campaigns"
	"github.com/mcpulse/mcpulse/campaigns/campaignstest"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// The scheduled lint reads PostHog's feature-flags API with the key from its variable, stores
// the run and logs a campaign that cannot recruit; a source that cannot be read (a rejected
// key) fails the run and stores nothing.
func TestCampaignsLintStoresRunsFromTheAPI(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	srv := campaignstest.NewServer(t, filepath.Join("..", "campaigns", "testdata", "api"), "2", "phx_good")
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	var logs bytes.Buffer
	env := map[string]string{"TEAM_KEY": "phx_good"}
	job := &CampaignsLint{
		Source:     campaigns.Source{ProjectID: "2", Host: srv.URL, APIKeyEnv: "TEAM_KEY", ExclusionCohort: 641799},
		ClickHouse: e.ClickHouse, Getenv: func(k string) string { return env[k] },
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Now: func() time.Time { return at },
	}
	if err := job.lintAndLog(); err != nil {
		t.Fatal(err)
	}
	var runs, variants uint64
	if err := e.ClickHouse.QueryRow(ctx, `SELECT count(), countIf(variant != '') FROM mcpulse.campaign_lint_runs WHERE run_at = ?`, at).Scan(&runs, &variants); err != nil {
		t.Fatal(err)
	}
	rep, _, _ := (&CampaignsLint{Source: job.Source, ClickHouse: e.ClickHouse, Getenv: job.Getenv, Now: func() time.Time { return at.Add(time.Hour) }}).RunOnce(ctx)
	want := uint64(len(rep.Flags) + len(rep.Missing))
	for _, f := range rep.Flags {
		want += uint64(len(f.Variants))
	}
	if runs == 0 || runs != want || variants == 0 {
		t.Errorf("%d lint-run rows (%d variants) stored at %s, want %d", runs, variants, at, want)
	}
	if !strings.Contains(logs.String(), "campaign flag lint") {
		t.Errorf("no log line: %s", logs.String())
	}

	env["TEAM_KEY"] = "phx_revoked"
	job.Now = func() time.Time { return at.Add(2 * time.Hour) }
	if err := job.lintAndLog(); err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "TEAM_KEY") {
		t.Errorf("a rejected key: %v", err)
	}
	if err := e.ClickHouse.QueryRow(ctx, `SELECT count() FROM mcpulse.campaign_lint_runs WHERE run_at = ?`, at.Add(2*time.Hour)).Scan(&runs); err != nil {
		t.Fatal(err)
	}
	if runs != 0 {
		t.Errorf("a failed read stored %d rows", runs)
	}
}
