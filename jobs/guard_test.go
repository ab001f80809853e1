package jobs

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/robfig/cron/v3"

	"github.com/mcpulse/mcpulse/campaigns"
	"github.com/mcpulse/mcpulse/schemacheck"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// evaluations counts alert evaluations (the job body; the evaluator itself is tested in
// dashboards/alerts).
type evaluations struct{ n atomic.Int64 }

func (e *evaluations) EvaluateAndLog(context.Context, time.Time) error { e.n.Add(1); return nil }

// Every job the scheduler runs (reconcile, contact audit, alerts, schema check, campaign flag
// lint) runs once per period across scheduler replicas sharing a Redis: two replicas firing the
// same tick run each job once, a second tick in the same period runs nothing, and the next
// period runs each once again.
func TestEveryJobRunsOncePerPeriodAcrossReplicas(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	unreachable := "http://" + closed.Addr().String() + "/mcp"
	closed.Close()

	var clock atomic.Int64
	clock.Store(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).UnixMilli())
	now := func() time.Time { return time.UnixMilli(clock.Load()) }
	type replica struct {
		c   *cron.Cron
		reg *prometheus.Registry
	}
	var replicas []replica
	alerts := &evaluations{}
	for range 2 {
		reg := prometheus.NewRegistry()
		m, err := NewJobMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewScheduler(SchedulerConfig{Redis: e.Redis, ClickHouse: e.ClickHouse, Now: now, Metrics: m,
			ReconcileSchedule: "@every 15m", ContactAuditSchedule: "@every 15m",
			AlertSchedule: "@every 15m", Alerts: alerts,
			SchemaServers:         []schemacheck.ServerConfig{{Name: "replicated", URL: unreachable, Schedule: "@every 15m"}},
			CampaignsLintSchedule: "@every 15m",
			CampaignsLint: &CampaignsLint{Source: campaigns.Source{
				File: filepath.Join("..", "campaigns", "testdata", "valid_api.json"), ExclusionCohort: 641799}},
			Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, replica{c, reg})
	}
	jobs := []string{JobReconcile, JobContactAudit, JobAlerts, JobSchemaCheck, JobCampaignsLint}
	tick := func() {
		var wg sync.WaitGroup
		for _, r := range replicas {
			for _, entry := range r.c.Entries() {
				wg.Go(entry.WrappedJob.Run)
			}
		}
		wg.Wait()
	}
	runs := func(job, outcome string) (n float64) {
		for _, r := range replicas {
			n += series(t, r.reg, "mcpulse_job_runs_total")["job="+job+",outcome="+outcome+","]
		}
		return n
	}
	ran := func(job string) (ran, skipped float64) {
		return runs(job, OutcomeOK) + runs(job, OutcomeFailed) + runs(job, OutcomePanicked), runs(job, OutcomeSkipped)
	}
	for _, step := range []struct {
		name         string
		advance      time.Duration
		ran, skipped float64 // totals so far, per job
	}{
		{"both replicas fire the same tick", 0, 1, 1},
		{"a second tick in the same period", 5 * time.Minute, 1, 3},
		{"the next period", 15 * time.Minute, 2, 4},
	} {
		clock.Add(step.advance.Milliseconds())
		tick()
		for _, job := range jobs {
			if r, s := ran(job); r != step.ran || s != step.skipped {
				t.Errorf("%s: %s ran %v times and was skipped %v times, want %v and %v", step.name, job, r, s, step.ran, step.skipped)
			}
		}
	}
	if n := alerts.n.Load(); n != 2 {
		t.Errorf("the alert rules were evaluated %d times, want 2", n)
	}
	if got := runs(JobReconcile, OutcomeOK) + runs(JobContactAudit, OutcomeOK); got != 4 {
		t.Errorf("reconcile and the contact audit succeeded %v times, want 4 (the runs are real, not only counted)", got)
	}
	var lintRuns uint64
	if err := e.ClickHouse.QueryRow(context.Background(), "SELECT uniqExact(run_at) FROM mcpulse.campaign_lint_runs").Scan(&lintRuns); err != nil {
		t.Fatal(err)
	}
	if lintRuns != 2 || runs(JobCampaignsLint, OutcomeOK) != 2 {
		t.Errorf("the campaign flag lint stored %d runs and succeeded %v times, want 2 and 2", lintRuns, runs(JobCampaignsLint, OutcomeOK))
	}
}
