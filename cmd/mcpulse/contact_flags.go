package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/mcpulse/mcpulse/campaigns"
	"github.com/mcpulse/mcpulse/internal/safetext"
	"github.com/mcpulse/mcpulse/jobs"
	"github.com/mcpulse/mcpulse/suppression"
)

// contactPolicyFlags are the contact-policy audit's options, shared by `mcpulse suppression
// audit` and `mcpulse scheduler`.
type contactPolicyFlags struct {
	nonProductTools []string
	exclusionFile   string
	cohortID        int64
	cohortProject   string
	cohortHost      string
	// withLint is set by the scheduler, where --exclusion-cohort is also the campaign flag
	// lint's exclusion cohort: there it may come with --exclusion-members (the file then gives
	// the audit its members) and without a project (the lint's project is used, else the
	// audit reads no cohort members).
	withLint bool
}

func (c *contactPolicyFlags) add(f *pflag.FlagSet) {
	f.StringSliceVar(&c.nonProductTools, "non-product-tools", suppression.DefaultNonProductTools,
		"tool names whose calls do not count toward an invitation's warm-up (discovery, docs, skills; exec commands other than call never count)")
	f.StringVar(&c.exclusionFile, "exclusion-members", "", "file of the recruitment exclusion cohort's distinct ids, one a line ('#' comments); invitations to them are excluded_person violations")
	usage := "PostHog cohort id of the recruitment exclusion cohort, read from PostHog's cohort persons API (key in $" + campaigns.EnvPersonalAPIKey + ")"
	if c.withLint {
		usage = "id of the shared recruitment exclusion cohort: the campaign flag lint requires it on every release condition (0: any cohort not_in condition, with a warning), and the contact-policy audit reads its members from PostHog's cohort persons API (key in $" + campaigns.EnvPersonalAPIKey + "; project: --exclusion-cohort-project, else the lint's) unless --exclusion-members is given"
	}
	f.Int64Var(&c.cohortID, "exclusion-cohort", 0, usage)
	f.StringVar(&c.cohortProject, "exclusion-cohort-project", "", "PostHog project id of --exclusion-cohort")
	f.StringVar(&c.cohortHost, "exclusion-cohort-host", campaigns.DefaultPostHogHost, "PostHog API host of --exclusion-cohort")
}

// check refuses contradictory flags before anything runs.
func (c *contactPolicyFlags) check() error {
	if c.exclusionFile != "" && c.cohortID != 0 && !c.withLint {
		return fmt.Errorf("--exclusion-members and --exclusion-cohort are two sources of one list: give one")
	}
	if c.cohortID != 0 && c.cohortProject == "" && !c.withLint {
		return fmt.Errorf("--exclusion-cohort needs --exclusion-cohort-project")
	}
	for _, n := range c.nonProductTools {
		if strings.IndexFunc(n, safetext.Hidden) >= 0 {
			return fmt.Errorf("--non-product-tools: %s holds hidden characters", safetext.Quote(n))
		}
	}
	return nil
}

// options reads the exclusion members (afresh at each call) and returns the audit's options.
func (c *contactPolicyFlags) options(ctx context.Context) (suppression.ContactPolicyOptions, error) {
	opts := suppression.ContactPolicyOptions{NonProductTools: c.nonProductTools}
	if opts.NonProductTools == nil {
		opts.NonProductTools = []string{}
	}
	switch {
	case c.exclusionFile != "":
		m, err := suppression.ReadExclusionMembers(c.exclusionFile, os.Stdin)
		if err != nil {
			return opts, err
		}
		opts.Excluded, opts.ExclusionSource = m, "file "+c.exclusionFile
	case c.cohortID != 0 && c.cohortProject != "":
		m, err := suppression.FetchCohortMembers(ctx, suppression.CohortSource{Host: c.cohortHost, ProjectID: c.cohortProject,
			CohortID: c.cohortID, APIKey: os.Getenv(campaigns.EnvPersonalAPIKey)})
		if err != nil {
			return opts, err
		}
		opts.Excluded, opts.ExclusionSource = m, fmt.Sprintf("PostHog cohort %d", c.cohortID)
	}
	return opts, nil
}

// shareLintSource gives the audit the campaign flag lint's exclusion cohort, PostHog project and
// host (a campaigns.yaml's among them) where the contact-policy flags do not set their own.
// A nil job changes nothing.
func (c *contactPolicyFlags) shareLintSource(job *jobs.CampaignsLint, f *pflag.FlagSet) {
	if job == nil {
		return
	}
	if c.cohortID == 0 {
		c.cohortID = job.Source.ExclusionCohort
	}
	if c.cohortProject == "" && job.Source.ProjectID != "" {
		c.cohortProject = job.Source.ProjectID
		if !f.Changed("exclusion-cohort-host") && job.Source.Host != "" {
			c.cohortHost = job.Source.Host
		}
	}
}
