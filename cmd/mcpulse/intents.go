package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/intents"
	"github.com/mcpulse/mcpulse/internal/safetext"
	"github.com/mcpulse/mcpulse/internal/stores"
)

func newIntentsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "intents",
		Short:   "Evaluate intent-prompt trials: agents' stated intents per prompt version",
		Example: "  mcpulse intents report --since 2026-11-01 --export calls.csv --goals goals.csv",
	}
	cmd.AddCommand(newIntentsReportCmd())
	return groupOnly(cmd)
}

func newIntentsReportCmd() *cobra.Command {
	var (
		dsn, since, until, exportPath, goalsPath string
		asJSON                                   bool
	)
	cmd := &cobra.Command{
		Use:   "report [--since T] [--until T] [--export F.csv] [--goals G.csv] [--json]",
		Short: "Count tool calls' intents per mcp-intent-prompt payload version, with identifying details by kind",
		Long: `Attributes each tool call of the range to the mcp-intent-prompt payload version in force
for its user's client. Versions are those the campaign-lint job recorded (mcpulse scheduler
with a flag source, or mcpulse campaigns lint --store), in the order first seen. A call counts
under the newest version first seen before its client (distinct_id and client name) last
listed tools before the call: clients cache tool schemas, so a call made before the client
listed tools again counts under the previous version. With no recorded version, or no listing
since the first, a call counts as "SDK default"; so does a call after the lint saw the prompt
go out of use (the flag turned off, or its payload invalid), which it records as a removal.

The flag's targeting is not evaluated: a version counts for every user's calls, not only for
the users its release conditions select, and the variants of a multivariate flag form one
timeline (the user's variant is in no event). Run a trial as one flag released to the trial's
users, and read the range it ran.

Per version: calls, calls with an intent, blank share, words per intent (median, p90), and the
share of intents holding identifying details, by kind: email, ip_address, phone,
url_credentials (a URL with user:password@ or a token, key or signature parameter), api_key
(PostHog phc_/phx_, sk-, GitHub, Slack, AWS, Google, JWT, Bearer, key=value), id (UUIDs,
numbers of 8 digits or more), home_path (/home/NAME, /Users/NAME, C:\Users\NAME). Details are
found as the consumer stores each call (calls stored before migration 0043 count as none).
Only masked intents are shown or exported, never an intent itself.

--export F.csv writes every call of the range (timestamp, distinct_id, client_name,
conversation_id, tool_name, version_index, version_label, has_intent, words, intent_details,
intent_masked, hedged, goal) for offline evaluation. --goals G.csv reads task goals recorded
independently (CSV with columns conversation_id and goal) and adds, per version, the calls
whose conversation has a goal and the intents that state uncertainty ("probably", "not
sure", ...), for the review of invented goals and fitting uncertainty; with --export, each
call's goal.

--json prints {"from", "until", "kinds", "versions": [{"index", "label", "first_seen",
"calls", "calls_with_intent", "blank_share", "words_median", "words_p90",
"calls_with_details", "detail_share", "details": [{"kind", "calls", "share"}],
"masked_examples", "goals": {"calls_with_goal", "intents_with_goal", "hedged_intents"}}]}.
Shares are fractions (0-1) of the calls with an intent, the blank share of all calls.`,
		Example: "  mcpulse intents report --since 168h\n  mcpulse intents report --since 2026-11-01 --until 2026-11-08 --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dsn == "" {
				return fmt.Errorf("no ClickHouse: set %s or pass --clickhouse", stores.EnvClickHouseDSN)
			}
			now := time.Now().UTC()
			from, err := parseSince(since, now)
			if err != nil {
				return err
			}
			to := now
			if until != "" {
				if to, err = parseSince(until, now); err != nil {
					return fmt.Errorf("--until %s: want a date (2006-01-02), an RFC 3339 time or a duration such as 24h", safetext.Quote(until))
				}
			}
			if to.Before(from) {
				return fmt.Errorf("--until %s is before --since %s", to.Format(time.RFC3339), from.Format(time.RFC3339))
			}
			var goals map[string]string
			if goalsPath != "" {
				f, err := os.Open(goalsPath)
				if err != nil {
					return err
				}
				goals, err = intents.ReadGoals(f)
				f.Close()
				if err != nil {
					return fmt.Errorf("%s: %w", safetext.Quote(goalsPath), err)
				}
			}
			ctx := cmd.Context()
			ch, err := stores.OpenClickHouse(ctx, dsn)
			if err != nil {
				return err
			}
			defer ch.Close()
			rep, err := intents.Run(ctx, ch, from, to)
			if err != nil {
				return err
			}
			if exportPath != "" || goals != nil {
				var figs map[int]intents.GoalFigures
				if exportPath != "" {
					out, cerr := os.Create(exportPath)
					if cerr != nil {
						return cerr
					}
					figs, err = intents.Export(ctx, ch, from, to, goals, out)
					if cerr := out.Close(); err == nil {
						err = cerr
					}
				} else {
					figs, err = intents.Export(ctx, ch, from, to, goals, nil)
				}
				if err != nil {
					return err
				}
				if goals != nil {
					rep.JoinGoals(figs)
				}
			}
			if asJSON {
				enc := newJSONEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return rep.Print(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&dsn, "clickhouse", os.Getenv(stores.EnvClickHouseDSN), "ClickHouse DSN, native protocol (default $"+stores.EnvClickHouseDSN+")")
	f.StringVar(&since, "since", "168h", "calls at or after this date (2006-01-02), RFC 3339 time, or duration ago (168h)")
	f.StringVar(&until, "until", "", "calls at or before this date, RFC 3339 time, or duration ago (default now)")
	f.StringVar(&exportPath, "export", "", "write every call of the range, masked, as CSV to this file")
	f.StringVar(&goalsPath, "goals", "", "CSV of task goals recorded independently (columns conversation_id, goal)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
