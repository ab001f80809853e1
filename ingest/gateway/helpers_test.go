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
