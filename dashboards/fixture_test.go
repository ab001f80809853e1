package dashboards

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"

	"github.com/mcpulse/mcpulse/demo"
	"github.com/mcpulse/mcpulse/demo/outcome"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/stack"
)

// demoData is the stack the integration tests share: the demo run once on a small corpus, so
// every panel has generated tool calls, recruitment events, dead letters, schema check runs
// and suppression resets to show. It is started by the first test that needs it and stopped
// by TestMain.
var demoData struct {
	once     sync.Once
	err      error
	dir      string
	stack    *stack.Stack
	ch       driver.Conn
	rdb      redis.UniversalClient
	expected *outcome.Outcome
	end      time.Time // the corpus end: no event is at or after it
}

// demoEvents is the corpus size: enough for every panel to have rows under every filter.
const demoEvents = 8000

func TestMain(m *testing.M) {
	code := m.Run()
	if demoData.ch != nil {
		demoData.ch.Close()
	}
	if demoData.rdb != nil {
		demoData.rdb.Close()
	}
	if demoData.stack != nil {
		if err := demoData.stack.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "devstack: close:", err)
		}
	}
	if demoData.dir != "" {
		os.RemoveAll(demoData.dir)
	}
	os.Exit(code)
}

// withDemoData returns the shared stack, running the demo on first use; a failure fails the
// test (never skips it).
func withDemoData(t *testing.T) {
	t.Helper()
	demoData.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		d := &demoData
		if d.dir, d.err = os.MkdirTemp("", "mcpulse-dashboards-test-"); d.err != nil {
			return
		}
		if d.stack, d.err = stack.Start(ctx, stack.Config{UseEnv: true, DataDir: filepath.Join(d.dir, "stack")}); d.err != nil {
			return
		}
		summary, err := demo.Run(ctx, demo.Config{Events: demoEvents, Seed: 11, DataDir: filepath.Join(d.dir, "demo"), Stack: d.stack})
		if err != nil {
			d.err = err
			return
		}
		if len(summary.Mismatches) > 0 {
			d.err = fmt.Errorf("the demo's stores differ from the expected outcome: %v", summary.Mismatches)
			return
		}
		if d.expected, d.err = outcome.Read(filepath.Join(d.dir, "demo", "events.jsonl.expected.json")); d.err != nil {
			return
		}
		if d.end, d.err = time.Parse(time.RFC3339, d.expected.Corpus.End); d.err != nil {
			return
		}
		if d.ch, d.err = stores.OpenClickHouse(ctx, d.stack.ClickHouseDSN); d.err != nil {
			return
		}
		d.rdb, d.err = stores.OpenRedis(ctx, d.stack.RedisURL)
	})
	if demoData.err != nil {
		t.Fatalf("demo data: %v", demoData.err)
	}
}
