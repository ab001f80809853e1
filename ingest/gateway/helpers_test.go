package gateway_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/ingest/gateway"
)

const testKey = "phc_test_project_key_0123456789"

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// fixture is a gateway on an httptest server, publishing to a kfake cluster of one broker with
// one partition per topic.
type fixture struct {
	t       testing.TB
	cluster *kfake.Cluster
	brokers []string
	gw      *gateway.Gateway
	srv     *httptest.Server
	logs    *syncBuffer
}

func newFixture(t testing.TB, mod func(*gateway.Config)) *fixture {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, ingest.AllTopics...), kfake.DefaultNumPartitions(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	f := &fixture{t: t, cluster: c, brokers: c.ListenAddrs(), logs: &syncBuffer{}}
	log := slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	pub, err := ingest.NewPublisher(ingest.PublisherConfig{
		Brokers: f.brokers, WriteTimeout: time.Second, CloseTimeout: time.Second, MaxAttempts: 2, Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	cfg := gateway.Config{APIKeys: []string{testKey, "second-key"}, Brokers: f.brokers, KafkaTimeout: 3 * time.Second, Logger: log}
	if mod != nil {
		mod(&cfg)
	}
	f.gw, err = gateway.New(cfg, pub)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(f.gw.Handler())
	t.Cleanup(f.srv.Close)
	return f
}

// post sends body to path with headers (name, value pairs) and decodes the JSON answer.
func (f *fixture) post(path string, body []byte, headers ...string) (*http.Response, gateway.Response) {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	var r gateway.Response
	if err := json.Unmarshal(data, &r); err != nil {
		f.t.Fatalf("POST %s: %d, body %q is not JSON: %v", path, res.StatusCode, data, err)
	}
	return res, r
}

// messages reads every message of a topic (partition 0).
func (f *fixture) messages(topic string) []kafka.Message {
	f.t.Helper()
	return readTopic(f.t, f.brokers, topic)
}

func readTopic(t testing.TB, brokers []string, topic string) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := kafka.DialLeader(ctx, "tcp", brokers[0], topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	last, err := conn.ReadLastOffset()
	if err != nil {
		t.Fatal(err)
	}
	if last == 0 {
		return nil
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	var out []kafka.Message
	for int64(len(out)) < last {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("reading %s: %v (got %d of %d)", topic, err, len(out), last)
		}
		out = append(out, m)
	}
	return out
}

var base = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

func uuidN(n int) string { return fmt.Sprintf("0192f2a0-0000-7000-8000-%012d", n) }

// toolCall is a PostHog-style $mcp_tool_call event.
func toolCall(n int) map[string]any {
	return map[string]any{
		"uuid": uuidN(n), "event": ingest.EventToolCall, "distinct_id": fmt.Sprintf("user-%d", n),
		"timestamp":  base.Add(time.Duration(n) * time.Second).Format(time.RFC3339Nano),
		"properties": map[string]any{"$mcp_tool_name": "search", "$lib": "posthog-node", "$mcp_is_error": false},
	}
}

func invitation(n int) map[string]any {
	return map[string]any{
		"uuid": uuidN(n), "event": ingest.EventInvitationSent, "distinct_id": fmt.Sprintf("user-%d", n),
		"timestamp": base.Add(time.Duration(n) * time.Second).Format(time.RFC3339Nano),
		"properties": map[string]any{"campaign_id": "onboarding", "invitation_id": fmt.Sprintf("inv-%d", n),
			"feature_flag": "mcp-interviews", "interview_recruitment_reason": "invited"},
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func batchBody(t testing.TB, sentAt string, events ...map[string]any) []byte {
	t.Helper()
	body := map[string]any{"api_key": testKey, "batch": events}
	if sentAt != "" {
		body["sent_at"] = sentAt
	}
	return mustJSON(t, body)
}

func gzipBytes(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// envelopeOf decodes a published message value.
func envelopeOf(t *testing.T, m kafka.Message) ingest.Envelope {
	t.Helper()
	var env ingest.Envelope
	if err := json.Unmarshal(m.Value, &env); err != nil {
		t.Fatal(err)
	}
	return env
}

func newGzipWriter(w io.Writer) *gzip.Writer {
	zw, _ := gzip.NewWriterLevel(w, gzip.BestCompression)
	return zw
}

// npmCI returns the absolute path of testdata/<name>, a Node.js package of SDK test clients,
// running `npm ci` there (from its package-lock.json) when node_modules lacks pkg. make sdk
// installs them ahead of the tests.
func npmCI(t testing.TB, name, pkg string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err == nil {
		return dir
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	return dir
}

// sdkCall is one call of testdata/mcp/client.js's CALLS, with what mcpulse must derive from it.
type sdkCall struct {
	Server string          `json:"server"`
	Tool   string          `json:"tool"`
	Case   string          `json:"case"`
	Args   json.RawMessage `json:"args"`
	Expect struct {
		Source string   `json:"source"`
		Keys   []string `json:"keys"`
		Reason string   `json:"reason"`
		Error  string   `json:"error"`
	} `json:"expect"`
}

// sdkOutcome is one line of client.js's output.
type sdkOutcome struct {
	Server  string `json:"server"`
	Tool    string `json:"tool"`
	Case    string `json:"case"`
	Outcome string `json:"outcome"` // ok, tool_error, rpc_error
	Text    string `json:"text"`
}

// mcpServerNames maps client.js's server labels to the names the servers report.
var mcpServerNames = map[string]string{"zod": "mcpulse-fixture-zod", "json": "mcpulse-fixture-json"}

// mcpServerVersions maps client.js's server labels to the versions the servers report.
var mcpServerVersions = map[string]string{"zod": "1.4.0", "json": "2.0.1"}

// mcpClientName is the name client.js's MCP client gives in its handshake.
const mcpClientName = "mcpulse-fixture-client"

// runMCPClient runs testdata/mcp/client.js against the gateway at url: the official MCP client
// drives the two @posthog/mcp-instrumented servers, whose events go to url. It returns the call
// table and each call's outcome, checked against the table (a call expected to fail failed).
func runMCPClient(t testing.TB, url, apiKey string) ([]sdkCall, []sdkOutcome) {
	t.Helper()
	dir := npmCI(t, "mcp", "@posthog/mcp")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	printCalls := exec.CommandContext(ctx, "node", "client.js", "--print-calls")
	printCalls.Dir = dir
	list, err := printCalls.Output()
	if err != nil {
		t.Fatalf("node client.js --print-calls: %v", err)
	}
	var calls []sdkCall
	if err := json.Unmarshal(list, &calls); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "node", "client.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GATEWAY_URL="+url, "API_KEY="+apiKey)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.js: %v\n%s", err, stderr.String())
	}
	if s := stderr.String(); strings.Contains(s, "posthog error") || strings.Count(s, "posthog flushed") != len(mcpServerNames) {
		t.Fatalf("the servers did not flush their events cleanly:\n%s", s)
	}
	var outcomes []sdkOutcome
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var o sdkOutcome
		if err := json.Unmarshal(line, &o); err != nil {
			t.Fatalf("client.js output %q: %v", line, err)
		}
		outcomes = append(outcomes, o)
	}
	if len(outcomes) != len(calls) {
		t.Fatalf("%d outcomes for %d calls", len(outcomes), len(calls))
	}
	for i, c := range calls {
		if failed := outcomes[i].Outcome != "ok"; failed != (c.Expect.Error != "") {
			t.Errorf("%s %s (%s): outcome %s %q, expected error %q", c.Server, c.Tool, c.Case, outcomes[i].Outcome, outcomes[i].Text, c.Expect.Error)
		}
	}
	return calls, outcomes
}
