package alerts

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/campaigns"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// The campaign rules fire on the lint runs campaigns.Record stores: a campaign whose payload
// breaks fires campaign-cannot-recruit, one whose release condition loses the exclusion cohort
// fires campaign-lost-exclusion (each once, for that campaign only), and both resolve when the
// exclusion is restored and the broken campaign is removed from the flag. A disabled flag
// (campaigns parked on purpose) fires neither.
func TestCampaignLintAlerts(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	ds := loadDashboards(t)
	rules := builtInRules(t, func(name string) bool { return strings.HasPrefix(name, "campaign-") }, 2)
	rc, ts := newReceiver(t, 0)
	evs := replicas(t, env, 1, rules, ds, ReceiversConfig{Receivers: []Receiver{{Name: "ops-webhook", Kind: KindWebhook, URL: ts.URL + "/hook"}}})

	good, err := campaigns.ReadFile(filepath.Join("..", "..", "campaigns", "testdata", "valid_api.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(change func(f *campaigns.Flag)) []campaigns.Flag {
		data, _ := json.Marshal(good)
		var out []campaigns.Flag
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatal(err)
		}
		for i := range out {
			if out[i].Key == campaigns.RecruitmentFlag {
				change(&out[i])
			}
		}
		return out
	}
	breakDataTeams := func(f *campaigns.Flag) {
		f.Filters.Payloads["data-teams"] = json.RawMessage(`"{\"message\": \"Chat?\", \"booking_url\": \"http://cal.com/x\"}"`)
	}
	dropExclusion := func(f *campaigns.Flag) { // condition 1 selects agents-q3 only
		f.Filters.Groups[0].Properties = f.Filters.Groups[0].Properties[:1]
	}
	broken := edit(func(f *campaigns.Flag) { breakDataTeams(f); dropExclusion(f) })
	disabled := edit(func(f *campaigns.Flag) { breakDataTeams(f); dropExclusion(f); f.Active = false })
	fixed := edit(func(f *campaigns.Flag) {
		delete(f.Filters.Payloads, "data-teams")
		f.Filters.Multivariate.Variants = slices.DeleteFunc(f.Filters.Multivariate.Variants, func(v campaigns.Variant) bool { return v.Key == "data-teams" })
	})

	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	type firing struct{ rule, campaign, state string }
	var got []firing
	for i, flags := range [][]campaigns.Flag{good, disabled, broken, broken, fixed} {
		at := t0.Add(time.Duration(i) * 15 * time.Minute)
		if _, err := campaigns.Record(ctx, env.ClickHouse, campaigns.Lint(flags, campaigns.Options{ExclusionCohort: 641799}), flags, at, 0); err != nil {
			t.Fatal(err)
		}
		for _, rep := range evaluateTogether(t, evs, at.Add(time.Minute), 1) {
			for _, tr := range rep.Transitions {
				got = append(got, firing{tr.Rule, tr.Labels["campaign_id"], tr.State})
				if tr.State == StateFiring && tr.Rule == "campaign-cannot-recruit" && !strings.Contains(tr.Summary, "booking_url_not_https") {
					t.Errorf("summary %q lacks the problem code", tr.Summary)
				}
			}
		}
	}
	want := []firing{
		{"campaign-cannot-recruit", "data-teams", StateFiring}, {"campaign-lost-exclusion", "agents-q3", StateFiring},
		{"campaign-cannot-recruit", "data-teams", StateResolved}, {"campaign-lost-exclusion", "agents-q3", StateResolved},
	}
	order := func(a, b firing) int { return strings.Compare(a.state+a.rule, b.state+b.rule) }
	slices.SortFunc(got, order)
	slices.SortFunc(want, order)
	if !slices.Equal(got, want) {
		t.Errorf("transitions %v, want %v", got, want)
	}
	if n := len(rc.got("/hook")); n != 4 {
		t.Errorf("the webhook got %d notifications, want 4", n)
	}
}
