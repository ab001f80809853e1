package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpulse/mcpulse/internal/obs"
)

func runHealthcheck(t *testing.T, args ...string) (error, string) {
	t.Helper()
	cmd := newHealthcheckCmd()
	cmd.SilenceUsage, cmd.SilenceErrors = true, true // as under the root command
	var stderr bytes.Buffer
	cmd.SetErr(&stderr)
	cmd.SetOut(&stderr)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return err, stderr.String()
}

func TestHealthcheckExitsByTheAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			http.Error(w, "kafka: dial tcp: connection refused\nredis: \u202eoops", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	}))
	defer srv.Close()

	if err, out := runHealthcheck(t, srv.URL+"/healthz"); err != nil {
		t.Fatalf("healthy: %v %s", err, out)
	}
	err, out := runHealthcheck(t, srv.URL+"/readyz")
	var exit exitCodeError
	if !errors.As(err, &exit) || exit.code != 1 {
		t.Fatalf("unready: error %v, want exit status 1", err)
	}
	if !strings.Contains(out, "503") || strings.Count(out, "\n") != 1 || strings.ContainsRune(out, '\u202e') {
		t.Errorf("unready: stderr %q, want one line naming the 503, the body quoted", out)
	}
	srv.Close()
	if err, _ := runHealthcheck(t, srv.URL+"/healthz"); !errors.As(err, &exit) || exit.code != 1 {
		t.Errorf("no server: error %v, want exit status 1", err)
	}
	if err, _ := runHealthcheck(t, "file:///etc/passwd"); err == nil || errors.As(err, &exit) {
		t.Errorf("a non-HTTP URL: error %v, want a usage error", err)
	}
}

func TestServeMetricsServesUntilStopped(t *testing.T) {
	reg := newProcessRegistry()
	stop, err := serveMetrics(context.Background(), "127.0.0.1:0", reg, slogDiscard(), obs.Check{Name: "x", Fn: func(context.Context) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	stop() // returns once the server stopped
	if _, err := serveMetrics(context.Background(), "not an address", prometheus.NewRegistry(), slogDiscard()); err == nil {
		t.Error("a bad --metrics-listen address: no error")
	}
	stop, err = serveMetrics(context.Background(), "", reg, slogDiscard())
	if err != nil {
		t.Fatal(err)
	}
	stop()
}

func slogDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// --pprof-listen serves the runtime profiles until stopped; a bad address fails at once.
func TestServePprofServesProfilesUntilStopped(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := servePprofListener(context.Background(), ln, slogDiscard())
	base := "http://" + ln.Addr().String() + "/debug/pprof/"
	for path, want := range map[string]string{"": "goroutine", "heap?debug=1": "heap profile", "cmdline": "mcpulse"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, body without %q: %.200s", base+path, resp.StatusCode, want, body)
		}
	}
	stop()
	if _, err := http.Get(base); err == nil {
		t.Error("still serving after stop")
	}
	if _, err := servePprof(context.Background(), "not an address", slogDiscard()); err == nil {
		t.Error("a bad --pprof-listen address: no error")
	}
}

// A missing URL and a timeout that cannot be met are refused saying what to give, instead of
// cobra's "accepts 1 arg(s), received 0" and a check that always fails with "context deadline
// exceeded".
func TestHealthcheckRefusesNoURLAndANonPositiveTimeout(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "healthcheck takes one URL"},
		{[]string{"http://a/healthz", "http://b/healthz"}, "healthcheck takes one URL, got 2"},
		{[]string{"--timeout", "0s", "http://127.0.0.1:1/healthz"}, "--timeout must be positive"},
		{[]string{"--timeout", "-1s", "http://127.0.0.1:1/healthz"}, "--timeout must be positive"},
	} {
		err, _ := runHealthcheck(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
}
