package jobs

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Job names, the job label of JobMetrics.
const (
	JobReconcile    = "reconcile"
	JobContactAudit = "contact_audit"
	JobSchemaCheck  = "schema_check"
	JobAlerts       = "alerts"
	JobSeal         = "seal"
	// JobCampaignsLint is the campaign flag lint (CampaignsLint).
	JobCampaignsLint = "campaigns_lint"
)

// Run outcomes, the outcome label of mcpulse_job_runs_total.
const (
	OutcomeOK       = "ok"       // the job did its work
	OutcomeFailed   = "failed"   // it returned an error (logged)
	OutcomePanicked = "panicked" // it panicked (cron.Recover logs it; the scheduler lives on)
	OutcomeSkipped  = "skipped"  // another scheduler replica had this period's run
)

// errSkipped is what a job returns when it left the run to another replica.
var errSkipped = errors.New("run left to another replica")

// JobMetrics are the scheduler's Prometheus metrics:
//
//	mcpulse_job_runs_total{job,outcome}              counter    runs by job and OutcomeOK/Failed/Panicked/Skipped
//	mcpulse_job_duration_seconds{job}                histogram  time of each run that was not skipped
//	mcpulse_job_last_success_timestamp_seconds{job}  gauge      Unix time of the last OutcomeOK run
//
// A nil *JobMetrics records nothing.
type JobMetrics struct {
	runs        *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	lastSuccess *prometheus.GaugeVec
}

// NewJobMetrics registers the job metrics on reg; it fails when they are already there.
func NewJobMetrics(reg prometheus.Registerer) (*JobMetrics, error) {
	m := &JobMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpulse_job_runs_total", Help: "Scheduled job runs by job and outcome (ok, failed, panicked, skipped).",
		}, []string{"job", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mcpulse_job_duration_seconds", Help: "Duration of scheduled job runs that were not skipped.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16), // 10ms .. ~5.5min
		}, []string{"job"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcpulse_job_last_success_timestamp_seconds", Help: "Unix time at which each job last ran successfully.",
		}, []string{"job"}),
	}
	for _, c := range []prometheus.Collector{m.runs, m.duration, m.lastSuccess} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("job metrics: %w", err)
		}
	}
	return m, nil
}

// wrap returns the cron function of job: it runs fn and records its outcome and duration. A
// panic is recorded and passed on to cron.Recover.
func (m *JobMetrics) wrap(job string, fn func() error) func() {
	return func() {
		start := time.Now()
		finished := false
		defer func() {
			if !finished && m != nil {
				m.record(job, OutcomePanicked, time.Since(start))
			}
		}()
		err := fn()
		finished = true
		if m == nil {
			return
		}
		switch {
		case errors.Is(err, errSkipped):
			m.runs.WithLabelValues(job, OutcomeSkipped).Inc()
		case err != nil:
			m.record(job, OutcomeFailed, time.Since(start))
		default:
			m.record(job, OutcomeOK, time.Since(start))
			m.lastSuccess.WithLabelValues(job).SetToCurrentTime()
		}
	}
}

func (m *JobMetrics) record(job, outcome string, took time.Duration) {
	m.runs.WithLabelValues(job, outcome).Inc()
	m.duration.WithLabelValues(job).Observe(took.Seconds())
}
