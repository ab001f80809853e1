package alerts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/mcpulse/mcpulse/dashboards"
)

func loadDashboards(t *testing.T) []dashboards.Dashboard {
	t.Helper()
	ds, err := dashboards.Load()
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// builtInRules returns the built-in rules whose names keep says to, failing t unless there are
// exactly want of them.
func builtInRules(t *testing.T, keep func(name string) bool, want int) []Rule {
	t.Helper()
	all, err := DefaultRules(loadDashboards(t))
	if err != nil {
		t.Fatal(err)
	}
	var rules []Rule
	for _, r := range all {
		if keep(r.Name) {
			rules = append(rules, r)
		}
	}
	if len(rules) != want {
		t.Fatalf("built-in rules %v, want %d", rules, want)
	}
	return rules
}

// The built-in rules load and cover what a team running MCP servers must hear about: a
// ratchet broken in production, the dead-letter rate, an invitation to a suppressed person.
func TestDefaultRulesLoad(t *testing.T) {
	rules, err := DefaultRules(loadDashboards(t))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]Rule{}
	for _, r := range rules {
		names[r.Name] = r
		if len(r.Receivers) == 0 || r.Window == 0 || r.Title == "" {
			t.Errorf("rule %s: %+v", r.Name, r)
		}
	}
	for _, want := range []string{"dead-letter-rate", "ratchet-broken", "invitation-to-suppressed", "contact-policy-violation", "tool-error-rate",
		"ignored-keys-after-new-version", "validation-errors-after-new-version", "campaign-cannot-recruit", "campaign-lost-exclusion"} {
		if _, ok := names[want]; !ok {
			t.Errorf("no built-in rule %s (have %v)", want, rules)
		}
	}
	cols := loadDashboards(t)[0].Columns
	if r := names["dead-letter-rate"]; r.ThresholdText(cols) != "above 1%" {
		t.Errorf("dead-letter-rate fires %q", r.ThresholdText(cols))
	}
	if r := names["validation-errors-after-new-version"]; r.ThresholdText(cols) != "up more than 5 pp on validation errors before" {
		t.Errorf("validation-errors-after-new-version fires %q", r.ThresholdText(cols))
	}
}

// A rule with mistakes is refused with every problem listed, each naming the file.
func TestBadRulesAreRefused(t *testing.T) {
	ds := loadDashboards(t)
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"no-source", "title: T\nwindow: 1h\nvalue: dead_letter_rate\nthreshold: {above: 1}\nreceivers: [a]\n",
			[]string{"set exactly one of query"}},
		{"both-sources", "title: T\nquery: alert_ratchet_broken\npanel: alerts/history\nwindow: 1h\nvalue: runs\nthreshold: {above: 1}\nreceivers: [a]\n",
			[]string{"set exactly one of query"}},
		{"unknown-query", "title: T\nquery: nope\nwindow: 1h\nvalue: runs\nthreshold: {above: 1}\nreceivers: [a]\n",
			[]string{`query "nope": no sql/queries/nope.sql`}},
		{"param-count", "title: T\nquery: alert_ratchet_broken\nparams: [from]\nwindow: 1h\nvalue: runs\nthreshold: {above: 1}\nreceivers: [a]\n",
			[]string{`2 "?" placeholders but params lists 1`}},
		{"unknown-panel", "title: T\npanel: alerts/nope\nwindow: 1h\nvalue: runs\nthreshold: {above: 1}\nreceivers: [a]\n",
			[]string{`panel "alerts/nope": no such dashboard panel`}},
		{"thresholds", "title: T\nquery: alert_ratchet_broken\nparams: [from, to]\nwindow: 1h\nvalue: runs\nthreshold: {above: 1}\nchange: {baseline: previous_period, above: 1}\nreceivers: [a]\n",
			[]string{"set exactly one of threshold"}},
		{"above-and-below", "title: T\nquery: alert_ratchet_broken\nparams: [from, to]\nwindow: 1h\nvalue: runs\nthreshold: {above: 1, below: 0}\nreceivers: [a]\n",
			[]string{"threshold: set exactly one of above and below"}},
		{"window", "title: T\nquery: alert_ratchet_broken\nparams: [from, to]\nwindow: 10s\nvalue: runs\nthreshold: {above: 1}\nreceivers: [a]\n",
			[]string{`window "10s"`}},
		{"volume", "title: T\nquery: alert_ratchet_broken\nparams: [from, to]\nwindow: 1h\nvalue: runs\nmin_volume: 3\nthreshold: {above: 1}\nreceivers: [a]\n",
			[]string{"min_volume needs volume"}},
		{"unlabelled", "title: T\nquery: alert_ratchet_broken\nparams: [from, to]\nwindow: 1h\nvalue: nolabel\nthreshold: {above: 1}\nreceivers: [a]\n",
			[]string{`column "nolabel" has no entry in dashboards/columns.yaml`}},
		{"no-receivers", "title: T\nquery: alert_ratchet_broken\nparams: [from, to]\nwindow: 1h\nvalue: runs\nthreshold: {above: 1}\n",
			[]string{"receivers is missing"}},
		{"unknown-field", "title: T\nquery: alert_ratchet_broken\nparams: [from, to]\nwindow: 1h\nvalue: runs\nthreshold: {above: 1}\nreceivers: [a]\nfor: 5m\n",
			[]string{"field for not found"}},
		{"Bad_Name", "title: T\nquery: alert_ratchet_broken\nparams: [from, to]\nwindow: 1h\nvalue: runs\nthreshold: {above: 1}\nreceivers: [a]\n",
			[]string{`file name "Bad_Name"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, tc.name+".yaml"), []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadRulesDir(dir, ds)
			if err == nil {
				t.Fatal("loaded, want an error")
			}
			for _, w := range append(tc.want, tc.name+".yaml") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}

// The receivers file reads URLs from the environment, and refuses every mistake at once.
func TestLoadReceivers(t *testing.T) {
	dir := t.TempDir()
	write := func(text string) string {
		p := filepath.Join(dir, "r.yaml")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := map[string]string{"HOOK": "https://alerts.example.com/hook", "SLACK": "https://hooks.slack.example/T/B/x"}
	getenv := func(k string) string { return env[k] }
	c, err := LoadReceivers(write("external_url: https://mcpulse.example.com/\nreceivers:\n  - {name: ops, type: webhook, url_env: HOOK}\n  - {name: chat, type: slack, url_env: SLACK}\n"), getenv)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := c.byName("chat"); !ok || r.URL != env["SLACK"] || r.Kind != KindSlack || c.ExternalURL != "https://mcpulse.example.com" {
		t.Errorf("config %+v", c)
	}
	_, err = LoadReceivers(write("receivers:\n  - {name: a, type: pager, url: https://x.example}\n  - {name: a, type: webhook, url_env: UNSET}\n  - {name: b, type: slack, url: 'ftp://x'}\n  - {type: webhook, url: https://x.example, url_env: HOOK}\n"), getenv)
	for _, w := range []string{`receiver "a": type "pager"`, `receiver "a": the name is used twice`, `$UNSET is not set`,
		`receiver "b": the URL is not an http(s) URL`, `receiver #4: name is missing`, `set url or url_env, not both`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v\nlacks %q", err, w)
		}
	}
}

// The webhook body is Alertmanager's (version 4, one alert, endsAt zero while firing, the same
// fingerprint on firing and resolving); the Slack body escapes and masks caller-chosen text so
// a tool name cannot make a link, a mention or reorder its line.
func TestPayloads(t *testing.T) {
	above := 0.01
	r := Rule{Name: "dead-letter-rate", Title: "Dead-letter rate above 1%", Severity: "warning", Value: "dead_letter_rate",
		Threshold: &Threshold{Above: &above}, Description: "Too\nmany."}
	v := 0.048
	start := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	firing := Transition{ID: "abc", Rule: r.Name, State: StateFiring, Labels: map[string]string{"tool_name": "<!channel> <http://evil|x>\u202e", "severity": "x"},
		Value: &v, Summary: "Dead-letter rate 4.8% over 210 events", At: start, StartsAt: start}
	resolved := firing
	resolved.State, resolved.At = StateResolved, start.Add(2*time.Hour)

	m := alertmanagerMessage(r, firing, "ops", "https://mcpulse.example.com")
	data, _ := json.Marshal(m)
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	alert := got["alerts"].([]any)[0].(map[string]any)
	labels := alert["labels"].(map[string]any)
	if got["version"] != "4" || got["status"] != "firing" || got["receiver"] != "ops" || got["groupKey"] != `{}:{alertname="dead-letter-rate"}` ||
		labels["alertname"] != "dead-letter-rate" || labels["severity"] != "warning" || labels["label_severity"] != "x" ||
		alert["endsAt"] != "0001-01-01T00:00:00Z" || alert["startsAt"] != "2026-03-10T12:00:00Z" ||
		alert["generatorURL"] != "https://mcpulse.example.com/dashboards/alerts" ||
		alert["annotations"].(map[string]any)["description"] != "Too many." {
		t.Errorf("webhook body %s", data)
	}
	mr := alertmanagerMessage(r, resolved, "ops", "")
	if mr.Alerts[0].EndsAt != resolved.At || mr.Alerts[0].Fingerprint != m.Alerts[0].Fingerprint || mr.Status != "resolved" {
		t.Errorf("resolved: %+v, fingerprint %s vs %s", mr.Alerts[0], mr.Alerts[0].Fingerprint, m.Alerts[0].Fingerprint)
	}

	s := slackMessage(r, firing, "https://mcpulse.example.com")
	var decoded struct {
		Text   string `json:"text"`
		Blocks []struct {
			Text struct{ Type, Text string } `json:"text"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal(encode(s), &decoded); err != nil || len(decoded.Blocks) != 1 || decoded.Blocks[0].Text.Type != "mrkdwn" {
		t.Fatalf("slack body %s: %v", encode(s), err)
	}
	body := decoded.Text + "\n" + decoded.Blocks[0].Text.Text
	if !strings.HasPrefix(s.Text, "[FIRING] Dead-letter rate above 1%: Dead-letter rate 4.8%") {
		t.Errorf("slack text %q", s.Text)
	}
	for _, bad := range []string{"<!channel>", "<http://evil", "\u202e"} {
		if strings.Contains(body, bad) || strings.Contains(s.Text, bad) {
			t.Errorf("slack body holds %q unescaped: %s", bad, body)
		}
	}
	if !strings.Contains(body, "&lt;!channel&gt;") || !strings.Contains(body, "<https://mcpulse.example.com/dashboards/alerts|Open the dashboard>") {
		t.Errorf("slack body %s", body)
	}
	if s := slackMessage(r, resolved, ""); !strings.HasPrefix(s.Text, "[RESOLVED]") || !strings.Contains(s.Blocks.BlockSet[0].(*slack.SectionBlock).Text.Text, "resolved 2026-03-10 14:00 UTC") {
		t.Errorf("resolved slack %s", encode(s))
	}
}

// A transition id depends on the whole chain position, so each node has one successor.
func TestTransitionIDsChain(t *testing.T) {
	a := transitionID("r", "{}", 1, StateFiring, "")
	b := transitionID("r", "{}", 2, StateResolved, a)
	if a == b || a != transitionID("r", "{}", 1, StateFiring, "") || b == transitionID("r", "{}", 2, StateResolved, "other") ||
		a == transitionID("r", `{"x":"1"}`, 1, StateFiring, "") {
		t.Error("transition ids do not identify their chain position")
	}
}
