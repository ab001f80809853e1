// Package testenv gives integration tests a migrated embedded stack with open clients, so each
// package's tests start from the same real services (DESIGN.md §7) without repeating the set-up.
package testenv

import (
	"context"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
	"github.com/mcpulse/mcpulse/stack"
)

// Env is one test's stack: ClickHouse migrated, clients open, all closed in t.Cleanup.
type Env struct {
	Stack      *stack.Stack
	ClickHouse driver.Conn
	// Redis is the stack's redis-server, or a three-master Redis Cluster (see Cluster).
	Redis     redis.UniversalClient
	Publisher *ingest.Publisher
}

// Options choose the variant of the stack.
type Options struct {
	// Cluster replaces the single redis-server with a three-master Redis Cluster, opened through
	// stores.OpenRedis like production (the stack's single node stays idle).
	Cluster bool
}

// New starts an Env for t; any failure fails the test (never skips it).
func New(t testing.TB, opts Options) *Env {
	t.Helper()
	ctx := context.Background()
	s := stack.ForTest(t)
	ch, err := stores.OpenClickHouse(ctx, s.ClickHouseDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	if _, err := migrations.Up(ctx, ch, nil); err != nil {
		t.Fatal(err)
	}
	url := s.RedisURL
	if opts.Cluster {
		url = stack.RedisClusterForTest(t).URL()
	}
	rdb, err := stores.OpenRedis(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	if _, isCluster := rdb.(*redis.ClusterClient); isCluster != opts.Cluster {
		t.Fatalf("OpenRedis(%q) = %T, want a cluster client: %v", url, rdb, opts.Cluster)
	}
	pub, err := ingest.NewPublisher(ingest.PublisherConfig{Brokers: s.KafkaBrokers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	return &Env{Stack: s, ClickHouse: ch, Redis: rdb, Publisher: pub}
}

// EachRedisNode runs fn on the single node, or on every master of a cluster.
func (e *Env) EachRedisNode(ctx context.Context, fn func(context.Context, *redis.Client) error) error {
	if c, ok := e.Redis.(*redis.ClusterClient); ok {
		return c.ForEachMaster(ctx, fn)
	}
	return fn(ctx, e.Redis.(*redis.Client))
}
