package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/mcpulse/mcpulse/dashboards"
	"github.com/mcpulse/mcpulse/dashboards/alerts"
	"github.com/mcpulse/mcpulse/demo"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/safetext"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/stack"
)

// Hostile caller-chosen strings, published through the real publisher and consumer so they
// reach the dashboards exactly as an agent's or a client's text would.
const (
	hostileKey = `<img src=x onerror=alert(1)>`
	// hostileKeyLS holds U+2028, which JavaScript once treated as a line break inside string
	// literals; the pipeline masks it to '?' in ignored keys (ingest.MaskControl), so the pages
	// show shownKeys, while the client name below carries it unmasked to the pages.
	hostileKeyLS      = "line\u2028sep</script><script>alert(2)</script>"
	hostileFormulaKey = `=HYPERLINK("http://x","y")`
	hostileClient     = "<script>alert(3)</script>\"'\u2028end"
	hostileDistinctID = `"><img src=x onerror=alert(4)>`
	// hostileTool is the tool the hostile calls name, so it reaches charts (dataset and axis
	// labels) as well as tables. Its U+202E RIGHT-TO-LEFT OVERRIDE would make a browser draw
	// "…hx-rloexe.png"; the pages show it escaped (shown).
	hostileTool     = "<svg/onload=alert(6)>hx-rlo\u202egnp.exe"
	hostileCampaign = `<b onmouseover=alert(5)>camp</b>`
	// hostileEvent is the name of an event mcpulse does not route: it reaches the data-quality
	// panels (events per name, other events) as text.
	hostileEvent = `<img src=x onerror=alert(8)>event`
	// hostileCalls is how many hostile tool calls are published: enough for the hostile keys,
	// client and tool to rank among the top rows of every "top N" panel and chart.
	hostileCalls = 1000
	// hostileEvents is how many events of hostileEvent are published: enough to rank among the
	// 8 names the events-per-name chart draws (the SDK's resources, prompts and identify events
	// are routed names of their own, each a few hundred in the demo data).
	hostileEvents = 400
	// hostileReports is how many missing-capability reports and failed resource reads with
	// hostile text are published, so the agent-report panels show caller text too.
	hostileReports = 5
)

var (
	hostileKeys = []string{hostileKey, hostileKeyLS, hostileFormulaKey}
	// shownKeys are hostileKeys as the pipeline stores them.
	shownKeys = []string{hostileKey, ingest.MaskControl(hostileKeyLS), hostileFormulaKey}
)

// shown is a caller-chosen string as the pages show it: control and bidi characters escaped.
func shown(s string) string { return safetext.Escape(s) }

// fixture is one stack shared by this package's tests that need data: demo data (20,000
// generated events) plus the hostile events, published and consumed through the real
// pipeline. It starts on first use and stops in TestMain, so tests that need no data (and
// `go test -run` of them) do not pay for it.
type fixture struct {
	stack *stack.Stack
	ch    driver.Conn
	dash  []dashboards.Dashboard
}

var (
	fixtureOnce sync.Once
	fixtureVal  *fixture
	fixtureErr  error
	fixtureStop []func()
)

func TestMain(m *testing.M) {
	code := m.Run()
	for i := len(fixtureStop) - 1; i >= 0; i-- {
		fixtureStop[i]()
	}
	os.Exit(code)
}

// sharedFixture returns the shared stack with data, failing t (never skipping) when it cannot
// be started.
func sharedFixture(t *testing.T) *fixture {
	t.Helper()
	fixtureOnce.Do(func() { fixtureVal, fixtureErr = startFixture() })
	if fixtureErr != nil {
		t.Fatalf("test fixture: %v", fixtureErr)
	}
	return fixtureVal
}

func startFixture() (*fixture, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stack, err := stack.Start(ctx, stack.Config{UseEnv: true})
	if err != nil {
		return nil, err
	}
	fixtureStop = append(fixtureStop, func() { stack.Close() })
	pub, err := ingest.NewPublisher(ingest.PublisherConfig{Brokers: stack.KafkaBrokers})
	if err != nil {
		return nil, err
	}
	defer pub.Close()
	if err := publishHostile(ctx, pub, time.Now().UTC().Truncate(time.Hour).Add(-90*time.Minute)); err != nil {
		return nil, fmt.Errorf("publishing hostile events: %w", err)
	}
	// demo.Run migrates, generates, publishes and consumes from the start of every topic, so
	// the hostile events published above are consumed with the demo's. Its comparison with the
	// generator's expectations is not this package's concern (the extra events make it differ).
	dir, err := os.MkdirTemp("", "dashserver-test-")
	if err != nil {
		return nil, err
	}
	fixtureStop = append(fixtureStop, func() { os.RemoveAll(dir) })
	if _, err := demo.Run(ctx, demo.Config{Events: 20000, Seed: 6, DataDir: filepath.Join(dir, "demo"), Stack: stack}); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	ch, err := stores.OpenClickHouse(ctx, stack.ClickHouseDSN)
	if err != nil {
		return nil, err
	}
	fixtureStop = append(fixtureStop, func() { ch.Close() })
	var stored uint64
	if err := ch.QueryRow(ctx, "SELECT count() FROM mcpulse.tool_calls FINAL WHERE client_name = ?", hostileClient).Scan(&stored); err != nil {
		return nil, err
	}
	if stored != hostileCalls {
		return nil, fmt.Errorf("stored %d hostile tool calls, published %d", stored, hostileCalls)
	}
	dash, err := dashboards.Load()
	if err != nil {
		return nil, err
	}
	if err := evaluateAlerts(ctx, ch, dash); err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	return &fixture{stack: stack, ch: ch, dash: dash}, nil
}

// evaluateAlerts gives the alerts dashboard a history, made by the real evaluator with two
// panel rules notifying a real webhook: the hostile tool's ignored-key rate fires now and
// resolves four hours later (its calls are out of the window), and the latest schema check's
// tools with many undescribed nested parameters keep firing.
func evaluateAlerts(ctx context.Context, ch driver.Conn, ds []dashboards.Dashboard) error {
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	defer hook.Close()
	dir, err := os.MkdirTemp("", "dashserver-alerts-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for name, text := range map[string]string{
		"ignored-keys-high.yaml": "title: Ignored-key rate above 50%\npanel: tool-diagnostics/most-misused\nwindow: 3h\n" +
			"value: ignored_key_rate\nvolume: calls\nmin_volume: 100\nlabels: [tool_name]\nthreshold: {above: 0.5}\nreceivers: [hook]\n",
		"undescribed-parameters.yaml": "title: Many undescribed nested parameters\npanel: schema-ratchet/offending-tools\nwindow: 24h\n" +
			"value: undescribed_nested\nlabels: [server, tool_name]\nthreshold: {above: 10}\nreceivers: [hook]\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	rules, err := alerts.LoadRulesDir(dir, ds)
	if err != nil {
		return err
	}
	ev := &alerts.Evaluator{Rules: rules, Dashboards: ds, ClickHouse: ch, Replica: "fixture",
		Receivers: alerts.ReceiversConfig{Receivers: []alerts.Receiver{{Name: "hook", Kind: alerts.KindWebhook, URL: hook.URL}}}}
	now := time.Now()
	for _, at := range []time.Time{now, now.Add(4 * time.Hour)} {
		rep, err := ev.Evaluate(ctx, at)
		if err == nil {
			err = errors.Join(rep.Errors...)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// publishHostile publishes hostileCalls successful tool calls at ts whose ignored keys, client
// name, distinct id and campaign are hostile strings.
func publishHostile(ctx context.Context, pub *ingest.Publisher, ts time.Time) error {
	var events []*ingest.Event
	for i := range hostileCalls {
		props := map[string]any{
			"$mcp_tool_name":                    hostileTool,
			"$mcp_is_error":                     false,
			"$mcp_client_name":                  hostileClient,
			"$mcp_ignored_keys":                 hostileKeys,
			"interview_recruitment_reason":      "session_too_young",
			"interview_recruitment_campaign_id": hostileCampaign,
		}
		env := map[string]any{
			"uuid":        uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "dashserver-hostile-%d", i)).String(),
			"event":       "$mcp_tool_call",
			"distinct_id": hostileDistinctID,
			"timestamp":   ts.Add(time.Duration(i) * time.Second).Format(time.RFC3339),
			"properties":  props,
		}
		data, err := json.Marshal(env)
		if err != nil {
			return err
		}
		ev, err := ingest.Parse(data)
		if err != nil {
			return err
		}
		events = append(events, ev)
	}
	for i := range hostileReports {
		for _, r := range []struct{ event, key string }{{"$mcp_missing_capability", "$mcp_intent"}, {"$mcp_resource_read", "$mcp_resource_name"}} {
			data, err := json.Marshal(map[string]any{
				"uuid":  uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "dashserver-hostile-report-%s-%d", r.event, i)).String(),
				"event": r.event, "distinct_id": hostileDistinctID, "timestamp": ts.Add(time.Duration(i) * time.Second).Format(time.RFC3339),
				"properties": map[string]any{r.key: hostileTool, "$mcp_client_name": hostileClient, "$mcp_server_name": "posthog",
					"$mcp_is_error": r.event == "$mcp_resource_read", "$mcp_error_message": hostileKeyLS, "$session_id": hostileDistinctID},
			})
			if err != nil {
				return err
			}
			ev, err := ingest.Parse(data)
			if err != nil {
				return err
			}
			events = append(events, ev)
		}
	}
	// A tools list whose hostile tool declares 1,001 properties (the consumer's limit is 1,000),
	// and a call of it: the schema is judged over the limit, and the pages list it.
	wide := map[string]any{}
	for i := range 1001 {
		wide[fmt.Sprintf("field_%04d", i)] = map[string]any{"type": "string"}
	}
	server := map[string]any{"$mcp_server_name": "wide-schemas-mcp", "$mcp_server_version": "0.9.0"}
	for i, props := range []map[string]any{
		{"$mcp_listed_tool_names": []string{hostileTool},
			"$mcp_parameters": map[string]any{"request": map[string]any{"method": "tools/list", "params": map[string]any{}}},
			"$mcp_response":   map[string]any{"tools": []any{map[string]any{"name": hostileTool, "inputSchema": map[string]any{"type": "object", "properties": wide}}}}},
		{"$mcp_tool_name": hostileTool, "$mcp_is_error": false,
			"$mcp_parameters": map[string]any{"request": map[string]any{"method": "tools/call", "params": map[string]any{"name": hostileTool, "arguments": map[string]any{"x": 1}}}}},
	} {
		maps.Copy(props, server)
		data, err := json.Marshal(map[string]any{
			"uuid":  uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "dashserver-over-limit-%d", i)).String(),
			"event": []string{"$mcp_tools_list", "$mcp_tool_call"}[i], "distinct_id": hostileDistinctID,
			"timestamp": ts.Add(time.Duration(i) * time.Second).Format(time.RFC3339), "properties": props,
		})
		if err != nil {
			return err
		}
		ev, err := ingest.Parse(data)
		if err != nil {
			return err
		}
		events = append(events, ev)
	}
	for i := range hostileEvents {
		data, err := json.Marshal(map[string]any{
			"uuid":  uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "dashserver-hostile-event-%d", i)).String(),
			"event": hostileEvent, "distinct_id": hostileDistinctID, "timestamp": ts.Add(time.Duration(i) * time.Second).Format(time.RFC3339),
			"properties": map[string]any{},
		})
		if err != nil {
			return err
		}
		ev, err := ingest.Parse(data)
		if err != nil {
			return err
		}
		events = append(events, ev)
	}
	return pub.Publish(ctx, events...)
}

// newTestServer serves cfg (ClickHouse and AssetsDir filled in from f when unset) on a loopback
// httptest server closed with the test.
func newTestServer(t *testing.T, cfg Config, ch driver.Conn) *httptest.Server {
	t.Helper()
	if cfg.ClickHouse == nil {
		cfg.ClickHouse = ch
	}
	if cfg.AssetsDir == "" {
		cfg.AssetsDir = assetsForTest(t)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts
}

var npmOnce sync.Once

// assetsForTest is the repository's dashboards/web with the chart library installed: when it
// is missing, the test runs the install command (`npm ci`, from package-lock.json) once, as
// the gateway's end-to-end test does for posthog-node.
func assetsForTest(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", DefaultAssetsDir)
	npmOnce.Do(func() {
		if checkAssets(dir) == nil {
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--prefix", dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("npm ci --prefix %s: %v\n%s", dir, err, out)
		}
	})
	if err := checkAssets(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}
