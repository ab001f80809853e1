package obs_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/obs"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

func get(t *testing.T, method, url string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b), res.Header
}

func newServer(t *testing.T, g prometheus.Gatherer, checks ...obs.Check) string {
	t.Helper()
	mux := http.NewServeMux()
	obs.Register(mux, g, checks...)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestReadyzPassesWithRealRedisClickHouseAndKafka(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "mcpulse_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Add(3)
	url := newServer(t, reg,
		obs.RedisCheck(env.Redis),
		obs.ClickHouseCheck(env.ClickHouse),
		obs.KafkaCheck(env.Stack.KafkaBrokers),
		obs.KafkaCheck(env.Stack.KafkaBrokers, ingest.ConsumedTopics...))

	if code, body, _ := get(t, "GET", url+"/readyz"); code != 200 || body != "ok\n" {
		t.Fatalf("/readyz = %d %q, want 200 ok", code, body)
	}
	if code, body, _ := get(t, "GET", url+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz = %d %q, want 200 ok", code, body)
	}
	code, body, _ := get(t, "GET", url+"/metrics")
	if code != 200 || !strings.Contains(body, "mcpulse_test_total 3") {
		t.Fatalf("/metrics = %d, body lacks mcpulse_test_total 3:\n%s", code, body)
	}
}

func TestReadyzNamesEachUnreachableDependency(t *testing.T) {
	// A port nobody listens on: take one, then close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	url := newServer(t, nil,
		obs.Check{Name: "fine", Fn: func(context.Context) error { return nil }},
		obs.KafkaCheck([]string{dead}),
		obs.Check{Name: "broken", Fn: func(context.Context) error { return errors.New("disk\nfull") }},
	)
	code, body, _ := get(t, "GET", url+"/readyz")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d, want 503", code)
	}
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "kafka: ") || lines[1] != "broken: disk full" {
		t.Fatalf("/readyz body = %q, want a kafka line then \"broken: disk full\"", body)
	}
	// Liveness does not depend on the checks.
	if code, _, _ := get(t, "GET", url+"/healthz"); code != 200 {
		t.Fatalf("/healthz = %d with failing checks, want 200", code)
	}
}

func TestReadyzReportsAHangingCheckAsTimedOut(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	failed := obs.RunChecks(context.Background(), obs.Check{Name: "hang", Fn: func(context.Context) error {
		<-block // ignores its context
		return nil
	}})
	if len(failed) != 1 || failed[0].Name != "hang" || !errors.Is(failed[0].Err, context.DeadlineExceeded) {
		t.Fatalf("RunChecks = %v, want hang: deadline exceeded", failed)
	}
}

func TestEndpointsAnswerGetAndHeadOnly(t *testing.T) {
	url := newServer(t, prometheus.NewRegistry())
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		if code, _, _ := get(t, "HEAD", url+path); code != 200 {
			t.Errorf("HEAD %s = %d, want 200", path, code)
		}
		code, _, h := get(t, "POST", url+path)
		if code != http.StatusMethodNotAllowed || h.Get("Allow") != "GET, HEAD" {
			t.Errorf("POST %s = %d Allow %q, want 405 GET, HEAD", path, code, h.Get("Allow"))
		}
	}
}

func TestServeStopsGracefullyWhenContextEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- obs.ServeListener(ctx, ln, prometheus.NewRegistry(), nil) }()
	if code, _, _ := get(t, "GET", "http://"+ln.Addr().String()+"/healthz"); code != 200 {
		t.Fatalf("/healthz = %d, want 200", code)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after cancel = %v, want nil", err)
		}
	case <-time.After(obs.ShutdownTimeout + 5*time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Fatal("listener still accepts connections after shutdown")
	}
}

func TestServeReportsAnAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := obs.Serve(context.Background(), ln.Addr().String(), nil, nil); err == nil {
		t.Fatal("Serve on a port in use = nil, want an error")
	}
}
