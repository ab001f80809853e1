package dashboards

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	chparser "github.com/AfterShip/clickhouse-sql-parser/parser"
	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/mcpulse/mcpulse/sql"
)

// sentQueries is a slog handler that keeps the text of every query clickhouse-go sends (its
// "sending query" debug record): the SQL after clickhouse-go's own binder has put the
// arguments in.
type sentQueries struct {
	mu   sync.Mutex
	sent []string
}

func (h *sentQueries) Enabled(context.Context, slog.Level) bool { return true }
func (h *sentQueries) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *sentQueries) WithGroup(string) slog.Handler            { return h }
func (h *sentQueries) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "sending query" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "query" {
			h.mu.Lock()
			h.sent = append(h.sent, a.Value.String())
			h.mu.Unlock()
			return false
		}
		return true
	})
	return nil
}

func (h *sentQueries) last() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.sent) == 0 {
		return ""
	}
	return h.sent[len(h.sent)-1]
}

// nonPanelArgs are typed arguments for the queries of sql/queries that no panel names: the
// older named queries take a UInt64 limit; the served-schema reads a server name (and
// version); the alert rules' queries a window, the alert evaluator's a transition id.
var nonPanelArgs = map[string][]any{
	"top_ignored_keys":                {uint64(3)},
	"worst_tools_by_ignored_key_rate": {uint64(3)},
	"served_tool_schemas_for_server":  {"github-mcp-server", "1.0.0"},
	"served_tool_schema_versions":     {"github-mcp-server"},
	"schema_verdicts_recent":          {uint64(10)},
	"schema_verdicts_by_hash":         {[]string{"0000000000000000000000000000000000000000000000000000000000000000"}},
	"alert_dead_letter_rate":          {alertFrom, alertTo, alertFrom, alertTo, alertFrom, alertTo},
	"alert_ratchet_broken":            {alertFrom, alertTo},
	"alert_invitations_to_suppressed": {alertFrom, alertTo},
	"alert_campaign_lint_state":       {alertFrom, alertTo, alertFrom, alertTo},
	"alert_contact_policy_violations": {alertFrom, alertTo},
	"alert_delivered":                 {"t1"},
	"alert_misuse_after_new_version":  {alertFrom, alertTo, alertFrom, alertTo, alertFrom.Add(-24 * time.Hour), alertTo, alertFrom, alertTo},
	"intents_report":                  {alertFrom, alertTo},
	"intents_export":                  {alertFrom, alertTo},
}

// The window the alert queries are bound with above.
var (
	alertFrom = time.Now().UTC().Add(-24 * time.Hour).Truncate(time.Second)
	alertTo   = time.Now().UTC().Truncate(time.Second)
)

// Every file in sql/queries, with its "?" placeholders bound to typed values by clickhouse-go's
// own binder, runs on ClickHouse 18.16 and parses under a current ClickHouse SQL grammar
// (AfterShip/clickhouse-sql-parser), so the same text works on both.
func TestEveryQueryRunsOn1816AndParsesUnderCurrentGrammar(t *testing.T) {
	withDemoData(t)
	ds, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	// Filters with every value set, so each kind of argument is bound.
	f := Filters{From: demoData.end.Add(-36 * time.Hour), To: demoData.end.Add(-90 * time.Minute),
		Campaign: "onboarding-2026q4", Client: "cursor", Tool: "execute-sql", Limit: 3}
	argsFor := map[string][]any{}
	for _, d := range ds {
		for _, p := range d.Panels {
			argsFor[p.Query] = f.Args(p)
			if p.RawQuery != "" {
				argsFor[p.RawQuery] = f.Args(p)
			}
		}
	}
	for name, args := range nonPanelArgs {
		argsFor[name] = args
	}

	opts, err := clickhouse.ParseDSN(demoData.stack.ClickHouseDSN)
	if err != nil {
		t.Fatal(err)
	}
	capture := &sentQueries{}
	opts.Logger = slog.New(capture)
	conn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	// The parser is a real check: it refuses what ClickHouse would.
	if _, err := chparser.NewParser("SELECT a FROM t WHERE (a = 1 LIMIT 2").ParseStmts(); err == nil {
		t.Fatal("the parser accepted an unbalanced parenthesis")
	}
	names := sql.Names()
	if len(names) < 30 {
		t.Fatalf("only %d queries in sql/queries", len(names))
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			text := sql.Query(name)
			n, err := countPlaceholders(text)
			if err != nil {
				t.Fatal(err)
			}
			args, ok := argsFor[name]
			if !ok && n > 0 {
				t.Fatalf("%d placeholders but no panel names the query and nonPanelArgs has no arguments for it", n)
			}
			if len(args) != n {
				t.Fatalf("%d placeholders, %d arguments", n, len(args))
			}
			if _, err := runQuery(context.Background(), conn, name, args); err != nil {
				t.Fatalf("on ClickHouse 18.16: %v", err)
			}
			bound := capture.last()
			if !strings.HasPrefix(bound, strings.SplitN(text, "\n", 2)[0]) {
				t.Fatalf("captured %q, not this query", bound)
			}
			if left, _ := countPlaceholders(bound); left != 0 {
				t.Fatalf("%d placeholders left after binding: %s", left, bound)
			}
			stmts, err := chparser.NewParser(bound).ParseStmts()
			if err != nil {
				t.Fatalf("current grammar refuses it: %v\n%s", err, bound)
			}
			if len(stmts) != 1 {
				t.Fatalf("%d statements, want 1", len(stmts))
			}
		})
	}
}
