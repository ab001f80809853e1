package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"

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
