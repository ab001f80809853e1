package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/internal/safetext"
	"github.com/mcpulse/mcpulse/internal/shutdown"
	"github.com/mcpulse/mcpulse/internal/stores"
)

// exitCodeError makes a command end with a chosen exit status after it has printed its own
// report (for example demo's mismatches: status 1).
type exitCodeError struct {
	code int
	msg  string
}

func (e exitCodeError) Error() string { return fmt.Sprintf("%s (exit status %d)", e.msg, e.code) }

func asExitCode(err error, target *exitCodeError) bool { return errors.As(err, target) }

// groupOnly makes a command that only groups subcommands refuse an unknown one (cobra would
// print the help and exit 0).
func groupOnly(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("unknown command %s for %q; see %s --help", safetext.Quote(args[0]), cmd.CommandPath(), cmd.CommandPath())
		}
		return cmd.Help()
	}
	return cmd
}

// allowEviction is --allow-eviction, a flag only the commands that write Redis have
// (addAllowEvictionFlag): consume, scheduler, suppression reset and suppression reconcile.
var allowEviction bool

// addAllowEvictionFlag gives cmd, a command that writes Redis, the --allow-eviction flag.
func addAllowEvictionFlag(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&allowEviction, "allow-eviction", false,
		"use a Redis whose maxmemory-policy is not noeviction (or cannot be checked), with a warning: it may evict suppression and cooldown records")
}

// openRedis connects to Redis for a command that writes it and checks, as every such command
// does at start-up, that its maxmemory-policy cannot evict suppression and cooldown records
// (DESIGN.md §5); --allow-eviction turns the refusal into a warning on stderr.
func openRedis(ctx context.Context, url string) (redis.UniversalClient, error) {
	return openRedisChecked(ctx, url, allowEviction)
}

// openRedisReader connects to Redis for a command that only reads it: an eviction policy that
// could have removed records is a warning on stderr (what it prints may be incomplete), never
// a refusal.
func openRedisReader(ctx context.Context, url string) (redis.UniversalClient, error) {
	return openRedisChecked(ctx, url, true)
}

func openRedisChecked(ctx context.Context, url string, warnOnly bool) (redis.UniversalClient, error) {
	rdb, err := stores.OpenRedis(ctx, url)
	if err != nil {
		return nil, err
	}
	if err := stores.CheckEvictionPolicy(ctx, rdb); err != nil {
		if !warnOnly {
			rdb.Close()
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "mcpulse: warning: %v\n", err)
	}
	return rdb, nil
}

// openStores opens Redis (checked as openRedis does) and ClickHouse; close releases both.
func openStores(ctx context.Context, redisURL, clickhouseDSN string) (rdb redis.UniversalClient, ch driver.Conn, close func(), err error) {
	rdb, err = openRedis(ctx, redisURL)
	if err != nil {
		return nil, nil, nil, err
	}
	ch, err = stores.OpenClickHouse(ctx, clickhouseDSN)
	if err != nil {
		rdb.Close()
		return nil, nil, nil, err
	}
	return rdb, ch, func() { ch.Close(); rdb.Close() }, nil
}

// newJSONEncoder is json.NewEncoder for output a person may read in a terminal: besides what
// encoding/json escapes, every non-ASCII character that does not show as itself
// (safetext.Hidden: U+202E RIGHT-TO-LEFT OVERRIDE and the other format characters, C1
// controls, private-use and unassigned code points) in caller-chosen strings is written as a
// \uXXXX escape (a surrogate pair above U+FFFF), so a hostile distinct id or tool name cannot
// reorder or hide what is shown. The output is the same JSON value.
// printBenchResult writes a benchmark's result: its readable report then its JSON, or only the
// JSON when jsonOnly.
func printBenchResult(out io.Writer, res interface{ Print(io.Writer) }, jsonOnly bool) error {
	if !jsonOnly {
		res.Print(out)
		fmt.Fprintln(out)
	}
	enc := newJSONEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

func newJSONEncoder(w io.Writer) *json.Encoder { return json.NewEncoder(escapeInvisible{w}) }

type escapeInvisible struct{ w io.Writer }

func (e escapeInvisible) Write(p []byte) (int, error) {
	// Such runes only occur inside JSON strings (the JSON structure is ASCII), where a \u escape
	// stands for the same character. Encoders write whole values, so no rune is split.
	if !bytes.ContainsFunc(p, invisible) {
		return e.w.Write(p)
	}
	var b bytes.Buffer
	for _, r := range string(p) {
		if invisible(r) {
			if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
				fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
			continue
		}
		b.WriteRune(r)
	}
	if _, err := e.w.Write(b.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// invisible reports a rune the JSON output escapes; ASCII controls are escaped by
// encoding/json already, and the JSON structure around the strings is ASCII.
func invisible(r rune) bool { return r >= 0x80 && safetext.Hidden(r) }

// stopBudget bounds the closes a command runs once its work stopped: together they wait at
// most shutdown.Grace from the first of them; a close still running past it is logged and
// left behind (the process's exit releases what it held), so a store or broker that does not
// answer cannot hold the exit.
type stopBudget struct {
	log   *slog.Logger
	until time.Time
}

// close runs fn (what names it in the log) within what is left of the budget.
func (b *stopBudget) close(what string, fn func() error) {
	if b.until.IsZero() {
		b.until = time.Now().Add(shutdown.Grace)
	}
	if err := shutdown.Within(max(time.Until(b.until), 100*time.Millisecond), what, fn); err != nil {
		b.log.Warn("shutdown: "+what, "err", err)
	}
}
