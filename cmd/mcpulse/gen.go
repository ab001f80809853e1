package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/demo/gen"
	"github.com/mcpulse/mcpulse/internal/safetext"
)

func newGenCmd() *cobra.Command {
	var (
		events            int
		seed              int64
		out               string
		force             bool
		end               string
		instanceURL       string
		shape             string
		hours             int
		listEvery         int
		contactViolations int
	)
	cmd := &cobra.Command{
		Use:   "gen",
		Short: "Generate a deterministic test corpus of MCP events and its expected outcome",
		Long: `gen writes a JSONL corpus of PostHog-style events (one envelope per line: uuid, event,
distinct_id, timestamp, properties) and, next to it, the outcome the pipeline must produce
from it (FILE.expected.json: events per kind, table row counts, every rollup row, the
suppression record of every identity), computed independently of the consumer.

The corpus:
  - tool calls (~80%) over ~50 real MCP tools whose input schemas are embedded (GitHub,
    PostHog, Sentry, Kubernetes MCP servers), from claude-code, cursor, claude-ai, vscode
    and codex, some through PostHog's exec tool; ~5% fail; ~12% of successful calls carry
    misnamed or misplaced argument keys and ~3% client-injected ones (_meta, toolCallId),
    reported in $mcp_ignored_keys exactly as a diff against the schema gives them;
    interview recruitment diagnostics (gate reason, url/form support, campaign);
  - recruitment flows over 3 campaigns: invitations, booking-link opens, responses
    (accept/decline/cancel, on time or late, with or without responded_at), repeated
    invitations, people with odd distinct_ids;
  - ~1% exact duplicate lines and ~0.5% malformed lines (bad JSON, missing uuid, bad
    timestamp, wrong types, response "maybe", 201-character distinct_id, 21 ignored keys,
    unknown event names) that must be dead-lettered.

With --shape sdk the tool calls are written as the @posthog/mcp SDK (0.16.3) sends them: no
$mcp_ignored_keys; the arguments in $mcp_parameters.request.params.arguments and the result in
$mcp_response (about 1 KB together; PostHog's own server names ignored keys in the result, the
others leave them to be derived from the served schema); $mcp_server_name and _version,
$mcp_source, $mcp_intent; the SDK's sanitizing and truncation applied. Before a user's first
call to a server come an $mcp_initialize and an $mcp_tools_list carrying the schemas as the
SDK serves them (--list-every N lists for one (user, server) pair in N only); each failed call
has an $exception beside it; some calls name tools the server does not have, some fail
validation. These events come on top of --events. The tool calls themselves are the ones the
demo shape holds (same uuids, times, users, tools and arguments).

With --contact-violations N, N invitations break each further rule of the contact-policy audit
(invited_before_thresholds, url_elicitation_unsupported, excluded_surface_or_task,
two_invitations_one_evaluation, excluded_person) and N break none, each to a person of its own
after a warm-up of tool calls in its conversation (on top of --events; demo shape only). The
expected counts and invitation ids are in the .expected.json under contact_policy, and the
excluded distinct ids in FILE.excluded.txt (mcpulse suppression audit --exclusion-members).
A two_invitations_one_evaluation case's second invitation is also a repeat within 7 days of
the first, as the audit reports it. contact_policy lists the further kinds only: the random
recruitment flows also break the two older rules (sent while suppressed, repeat within 7
days), and those counts are not predicted.

Events span the --hours (default 48) before --end. The same flags always give byte-identical
files.`,
		Example: `  mcpulse gen --events 20000 --seed 1
  mcpulse gen --events 200000 --seed 7 --out /tmp/big.jsonl --end 2026-03-01T00:00:00Z
  mcpulse gen --events 20000 --shape sdk --hours 24 --out sdk.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if events < 1 {
				return errors.New("--events must be at least 1")
			}
			if hours < 1 {
				return errors.New("--hours must be at least 1")
			}
			if contactViolations < 0 || (contactViolations > 0 && shape == string(gen.ShapeSDK)) {
				return errors.New("--contact-violations must not be negative, and needs --shape demo")
			}
			if out == "" || out == "-" {
				return errors.New("--out must be a file path (the expected outcome is written next to it)")
			}
			cfg := gen.Config{Events: events, Seed: seed, InstanceURL: instanceURL, Progress: cmd.ErrOrStderr(),
				Shape: gen.Shape(shape), Span: time.Duration(hours) * time.Hour, ListEvery: listEvery, ContactViolations: contactViolations}
			if end == "" {
				cfg.End = time.Now().UTC().Truncate(time.Hour)
			} else {
				t, err := time.Parse(time.RFC3339, end)
				if err != nil {
					return fmt.Errorf("--end %s: want an RFC 3339 time with its offset, such as 2026-03-01T00:00:00Z", safetext.Quote(end))
				}
				cfg.End = t.UTC()
			}
			if _, err := os.Stat(out); err == nil && !force {
				return fmt.Errorf("%s exists; pass --force to overwrite it (or choose another --out)", out)
			}
			o, err := gen.WriteFiles(cfg, out)
			if err != nil {
				return err
			}
			c := o.Corpus
			fmt.Fprintf(cmd.ErrOrStderr(),
				"gen: wrote %d lines to %s: %d tool calls, %d recruitment events, %d duplicate lines (rate %g), %d malformed lines (rate %g); "+
					"rates: tool errors %g, exec %g, misplaced keys %g and client-injected keys %g of successful calls, "+
					"diagnostics %g, unknown reasons %g, null capabilities %g, instance_url %g, late responses %g; "+
					"seed %d, events from %s to %s; expected outcome in %s.expected.json\n",
				c.Lines, out, o.Tables["tool_calls"], o.Tables["recruitment_events"],
				c.Duplicates, gen.DuplicateRate, c.Malformed, gen.MalformedRate,
				gen.ToolErrorRate, gen.ExecShare, gen.MisplacedKeyRate, gen.ClientInjectedKeyRate,
				gen.DiagnosticsRate, gen.UnknownReasonRate, gen.NullCapabilityRate, gen.InstanceURLRate, gen.LateResponseRate,
				c.Seed, cfg.End.Add(-cfg.Span).Format(time.RFC3339), c.End, out)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&events, "events", 10000, "number of lines to write, duplicates and malformed lines included")
	f.Int64Var(&seed, "seed", 1, "random seed; the same seed gives the same corpus")
	f.StringVar(&out, "out", "events.jsonl", "corpus file; the expected outcome goes to FILE.expected.json")
	f.BoolVar(&force, "force", false, "overwrite --out if it exists")
	f.StringVar(&end, "end", "", "RFC 3339 time the corpus ends at (default: now, truncated to the hour, UTC)")
	f.StringVar(&shape, "shape", string(gen.ShapeDemo), `how tool calls are written: "demo" (mcpulse's event contract) or "sdk" (as @posthog/mcp sends them)`)
	f.IntVar(&hours, "hours", int(gen.Window/time.Hour), "span of the events' timestamps before --end, in hours (at least 1)")
	f.IntVar(&contactViolations, "contact-violations", 0, "add N invitations breaking each further contact-policy rule, and N breaking none (expected under contact_policy)")
	f.IntVar(&listEvery, "list-every", 1, "with --shape sdk: list tools for one (user, server) pair in N")
	f.StringVar(&instanceURL, "instance-url", gen.DefaultInstanceURL,
		"default PostHog instance URL: what events without instance_url belong to, in the expected identity hashes")
	return cmd
}
