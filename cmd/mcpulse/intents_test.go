package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/intents"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// `intents report` wires the flags to package intents: --json prints the report, --export
// writes the masked calls, --goals joins the goals; a bad range or goals file is refused.
func TestIntentsReportWiring(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	at := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	b, err := e.ClickHouse.PrepareBatch(ctx, `INSERT INTO mcpulse.tool_calls (uuid, timestamp, distinct_id, tool_name, client_name, conversation_id, intent, intent_details, intent_masked)`)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Append("0192f2a0-0000-7000-8000-000000000001", at, "ana", "insight-query", "claude-code", "conv-1",
		"Probably looking up ana@example.com", []string{"email"}, "Probably looking up [email]"); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	goals := filepath.Join(dir, "goals.csv")
	if err := os.WriteFile(goals, []byte("conversation_id,goal\nconv-1,check a person's flags\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	export := filepath.Join(dir, "calls.csv")
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"intents", "report", "--clickhouse", e.Stack.ClickHouseDSN, "--since", "24h", "--json", "--export", export, "--goals", goals})
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
	var rep intents.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(rep.Versions) != 1 || rep.Versions[0].Label != intents.SDKDefault || rep.Versions[0].CallsWithDetails != 1 ||
		rep.Versions[0].Goals == nil || *rep.Versions[0].Goals != (intents.GoalFigures{CallsWithGoal: 1, IntentsWithGoal: 1, HedgedIntents: 1}) {
		t.Errorf("report %s", out.String())
	}
	if strings.Contains(out.String(), "ana@example.com") {
		t.Error("the report shows an intent unmasked")
	}
	data, err := os.ReadFile(export)
	if err != nil || !strings.Contains(string(data), "Probably looking up [email]") || !strings.Contains(string(data), "check a person's flags") ||
		strings.Contains(string(data), "ana@example.com") {
		t.Errorf("export %q, %v", data, err)
	}
	text := newRootCmd()
	out.Reset()
	text.SetOut(&out)
	text.SetArgs([]string{"intents", "report", "--clickhouse", e.Stack.ClickHouseDSN, "--since", "24h"})
	if err := text.ExecuteContext(ctx); err != nil || !strings.Contains(out.String(), "0. SDK default") ||
		!strings.Contains(out.String(), "e.g. Probably looking up [email]") || strings.Contains(out.String(), "ana@example.com") {
		t.Errorf("text report %v:\n%s", err, out.String())
	}
	if err := runRoot(t, "intents", "report", "--clickhouse", e.Stack.ClickHouseDSN, "--since", "1h", "--until", "2h"); err == nil {
		t.Error("--until before --since was accepted")
	}
	bad := filepath.Join(dir, "bad.csv")
	_ = os.WriteFile(bad, []byte("id,text\n"), 0o644)
	if err := runRoot(t, "intents", "report", "--clickhouse", e.Stack.ClickHouseDSN, "--goals", bad); err == nil || !strings.Contains(err.Error(), "conversation_id") {
		t.Errorf("a goals file without conversation_id: %v", err)
	}
}
