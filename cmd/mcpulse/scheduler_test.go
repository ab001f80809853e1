package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	if got := strings.Join(names, ","); got != "contact-policy-violation,dead-letter-rate,ignored-keys-after-new-version,invitation-to-suppressed,ratchet-broken,tool-error-rate,validation-errors-after-new-version,no-schema-checks" {
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
