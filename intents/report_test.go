package intents_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/mcpulse/mcpulse/consumers/chwrite"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/intents"
	"github.com/mcpulse/mcpulse/intents/details"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

type labelled struct {
	Text  string         `json:"text"`
	Kinds []details.Kind `json:"kinds"`
}

func readLabelled(t testing.TB) []labelled {
	f, err := os.Open("testdata/labelled.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []labelled
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l labelled
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

// event is a tool call or tools/list envelope as the MCP analytics SDK sends it.
func event(t testing.TB, name, distinctID string, at time.Time, props map[string]any) []byte {
	b, err := json.Marshal(map[string]any{"uuid": uuid.New().String(), "event": name, "distinct_id": distinctID,
		"timestamp": at.Format(time.RFC3339Nano), "properties": props})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// store parses events as the consumer does and inserts their tool_calls and
// tools_list_events rows.
func store(t testing.TB, ctx context.Context, conn driver.Conn, events ...[]byte) {
	t.Helper()
	var rs ingest.Rows
	for i, e := range events {
		ev, err := ingest.Parse(e)
		if err != nil {
			t.Fatalf("%s: %v", e, err)
		}
		rs.Append(ev, ingest.RowContext{Offset: int64(i), InsertedAt: time.Now().UTC()})
	}
	calls, err := chwrite.NewTable[ingest.ToolCallRow]("mcpulse.tool_calls")
	if err != nil {
		t.Fatal(err)
	}
	lists, err := chwrite.NewTable[ingest.ToolsListRow]("mcpulse.tools_list_events")
	if err != nil {
		t.Fatal(err)
	}
	if err := calls.Insert(ctx, conn, rs.ToolCalls); err != nil {
		t.Fatal(err)
	}
	if err := lists.Insert(ctx, conn, rs.ToolsLists); err != nil {
		t.Fatal(err)
	}
}

// payloadVersion inserts a flag_payload_versions row as the campaign-lint job does.
func payloadVersion(t testing.TB, ctx context.Context, conn driver.Conn, variant string, firstSeen time.Time, sha string, removed bool) {
	t.Helper()
	b, err := conn.PrepareBatch(ctx, `INSERT INTO mcpulse.flag_payload_versions (flag_key, variant, first_seen, last_seen, payload_sha256, payload, removed)`)
	if err != nil {
		t.Fatal(err)
	}
	r := uint8(0)
	payload := `{"prompt":"Explain the task abstractly; never include personal data."}`
	if removed {
		r, payload = 1, ""
	}
	if err := b.Append("mcp-intent-prompt", variant, firstSeen, firstSeen.Add(time.Hour), sha, payload, r); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

func call(t testing.TB, distinctID, client string, at time.Time, intent, conversation string) []byte {
	return event(t, "$mcp_tool_call", distinctID, at, map[string]any{"$mcp_tool_name": "insight-query",
		"$mcp_client_name": client, "$mcp_intent": intent, "$mcp_conversation_id": conversation})
}

func listing(t testing.TB, distinctID, client string, at time.Time) []byte {
	return event(t, "$mcp_tools_list", distinctID, at, map[string]any{"$mcp_client_name": client,
		"$mcp_listed_tool_names": []string{"insight-query"}})
}

// TestReportAttributesCallsToTheListedVersion checks the attribution rule: a call counts under
// the version in force at its client's latest listing, the SDK default before the first.
func TestReportAttributesCallsToTheListedVersion(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{})
	conn := env.ClickHouse
	t0 := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	v1, v2 := t0.Add(time.Hour), t0.Add(5*time.Hour)
	payloadVersion(t, ctx, conn, "true", v1, "aaaaaaaaaaaa1111", false)
	payloadVersion(t, ctx, conn, "true", v2, "bbbbbbbbbbbb2222", false)
	store(t, ctx, conn,
		listing(t, "ana", "claude-code", t0),
		call(t, "ana", "claude-code", t0.Add(30*time.Minute), "Listing flags before any version.", "c1"),          // default
		call(t, "ana", "claude-code", v1.Add(time.Minute), "Checking the funnel after v1, no refresh yet.", "c1"), // default: no listing since v1
		listing(t, "ana", "claude-code", v1.Add(10*time.Minute)),
		call(t, "ana", "claude-code", v1.Add(20*time.Minute), "User ana@example.com wants her flags.", "c2"), // v1
		call(t, "ana", "claude-code", v2.Add(time.Minute), "", "c2"),                                         // v1: no listing since v2
		listing(t, "ana", "claude-code", v2.Add(2*time.Minute)),
		call(t, "ana", "claude-code", v2.Add(3*time.Minute), "Probably the user wants weekly signups from 10.0.0.1.", "c3"), // v2
		call(t, "ana", "cursor", v2.Add(4*time.Minute), "Another client, never listed.", "c4"),                              // default
	)
	rep, err := intents.Run(ctx, conn, t0, v2.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	type fig struct {
		label                      string
		calls, intents, withDetail uint64
	}
	var got []fig
	for _, v := range rep.Versions {
		got = append(got, fig{v.Label, v.Calls, v.CallsWithIntent, v.CallsWithDetails})
	}
	want := []fig{{"SDK default", 3, 3, 0}, {"true aaaaaaaaaaaa", 2, 1, 1}, {"true bbbbbbbbbbbb", 1, 1, 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("versions %+v, want %+v", got, want)
	}
	v1rep := rep.Versions[1]
	if v1rep.BlankShare != 0.5 || v1rep.Details[slices.Index(rep.Kinds, details.Email)].Calls != 1 ||
		!slices.Equal(v1rep.MaskedExamples, []string{"User [email] wants her flags."}) {
		t.Errorf("v1: %+v", v1rep)
	}
	if rep.Versions[0].WordsMedian != 5 {
		t.Errorf("SDK default words median %v, want 5", rep.Versions[0].WordsMedian)
	}

	var out bytes.Buffer
	figs, err := intents.Export(ctx, conn, t0, v2.Add(time.Hour), map[string]string{"c3": "weekly signup trend", "c2": "flag values"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	rep.JoinGoals(figs)
	if g := rep.Versions[2].Goals; g == nil || *g != (intents.GoalFigures{CallsWithGoal: 1, IntentsWithGoal: 1, HedgedIntents: 1}) {
		t.Errorf("v2 goals %+v", g)
	}
	records, err := csv.NewReader(&out).ReadAll()
	if err != nil || len(records) != 7 || !slices.Equal(records[0], intents.ExportHeader) {
		t.Fatalf("export: %d records, %v", len(records), err)
	}
	if strings.Contains(out.String(), "ana@example.com") || strings.Contains(out.String(), "10.0.0.1") {
		t.Errorf("export holds an unmasked detail:\n%s", out.String())
	}

	empty, err := intents.Run(ctx, conn, t0.Add(-48*time.Hour), t0.Add(-24*time.Hour))
	if err != nil || len(empty.Versions) != 0 {
		t.Errorf("empty range: %+v, %v", empty, err)
	}
}

// TestReportMatchesTheLabelledSet stores every hand-labelled intent as a tool call, through
// the consumer's row builder, and checks the report's per-kind counts against the labels, and
// per kind the precision and recall of what was stored (at least 0.95).
func TestReportMatchesTheLabelledSet(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{})
	conn := env.ClickHouse
	set := readLabelled(t)
	if len(set) < 200 {
		t.Fatalf("%d labelled intents, want at least 200", len(set))
	}
	t0 := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	var events [][]byte
	want := map[details.Kind]uint64{}
	blank := uint64(0)
	for i, l := range set {
		events = append(events, call(t, fmt.Sprintf("user-%d", i%7), "claude-code", t0.Add(time.Duration(i)*time.Second), l.Text, fmt.Sprintf("labelled-%d", i)))
		for _, k := range l.Kinds {
			want[k]++
		}
		if strings.TrimSpace(l.Text) == "" {
			blank++
		}
	}
	store(t, ctx, conn, events...)
	rep, err := intents.Run(ctx, conn, t0, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Versions) != 1 || rep.Versions[0].Calls != uint64(len(set)) || rep.Versions[0].CallsWithIntent != uint64(len(set))-blank {
		t.Fatalf("versions %+v", rep.Versions)
	}
	for _, kc := range rep.Versions[0].Details {
		if kc.Calls != want[kc.Kind] {
			t.Errorf("%s: report counts %d calls, the labels %d", kc.Kind, kc.Calls, want[kc.Kind])
		}
	}
	var out bytes.Buffer
	if _, err := intents.Export(ctx, conn, t0, t0.Add(time.Hour), nil, &out); err != nil {
		t.Fatal(err)
	}
	records, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := func(name string) int { return slices.Index(intents.ExportHeader, name) }
	found := map[int][]details.Kind{}
	for _, r := range records[1:] {
		var n int
		if _, err := fmt.Sscanf(r[col("conversation_id")], "labelled-%d", &n); err != nil {
			t.Fatal(err)
		}
		for _, k := range strings.Split(r[col("intent_details")], ";") {
			if k != "" {
				found[n] = append(found[n], details.Kind(k))
			}
		}
	}
	for _, k := range details.Kinds() {
		var tp, fp, fn int
		for i, l := range set {
			g, w := slices.Contains(found[i], k), slices.Contains(l.Kinds, k)
			switch {
			case g && w:
				tp++
			case g:
				fp++
			case w:
				fn++
			}
		}
		p, r := float64(tp)/float64(max(tp+fp, 1)), float64(tp)/float64(max(tp+fn, 1))
		t.Logf("stored %-16s precision %.3f recall %.3f (tp %d, fp %d, fn %d)", k, p, r, tp, fp, fn)
		if p < 0.95 || r < 0.95 {
			t.Errorf("%s: precision %.3f, recall %.3f, want at least 0.95", k, p, r)
		}
	}
}
