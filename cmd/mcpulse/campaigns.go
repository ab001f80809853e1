package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/campaigns"
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
		asJSON              bool
	)
	cmd := &cobra.Command{
		Use:   "lint (--flags-file F | --project-id P [--posthog-host H]) [--exclusion-cohort ID] [--config F] [--json]",
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
                   API key read from $` + campaigns.EnvPersonalAPIKey + `
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
                                            operator not_in, value --exclusion-cohort)
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
Per flag: W flag_inactive, no_release_condition, unknown_variant_override (a condition
overriding to a variant the flag lacks), payload_orphan (a payload for no variant),
exclusion_cohort_unset (no --exclusion-cohort: any cohort not_in filter was accepted).

--json prints {"flags": [{"flag", "active", "problems", "variants": [{"campaign_id",
"payload_key", "will_recruit", "prompt_in_use" (intent prompt only), "problems": [{"code",
"severity", "message", "condition"}]}]}], "missing", "errors", "warnings"}. will_recruit is
whether the server would invite anyone for the campaign (active, selectable, valid payload);
a campaign with exclusion errors can still recruit. Codes are stable.

Exit status: 0 without errors (warnings allowed), 1 when any error is found or the flags
cannot be read.`,
		Example: `  mcpulse campaigns lint --flags-file flags.json --exclusion-cohort 641799
  ` + campaigns.EnvPersonalAPIKey + `=phx_... mcpulse campaigns lint --project-id 2 --exclusion-cohort 641799 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var (
				flags []campaigns.Flag
				err   error
			)
			keyEnv := campaigns.EnvPersonalAPIKey
			if configPath != "" {
				cfg, err := campaigns.LoadConfig(configPath)
				if err != nil {
					return err
				}
				f := cmd.Flags()
				if !f.Changed("exclusion-cohort") && cfg.ExclusionCohort != 0 {
					cohort = cfg.ExclusionCohort
				}
				if !f.Changed("posthog-host") && cfg.PostHog.Host != "" {
					host = cfg.PostHog.Host
				}
				if !f.Changed("project-id") && file == "" {
					project = cfg.PostHog.ProjectID
				}
				if cfg.PostHog.PersonalAPIKeyEnv != "" {
					keyEnv = cfg.PostHog.PersonalAPIKeyEnv
				}
			}
			switch {
			case file != "" && project != "":
				return fmt.Errorf("give --flags-file or --project-id, not both")
			case file != "":
				flags, err = campaigns.ReadFile(file, cmd.InOrStdin())
			case project != "":
				flags, err = campaigns.Fetch(cmd.Context(), campaigns.FetchOptions{
					Host: host, ProjectID: project, APIKey: os.Getenv(keyEnv), APIKeyEnv: keyEnv,
				})
			default:
				return fmt.Errorf("give --flags-file F, or --project-id P with a PostHog personal API key in $%s", campaigns.EnvPersonalAPIKey)
			}
			if err != nil {
				return err
			}
			if cohort < 0 {
				return fmt.Errorf("--exclusion-cohort %s is not a cohort id", strconv.FormatInt(cohort, 10))
			}
			rep := campaigns.Lint(flags, campaigns.Options{ExclusionCohort: cohort})
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
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "flags-file", "", "PostHog flag definitions file (feature-flags API list or local-evaluation response; - for standard input)")
	f.StringVar(&project, "project-id", "", "PostHog project id: read the flags from PostHog's feature-flags API")
	f.StringVar(&host, "posthog-host", campaigns.DefaultPostHogHost, "PostHog API host for --project-id (e.g. https://eu.posthog.com or a self-hosted URL)")
	f.Int64Var(&cohort, "exclusion-cohort", 0, "id of the shared recruitment exclusion cohort every release condition must exclude (0: accept any cohort not_in condition, with a warning)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&configPath, "config", "", "campaigns.yaml with exclusion_cohort and the PostHog project (see campaigns.example.yaml); flags given override it")
	return cmd
}
