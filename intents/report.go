// Package intents reports how agents' stated intents ($mcp_intent) read under each version of
// the mcp-intent-prompt flag's payload, for intent-prompt trials (DESIGN.md §8, "Intent prompt
// trials"; seed 004, "Intent prompt trials").
//
// A tool call counts under the payload version in force for its user's client: the version
// the campaign-lint job recorded (flag_payload_versions, migration 0041) whose first_seen is
// the latest at or before that client's latest tools/list (tools_list_events, migration 0043)
// at or before the call. Clients cache tool schemas, so a call before any listing since a
// change counts under the previous version; with no recorded version, or no listing since the
// first, it counts as the SDK default. The identifying details are found at ingest (package
// intents/details, tool_calls.intent_details and intent_masked): reports show counts and
// masked intents, never an intent itself.
package intents

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/intents/details"
	"github.com/mcpulse/mcpulse/internal/safetext"
	"github.com/mcpulse/mcpulse/sql"
)

// SDKDefault labels the calls no recorded payload version covers.
const SDKDefault = "SDK default"

// KindCount is how many calls of a version hold one kind of identifying detail, and their
// share of the calls with an intent (0 when none).
type KindCount struct {
	Kind  details.Kind `json:"kind"`
	Calls uint64       `json:"calls"`
	Share float64      `json:"share"`
}

// Version is one payload version's figures over a range.
type Version struct {
	// Index is the version's place among the flag's recorded versions (1 the first seen), 0
	// for the SDK default.
	Index int `json:"index"`
	// Label is "SDK default", or per variant "variant sha256-prefix" (a removed variant as
	// "SDK default"), comma-separated. Untrusted text (variant keys): escape it to display.
	Label string `json:"label"`
	// FirstSeen is when the lint job first saw the version (nil for the SDK default).
	FirstSeen *time.Time `json:"first_seen"`
	// Calls are the tool calls of the range attributed to the version; CallsWithIntent those
	// whose intent holds a non-space character; BlankShare the others' share of Calls.
	Calls           uint64  `json:"calls"`
	CallsWithIntent uint64  `json:"calls_with_intent"`
	BlankShare      float64 `json:"blank_share"`
	// WordsMedian and WordsP90 are the exact 0.5 and 0.9 quantiles of the words (runs of
	// non-space characters) of the intents, 0 when none.
	WordsMedian float64 `json:"words_median"`
	WordsP90    float64 `json:"words_p90"`
	// CallsWithDetails hold at least one identifying detail; DetailShare is their share of
	// CallsWithIntent. Details has one entry per kind of details.Patterns, in its order.
	CallsWithDetails uint64      `json:"calls_with_details"`
	DetailShare      float64     `json:"detail_share"`
	Details          []KindCount `json:"details"`
	// MaskedExamples are, per kind found, one intent holding it (in the kinds' order; the same
	// intent may stand for two), each detail replaced by its kind's placeholder. Untrusted
	// text: escape it to display.
	MaskedExamples []string `json:"masked_examples"`
	// Goals is the goal review's figures (Report.JoinGoals), nil without goals.
	Goals *GoalFigures `json:"goals,omitempty"`
}

// Report is the report over calls at From..Until (both included, UTC).
type Report struct {
	From     time.Time      `json:"from"`
	Until    time.Time      `json:"until"`
	Kinds    []details.Kind `json:"kinds"`
	Versions []Version      `json:"versions"`
}

// Run computes the report from ClickHouse (sql/queries/intents_report.sql): one row per
// version with calls in the range, the SDK default first, then by first seen. An error is a
// query's.
func Run(ctx context.Context, conn driver.Conn, from, until time.Time) (Report, error) {
	rep := Report{From: from.UTC(), Until: until.UTC(), Kinds: details.Kinds(), Versions: []Version{}}
	rows, err := conn.Query(ctx, sql.Query("intents_report"), from.UTC(), until.UTC())
	if err != nil {
		return rep, fmt.Errorf("intents report: %w", err)
	}
	defer rows.Close()
	if err := checkKindColumns(rows.Columns()); err != nil {
		return rep, err
	}
	for rows.Next() {
		var (
			v         Version
			index     uint32
			firstSeen time.Time
			quantiles []float64
			counts    = make([]uint64, len(rep.Kinds))
		)
		dest := []any{&index, &firstSeen, &v.Label, &v.Calls, &v.CallsWithIntent, &quantiles, &v.CallsWithDetails}
		for i := range counts {
			dest = append(dest, &counts[i])
		}
		if err := rows.Scan(append(dest, &v.MaskedExamples)...); err != nil {
			return rep, fmt.Errorf("intents report: %w", err)
		}
		v.Index = int(index)
		if v.Index == 0 {
			v.Label = SDKDefault
		} else {
			t := firstSeen.UTC()
			v.FirstSeen = &t
		}
		if v.CallsWithIntent > 0 && len(quantiles) == 2 {
			v.WordsMedian, v.WordsP90 = quantiles[0], quantiles[1]
		}
		v.BlankShare = share(v.Calls-v.CallsWithIntent, v.Calls)
		v.DetailShare = share(v.CallsWithDetails, v.CallsWithIntent)
		for i, k := range rep.Kinds {
			n := counts[i]
			v.Details = append(v.Details, KindCount{Kind: k, Calls: n, Share: share(n, v.CallsWithIntent)})
		}
		if v.MaskedExamples == nil {
			v.MaskedExamples = []string{}
		}
		rep.Versions = append(rep.Versions, v)
	}
	if err := rows.Err(); err != nil {
		return rep, fmt.Errorf("intents report: %w", err)
	}
	sort.Slice(rep.Versions, func(i, j int) bool { return rep.Versions[i].Index < rep.Versions[j].Index })
	return rep, nil
}

func share(n, of uint64) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// kindColumnsAt is where intents_report.sql's details_<kind> columns start.
const kindColumnsAt = 7

// checkKindColumns checks that intents_report.sql has one details_<kind> column per kind of
// details.Patterns, in its order, followed by the masked examples.
func checkKindColumns(cols []string) error {
	kinds := details.Kinds()
	if len(cols) != kindColumnsAt+len(kinds)+1 {
		return fmt.Errorf("BUG: intents_report.sql has %d columns, want %d", len(cols), kindColumnsAt+len(kinds)+1)
	}
	for i, k := range kinds {
		if cols[kindColumnsAt+i] != "details_"+string(k) {
			return fmt.Errorf("BUG: intents_report.sql column %d is %s, want details_%s", kindColumnsAt+i+1, cols[kindColumnsAt+i], k)
		}
	}
	return nil
}

// Print writes the report as text: per version its label, first seen, calls, blank share,
// words, detail shares by kind and masked examples. Labels and examples are untrusted text,
// written escaped (safetext.Escape) and cut to 200 bytes.
func (r Report) Print(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "Intent prompt versions, calls at %s .. %s (UTC)\n", r.From.Format(time.RFC3339), r.Until.Format(time.RFC3339))
	if len(r.Versions) == 0 {
		fmt.Fprintln(bw, "no tool calls in the range")
	}
	for _, v := range r.Versions {
		seen := "never recorded"
		if v.FirstSeen != nil {
			seen = "first seen " + v.FirstSeen.Format(time.RFC3339)
		}
		fmt.Fprintf(bw, "\n%d. %s (%s)\n", v.Index, safetext.Escape(safetext.Bound(v.Label, 200)), seen)
		fmt.Fprintf(bw, "   calls %d, with an intent %d, blank %.1f%%, words median %g, p90 %g\n",
			v.Calls, v.CallsWithIntent, 100*v.BlankShare, v.WordsMedian, v.WordsP90)
		fmt.Fprintf(bw, "   intents with identifying details %d (%.1f%%)", v.CallsWithDetails, 100*v.DetailShare)
		for _, k := range v.Details {
			if k.Calls > 0 {
				fmt.Fprintf(bw, ", %s %d (%.1f%%)", k.Kind, k.Calls, 100*k.Share)
			}
		}
		fmt.Fprintln(bw)
		if g := v.Goals; g != nil {
			fmt.Fprintf(bw, "   calls with a recorded goal %d (with an intent %d), intents stating uncertainty %d\n",
				g.CallsWithGoal, g.IntentsWithGoal, g.HedgedIntents)
		}
		shown := map[string]bool{}
		for _, e := range v.MaskedExamples {
			if !shown[e] { // one intent may stand for several kinds: shown once
				shown[e] = true
				fmt.Fprintf(bw, "   e.g. %s\n", safetext.Escape(safetext.Bound(e, 200)))
			}
		}
	}
	return bw.Flush()
}
