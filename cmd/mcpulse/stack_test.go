package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
	"github.com/mcpulse/mcpulse/stack"
)

// syncBuffer is a bytes.Buffer safe to write from a running command and read from the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var (
	hostLineRE    = regexp.MustCompile(`shard (\d+) replica (\d+)  (clickhouse://\S+)`)
	migrateHintRE = regexp.MustCompile(`create the schema with: mcpulse (.+)`)
)

// "mcpulse stack --shards 2 --replicas 1" runs a cluster, lists every host's DSN and exports
// the first; the migrate command it prints, "migrate up --cluster mcpulse_cluster --sharded",
// through shard 1 creates the sharded layout (mcpulse.tool_calls Distributed over the
// cluster), then through shard 2 says "schema is up to date".
func TestStackWithShardsRunsAClusterThatMigratesOnceForEveryShard(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := newRootCmd()
	var out, errOut syncBuffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"stack", "--shards", "2", "--replicas", "1"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	deadline := time.After(2 * time.Minute)
	for !strings.Contains(errOut.String(), "create the schema with") {
		select {
		case err := <-done:
			stack.SkipOrFail(t, err) // skips without ZooKeeper unless CI is set
			t.Fatalf("stack exited without an error before it was up:\n%s", errOut.String())
		case <-deadline:
			t.Fatalf("stack not up within 2 minutes:\n%s", errOut.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stack: %v", err)
		}
	}()
	hosts := hostLineRE.FindAllStringSubmatch(errOut.String(), -1)
	if len(hosts) != 2 || hosts[0][1] != "1" || hosts[1][1] != "2" {
		t.Fatalf("host lines %q, want shard 1 and shard 2:\n%s", hosts, errOut.String())
	}
	if !strings.Contains(out.String(), "MCPULSE_CLICKHOUSE_DSN='"+hosts[0][3]+"'") {
		t.Errorf("stdout exports\n%s\nwant the first host's DSN %s", out.String(), hosts[0][3])
	}
	hint := migrateHintRE.FindStringSubmatch(errOut.String())
	if hint == nil || hint[1] != "migrate up --cluster "+stack.ClusterName+" --sharded" {
		t.Fatalf("stack printed the migrate command %q, want the sharded layout's:\n%s", hint, errOut.String())
	}
	migrate := func(dsn string) string {
		t.Helper()
		root := newRootCmd()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs(append(strings.Fields(hint[1]), "--clickhouse", dsn))
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("migrate up through %s: %v", dsn, err)
		}
		return out.String()
	}
	began := time.Now()
	if first := migrate(hosts[0][3]); !strings.Contains(first, "applied 0001_") {
		t.Errorf("first migrate up printed\n%s\nwant every migration applied", first)
	}
	t.Logf("migrated a 2×1 cluster, sharded, in %s", time.Since(began).Round(time.Millisecond))
	conn, err := stores.OpenClickHouse(ctx, hosts[0][3])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if target, err := migrations.MutationTarget(ctx, conn, "tool_calls"); err != nil || target.Cluster != stack.ClusterName || target.Database != migrations.LocalDatabase {
		t.Errorf("mcpulse.tool_calls after the printed migrate command: mutations go to %+v (%v), want the local table on %s", target, err, stack.ClusterName)
	}
	if second := migrate(hosts[1][3]); strings.TrimSpace(second) != "schema is up to date" {
		t.Errorf("migrate up through shard 2 printed\n%s\nwant \"schema is up to date\"", second)
	}
}
