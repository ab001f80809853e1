package demo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/dashboards"
	"github.com/mcpulse/mcpulse/demo"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// The demo's lint runs give the recruitment dashboard's panels their data: the latest state of
// each campaign (one broken payload, one missing exclusion), and the payload changes (the copy
// change and the broken URL after the launch's three versions).
func TestRecordCampaignLintFillsThePanels(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	end := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	n, err := demo.RecordCampaignLint(ctx, env.ClickHouse, end)
	if err != nil || n != 6 {
		t.Fatalf("%d runs: %v", n, err)
	}
	ds, err := dashboards.Load()
	if err != nil {
		t.Fatal(err)
	}
	panel := func(id string) map[string][]string {
		t.Helper()
		for _, d := range ds {
			for _, p := range d.Panels {
				if d.Name != "recruitment-campaigns" || p.ID != id {
					continue
				}
				res, err := dashboards.Run(ctx, env.ClickHouse, p, dashboards.Filters{})
				if err != nil {
					t.Fatal(err)
				}
				out := map[string][]string{}
				for _, row := range res.Rows {
					var cells []string
					for i := 1; i < len(row); i++ {
						switch v := row[i].(type) {
						case time.Time:
							cells = append(cells, res.Columns[i].Name+"=-"+end.Sub(v).String())
						default:
							cells = append(cells, fmt.Sprintf("%s=%v", res.Columns[i].Name, v))
						}
					}
					out[row[0].(string)] = append(out[row[0].(string)], fmt.Sprint(cells))
				}
				return out
			}
		}
		t.Fatalf("no panel recruitment-campaigns/%s", id)
		return nil
	}
	lint := panel("campaign-lint")
	want := map[string]string{
		"onboarding-2026q4":   "[checked_at=-1h0m0s lint_state=ok recruits=1 exclusion_held=1 lint_errors=0 lint_warnings=0 problems= payload_since=-14h0m0s]",
		"sql-editor-research": "[checked_at=-1h0m0s lint_state=cannot recruit recruits=0 exclusion_held=1 lint_errors=1 lint_warnings=0 problems=booking_url_not_https payload_since=-3h0m0s]",
		"mcp-exec-study":      "[checked_at=-1h0m0s lint_state=exclusion missing recruits=1 exclusion_held=0 lint_errors=1 lint_warnings=0 problems=exclusion_missing payload_since=-30h0m0s]",
	}
	for c, w := range want {
		if got := lint[c]; len(got) != 1 || got[0] != w {
			t.Errorf("campaign-lint %s: %v, want %s", c, got, w)
		}
	}
	changes := panel("payload-changes")
	if len(changes["onboarding-2026q4"]) != 2 || len(changes["sql-editor-research"]) != 2 || len(changes["mcp-exec-study"]) != 1 {
		t.Errorf("payload-changes: %v, want 2, 2 and 1 versions", changes)
	}
}
