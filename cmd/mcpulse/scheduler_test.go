package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/jobs"
)

// The scheduler's alert evaluator holds the built-in rules and a directory's own, with the
// receivers of the file; a rule that takes a built-in rule's name, or a receivers file with a
// mistake, stops the scheduler before it starts.
func TestSchedulerLoadsAlertRulesAndReceivers(t *testing.T) {
	dir := t.TempDir()
	receivers := filepath.Join(dir, "receivers.yaml")
	if err := os.WriteFile(receivers, []byte("receivers:\n  - {name: ops-webhook, type: webhook, url_env: TEST_ALERT_HOOK}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TEST_ALERT_HOOK", "https://alerts.example.com/hook")
	rules := filepath.Join(dir, "rules")
	if err := os.Mkdir(rules, 0o755); err != nil {
		t.Fatal(err)
	}
	own := "title: Schema checks failing\nquery: alert_ratchet_broken\nparams: [from, to]\nwindow: 6h\nvalue: runs\nthreshold: {below: 1}\nreceivers: [ops-webhook]\n"
	if err := os.WriteFile(filepath.Join(rules, "no-schema-checks.yaml"), []byte(own), 0o644); err != nil {
		t.Fatal(err)
	}
	ev, err := newAlertEvaluator(rules, receivers, nil, nil, slogDiscard())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range ev.Rules {
		names = append(names, r.Name)
	}
	if got := strings.Join(names, ","); got != "campaign-cannot-recruit,campaign-lost-exclusion,contact-policy-violation,dead-letter-rate,ignored-keys-after-new-version,invitation-to-suppressed,ratchet-broken,tool-error-rate,validation-errors-after-new-version,no-schema-checks" {
		t.Errorf("rules %s", got)
	}
	if len(ev.Receivers.Receivers) != 1 || ev.Receivers.Receivers[0].URL != "https://alerts.example.com/hook" {
		t.Errorf("receivers %+v", ev.Receivers)
	}
	if err := os.WriteFile(filepath.Join(rules, "dead-letter-rate.yaml"), []byte(own), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := newAlertEvaluator(rules, receivers, nil, nil, slogDiscard()); err == nil || !strings.Contains(err.Error(), "name of a built-in rule") {
		t.Errorf("a rule named like a built-in one: %v", err)
	}
	t.Setenv("TEST_ALERT_HOOK", "")
	if _, err := newAlertEvaluator("", receivers, nil, nil, slogDiscard()); err == nil || !strings.Contains(err.Error(), "$TEST_ALERT_HOOK is not set") {
		t.Errorf("an unset URL variable: %v", err)
	}
}

// The campaign flag lint runs only with a flag source; its source is resolved as the CLI
// resolves it (a campaigns.yaml gives the project and cohort, a flag given wins), and a wrong
// combination stops the scheduler before it starts.
func TestSchedulerCampaignsLintFlags(t *testing.T) {
	parse := func(args ...string) (*jobs.CampaignsLint, error) {
		t.Helper()
		cmd := newSchedulerCmd()
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		var l campaignsLintFlags
		f := cmd.Flags()
		l.file, _ = f.GetString("flags-file")
		l.project, _ = f.GetString("campaigns-project-id")
		l.host, _ = f.GetString("campaigns-posthog-host")
		l.config, _ = f.GetString("campaigns-config")
		l.cohort, _ = f.GetInt64("exclusion-cohort")
		l.retention, _ = f.GetDuration("campaigns-lint-retention")
		if spec, _ := f.GetString("campaigns-lint"); spec != jobs.DefaultCampaignsLintSchedule && !slices.Contains(args, "--campaigns-lint") {
			t.Errorf("default schedule %q", spec)
		}
		return l.job(f)
	}
	if j, err := parse(); j != nil || err != nil {
		t.Errorf("no source: %+v %v, want the lint off", j, err)
	}
	j, err := parse("--flags-file", "flags.json", "--exclusion-cohort", "641799")
	if err != nil || j == nil || j.Source.File != "flags.json" || j.Source.ExclusionCohort != 641799 || j.Retention != 30*24*time.Hour {
		t.Errorf("--flags-file: %+v %v", j, err)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "campaigns.yaml")
	if err := os.WriteFile(conf, []byte("exclusion_cohort: 641799\nposthog:\n  project_id: \"2\"\n  personal_api_key_env: TEAM_KEY\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	j, err = parse("--campaigns-config", conf, "--exclusion-cohort", "7")
	if err != nil || j == nil || j.Source.ProjectID != "2" || j.Source.APIKeyEnv != "TEAM_KEY" || j.Source.ExclusionCohort != 7 || j.Source.Host != "https://us.posthog.com" {
		t.Errorf("--campaigns-config: %+v %v", j, err)
	}
	noProject := filepath.Join(dir, "cohort-only.yaml")
	if err := os.WriteFile(noProject, []byte("exclusion_cohort: 641799\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--flags-file", "flags.json", "--campaigns-project-id", "2"},
		{"--flags-file", "flags.json", "--exclusion-cohort", "-1"},
		{"--flags-file", "flags.json", "--campaigns-lint-retention", "0s"},
		{"--flags-file", "-"},
		{"--campaigns-config", noProject},
	} {
		if j, err := parse(args...); err == nil {
			t.Errorf("%v accepted: %+v", args, j)
		}
	}
}
