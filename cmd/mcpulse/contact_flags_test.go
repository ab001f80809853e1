package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/mcpulse/mcpulse/campaigns"
	"github.com/mcpulse/mcpulse/jobs"
)

// The contact-policy options are checked before anything starts, on the audit, the scheduler
// and gen alike.
func TestContactPolicyFlagsAreCheckedFirst(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"suppression", "audit", "--exclusion-members", "x.txt", "--exclusion-cohort", "641799"}, "give one"},
		{[]string{"suppression", "audit", "--exclusion-cohort", "641799"}, "--exclusion-cohort needs --exclusion-cohort-project"},
		{[]string{"scheduler", "--non-product-tools", "docs\u202e"}, `holds hidden characters`},
		{[]string{"suppression", "audit", "--non-product-tools", "docs\u202e"}, `holds hidden characters`},
		{[]string{"suppression", "audit", "--exclusion-members", "/nonexistent/excluded.txt"}, "exclusion members"},
		{[]string{"gen", "--events", "10", "--contact-violations", "-1", "--out", "/nonexistent/x.jsonl"}, "--contact-violations must not be negative"},
		{[]string{"gen", "--events", "10", "--contact-violations", "2", "--shape", "sdk", "--out", "/nonexistent/x.jsonl"}, "needs --shape demo"},
	} {
		root := newRootCmd()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs(c.args)
		err := root.ExecuteContext(ctx)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
		if strings.ContainsRune(err.Error(), '\u202e') {
			t.Errorf("%v: error shows a bidi control: %q", c.args, err)
		}
	}
}

// In the scheduler --exclusion-cohort is the lint's cohort and the audit's: the audit takes the
// lint's cohort, project and host where its own flags say nothing, and a members file beside
// the cohort id is no contradiction there.
func TestSchedulerAuditSharesTheLintsExclusionCohort(t *testing.T) {
	c := contactPolicyFlags{withLint: true}
	f := pflag.NewFlagSet("scheduler", pflag.ContinueOnError)
	c.add(f)
	if err := f.Parse([]string{"--exclusion-members", "excluded.txt", "--exclusion-cohort", "641799"}); err != nil {
		t.Fatal(err)
	}
	if err := c.check(); err != nil {
		t.Fatalf("members file beside the lint's cohort: %v", err)
	}
	c = contactPolicyFlags{withLint: true}
	f = pflag.NewFlagSet("scheduler", pflag.ContinueOnError)
	c.add(f)
	if err := f.Parse(nil); err != nil {
		t.Fatal(err)
	}
	c.shareLintSource(&jobs.CampaignsLint{Source: campaigns.Source{ProjectID: "12", Host: "https://eu.posthog.com", ExclusionCohort: 641799}}, f)
	if c.cohortID != 641799 || c.cohortProject != "12" || c.cohortHost != "https://eu.posthog.com" {
		t.Errorf("audit cohort %d, project %q, host %q; want the lint's 641799, 12, https://eu.posthog.com", c.cohortID, c.cohortProject, c.cohortHost)
	}
	c = contactPolicyFlags{withLint: true}
	f = pflag.NewFlagSet("scheduler", pflag.ContinueOnError)
	c.add(f)
	if err := f.Parse([]string{"--exclusion-cohort", "7", "--exclusion-cohort-project", "99"}); err != nil {
		t.Fatal(err)
	}
	c.shareLintSource(&jobs.CampaignsLint{Source: campaigns.Source{ProjectID: "12", ExclusionCohort: 641799}}, f)
	if c.cohortID != 7 || c.cohortProject != "99" {
		t.Errorf("audit cohort %d, project %q; want its own 7, 99", c.cohortID, c.cohortProject)
	}
}
