package jobs

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// series returns name's series in reg as "label=value,..." → value (a histogram: its count).
func series(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				key += l.GetName() + "=" + l.GetValue() + ","
			}
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func TestJobMetricsRecordEveryOutcome(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewJobMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.wrap(JobReconcile, func() error { return nil })()
	m.wrap(JobReconcile, func() error { return nil })()
	m.wrap(JobContactAudit, func() error { return errors.New("clickhouse down") })()
	m.wrap(JobSchemaCheck, func() error { return errSkipped })()
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("the panic did not reach the caller (cron.Recover)")
			}
		}()
		m.wrap(JobSchemaCheck, func() error { panic("BUG: test") })()
	}()

	runs := series(t, reg, "mcpulse_job_runs_total")
	want := map[string]float64{
		"job=reconcile,outcome=ok,":          2,
		"job=contact_audit,outcome=failed,":  1,
		"job=schema_check,outcome=skipped,":  1,
		"job=schema_check,outcome=panicked,": 1,
	}
	if len(runs) != len(want) {
		t.Errorf("runs = %v, want %v", runs, want)
	}
	for k, v := range want {
		if runs[k] != v {
			t.Errorf("runs{%s} = %v, want %v", k, runs[k], v)
		}
	}
	// Skipped runs have no duration; the others do.
	durations := series(t, reg, "mcpulse_job_duration_seconds")
	if durations["job=reconcile,"] != 2 || durations["job=contact_audit,"] != 1 || durations["job=schema_check,"] != 1 {
		t.Errorf("duration observations = %v, want reconcile 2, contact_audit 1, schema_check 1", durations)
	}
	last := series(t, reg, "mcpulse_job_last_success_timestamp_seconds")
	if len(last) != 1 || last["job=reconcile,"] <= 0 {
		t.Errorf("last success = %v, want only reconcile, set", last)
	}
	if _, err := NewJobMetrics(reg); err == nil {
		t.Error("registering the job metrics twice succeeded, want an error")
	}
}

func TestNilJobMetricsStillRunTheJob(t *testing.T) {
	var m *JobMetrics
	ran := false
	m.wrap(JobReconcile, func() error { ran = true; return errors.New("x") })()
	if !ran {
		t.Fatal("the job did not run")
	}
}
