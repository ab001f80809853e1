package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/campaigns"
	"github.com/mcpulse/mcpulse/internal/safetext"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/suppression"
)

func newSuppressionReconcileCmd() *cobra.Command {
	var (
		redisURL, dsn  string
		dryRun, asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "Rebuild the Redis suppression records from ClickHouse and repair what differs",
		Long: `Recomputes every live suppression record from the response history (recruitment_events)
and the reset audit (suppression_audit) in ClickHouse, then repairs Redis: missing records and
reset watermarks are written, stale ones replaced, records that predate a reset or whose
cooldown ended are deleted. A record newer than anything ClickHouse holds is left alone.
Cooldowns get their remaining TTL from responded_at + 7 days. Prints counts of each repair.`,
		Example: "  mcpulse suppression reconcile --dry-run\n  mcpulse suppression reconcile --json",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			rdb, ch, closeStores, err := openStores(ctx, redisURL, dsn)
			if err != nil {
				return err
			}
			defer closeStores()
			rep, err := suppression.Reconcile(ctx, ch, rdb, time.Now(), dryRun)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return newJSONEncoder(out).Encode(rep)
			}
			verb := "repaired"
			if dryRun {
				verb = "would repair (dry run, nothing written)"
			}
			fmt.Fprintf(out, "identities with history: %d, live records: %d\n", rep.Identities, rep.Live)
			fmt.Fprintf(out, "%s %d: missing %d, stale %d, wrong %d, reset watermarks %d\n", verb, rep.Repairs(), rep.Missing, rep.Stale, rep.Wrong, rep.ResetsRestored)
			fmt.Fprintf(out, "left alone: unchanged %d, newer than ClickHouse %d, unknown to ClickHouse %d, not live %d\n",
				rep.Unchanged, rep.KeptNewer, rep.UnknownToClickHouse, rep.NotLive)
			return nil
		},
	}
	addAllowEvictionFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&redisURL, "redis", os.Getenv(stores.EnvRedisURL), "Redis URL (default $"+stores.EnvRedisURL+")")
	f.StringVar(&dsn, "clickhouse", os.Getenv(stores.EnvClickHouseDSN), "ClickHouse DSN, native protocol (default $"+stores.EnvClickHouseDSN+")")
	f.BoolVar(&dryRun, "dry-run", false, "report what would be repaired; write nothing")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func newSuppressionAuditCmd() *cobra.Command {
	var (
		dsn, since     string
		dryRun, asJSON bool
		policy         contactPolicyFlags
	)
	var kinds strings.Builder
	for _, k := range suppression.ViolationKinds {
		fmt.Fprintf(&kinds, "  %-31s %s\n", k.Kind, k.Meaning)
	}
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Check in the event log that the contact policy was honoured",
		Long: `Replays the recruitment event log and judges every invitation sent since --since by each
rule of the contact policy, one violation kind per rule:

` + kinds.String() + `
The warm-up is recounted from the stored tool calls under the invitation's distinct_id, client
($mcp_client_name) and conversation ($mcp_conversation_id): successful calls of tools not in
--non-product-tools (exec commands other than call never count), and seconds since the first
product call, both since the last 24 hours without one; the thresholds are those of the flag
payload version in force when it was sent (table flag_payload_versions, by feature_flag and
campaign), else 3 calls and 120 s. Where the server's own counters
(interview_recruitment_completed_calls, _session_age_seconds) disagree with the recount they
are shown beside it. The surface rule reads interview_recruitment_surface (only mcp may recruit)
and interview_recruitment_task_bound, the evaluation rule interview_recruitment_request_id; an
invitation without what a rule reads is not judged by it. excluded_person needs the exclusion
cohort: --exclusion-members FILE, or --exclusion-cohort ID with --exclusion-cohort-project
(PostHog's cohort persons API, key in $` + campaigns.EnvPersonalAPIKey + `).

Prints counts per campaign and kind and the offending invitation ids. The violations are stored
in ClickHouse table contact_policy_violations for the dashboards (not with --dry-run). Exits 1
when there is any violation.`,
		Example: "  mcpulse suppression audit --since 2026-11-01\n  mcpulse suppression audit --since 720h --json\n" +
			"  mcpulse suppression audit --exclusion-members excluded.txt --non-product-tools exec,search_docs,learn",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			now := time.Now().UTC()
			from, err := parseSince(since, now)
			if err != nil {
				return err
			}
			if err := policy.check(); err != nil {
				return err
			}
			opts, err := policy.options(ctx)
			if err != nil {
				return err
			}
			ch, err := stores.OpenClickHouse(ctx, dsn)
			if err != nil {
				return err
			}
			defer ch.Close()
			a, err := suppression.AuditContactPolicyWith(ctx, ch, from, now, dryRun, opts)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := newJSONEncoder(out).Encode(a); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(out, "invitations since %s: %d, violations: %d\n", from.Format(time.RFC3339), a.Invitations, len(a.Violations))
				campaigns := make([]string, 0, len(a.ByCampaign))
				for c := range a.ByCampaign {
					campaigns = append(campaigns, c)
				}
				sort.Strings(campaigns)
				for _, c := range campaigns {
					v := a.ByCampaign[c]
					fmt.Fprintf(out, "  campaign %s: %d invitations", strconv.QuoteToGraphic(c), v.Invitations)
					for _, k := range suppression.ViolationKinds {
						if n := v.Count(k.Kind); n > 0 || k.Kind == suppression.ViolationSentWhileSuppressed || k.Kind == suppression.ViolationRepeatWithin7Days {
							fmt.Fprintf(out, ", %d %s", n, k.Kind)
						}
					}
					fmt.Fprintln(out)
				}
				for _, v := range a.Violations {
					fmt.Fprintf(out, "  %s %s invitation %s to %s (%s)\n", v.SentAt.Format(time.RFC3339), v.Kind,
						strconv.QuoteToGraphic(v.InvitationID), strconv.QuoteToGraphic(v.DistinctID), v.Detail)
				}
			}
			if len(a.Violations) > 0 {
				return exitCodeError{code: 1, msg: fmt.Sprintf("%d contact-policy violations", len(a.Violations))}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dsn, "clickhouse", os.Getenv(stores.EnvClickHouseDSN), "ClickHouse DSN, native protocol (default $"+stores.EnvClickHouseDSN+")")
	f.StringVar(&since, "since", "720h", "audit invitations sent since this date (2006-01-02), RFC 3339 time, or duration ago (720h)")
	f.BoolVar(&dryRun, "dry-run", false, "do not store the violations in ClickHouse")
	f.BoolVar(&asJSON, "json", false, "print the audit as JSON")
	policy.add(f)
	return cmd
}

// parseSince accepts a date, an RFC 3339 time, or a duration before now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--since %s: want a date (2006-01-02), an RFC 3339 time or a duration such as 720h", safetext.Quote(s))
}
