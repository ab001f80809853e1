package alerts

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/mcpulse/mcpulse/dashboards"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// receiver is a real HTTP endpoint standing in for Alertmanager (POST /hook) and a Slack
// incoming webhook (POST /slack): it keeps every body it answered 200, and answers the first
// failFirst requests of each path 503 (a receiver that is down for a moment).
type receiver struct {
	mu        sync.Mutex
	failFirst int
	seen      map[string]int // requests per path, failed ones included
	bodies    map[string][][]byte
}

func newReceiver(t *testing.T, failFirst int) (*receiver, *httptest.Server) {
	rc := &receiver{failFirst: failFirst, seen: map[string]int{}, bodies: map[string][][]byte{}}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.seen[r.URL.Path]++
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "want a JSON POST", http.StatusBadRequest)
			return
		}
		if rc.seen[r.URL.Path] <= rc.failFirst {
			http.Error(w, "down for a moment", http.StatusServiceUnavailable)
			return
		}
		rc.bodies[r.URL.Path] = append(rc.bodies[r.URL.Path], body)
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(ts.Close)
	return rc, ts
}

func (rc *receiver) got(path string) [][]byte {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.bodies[path])
}

// replicas are n evaluators of the same rules, each with its own ClickHouse and Redis
// connections, as n scheduler processes would be.
func replicas(t *testing.T, env *testenv.Env, n int, rules []Rule, ds []dashboards.Dashboard, recv ReceiversConfig) []*Evaluator {
	t.Helper()
	ctx := context.Background()
	var out []*Evaluator
	for i := range n {
		ch, err := stores.OpenClickHouse(ctx, env.Stack.ClickHouseDSN)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ch.Close() })
		rdb, err := stores.OpenRedis(ctx, env.Stack.RedisURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		out = append(out, &Evaluator{Rules: rules, Dashboards: ds, Receivers: recv, ClickHouse: ch, Redis: rdb,
			Replica: fmt.Sprintf("replica-%d", i), Logger: slog.New(slog.DiscardHandler)})
	}
	return out
}

// evaluateTogether runs every replica's Evaluate at now, rounds times, all at once.
func evaluateTogether(t *testing.T, evs []*Evaluator, now time.Time, rounds int) []Report {
	t.Helper()
	var (
		mu      sync.Mutex
		reports []Report
		wg      sync.WaitGroup
	)
	start := make(chan struct{})
	for _, ev := range evs {
		for range rounds {
			wg.Go(func() {
				<-start
				rep, err := ev.Evaluate(context.Background(), now)
				if err != nil {
					t.Errorf("%s: %v", ev.Replica, err)
				}
				mu.Lock()
				reports = append(reports, rep)
				mu.Unlock()
			})
		}
	}
	close(start)
	wg.Wait()
	for _, r := range reports {
		for _, err := range r.Errors {
			t.Errorf("evaluation error: %v", err)
		}
	}
	return reports
}

// insertEvents stores n tool calls the consumer inserted at insertedAt and deadLetters dead
// letters received at receivedAt, the figures of the dead-letter rate.
func insertEvents(t *testing.T, ch driver.Conn, n int, insertedAt time.Time, deadLetters int, receivedAt time.Time) {
	t.Helper()
	ctx := context.Background()
	b, err := ch.PrepareBatch(ctx, "INSERT INTO mcpulse.tool_calls (uuid, timestamp, tool_name, inserted_at)")
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := b.Append(uuid.New(), insertedAt, "search", insertedAt); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	b, err = ch.PrepareBatch(ctx, "INSERT INTO mcpulse.dead_letters (dead_letter_id, received_at, reason, reason_class)")
	if err != nil {
		t.Fatal(err)
	}
	for range deadLetters {
		if err := b.Append(uuid.NewString(), receivedAt, "bad JSON: unexpected end of JSON input", "bad_json"); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

func insertRun(t *testing.T, ch driver.Conn, server string, at time.Time, ok bool, violations ...string) {
	t.Helper()
	if violations == nil {
		violations = []string{}
	}
	okv := uint8(0)
	if ok {
		okv = 1
	}
	if err := ch.Exec(context.Background(), `INSERT INTO mcpulse.schema_check_runs (run_id, server, started_at, reached, ok, violations, notes)
SELECT ?, ?, toDateTime(?, 'UTC'), 1, ?, ?, []`, uuid.NewString(), server, at.Unix(), okv, violations); err != nil {
		t.Fatal(err)
	}
}

// An alert fires once and resolves once, notified once each to a real Alertmanager-format
// webhook and a real Slack-format webhook, however many replicas evaluate at the same moments:
// two replicas, each evaluating three times at once per step, over four steps (firing,
// still firing, resolved, still resolved). The webhook is down for its first request (the
// send is retried), and after Redis forgets every delivery the ClickHouse record alone keeps
// the notifications from repeating. The alerts dashboard shows the history.
func TestAlertFiresOnceResolvesOnceAcrossReplicas(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ds := loadDashboards(t)
	all, err := DefaultRules(ds)
	if err != nil {
		t.Fatal(err)
	}
	var rules []Rule
	for _, r := range all {
		if r.Name == "dead-letter-rate" || r.Name == "ratchet-broken" {
			rules = append(rules, r)
		}
	}
	rc, ts := newReceiver(t, 1)
	recv := ReceiversConfig{ExternalURL: "https://mcpulse.example.com", Receivers: []Receiver{
		{Name: "ops-webhook", Kind: KindWebhook, URL: ts.URL + "/hook"},
		{Name: "ops-slack", Kind: KindSlack, URL: ts.URL + "/slack"},
	}}
	evs := replicas(t, env, 2, rules, ds, recv)

	t0 := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	// 200 events and 10 dead letters in the hour before t0: 10 / 210 = 4.8%, above 1%.
	insertEvents(t, env.ClickHouse, 200, t0.Add(-10*time.Minute), 10, t0.Add(-5*time.Minute))
	// PostHog's server broke its ratchet at the last check; GitHub's held.
	insertRun(t, env.ClickHouse, "posthog", t0.Add(-time.Hour), false, "oversized tools: 3 > max_oversized 2")
	insertRun(t, env.ClickHouse, "github", t0.Add(-time.Hour), true)

	steps := []struct {
		at      time.Time
		prepare func()
	}{
		{t0, nil},
		{t0.Add(30 * time.Minute), nil},
		{t0.Add(2 * time.Hour), func() {
			// Traffic without dead letters; PostHog's next check holds.
			insertEvents(t, env.ClickHouse, 500, t0.Add(90*time.Minute), 0, time.Time{})
			insertRun(t, env.ClickHouse, "posthog", t0.Add(100*time.Minute), true)
		}},
		{t0.Add(2*time.Hour + 10*time.Minute), nil},
	}
	var transitions []Transition
	for _, s := range steps {
		if s.prepare != nil {
			s.prepare()
		}
		for _, rep := range evaluateTogether(t, evs, s.at, 3) {
			transitions = append(transitions, rep.Transitions...)
		}
	}

	// Redis forgets every delivery (a flushed or replaced Redis): the recorded deliveries in
	// ClickHouse keep the recent transitions from being sent again.
	if err := env.Redis.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	evaluateTogether(t, evs, t0.Add(2*time.Hour+20*time.Minute), 2)

	type msg struct{ rule, status string }
	for _, path := range []string{"/hook", "/slack"} {
		var got []msg
		for _, body := range rc.got(path) {
			if path == "/hook" {
				var m AlertmanagerMessage
				if err := json.Unmarshal(body, &m); err != nil {
					t.Fatalf("%s: %v: %s", path, err, body)
				}
				got = append(got, msg{m.Alerts[0].Labels["alertname"], m.Status})
				checkWebhook(t, m)
			} else {
				var m struct{ Text string }
				if err := json.Unmarshal(body, &m); err != nil {
					t.Fatal(err)
				}
				// "[FIRING] <rule title>: <summary>"
				status, rest, _ := strings.Cut(strings.TrimPrefix(m.Text, "["), "] ")
				name := "?"
				for _, r := range rules {
					if strings.HasPrefix(rest, r.Title+": ") {
						name = r.Name
					}
				}
				got = append(got, msg{name, strings.ToLower(status)})
			}
		}
		slices.SortFunc(got, func(a, b msg) int { return strings.Compare(a.rule+a.status, b.rule+b.status) })
		var want []msg
		for _, r := range rules {
			want = append(want, msg{r.Name, StateFiring}, msg{r.Name, StateResolved})
		}
		slices.SortFunc(want, func(a, b msg) int { return strings.Compare(a.rule+a.status, b.rule+b.status) })
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s received %v, want each rule firing once and resolved once: %v", path, got, want)
		}
	}
	if rc.seen["/hook"] != 5 {
		t.Errorf("the webhook saw %d requests, want 5: the first answered 503 and retried, then 4 notifications", rc.seen["/hook"])
	}

	// ClickHouse holds one chain per instance: firing then resolved.
	var n, resolved, sent uint64
	if err := env.ClickHouse.QueryRow(context.Background(), `SELECT count(), countIf(state = 'resolved') FROM mcpulse.alert_transitions FINAL`).Scan(&n, &resolved); err != nil {
		t.Fatal(err)
	}
	if n != 4 || resolved != 2 {
		t.Errorf("alert_transitions: %d rows, %d resolved; want 2 rules × (firing, resolved)", n, resolved)
	}
	if err := env.ClickHouse.QueryRow(context.Background(), `SELECT count() FROM mcpulse.alert_notifications FINAL WHERE status = 'sent'`).Scan(&sent); err != nil {
		t.Fatal(err)
	}
	if sent != 8 {
		t.Errorf("%d deliveries recorded, want 4 transitions × 2 receivers", sent)
	}
	ids := map[string]bool{}
	for _, tr := range transitions {
		ids[tr.ID] = true
	}
	if len(ids) != 4 {
		t.Errorf("the replicas computed %d distinct transition ids, want 4", len(ids))
	}

	// The alerts dashboard shows the history and nothing firing.
	for _, id := range []string{"history", "firing-now", "notifications", "fired-per-day"} {
		p, ok := FindPanel(ds, AlertsDashboard+"/"+id)
		if !ok {
			t.Fatalf("no panel alerts/%s", id)
		}
		res, err := dashboards.Run(context.Background(), env.ClickHouse, p, dashboards.Filters{})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int{"history": 4, "firing-now": 0, "notifications": 2, "fired-per-day": 2}[id]
		if len(res.Rows) != want {
			t.Errorf("alerts/%s shows %d rows, want %d: %v", id, len(res.Rows), want, res.Rows)
		}
	}
}

// checkWebhook checks one Alertmanager-format body.
func checkWebhook(t *testing.T, m AlertmanagerMessage) {
	t.Helper()
	if m.Version != "4" || len(m.Alerts) != 1 || m.Receiver != "ops-webhook" || m.ExternalURL != "https://mcpulse.example.com" {
		t.Errorf("webhook body %+v", m)
		return
	}
	a := m.Alerts[0]
	switch a.Labels["alertname"] {
	case "dead-letter-rate":
		if m.Status == StateFiring && !strings.Contains(a.Annotations["summary"], "Dead-letter rate 4.8% over 210 events in the last 1h, above 1% · Most frequent class: bad_json") {
			t.Errorf("dead-letter summary %q", a.Annotations["summary"])
		}
		if a.Labels["severity"] != "warning" {
			t.Errorf("labels %v", a.Labels)
		}
	case "ratchet-broken":
		if a.Labels["server"] != "posthog" || a.Labels["severity"] != "critical" {
			t.Errorf("ratchet labels %v, want server posthog (GitHub's ratchet held)", a.Labels)
		}
		if m.Status == StateFiring && !strings.Contains(a.Annotations["summary"], "Violations: oversized tools: 3 > max_oversized 2") {
			t.Errorf("ratchet summary %q", a.Annotations["summary"])
		}
	default:
		t.Errorf("unexpected alert %v", a.Labels)
	}
	zero := time.Time{}
	if (m.Status == StateFiring) != a.EndsAt.Equal(zero) || a.StartsAt.IsZero() || a.Fingerprint == "" {
		t.Errorf("%s alert times: starts %v ends %v", m.Status, a.StartsAt, a.EndsAt)
	}
}

// A rule can compare with the previous period of the same length (here the dead-letter rate
// rising by more than 2 points on the hour before, with enough volume in both), and a rule can
// read a dashboard panel instead of a query of its own (here each tool of the latest schema
// check with more than 10 undescribed nested parameters, one alert per server and tool). A
// single replica without Redis relies on the ClickHouse record alone.
func TestChangeAgainstThePreviousPeriodAndPanelRules(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ds := loadDashboards(t)
	parse := func(name, text string) Rule {
		r, problems := parseRule("test/"+name+".yaml", []byte(text), ds)
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		return r
	}
	rising := parse("dead-letters-rising", `title: Dead letters rising
query: alert_dead_letter_rate
params: [from, to, from, to, from, to]
window: 1h
value: dead_letter_rate
volume: events
min_volume: 50
change: {baseline: previous_period, above: 0.02}
receivers: [hook]
`)
	undescribed := parse("undescribed-parameters", `title: Tools with many undescribed nested parameters
panel: schema-ratchet/offending-tools
window: 24h
value: undescribed_nested
labels: [server, tool_name]
threshold: {above: 10}
receivers: [hook]
`)
	rc, ts := newReceiver(t, 0)
	ev := &Evaluator{Rules: []Rule{rising, undescribed}, Dashboards: ds, ClickHouse: env.ClickHouse, Replica: "single",
		Receivers: ReceiversConfig{Receivers: []Receiver{{Name: "hook", Kind: KindWebhook, URL: ts.URL + "/hook"}}}}

	t0 := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	// The hour before the window: 1 of 100; the window: 5 of 100 (5 dead letters on 95 events).
	insertEvents(t, env.ClickHouse, 99, t0.Add(-90*time.Minute), 1, t0.Add(-90*time.Minute))
	insertEvents(t, env.ClickHouse, 95, t0.Add(-30*time.Minute), 5, t0.Add(-30*time.Minute))
	run := uuid.NewString()
	if err := env.ClickHouse.Exec(context.Background(), `INSERT INTO mcpulse.schema_check_runs (run_id, server, started_at, reached, ok, violations, notes)
SELECT ?, 'posthog', toDateTime(?, 'UTC'), 1, 1, [], []`, run, t0.Add(-time.Hour).Unix()); err != nil {
		t.Fatal(err)
	}
	if err := env.ClickHouse.Exec(context.Background(), `INSERT INTO mcpulse.schema_check_tools (run_id, server, started_at, tool_name, schema_chars, oversized, nested, described, name_warnings, problems)
SELECT ?, 'posthog', toDateTime(?, 'UTC'), tool, 1000, 0, 50, described, [], [] FROM (SELECT arrayJoin([('cohorts-create', 5), ('action-create', 49)]) AS t, t.1 AS tool, t.2 AS described)`,
		run, t0.Add(-time.Hour).Unix()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		rep, err := ev.Evaluate(context.Background(), t0)
		if err != nil || len(rep.Errors) > 0 {
			t.Fatal(err, rep.Errors)
		}
	}
	got := map[string]AlertmanagerMessage{}
	for _, body := range rc.got("/hook") {
		var m AlertmanagerMessage
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		got[m.Alerts[0].Labels["alertname"]+"/"+m.Alerts[0].Labels["tool_name"]] = m
	}
	if len(got) != 2 || len(rc.got("/hook")) != 2 {
		t.Fatalf("received %d messages %v, want one per firing instance: dead letters rising, cohorts-create", len(rc.got("/hook")), got)
	}
	if s := got["dead-letters-rising/"].Alerts[0].Annotations["summary"]; !strings.Contains(s, "Dead-letter rate 5% over 100 events in the last 1h (baseline 1%), up more than 2 pp on the previous period") {
		t.Errorf("summary %q", s)
	}
	if a := got["undescribed-parameters/cohorts-create"].Alerts[0]; a.Labels["server"] != "posthog" || !strings.Contains(a.Annotations["summary"], "Undescribed nested parameters 45") {
		t.Errorf("panel rule alert %+v", a)
	}
}

// statsRow is one hour of one tool on one server version in tool_call_stats_hourly, written
// as the migration's backfill writes recomputed history (pseudo-partition -1 of topic ”).
type statsRow struct {
	hour                                   time.Time
	tool, server, version                  string
	calls, errors, measurable, withIgnored uint64
	validation                             uint64
}

func insertStats(t *testing.T, ch driver.Conn, rows ...statsRow) {
	t.Helper()
	b, err := ch.PrepareBatch(context.Background(), `INSERT INTO mcpulse.tool_call_stats_hourly (kafka_topic, kafka_partition, hour,
tool_name, client_name, server_name, server_version, calls, errors, successful_calls, measurable_calls, calls_with_ignored_keys,
validation_errors, duration_buckets, as_of, before, before_as_of, version)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := b.Append("", int32(-1), r.hour, r.tool, "claude-code", r.server, r.version, r.calls, r.errors, r.calls-r.errors,
			r.measurable, r.withIgnored, r.validation, []uint64{}, int64(0), []uint64{}, int64(0), uint64(0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

// When a server's new version appears, a tool whose ignored-key rate (or validation-error
// rate) rose by more than 5 points against the previous version fires, one alert per server,
// tool and version; a tool whose rates held, a server without a new version, and a new version
// with too few calls do not.
func TestMisuseRisingAfterANewServerVersion(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ds := loadDashboards(t)
	rules := builtInRules(t, func(name string) bool { return strings.HasSuffix(name, "-after-new-version") }, 2)
	rc, ts := newReceiver(t, 0)
	ev := &Evaluator{Rules: rules, Dashboards: ds, ClickHouse: env.ClickHouse, Replica: "single",
		Receivers: ReceiversConfig{Receivers: []Receiver{{Name: "ops-webhook", Kind: KindWebhook, URL: ts.URL + "/hook"}}}}

	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	old, fresh := now.Add(-30*time.Hour), now.Add(-6*time.Hour)
	insertStats(t, env.ClickHouse,
		// posthog 1.4.0 served for days; 1.5.0 appeared 6 hours ago.
		statsRow{old, "query-run", "posthog", "1.4.0", 200, 0, 200, 20, 0},     // 10% ignored
		statsRow{fresh, "query-run", "posthog", "1.5.0", 100, 0, 100, 40, 0},   // 40%: fires
		statsRow{old, "insight-get", "posthog", "1.4.0", 200, 10, 190, 19, 2},  // 10%, 1% validation
		statsRow{fresh, "insight-get", "posthog", "1.5.0", 100, 20, 80, 8, 15}, // 10% held; 15% validation: fires
		statsRow{old, "exec", "posthog", "1.4.0", 200, 0, 200, 0, 0},
		statsRow{fresh, "exec", "posthog", "1.5.0", 10, 0, 10, 9, 0}, // 90% on 10 calls: too few
		// sentry-mcp's one version is old: nothing to compare.
		statsRow{old, "search_issues", "sentry-mcp", "2.0.0", 200, 0, 200, 0, 0},
		statsRow{fresh, "search_issues", "sentry-mcp", "2.0.0", 100, 0, 100, 90, 0},
	)
	rep, err := ev.Evaluate(context.Background(), now)
	if err != nil || len(rep.Errors) > 0 {
		t.Fatal(err, rep.Errors)
	}
	var got []string
	for _, body := range rc.got("/hook") {
		var m AlertmanagerMessage
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		l := m.Alerts[0].Labels
		got = append(got, l["alertname"]+" "+l["server_name"]+" "+l["tool_name"]+" "+l["server_version"]+": "+m.Alerts[0].Annotations["summary"])
	}
	slices.Sort(got)
	want := []string{
		"ignored-keys-after-new-version posthog query-run 1.5.0: Ignored-key rate 40% over 100 measurable calls in the last 24h (baseline 10%), up more than 5 pp on ignored-key rate before · Previous version: 1.4.0",
		"validation-errors-after-new-version posthog insight-get 1.5.0: Validation errors 15% over 100 calls in the last 24h (baseline 1%), up more than 5 pp on validation errors before · Previous version: 1.4.0",
	}
	if !slices.Equal(got, want) {
		t.Errorf("notified\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
