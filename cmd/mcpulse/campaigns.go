package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/campaigns"
	"github.com/mcpulse/mcpulse/internal/safetext"
	"github.com/mcpulse/mcpulse/internal/stores"
)

func newCampaignsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "campaigns",
		Short: "Check interview recruitment campaigns and intent-prompt trials before they run",
		Long: `Tools for research teams running interview recruitment campaigns (one variant of the PostHog
flag mcp-interview-recruitment each) and intent-prompt trials (flag mcp-intent-prompt).`,
		Example: "  mcpulse campaigns lint --flags-file flags.json --exclusion-cohort 641799",
	}
	cmd.AddCommand(newCampaignsLintCmd())
	return groupOnly(cmd)
}

func newCampaignsLintCmd() *cobra.Command {
	var (
		file, host, project string
		configPath          string
		cohort              int64
		asJSON, store       bool
		dsn                 string
		retention, timeout  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "lint (--flags-file F | --project-id P [--posthog-host H] [--timeout D]) [--exclusion-cohort ID] [--config F] [--json] [--store [--clickhouse DSN] [--retention D]]",
		Short: "Find what stops a campaign recruiting, or lets it reach people it must not, in the PostHog flags",
		Long: `Reads PostHog flag definitions and checks the two flags an MCP server with interview
recruitment evaluates. The server skips a campaign silently when its payload is wrong; this
says so before the campaign runs.

Source, one of:
  --flags-file F   a file (or - for standard input) in PostHog's JSON: the feature-flags API
                   list ({"results": [...]}), the local-evaluation response ({"flags": [...]})
                   or one flag ({"key": ...}); payloads as JSON-encoded strings (as PostHog
                   stores them) or objects
  --project-id P   PostHog's feature-flags API on --posthog-host (every page), with a personal
                   API key read from $` + campaigns.EnvPersonalAPIKey + `; each page must
                   arrive within --timeout (30s), or the lint stops naming the host
--config F (campaigns.yaml) can give exclusion_cohort and posthog.host, project_id and
personal_api_key_env (the variable holding the key); flags given on the command line win.

mcp-interview-recruitment, per variant (= campaign; a boolean flag is campaign mcp-research),
by code (E error, W warning):
  E payload_missing, payload_malformed      no payload, or not a JSON object (a bare true too)
  E message_missing, message_blank,         message absent or not a string, blank, or over
    message_too_long                        1,000 characters (UTF-16 units, as the server counts)
  E booking_url_missing, booking_url_invalid, booking_url_not_https
                                            booking_url absent, not absolute, or not https
  E min_completed_tool_calls_invalid,       not an integer in 0-1000, or 0-86400 (omitted
    min_session_age_seconds_invalid         means the defaults 3 and 120)
  W immediate_invitation                    both thresholds zero: testing only
  E exclusion_missing                       a release condition that can select the variant
                                            lacks the exclusion cohort (type cohort, key id,
                                            operator not_in, value --exclusion-cohort); a
                                            condition at rollout 0 selects nobody and is
                                            not checked
  E exclusion_inverted                      a condition selects that cohort instead (in, or
                                            not_in negated)
  W exclusion_only_condition                a condition whose only filter is the exclusion:
                                            conditions are OR alternatives, it protects no other
  W variant_unreachable                     no condition can select the variant
mcp-intent-prompt, per variant:
  E payload_missing, payload_malformed, prompt_missing, prompt_blank, prompt_too_long
                                            prompt absent, blank, or over 2,000 characters
  E unconditional_release                   a condition with no properties and a rollout of
                                            100% or unset
Per flag: E flag_malformed, the definition does not decode (a field of the wrong JSON type,
e.g. a rollout_percentage given as a string): nothing else of that flag is checked, the other
flag still is. Flags other than these two are skipped whatever their shape.
W flag_inactive, no_release_condition, unknown_variant_override (a condition
overriding to a variant the flag lacks), payload_orphan (a payload for no variant),
exclusion_cohort_unset (no --exclusion-cohort: any cohort not_in filter was accepted).
Stored runs only (--store, the scheduler): W flag_missing, the flag is absent or deleted.

--store also records the run in ClickHouse (--clickhouse), as the scheduler's campaigns_lint
job does (mcpulse scheduler --campaigns-lint): one campaign_lint_runs row per flag (variant
'', the flag's own problems) and per variant (will_recruit, exclusion_ok, errors, warnings,
problem codes), and the payload version of each variant in flag_payload_versions (SHA-256 of
its canonical JSON: first_seen kept while the hash is unchanged, a new version when it
changes, dated a second after the previous one when both fall in one second, a removed = 1
row when the variant goes). Runs older than --retention (30 days) are
deleted. The recruitment dashboard shows them (panels campaign-lint, payload-changes), and the
alerts campaign-cannot-recruit and campaign-lost-exclusion read them.

--json prints {"flags": [{"flag", "active", "problems", "variants": [{"campaign_id",
"payload_key", "will_recruit", "prompt_in_use" (intent prompt only), "problems": [{"code",
"severity", "message", "condition"}]}]}], "missing", "errors", "warnings"}. will_recruit is
whether the server would invite anyone for the campaign (active, selectable, valid payload);
a campaign with exclusion errors can still recruit. will_recruit is only meaningful for
mcp-interview-recruitment: for mcp-intent-prompt variants it is always false, read
prompt_in_use instead. Codes are stable. When neither flag is found, "flags" is empty,
"missing" names both, and the text output says that nothing was linted (exit status 0).

Exit status, so that a CI gate can tell a bad flag from a lint that did not run:
  0  no error found (warnings allowed)
  1  the lint ran and found an error
  2  the lint did not run, and says why: the flags cannot be read (a missing or unreadable
     file, a document that is not PostHog's JSON, PostHog's API refusing the key, failing,
     unreachable or slower than --timeout), a wrong option or campaigns.yaml, or (--store)
     the run cannot be stored`,
		Example: `  mcpulse campaigns lint --flags-file flags.json --exclusion-cohort 641799
  ` + campaigns.EnvPersonalAPIKey + `=phx_... mcpulse campaigns lint --project-id 2 --exclusion-cohort 641799 --json
  mcpulse campaigns lint --config campaigns.yaml --store --clickhouse clickhouse://localhost:9000`,
		Args: cobra.NoArgs,
		RunE: lintVerdictOnly(func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			if store && dsn == "" {
				return fmt.Errorf("--store writes to ClickHouse: give --clickhouse or set $%s", stores.EnvClickHouseDSN)
			}
			if timeout <= 0 {
				return fmt.Errorf("--timeout must be positive, got %s (e.g. 30s)", timeout)
			}
			if retention <= 0 {
				return fmt.Errorf("--retention must be positive, got %s (e.g. 720h for 30 days)", retention)
			}
			src, err := campaigns.ResolveSource(campaigns.Source{File: file, ProjectID: project, Host: host, ExclusionCohort: cohort, Timeout: timeout}, configPath,
				campaigns.Given{ExclusionCohort: f.Changed("exclusion-cohort"), Host: f.Changed("posthog-host"), ProjectID: f.Changed("project-id")})
			switch {
			case errors.Is(err, campaigns.ErrNoSource):
				return fmt.Errorf("give --flags-file F, or --project-id P with a PostHog personal API key in $%s", campaigns.EnvPersonalAPIKey)
			case errors.Is(err, campaigns.ErrNegativeCohort):
				return fmt.Errorf("--exclusion-cohort %s is not a cohort id", strconv.FormatInt(src.ExclusionCohort, 10))
			case errors.Is(err, campaigns.ErrTwoSources):
				return fmt.Errorf("give --flags-file or --project-id, not both")
			case err != nil:
				return err
			}
			now := time.Now()
			flags, err := src.Load(cmd.Context(), cmd.InOrStdin(), nil)
			if err != nil {
				return err
			}
			rep := campaigns.Lint(flags, src.Options())
			if store {
				ch, err := stores.OpenClickHouse(cmd.Context(), dsn)
				if err != nil {
					return err
				}
				defer ch.Close()
				res, err := campaigns.Record(cmd.Context(), ch, rep, flags, now, retention)
				if err != nil {
					return fmt.Errorf("the lint ran but was not stored: %w", err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "mcpulse campaigns lint: stored the run of %s in campaign_lint_runs (%d rows) and flag_payload_versions (%d new versions, %d variants removed)\n",
					res.RunAt.Format(time.RFC3339), res.Rows, res.NewVersions, res.Removed)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := newJSONEncoder(out)
				enc.SetIndent("", "  ")
				err = enc.Encode(rep)
			} else {
				err = rep.WriteText(out)
			}
			if err != nil {
				return err
			}
			if rep.Errors > 0 {
				return exitCodeError{code: 1, msg: fmt.Sprintf("%d error(s) in the campaign flags", rep.Errors)}
			}
			return nil
		}),
	}
	cmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return campaignsLintCannotRun(cmd, fmt.Errorf("%w (see %s --help)", err, cmd.CommandPath()))
	})
	f := cmd.Flags()
	f.StringVar(&file, "flags-file", "", "PostHog flag definitions file (feature-flags API list or local-evaluation response; - for standard input)")
	f.StringVar(&project, "project-id", "", "PostHog project id: read the flags from PostHog's feature-flags API")
	f.StringVar(&host, "posthog-host", campaigns.DefaultPostHogHost, "PostHog API host for --project-id (e.g. https://eu.posthog.com or a self-hosted URL)")
	f.DurationVar(&timeout, "timeout", campaigns.DefaultFetchTimeout, "with --project-id: the longest wait for each page of PostHog's API, its body included")
	f.Int64Var(&cohort, "exclusion-cohort", 0, "id of the shared recruitment exclusion cohort every release condition must exclude (0: accept any cohort not_in condition, with a warning)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&configPath, "config", "", "campaigns.yaml with exclusion_cohort and the PostHog project (see campaigns.example.yaml); flags given override it")
	f.BoolVar(&store, "store", false, "also record the run in ClickHouse (campaign_lint_runs, flag_payload_versions: the rows the scheduler's campaigns_lint job writes)")
	f.StringVar(&dsn, "clickhouse", os.Getenv(stores.EnvClickHouseDSN), "ClickHouse DSN for --store, native protocol (default $"+stores.EnvClickHouseDSN+")")
	f.DurationVar(&retention, "retention", campaigns.DefaultRetention, "with --store: delete stored lint runs older than this")
	return cmd
}

// lintVerdictOnly keeps exit status 1 for a lint that found an error (run's exitCodeError):
// any other error means the lint did not run, or its run was not stored, and ends with exit
// status 2 after saying why (campaignsLintCannotRun).
func lintVerdictOnly(run func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := run(cmd, args)
		var exit exitCodeError
		if err == nil || errors.As(err, &exit) {
			return err
		}
		return campaignsLintCannotRun(cmd, err)
	}
}

// campaignsLintCannotRun prints why `campaigns lint` could not run and ends with exit status 2.
func campaignsLintCannotRun(cmd *cobra.Command, err error) error {
	msg := safetext.Escape(err.Error())
	fmt.Fprintf(cmd.ErrOrStderr(), "mcpulse campaigns lint: %s\n", msg)
	return exitCodeError{code: 2, msg: msg}
}
