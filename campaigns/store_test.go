package campaigns

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/testkit/testenv"
)

func loadValid(t *testing.T) []Flag {
	t.Helper()
	flags, err := ReadFile(filepath.Join("testdata", "valid_api.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return flags
}

// setPayload replaces one payload of the recruitment flag (a JSON-encoded string, as PostHog
// stores it); nil deletes the variant altogether.
func setPayload(t *testing.T, flags []Flag, variant string, payload any) []Flag {
	t.Helper()
	data, _ := json.Marshal(flags)
	var out []Flag
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		if out[i].Key != RecruitmentFlag {
			continue
		}
		f := &out[i].Filters
		if payload == nil {
			delete(f.Payloads, variant)
			var kept []Variant
			for _, v := range f.Multivariate.Variants {
				if v.Key != variant {
					kept = append(kept, v)
				}
			}
			f.Multivariate.Variants = kept
			continue
		}
		text, _ := json.Marshal(payload)
		enc, _ := json.Marshal(string(text))
		f.Payloads[variant] = enc
	}
	return out
}

type versionRow struct {
	First, Last time.Time
	SHA         string
	Removed     uint8
}

func versionsOf(t *testing.T, ch driver.Conn, variant string) []versionRow {
	t.Helper()
	rows, err := ch.Query(context.Background(), `SELECT first_seen, last_seen, payload_sha256, removed
FROM mcpulse.flag_payload_versions FINAL WHERE flag_key = ? AND variant = ? ORDER BY first_seen`, RecruitmentFlag, variant)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []versionRow
	for rows.Next() {
		var r versionRow
		if err := rows.Scan(&r.First, &r.Last, &r.SHA, &r.Removed); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// Record keeps a payload version's first_seen while its hash is unchanged (a payload
// re-indented or stored as an object is the same version), starts a version when it changes,
// records a removed variant once, writes one lint-run row per flag and variant, answers the
// version in force at any time, and deletes runs past the retention.
func TestRecordKeepsPayloadVersionsAndRuns(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	ch := env.ClickHouse
	t1 := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	opts := Options{ExclusionCohort: 641799}
	record := func(flags []Flag, at time.Time) RecordResult {
		t.Helper()
		res, err := Record(ctx, ch, Lint(flags, opts), flags, at, 0)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	v1 := loadValid(t)
	if r := record(v1, t1); r.Rows != 5 || r.Versions != 3 || r.NewVersions != 3 || r.Removed != 0 {
		t.Errorf("first run %+v: want 5 run rows (2 flags, 3 variants) and 3 new versions", r)
	}
	// The same payload, re-indented and as a JSON object rather than a string: same version.
	same := setPayload(t, v1, "data-teams", map[string]any{
		"min_session_age_seconds": 600, "min_completed_tool_calls": 5,
		"booking_url": "https://cal.com/research-team/mcp-chat", "message": "Help us shape PostHog's MCP: 20 minutes, merch as thanks.",
	})
	t2 := t1.Add(15 * time.Minute)
	if r := record(same, t2); r.NewVersions != 0 || r.Versions != 3 {
		t.Errorf("unchanged run %+v: want 3 versions kept, none new", r)
	}
	got := versionsOf(t, ch, "data-teams")
	if len(got) != 1 || !got[0].First.Equal(t1) || !got[0].Last.Equal(t2) || len(got[0].SHA) != 64 {
		t.Fatalf("data-teams after an unchanged run: %+v, want one version first seen %s, last seen %s", got, t1, t2)
	}

	// The message changes: a second version from t3; then the payload breaks (http URL).
	t3 := t2.Add(15 * time.Minute)
	changed := setPayload(t, v1, "data-teams", map[string]any{"message": "New copy", "booking_url": "https://cal.com/research-team/mcp-chat"})
	if r := record(changed, t3); r.NewVersions != 1 {
		t.Errorf("changed run %+v: want 1 new version", r)
	}
	got = versionsOf(t, ch, "data-teams")
	if len(got) != 2 || !got[0].First.Equal(t1) || !got[0].Last.Equal(t2) || !got[1].First.Equal(t3) || got[1].SHA == got[0].SHA {
		t.Fatalf("data-teams after a change: %+v, want the old version (t1..t2) and a new one from %s", got, t3)
	}
	if a := versionsOf(t, ch, "agents-q3"); len(a) != 1 || !a[0].First.Equal(t1) || !a[0].Last.Equal(t3) {
		t.Errorf("agents-q3, unchanged: %+v", a)
	}

	// The variant is removed: one removal row, not repeated by the next run.
	t4 := t3.Add(15 * time.Minute)
	gone := setPayload(t, v1, "data-teams", nil)
	if r := record(gone, t4); r.Removed != 1 {
		t.Errorf("removal run %+v: want 1 removed", r)
	}
	if r := record(gone, t4.Add(15*time.Minute)); r.Removed != 0 || r.NewVersions != 0 {
		t.Errorf("run after the removal %+v: want nothing new", r)
	}
	got = versionsOf(t, ch, "data-teams")
	if len(got) != 3 || got[2].Removed != 1 || !got[2].First.Equal(t4) || got[2].SHA != "" {
		t.Fatalf("data-teams after its removal: %+v", got)
	}

	// The version in force at a time.
	for _, tc := range []struct {
		at      time.Time
		ok      bool
		first   time.Time
		removed bool
	}{
		{t1.Add(-time.Second), false, time.Time{}, false},
		{t1, true, t1, false},
		{t3.Add(-time.Second), true, t1, false},
		{t3.Add(time.Minute), true, t3, false},
		{t4.Add(time.Hour), true, t4, true},
	} {
		v, ok, err := PayloadVersionAt(ctx, ch, RecruitmentFlag, "data-teams", tc.at)
		if err != nil {
			t.Fatal(err)
		}
		if ok != tc.ok || (ok && (!v.FirstSeen.Equal(tc.first) || v.Removed != tc.removed)) {
			t.Errorf("version at %s: %+v %v, want first_seen %s removed %v (found %v)", tc.at, v, ok, tc.first, tc.removed, tc.ok)
		}
		if ok && !tc.removed {
			var p map[string]any
			if err := json.Unmarshal([]byte(v.Payload), &p); err != nil || p["booking_url"] == nil {
				t.Errorf("version at %s: payload %q", tc.at, v.Payload)
			}
		}
	}

	// The lint runs: per run a flag row (variant '') and a row per variant.
	var runs, flagRows, variantRows uint64
	if err := ch.QueryRow(ctx, `SELECT uniqExact(run_at), countIf(variant = ''), countIf(variant != '') FROM mcpulse.campaign_lint_runs`).Scan(&runs, &flagRows, &variantRows); err != nil {
		t.Fatal(err)
	}
	if runs != 5 || flagRows != 10 || variantRows != 3+3+3+2+2 {
		t.Errorf("campaign_lint_runs: %d runs, %d flag rows, %d variant rows", runs, flagRows, variantRows)
	}

	// A broken payload and a missing exclusion are stored with their codes.
	broken := setPayload(t, gone, "agents-q3", map[string]any{"message": "Hi", "booking_url": "http://cal.com/x"})
	for i := range broken {
		if broken[i].Key == RecruitmentFlag {
			broken[i].Filters.Groups[0].Properties = broken[i].Filters.Groups[0].Properties[:1]
		}
	}
	t5 := t4.Add(time.Hour)
	record(broken, t5)
	var will, excl uint8
	var errs uint32
	var codes []string
	if err := ch.QueryRow(ctx, `SELECT will_recruit, exclusion_ok, errors, problem_codes FROM mcpulse.campaign_lint_runs
WHERE run_at = ? AND flag_key = ? AND variant = 'agents-q3'`, t5, RecruitmentFlag).Scan(&will, &excl, &errs, &codes); err != nil {
		t.Fatal(err)
	}
	if will != 0 || excl != 0 || errs != 2 || len(codes) != 2 {
		t.Errorf("broken agents-q3: will_recruit %d exclusion_ok %d errors %d codes %v", will, excl, errs, codes)
	}

	// A flag missing from the definitions: a flag row saying so, its variants removed.
	var onlyPrompt []Flag
	for _, f := range v1 {
		if f.Key != RecruitmentFlag {
			onlyPrompt = append(onlyPrompt, f)
		}
	}
	t6 := t5.Add(time.Hour)
	if r := record(onlyPrompt, t6); r.Removed != 1 {
		t.Errorf("missing flag run %+v: want agents-q3 removed", r)
	}
	if err := ch.QueryRow(ctx, `SELECT problem_codes FROM mcpulse.campaign_lint_runs WHERE run_at = ? AND flag_key = ? AND variant = ''`, t6, RecruitmentFlag).Scan(&codes); err != nil {
		t.Fatal(err)
	}
	if len(codes) != 1 || codes[0] != CodeFlagMissing {
		t.Errorf("missing flag row codes %v", codes)
	}

	// 31 days later the earlier runs are past the default retention: deleted (a mutation).
	t7 := t1.Add(31 * 24 * time.Hour)
	r := record(v1, t7)
	if r.Expired != 5*2+13+4+3 {
		t.Errorf("retention run %+v: want the 7 earlier runs' 30 rows expired", r)
	}
	var left uint64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if err := ch.QueryRow(ctx, `SELECT count() FROM mcpulse.campaign_lint_runs WHERE run_at < ?`, t7.Add(-DefaultRetention)).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 || time.Now().After(deadline) {
			break
		}
	}
	if left != 0 {
		t.Errorf("%d expired rows left", left)
	}
	if _, err := Record(ctx, ch, Lint(v1, opts), v1, t7, -time.Hour); err == nil {
		t.Error("a negative retention was accepted")
	}
}

// The canonical payload text ignores layout and the stored shape, and keeps what was written.
func TestCanonicalPayload(t *testing.T) {
	a, sa := CanonicalPayload(json.RawMessage(`"{\"b\": 1.50, \"a\": \"<x>\"}"`))
	b, sb := CanonicalPayload(json.RawMessage(` {"a":"<x>",  "b":1.50}`))
	if a != `{"a":"<x>","b":1.50}` || a != b || sa != sb || len(sa) != 64 {
		t.Errorf("canonical %q %q, %s %s", a, b, sa, sb)
	}
	if text, sha := CanonicalPayload(json.RawMessage(`null`)); text != "" || sha != "" {
		t.Errorf("null payload: %q %q", text, sha)
	}
	if text, sha := CanonicalPayload(json.RawMessage(`"{not json "`)); text != "{not json" || sha == "" {
		t.Errorf("malformed payload: %q %q", text, sha)
	}
}

// A prompt the server stops serving (the intent-prompt flag turned off) ends its version with
// one removal row, so the calls after it count under the SDK default; turned on again, the
// same prompt starts a new version.
func TestRecordEndsAPromptVersionWhenThePromptIsNotInUse(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	ch := env.ClickHouse
	opts := Options{ExclusionCohort: 641799}
	withActive := func(active bool) []Flag {
		flags := loadValid(t)
		for i := range flags {
			if flags[i].Key == IntentPromptFlag {
				flags[i].Active = active
			}
		}
		return flags
	}
	t1 := time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC)
	for i, active := range []bool{true, false, false, true} {
		flags := withActive(active)
		if _, err := Record(ctx, ch, Lint(flags, opts), flags, t1.Add(time.Duration(i)*15*time.Minute), 0); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := ch.Query(ctx, `SELECT first_seen, removed, payload_sha256 FROM mcpulse.flag_payload_versions FINAL
WHERE flag_key = ? ORDER BY first_seen`, IntentPromptFlag)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type row struct {
		first   time.Time
		removed uint8
		sha     string
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.first, &r.removed, &r.sha); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if len(got) != 3 || got[0].removed != 0 || !got[0].first.Equal(t1) ||
		got[1].removed != 1 || !got[1].first.Equal(t1.Add(15*time.Minute)) ||
		got[2].removed != 0 || !got[2].first.Equal(t1.Add(45*time.Minute)) || got[2].sha != got[0].sha {
		t.Errorf("intent prompt versions %+v: want the prompt from t1, its removal at +15m (once), the same prompt again from +45m", got)
	}
}

// Two runs within one second: an unchanged payload is not stored as a new version, and a
// changed one keeps both versions (the newer first seen a second later), even after
// ClickHouse merges the ReplacingMergeTree's rows.
func TestRecordTwoRunsInOneSecond(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	ch := env.ClickHouse
	opts := Options{ExclusionCohort: 641799}
	withPrompt := func(prompt string) []Flag {
		flags, _, err := DecodeFlags(strings.NewReader(`{"results": [` + validRecruitmentJSON(t) + `,
{"id": 4212, "key": "mcp-intent-prompt", "active": true, "deleted": false, "filters": {
  "groups": [{"properties": [{"key": "distinct_id", "type": "person", "value": ["user-8f3a2c"], "operator": "exact"}], "rollout_percentage": null, "variant": null}],
  "payloads": {"true": ` + strconv.Quote(`{"prompt": "`+prompt+`"}`) + `}, "multivariate": null}}]}`))
		if err != nil {
			t.Fatal(err)
		}
		return flags
	}
	a := withPrompt("In one short sentence, say what the user is trying to achieve.")
	b := withPrompt("Say in a few words what the user wants from this call.")
	t1 := time.Date(2026, 12, 5, 17, 0, 0, 100e6, time.UTC)
	runs := []struct {
		flags   []Flag
		at      time.Time
		wantNew int
	}{
		{a, t1, 3},                             // every variant first seen
		{b, t1.Add(300 * time.Millisecond), 1}, // only the prompt changed
		{b, t1.Add(600 * time.Millisecond), 0}, // nothing changed
		{a, t1.Add(800 * time.Millisecond), 1}, // the prompt changed back
	}
	for i, r := range runs {
		res, err := Record(ctx, ch, Lint(r.flags, opts), r.flags, r.at, 0)
		if err != nil {
			t.Fatal(err)
		}
		if res.NewVersions != r.wantNew || res.Versions != 3 {
			t.Errorf("run %d: %+v, want %d new of 3 versions", i+1, res, r.wantNew)
		}
	}
	if err := ch.Exec(ctx, `OPTIMIZE TABLE mcpulse.flag_payload_versions FINAL`); err != nil {
		t.Fatal(err)
	}
	sec := t1.Truncate(time.Second)
	for _, c := range []struct {
		flag, variant string
		firsts        []time.Time
	}{
		{RecruitmentFlag, "agents-q3", []time.Time{sec}},
		{RecruitmentFlag, "data-teams", []time.Time{sec}},
		{IntentPromptFlag, "true", []time.Time{sec, sec.Add(time.Second), sec.Add(2 * time.Second)}},
	} {
		rows, err := ch.Query(ctx, `SELECT first_seen, payload FROM mcpulse.flag_payload_versions WHERE flag_key = ? AND variant = ? ORDER BY first_seen`, c.flag, c.variant)
		if err != nil {
			t.Fatal(err)
		}
		var firsts []time.Time
		var payloads []string
		for rows.Next() {
			var f time.Time
			var p string
			if err := rows.Scan(&f, &p); err != nil {
				t.Fatal(err)
			}
			firsts, payloads = append(firsts, f.UTC()), append(payloads, p)
		}
		rows.Close()
		if !slices.EqualFunc(firsts, c.firsts, time.Time.Equal) {
			t.Errorf("%s/%s: versions first seen %v, want %v", c.flag, c.variant, firsts, c.firsts)
		}
		if c.variant == "true" && len(payloads) == 3 && (!strings.Contains(payloads[0], "trying to achieve") ||
			!strings.Contains(payloads[1], "a few words") || payloads[2] != payloads[0]) {
			t.Errorf("prompt versions %q", payloads)
		}
	}
	// The version in force just after the runs is the latest one.
	v, ok, err := PayloadVersionAt(ctx, ch, IntentPromptFlag, "true", sec.Add(3*time.Second))
	if err != nil || !ok || !v.FirstSeen.Equal(sec.Add(2*time.Second)) || !strings.Contains(v.Payload, "trying to achieve") {
		t.Errorf("version in force: %+v %v %v", v, ok, err)
	}
}

// validRecruitmentJSON is the recruitment flag of testdata/valid_api.json, as PostHog serves it.
func validRecruitmentJSON(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "valid_api.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Results []json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for _, r := range doc.Results {
		if strings.Contains(string(r), `"key": "`+RecruitmentFlag+`"`) {
			return string(r)
		}
	}
	t.Fatal("no recruitment flag in valid_api.json")
	return ""
}
