package jobs

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/schemacheck"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

func countRuns(t *testing.T, e *testenv.Env, where string) uint64 {
	t.Helper()
	var n uint64
	if err := e.ClickHouse.QueryRow(context.Background(), "SELECT count() FROM mcpulse.schema_check_runs FINAL WHERE "+where).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A server that cannot be reached is a failed check with its error, never a run with zero
// tools; a hanging server ends at the timeout, and the next tick runs again.
func TestUnreachableAndHangingServersAreRecordedAsFailedChecks(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	hanging, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer hanging.Close()
	go func() {
		for {
			c, err := hanging.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()

	for _, tc := range []struct{ name, url string }{
		{"unreachable", "http://" + closedAddr + "/mcp"},
		{"hanging", "http://" + hanging.Addr().String() + "/mcp"},
	} {
		job := &SchemaRatchet{Server: schemacheck.ServerConfig{Name: tc.name, URL: tc.url}, ClickHouse: e.ClickHouse, Timeout: 2 * time.Second}
		start := time.Now()
		for tick := 0; tick < 2; tick++ {
			run, err := job.RunOnce(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if run.Err == nil || run.Report != nil {
				t.Errorf("%s: run %+v, want a failed check", tc.name, run)
			}
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%s: two runs took %s, want each bounded by the 2s timeout", tc.name, took)
		}
		if n := countRuns(t, e, "server = '"+tc.name+"' AND reached = 0 AND error != '' AND tools = 0"); n != 2 {
			t.Errorf("%s: %d failed runs stored, want 2", tc.name, n)
		}
	}
}

// Two scheduler replicas firing the same tick run the check once.
func TestEachScheduledRunHappensOnceAcrossReplicas(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	url := "http://" + closed.Addr().String() + "/mcp"
	closed.Close()
	server := schemacheck.ServerConfig{Name: "replicated", URL: url}
	replicas := []*SchemaRatchet{
		{Server: server, ClickHouse: e.ClickHouse, Redis: e.Redis, Timeout: 2 * time.Second},
		{Server: server, ClickHouse: e.ClickHouse, Redis: e.Redis, Timeout: 2 * time.Second},
	}
	fire := func() {
		var wg sync.WaitGroup
		for _, r := range replicas {
			wg.Add(1)
			go func() { defer wg.Done(); r.scheduled(time.Hour)() }()
		}
		wg.Wait()
	}
	fire()
	if n := countRuns(t, e, "server = 'replicated'"); n != 1 {
		t.Fatalf("%d runs after one tick on two replicas, want 1", n)
	}
	fire() // the same period again: nothing
	if n := countRuns(t, e, "server = 'replicated'"); n != 1 {
		t.Fatalf("%d runs after a second tick in the same period, want 1", n)
	}
}
