package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/cobra"

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
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Check in the event log that suppression was honoured",
		Long: `Replays the recruitment event log and lists every invitation sent since --since to an
identity that had accepted or declined, or was in a cooldown, at that moment (a gate that
failed in the MCP server), and every invitation sent less than 7 days after the identity's
previous one, with counts per campaign and the offending invitation ids. The violations are
stored in ClickHouse table contact_policy_violations for the dashboards (not with --dry-run).
Exits 1 when there is any violation.`,
		Example: "  mcpulse suppression audit --since 2026-11-01\n  mcpulse suppression audit --since 720h --json",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			now := time.Now().UTC()
			from, err := parseSince(since, now)
			if err != nil {
				return err
			}
			ch, err := stores.OpenClickHouse(ctx, dsn)
			if err != nil {
				return err
			}
			defer ch.Close()
			a, err := suppression.AuditContactPolicy(ctx, ch, from, now, dryRun)
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
					fmt.Fprintf(out, "  campaign %s: %d invitations, %d sent while suppressed, %d repeats within 7 days\n",
						strconv.QuoteToGraphic(c), v.Invitations, v.SentWhileSuppressed, v.RepeatWithin7Days)
				}
				for _, v := range a.Violations {
					detail := "state " + v.StateAtSend
					if v.PreviousInvitationID != "" {
						detail = "previous invitation " + strconv.QuoteToGraphic(v.PreviousInvitationID)
					}
					fmt.Fprintf(out, "  %s %s invitation %s to %s (%s)\n", v.SentAt.Format(time.RFC3339), v.Kind,
						strconv.QuoteToGraphic(v.InvitationID), strconv.QuoteToGraphic(v.DistinctID), detail)
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
