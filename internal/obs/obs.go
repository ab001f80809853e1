// Package obs gives every mcpulse service the same operational endpoints:
// /metrics (Prometheus text exposition through promhttp), /healthz (the process is alive) and
// /readyz (every dependency answers), served on the service's own listener or a separate one.
package obs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ReadyTimeout bounds every readiness check of one /readyz request; the checks run
// concurrently, so /readyz answers within about this long even when a dependency hangs.
const ReadyTimeout = 2 * time.Second

// ShutdownTimeout bounds how long Serve waits for in-flight scrapes once its context ends.
const ShutdownTimeout = 5 * time.Second

// Check is one readiness condition: Fn returns nil when the dependency called Name is usable.
// Fn gets a context that ends after ReadyTimeout and must return by then.
type Check struct {
	// Name identifies the dependency in the /readyz answer ("redis", "clickhouse", "kafka").
	Name string
	// Fn probes the dependency; a nil Fn always passes.
	Fn func(context.Context) error
}

// Register mounts on mux:
//
//	/metrics  the metrics of g in Prometheus' exposition format (promhttp.HandlerFor)
//	/healthz  200 "ok" while the process serves HTTP
//	/readyz   200 "ok" when every check passes within ReadyTimeout, else 503 with one line
//	          "name: error" per failed check
//
// Each answers GET and HEAD only (405 with an Allow header otherwise). A nil g serves the
// default gatherer. Check errors are written as text/plain, never as HTML.
func Register(mux *http.ServeMux, g prometheus.Gatherer, checks ...Check) {
	if g == nil {
		g = prometheus.DefaultGatherer
	}
	mux.Handle("/metrics", readOnly(promhttp.HandlerFor(g, promhttp.HandlerOpts{})))
	mux.Handle("/healthz", readOnly(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok\n")
	})))
	checks = append([]Check(nil), checks...)
	mux.Handle("/readyz", readOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		failed := RunChecks(r.Context(), checks...)
		if len(failed) == 0 {
			writeText(w, http.StatusOK, "ok\n")
			return
		}
		var b strings.Builder
		for _, f := range failed {
			fmt.Fprintf(&b, "%s: %s\n", f.Name, oneLine(f.Err.Error()))
		}
		writeText(w, http.StatusServiceUnavailable, b.String())
	})))
}

// Failure is a check that did not pass.
type Failure struct {
	Name string
	Err  error
}

// RunChecks runs checks concurrently, each under a ReadyTimeout deadline derived from ctx,
// and returns the failures in the order of checks (nil when all passed). A check that
// ignores its context is reported as timed out once the deadline passes.
func RunChecks(ctx context.Context, checks ...Check) []Failure {
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		if c.Fn == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan error, 1)
			go func() { done <- c.Fn(ctx) }()
			select {
			case errs[i] = <-done:
			case <-ctx.Done():
				errs[i] = fmt.Errorf("no answer within %s: %w", ReadyTimeout, ctx.Err())
			}
		}()
	}
	wg.Wait()
	var failed []Failure
	for i, err := range errs {
		if err != nil {
			failed = append(failed, Failure{Name: checks[i].Name, Err: err})
		}
	}
	return failed
}

// Serve listens on addr and serves Register's endpoints until ctx ends, then shuts down
// gracefully (bounded by ShutdownTimeout). It returns nil after a shutdown caused by ctx and
// the listen or serve error otherwise. A nil log discards.
func Serve(ctx context.Context, addr string, g prometheus.Gatherer, log *slog.Logger, checks ...Check) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics listener: %w", err)
	}
	return ServeListener(ctx, ln, g, log, checks...)
}

// ServeListener is Serve on a listener of the caller's (tests pass one on port 0); it
// closes ln.
func ServeListener(ctx context.Context, ln net.Listener, g prometheus.Gatherer, log *slog.Logger, checks ...Check) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	Register(mux, g, checks...)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("metrics: listening", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("metrics listener: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("metrics listener: shutdown: %w", err)
	}
	return nil
}

func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeText(w, http.StatusMethodNotAllowed, "method not allowed\n")
			return
		}
		h.ServeHTTP(w, r)
	})
}

func writeText(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}

// oneLine keeps a check error on one line of the /readyz body (driver errors may span lines).
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
