package report

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/demo/live"
	"github.com/mcpulse/mcpulse/demo/outcome"
	"github.com/mcpulse/mcpulse/suppression"
)

// Summary is what `mcpulse demo` prints: the figures a newcomer checks against the corpus.
type Summary struct {
	EventsByKind      map[string]int64 `json:"events_by_kind"`
	Tables            map[string]int64 `json:"tables"`
	DuplicatesDropped int64            `json:"duplicates_dropped"`
	DeadLettered      int64            `json:"dead_lettered"`
	WorstTools        []ToolRate       `json:"worst_tools"`
	MostMisused       []ToolMisuse     `json:"most_misused_tools"`
	// Live are the demo's live MCP servers' figures as ClickHouse holds them (demo/live), set
	// by the demo when it ran them.
	Live             []live.Figure            `json:"live_servers,omitempty"`
	GateReasonShares map[string][]ReasonShare `json:"gate_reason_shares"`
	Funnel           []CampaignFunnel         `json:"funnel"`
	Suppression      map[string]int64         `json:"suppression"`
	Throughput       Throughput               `json:"throughput"`
	// ToolCallsPerShard are the rows of tool_calls (after FINAL) each shard of a sharded
	// ClickHouse cluster holds, shard 1 first; set by the demo on such a cluster only.
	ToolCallsPerShard []int64  `json:"tool_calls_per_shard,omitempty"`
	Mismatches        []string `json:"mismatches"`
}

// ToolRate is one of the tools with the highest ignored-key rate: calls with ignored keys ÷
// the successful calls whose ignored keys could be measured.
type ToolRate struct {
	Tool                 string     `json:"tool_name"`
	MeasurableCalls      int64      `json:"measurable_calls"`
	CallsWithIgnoredKeys int64      `json:"calls_with_ignored_keys"`
	IgnoredKeyRate       float64    `json:"ignored_key_rate"`
	TopKeys              []KeyCount `json:"top_ignored_keys"`
}

// ToolMisuse is one of the tools with the most calls refused for their input or made to it
// while unlisted, over the whole run.
type ToolMisuse struct {
	Tool             string `json:"tool_name"`
	Calls            int64  `json:"calls"`
	ValidationErrors int64  `json:"validation_errors"`
	UnknownToolCalls int64  `json:"unknown_tool_calls"`
}

// KeyCount is an ignored key path and how many calls sent it.
type KeyCount struct {
	KeyPath     string `json:"key_path"`
	Occurrences int64  `json:"occurrences"`
}

// ReasonShare is a gate reason's share of the calls that carried a reason in one campaign.
type ReasonShare struct {
	Reason string  `json:"reason"`
	Calls  int64   `json:"calls"`
	Share  float64 `json:"share"`
}

// CampaignFunnel is one campaign's funnel over the whole run; people and attempts are distinct.
type CampaignFunnel struct {
	CampaignID string `json:"campaign_id"`
	Attempts   int64  `json:"attempts"`
	People     int64  `json:"people"`
	FirstOpens int64  `json:"first_opens"`
	Accepted   int64  `json:"accepted"`
	Declined   int64  `json:"declined"`
	Cancelled  int64  `json:"cancelled"`
	Unanswered int64  `json:"unanswered"`
}

// Throughput is the run's end-to-end rate: events published and stored per wall-clock second.
type Throughput struct {
	Events          int64   `json:"events"`
	Seconds         float64 `json:"seconds"`
	EventsPerSecond float64 `json:"events_per_second"`
}

// BuildSummary reads the summary figures from ClickHouse; observed supplies counts and the
// suppression records already read by Observe.
func BuildSummary(ctx context.Context, ch driver.Conn, observed *outcome.Outcome, worst int) (*Summary, error) {
	s := &Summary{
		EventsByKind:     observed.EventsByKind,
		Tables:           observed.Tables,
		DeadLettered:     observed.Tables["dead_letters"],
		GateReasonShares: map[string][]ReasonShare{},
		Suppression:      map[string]int64{suppression.StateAccepted: 0, suppression.StateDeclined: 0, suppression.StateCooldown: 0},
		Mismatches:       []string{},
	}
	for _, rec := range observed.Suppression {
		s.Suppression[rec.Response]++
	}
	s.MostMisused = mostMisused(observed.ToolMisuse, worst)
	err := each(ctx, ch, "worst_tools_by_ignored_key_rate", func(r driver.Rows) error {
		var (
			t    ToolRate
			c, w uint64
		)
		if err := r.Scan(&t.Tool, &c, &w, &t.IgnoredKeyRate); err != nil {
			return err
		}
		t.MeasurableCalls, t.CallsWithIgnoredKeys = int64(c), int64(w)
		s.WorstTools = append(s.WorstTools, t)
		return nil
	}, uint64(worst))
	if err != nil {
		return nil, err
	}
	keys := map[string][]KeyCount{}
	err = each(ctx, ch, "top_ignored_keys", func(r driver.Rows) error {
		var (
			tool string
			k    KeyCount
			n    uint64
		)
		if err := r.Scan(&tool, &k.KeyPath, &n); err != nil {
			return err
		}
		k.Occurrences = int64(n)
		keys[tool] = append(keys[tool], k)
		return nil
	}, uint64(3))
	if err != nil {
		return nil, err
	}
	for i := range s.WorstTools {
		s.WorstTools[i].TopKeys = keys[s.WorstTools[i].Tool]
	}
	err = each(ctx, ch, "gate_reason_shares", func(r driver.Rows) error {
		var (
			campaign string
			rs       ReasonShare
			n        uint64
		)
		if err := r.Scan(&campaign, &rs.Reason, &n, &rs.Share); err != nil {
			return err
		}
		rs.Calls = int64(n)
		s.GateReasonShares[campaign] = append(s.GateReasonShares[campaign], rs)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = each(ctx, ch, "funnel_by_campaign", func(r driver.Rows) error {
		var (
			f                         CampaignFunnel
			a, p, o, acc, dec, cancel uint64
		)
		if err := r.Scan(&f.CampaignID, &a, &p, &o, &acc, &dec, &cancel, &f.Unanswered); err != nil {
			return err
		}
		f.Attempts, f.People, f.FirstOpens, f.Accepted, f.Declined, f.Cancelled = int64(a), int64(p), int64(o), int64(acc), int64(dec), int64(cancel)
		s.Funnel = append(s.Funnel, f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// mostMisused sums the hours of each tool and keeps the n with the most validation errors
// and unlisted-tool calls together (ties by name), leaving out tools with neither.
func mostMisused(rows []outcome.ToolMisuse, n int) []ToolMisuse {
	by := map[string]*ToolMisuse{}
	for _, r := range rows {
		t := by[r.ToolName]
		if t == nil {
			t = &ToolMisuse{Tool: r.ToolName}
			by[r.ToolName] = t
		}
		t.Calls += r.Calls
		t.ValidationErrors += r.ValidationErrors
		t.UnknownToolCalls += r.UnknownToolCalls
	}
	var out []ToolMisuse
	for _, t := range by {
		if t.ValidationErrors+t.UnknownToolCalls > 0 {
			out = append(out, *t)
		}
	}
	slices.SortFunc(out, func(a, b ToolMisuse) int {
		if d := (b.ValidationErrors + b.UnknownToolCalls) - (a.ValidationErrors + a.UnknownToolCalls); d != 0 {
			return int(max(min(d, 1), -1))
		}
		return strings.Compare(a.Tool, b.Tool)
	})
	return out[:min(n, len(out))]
}

// display quotes caller-chosen text (tool names, key paths, campaign ids) for a terminal:
// control characters and line separators are escaped so a crafted key cannot rewrite the
// report.
func display(s string) string {
	q := strconv.QuoteToGraphic(s)
	if q[1:len(q)-1] == s && !strings.ContainsAny(s, " \t") {
		return s
	}
	return q
}

// Print writes the summary as aligned plain-text sections.
func (s *Summary) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "== events stored, by kind")
	for _, k := range slices.Sorted(maps.Keys(s.EventsByKind)) {
		fmt.Fprintf(tw, "  %s\t%d\n", k, s.EventsByKind[k])
	}
	fmt.Fprintf(tw, "  duplicates dropped\t%d\n", s.DuplicatesDropped)
	fmt.Fprintf(tw, "  dead-lettered\t%d\n", s.DeadLettered)
	tw.Flush()

	fmt.Fprintln(w, "\n== tools with the highest ignored-key rate (over the successful calls whose keys could be measured)")
	fmt.Fprintf(tw, "  tool\tmeasured calls\twith ignored keys\trate\ttop ignored keys\n")
	for _, t := range s.WorstTools {
		var top []string
		for _, k := range t.TopKeys {
			top = append(top, fmt.Sprintf("%s (%d)", display(k.KeyPath), k.Occurrences))
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%.1f%%\t%s\n", display(t.Tool), t.MeasurableCalls, t.CallsWithIgnoredKeys, 100*t.IgnoredKeyRate, strings.Join(top, ", "))
	}
	tw.Flush()

	fmt.Fprintln(w, "\n== tools agents misuse most (input refused by validation, calls while unlisted)")
	fmt.Fprintf(tw, "  tool\tcalls\tvalidation errors\tunlisted-tool calls\n")
	for _, t := range s.MostMisused {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\n", display(t.Tool), t.Calls, t.ValidationErrors, t.UnknownToolCalls)
	}
	tw.Flush()

	if len(s.Live) > 0 {
		fmt.Fprintln(w, "\n== live MCP servers (per-session tool sets, a tool removed at run time; radar-posthog pages its tools/list)")
		fmt.Fprintf(tw, "  server\ttool\tcalls\terrors\tvalidation\tunlisted\tmeasured\twith ignored keys\tignored keys\n")
		for _, f := range s.Live {
			keys := make([]string, len(f.IgnoredKeys))
			for i, k := range f.IgnoredKeys {
				keys[i] = display(k)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", display(f.Server), display(f.Tool), f.Calls, f.Errors,
				f.ValidationErrors, f.UnknownToolCalls, f.MeasurableCalls, f.CallsWithIgnoredKeys, strings.Join(keys, ", "))
		}
		tw.Flush()
		fmt.Fprintln(w, "  (radar-posthog reports PostHog events through the capture API, radar-otel only OpenTelemetry spans,")
		fmt.Fprintln(w, "  which name no client)")
	}

	fmt.Fprintln(w, "\n== gate-reason shares per campaign (tool calls that carried a reason)")
	for _, c := range slices.Sorted(maps.Keys(s.GateReasonShares)) {
		name := c
		if name == "" {
			name = "(no campaign)"
		} else {
			name = display(name)
		}
		var parts []string
		for _, r := range s.GateReasonShares[c] {
			parts = append(parts, fmt.Sprintf("%s %.1f%%", display(r.Reason), 100*r.Share))
		}
		fmt.Fprintf(w, "  %s: %s\n", name, strings.Join(parts, ", "))
	}

	fmt.Fprintln(w, "\n== recruitment funnel per campaign")
	fmt.Fprintf(tw, "  campaign\tattempts\tpeople\tfirst opens\taccepted\tdeclined\tcancelled\tunanswered\n")
	for _, f := range s.Funnel {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", display(f.CampaignID), f.Attempts, f.People, f.FirstOpens, f.Accepted, f.Declined, f.Cancelled, f.Unanswered)
	}
	tw.Flush()
	fmt.Fprintln(w, "  (unanswered: no answer within 10 minutes of the invitation; an answer that comes later counts")
	fmt.Fprintln(w, "  there and in its own column, so the answer columns can add up to more than the attempts)")

	fmt.Fprintln(w, "\n== suppression (Redis records)")
	fmt.Fprintf(tw, "  suppressed: accepted\t%d\n", s.Suppression[suppression.StateAccepted])
	fmt.Fprintf(tw, "  suppressed: declined\t%d\n", s.Suppression[suppression.StateDeclined])
	fmt.Fprintf(tw, "  in cooldown\t%d\n", s.Suppression[suppression.StateCooldown])
	tw.Flush()

	fmt.Fprintf(w, "\n== throughput: %d events in %.1f s = %.0f events/s end to end (publish to stored)\n",
		s.Throughput.Events, s.Throughput.Seconds, s.Throughput.EventsPerSecond)
	if len(s.ToolCallsPerShard) > 0 {
		fmt.Fprintln(w, "\n== tool_calls rows per shard of the ClickHouse cluster")
		for i, n := range s.ToolCallsPerShard {
			fmt.Fprintf(tw, "  shard %d\t%d\n", i+1, n)
		}
		tw.Flush()
	}
	if len(s.Mismatches) == 0 {
		fmt.Fprintln(w, "\nevery figure matches the expected outcome")
		return
	}
	fmt.Fprintf(w, "\n%d MISMATCHES against the expected outcome:\n", len(s.Mismatches))
	for _, m := range s.Mismatches {
		q := strconv.QuoteToGraphic(m) // rows carry caller-chosen strings
		fmt.Fprintln(w, "  "+q[1:len(q)-1])
	}
}
