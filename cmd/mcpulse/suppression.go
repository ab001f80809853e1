package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/suppression"
)

func newSuppressionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "suppression",
		Short: "Inspect, reset, list, reconcile and audit interview suppression state",
		Long: `Ops tools for interview suppression (DESIGN.md §3). An identity is one user of one PostHog
instance: give --distinct-id (with --instance-url, default https://us.posthog.com) or its
--identity-hash (64 hex characters, the SHA-256 of JSON.stringify([instance_url, distinct_id])).

Services: --redis ($MCPULSE_REDIS_URL), --clickhouse ($MCPULSE_CLICKHOUSE_DSN) and, for reset,
--brokers ($MCPULSE_KAFKA_BROKERS).`,
		Example: "  mcpulse suppression show --distinct-id user-42\n" +
			"  mcpulse suppression reset --distinct-id user-42 --reason \"declined by mistake (ticket 1234)\" --dry-run\n" +
			"  mcpulse suppression list --state cooldown",
	}
	cmd.AddCommand(
		newSuppressionShowCmd(),
		newSuppressionResetCmd(),
		newSuppressionListCmd(),
		newSuppressionReconcileCmd(),
		newSuppressionAuditCmd(),
	)
	return groupOnly(cmd)
}

// supprConn holds the service flags of the suppression subcommands.
type supprConn struct {
	redisURL, dsn, brokers string
}

func (c *supprConn) redisFlag(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&c.redisURL, "redis", os.Getenv(stores.EnvRedisURL), "Redis URL, or comma-separated addresses of a Redis Cluster (default $"+stores.EnvRedisURL+")")
}

func (c *supprConn) clickHouseFlag(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&c.dsn, "clickhouse", os.Getenv(stores.EnvClickHouseDSN), "ClickHouse DSN, native protocol (default $"+stores.EnvClickHouseDSN+")")
}

// supprIdentity holds the identity flags of show and reset.
type supprIdentity struct {
	distinctID, instanceURL, hash string
}

func (id *supprIdentity) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&id.distinctID, "distinct-id", "", "the person's PostHog distinct_id")
	f.StringVar(&id.instanceURL, "instance-url", ingest.DefaultInstanceURL, "PostHog instance URL of the distinct id (part of the identity hash)")
	f.StringVar(&id.hash, "identity-hash", "", "the identity hash (64 hex characters) instead of --distinct-id")
}

func newSuppressionShowCmd() *cobra.Command {
	var (
		conn   supprConn
		id     supprIdentity
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "show (--distinct-id D [--instance-url U] | --identity-hash H) [--json]",
		Short: "Show one identity's suppression record, cooldown, pending keys, last reset and history",
		Long: `Prints an identity's hash; its suppression record (state, campaign, responded_at) and the
time left on a cooldown; its pending continuation keys (found with SCAN on the identity's own
pattern, never KEYS); its last ops reset; and, from ClickHouse, its response history
(recruitment_events) and its resets (suppression_audit). Without a ClickHouse DSN the history
is skipped with a warning. Strings that came from outside (distinct ids, campaign ids,
reasons) are printed quoted, with control characters escaped.`,
		Example: `  mcpulse suppression show --distinct-id user-42
  mcpulse suppression show --distinct-id user-42 --instance-url https://eu.posthog.com --json
  mcpulse suppression show --identity-hash 3f1c…(64 hex)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := suppression.CheckIdentityArgs(id.distinctID, id.instanceURL, id.hash); err != nil {
				return err
			}
			rdb, err := openRedisReader(ctx, conn.redisURL)
			if err != nil {
				return err
			}
			defer rdb.Close()
			opts := suppression.ShowOptions{Redis: rdb, DistinctID: id.distinctID, InstanceURL: id.instanceURL, IdentityHash: id.hash}
			if conn.dsn == "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: no ClickHouse DSN (set %s or pass --clickhouse): history and resets not shown\n", stores.EnvClickHouseDSN)
			} else {
				// The Redis record is what an operator needs first: show it even when ClickHouse
				// is down, and say what is missing.
				if ch, err := stores.OpenClickHouse(ctx, conn.dsn); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v: history and resets not shown\n", err)
				} else {
					defer ch.Close()
					opts.ClickHouse = ch
				}
			}
			rep, err := suppression.Show(ctx, opts)
			if err != nil {
				return err
			}
			if asJSON {
				return supprWriteJSON(cmd.OutOrStdout(), rep)
			}
			return rep.WriteText(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	id.flags(cmd)
	conn.redisFlag(cmd)
	conn.clickHouseFlag(cmd)
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func newSuppressionResetCmd() *cobra.Command {
	var (
		conn                supprConn
		id                  supprIdentity
		reason, actor, file string
		dryRun, yes         bool
	)
	cmd := &cobra.Command{
		Use:   "reset (--distinct-id D [--instance-url U] | --identity-hash H | --from-file F) --reason TEXT [--actor NAME] [--dry-run]",
		Short: "Clear one identity's suppression state, write its reset watermark, and audit it",
		Long: `Deletes the identity's suppression record and its pending continuation keys and writes its
reset watermark mcp:interview:{<hash>}:reset = {"reset_at","actor","reason"} (no TTL), all in
one Lua script. reset_at is the Redis server's clock (not this machine's), and responses dated
up to 5 minutes after it are ignored from then on: the clock rule accepts a response dated that
far ahead of the clock receiving it, so neither one received before the reset nor any replay of
it, under any uuid, can bring the record back. Then publishes an audit event (action suppression_reset, the deleted
keys and the previous record) to topic mcpulse_audit and waits for Kafka's ack.

--dry-run prints what would be done and writes nothing at all (Redis, Kafka).

An identity with no record, no pending key and no recruitment_events row is unknown: the
command says so, writes nothing and exits 1.

--from-file F resets the identities listed in F, one a line: a distinct id (with
--instance-url), or hash:<64 hex>; blank lines and lines starting with # are skipped. More
than 100 identities need --yes. Each is reset and audited in turn; unknown or failed ones are
reported and skipped, and the exit status is then 1.

If the audit event cannot be published after Redis was changed, the event's JSON is printed
on stderr: publish it to mcpulse_audit (key: the identity hash) by hand. Exit status 1.

--actor defaults to the OS user. --reason is required.`,
		Example: `  mcpulse suppression reset --distinct-id user-42 --reason "asked support to be invited again (ticket 1234)"
  mcpulse suppression reset --identity-hash 3f1c…(64 hex) --reason "GDPR erasure" --dry-run
  mcpulse suppression reset --from-file ids.txt --reason "campaign opt-in list" --actor alice`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if strings.TrimSpace(reason) == "" {
				return errors.New(`--reason is required: say why the identity is reset (it is kept in the audit), e.g. --reason "ticket 1234"`)
			}
			if !cmd.Flags().Changed("actor") {
				if actor = suppression.DefaultResetActor(); actor == "" {
					return errors.New("the OS user could not be found: pass --actor NAME (who resets, kept in the audit)")
				}
			} else if strings.TrimSpace(actor) == "" {
				return errors.New("--actor is empty: name who resets (kept in the audit), or leave --actor out to use the OS user")
			}
			var targets []suppression.ResetTarget
			if file != "" {
				if id.distinctID != "" || id.hash != "" {
					return errors.New("give --from-file or one identity (--distinct-id / --identity-hash), not both")
				}
				var err error
				if targets, err = supprReadTargets(file, cmd.InOrStdin()); err != nil {
					return err
				}
				if len(targets) > suppression.ResetBatchLimit && !yes {
					from := file
					if from == "-" {
						from = "standard input"
					}
					return fmt.Errorf("%s names %d identities, more than %d: this is not a bulk tool; pass --yes if you mean it", from, len(targets), suppression.ResetBatchLimit)
				}
				if err := ingest.CheckIdentity(id.instanceURL, ""); err != nil {
					return fmt.Errorf("--instance-url: %w", err)
				}
			} else if id.distinctID == "" && id.hash == "" {
				return errors.New("no identity: give --distinct-id, --identity-hash or --from-file")
			} else if err := suppression.CheckIdentityArgs(id.distinctID, id.instanceURL, id.hash); err != nil {
				return err
			}

			rdb, err := openRedis(ctx, conn.redisURL)
			if err != nil {
				return err
			}
			defer rdb.Close()
			ch, err := stores.OpenClickHouse(ctx, conn.dsn)
			if err != nil {
				return err
			}
			defer ch.Close()
			opts := suppression.ResetOptions{
				Redis: rdb, ClickHouse: ch, DistinctID: id.distinctID, InstanceURL: id.instanceURL, IdentityHash: id.hash,
				Actor: actor, Reason: reason, DryRun: dryRun,
			}
			if !dryRun {
				brokers, err := stores.ParseBrokers(conn.brokers)
				if err != nil {
					return err
				}
				if len(brokers) == 0 {
					return fmt.Errorf("no Kafka brokers for the audit event: set %s or pass --brokers", stores.EnvKafkaBrokers)
				}
				if err := suppression.ResetCheckKafka(ctx, brokers); err != nil {
					return err
				}
				pub, err := ingest.NewPublisher(ingest.PublisherConfig{Brokers: brokers, DefaultInstanceURL: id.instanceURL})
				if err != nil {
					return err
				}
				defer pub.Close()
				opts.Publisher = pub
			}

			if file == "" {
				rep, err := suppression.Reset(ctx, opts)
				if rep != nil {
					if werr := rep.WriteText(out); werr != nil && err == nil {
						err = werr
					}
				}
				return supprResetError(errOut, err)
			}

			done := 0
			failed, err := suppression.ResetBatch(ctx, opts, targets, yes, func(o suppression.ResetBatchOutcome) {
				if o.Err == nil {
					done++
				}
				if o.Report != nil {
					_ = o.Report.WriteText(out)
				}
				if o.Err != nil {
					var auditErr *suppression.ResetAuditError
					if errors.As(o.Err, &auditErr) {
						supprAuditAlarm(errOut, auditErr)
					} else {
						fmt.Fprintf(errOut, "line %d (%s): %v\n", o.Target.Line, o.Target, o.Err)
					}
				}
			})
			verb := "reset"
			if dryRun {
				verb = "would reset (dry run)"
			}
			fmt.Fprintf(errOut, "%s %d of %d identities; %d failed\n", verb, done, len(targets), failed)
			if err != nil {
				return err
			}
			if failed > 0 {
				return exitCodeError{code: 1, msg: fmt.Sprintf("%d identities not reset", failed)}
			}
			return nil
		},
	}
	addAllowEvictionFlag(cmd)
	f := cmd.Flags()
	id.flags(cmd)
	conn.redisFlag(cmd)
	conn.clickHouseFlag(cmd)
	f.StringVar(&conn.brokers, "brokers", os.Getenv(stores.EnvKafkaBrokers), "Kafka brokers for the audit event, comma-separated (default $"+stores.EnvKafkaBrokers+")")
	f.StringVar(&reason, "reason", "", "why the identity is reset (required; kept in the audit)")
	f.StringVar(&actor, "actor", "", "who resets (default: the OS user)")
	f.BoolVar(&dryRun, "dry-run", false, "print what would be done; write nothing")
	f.StringVar(&file, "from-file", "", "reset the identities listed in this file (one a line: a distinct id or hash:<64 hex>; - for stdin)")
	f.BoolVar(&yes, "yes", false, "confirm a --from-file of more than 100 identities")
	return cmd
}

// supprReadTargets reads a --from-file ("-": standard input).
func supprReadTargets(file string, stdin io.Reader) ([]suppression.ResetTarget, error) {
	r := stdin
	if file != "-" {
		fh, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer fh.Close()
		r = fh
	}
	targets, err := suppression.ParseResetTargets(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return targets, nil
}

// supprResetError turns a single reset's error into the command's: the audit failure is
// printed loudly with the event to re-publish.
func supprResetError(errOut io.Writer, err error) error {
	var auditErr *suppression.ResetAuditError
	if errors.As(err, &auditErr) {
		supprAuditAlarm(errOut, auditErr)
		return exitCodeError{code: 1, msg: "audit event not published"}
	}
	return err
}

func supprAuditAlarm(errOut io.Writer, e *suppression.ResetAuditError) {
	fmt.Fprintf(errOut, "\n*** ERROR: %v\n", e)
	if len(e.Event) > 0 {
		fmt.Fprintf(errOut, "*** Redis WAS changed. Publish this audit event to %s with key %s by hand:\n%s\n\n",
			ingest.TopicAudit, e.IdentityHash, e.Event)
	} else {
		fmt.Fprintf(errOut, "*** Redis WAS changed and the audit event could not even be built; record this reset by hand.\n\n")
	}
}

func newSuppressionListCmd() *cobra.Command {
	var (
		conn            supprConn
		state, campaign string
		asJSON          bool
	)
	cmd := &cobra.Command{
		Use:   "list [--state accepted|declined|cooldown] [--campaign C] [--json]",
		Short: "Stream the suppression records, optionally filtered by state and campaign",
		Long: `Streams every suppression record with SCAN MATCH mcp:interview:*:response COUNT 500 (never
blocking Redis; on a Redis Cluster every master is scanned), one line per record as it is
found: identity hash, state, campaign, responded_at, time left on a cooldown ("-" for none).
--json prints JSON lines instead (with distinct_id and ttl_ms, -1 for none). A final count goes
to stderr. Records that are not valid JSON are listed as unreadable when no filter is set.`,
		Example: `  mcpulse suppression list
  mcpulse suppression list --state cooldown --campaign onboarding
  mcpulse suppression list --state declined --json | jq .identity_hash`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if _, err := suppression.ListState(state); err != nil {
				return err
			}
			rdb, err := openRedisReader(ctx, conn.redisURL)
			if err != nil {
				return err
			}
			defer rdb.Close()
			out := cmd.OutOrStdout()
			enc := newJSONEncoder(out)
			enc.SetEscapeHTML(false)
			stats, err := suppression.List(ctx, suppression.ListOptions{Redis: rdb, State: state, Campaign: campaign},
				func(e suppression.ListEntry) error {
					if asJSON {
						return enc.Encode(e)
					}
					_, err := fmt.Fprintln(out, e.Text())
					return err
				})
			fmt.Fprintf(cmd.ErrOrStderr(), "%d record(s) listed of %d read (%d unreadable)\n", stats.Listed, stats.Scanned, stats.Unreadable)
			return err
		},
	}
	f := cmd.Flags()
	conn.redisFlag(cmd)
	f.StringVar(&state, "state", "", "only records in this state: accepted (shown as booking_link_accepted), declined (do_not_ask_again) or cooldown")
	f.StringVar(&campaign, "campaign", "", "only records of this campaign_id")
	f.BoolVar(&asJSON, "json", false, "print JSON lines")
	return cmd
}

func supprWriteJSON(w io.Writer, v any) error {
	enc := newJSONEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
