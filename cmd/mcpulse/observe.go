package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"

	"github.com/mcpulse/mcpulse/internal/obs"
)

// metricsListenUsage is the help of every service's --metrics-listen flag.
const metricsListenUsage = "serve /metrics (Prometheus), /healthz and /readyz on this host:port (\"\" = off)"

// addMetricsListenFlag adds --metrics-listen to a service command's flags.
func addMetricsListenFlag(f *pflag.FlagSet, addr *string) {
	f.StringVar(addr, "metrics-listen", "", metricsListenUsage)
}

// newProcessRegistry returns a registry holding the Go runtime and process collectors, for a
// service to add its own metrics to.
func newProcessRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// serveMetrics listens on addr (nothing when addr is "") and serves obs.Register's endpoints
// for g and checks in the background until stop is called or ctx ends; stop waits for the
// server to shut down. A listen error is returned at once, so a taken port fails the command
// at start-up rather than going unnoticed.
func serveMetrics(ctx context.Context, addr string, g prometheus.Gatherer, log *slog.Logger, checks ...obs.Check) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := obs.ServeListener(ctx, ln, g, log, checks...); err != nil {
			log.Error("metrics listener stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}

// pprofListenUsage is the help of --pprof-listen.
const pprofListenUsage = "serve Go's runtime profiles (net/http/pprof: /debug/pprof/, profile?seconds=N, heap, trace) on this host:port (\"\" = off; keep it on loopback or a private network)"

// servePprof listens on addr (nothing when addr is "") and serves net/http/pprof's handlers in
// the background until stop is called or ctx ends. Profiles are kept off the metrics port: a
// CPU profile or trace costs CPU while it runs and shows the process's internals, so they are
// served only where an operator asked for them. A listen error is returned at once.
func servePprof(ctx context.Context, addr string, log *slog.Logger) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof-listen: %w", err)
	}
	return servePprofListener(ctx, ln, log), nil
}

// servePprofListener is servePprof on a listener of the caller's; stop closes ln.
func servePprofListener(ctx context.Context, ln net.Listener, log *slog.Logger) (stop func()) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		go func() {
			<-ctx.Done()
			sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), obs.ShutdownTimeout)
			defer scancel()
			_ = srv.Shutdown(sctx)
		}()
		log.Info("pprof: listening", "addr", ln.Addr().String())
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof listener stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }
}
