package stack

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// ForTest starts a stack for one test (or benchmark) and stops it in t.Cleanup. It honours
// MCPULSE_KAFKA_BROKERS, MCPULSE_REDIS_URL and MCPULSE_CLICKHOUSE_DSN (Config.UseEnv), so CI
// can point tests at external services; otherwise every service is embedded in a temporary
// directory. Start-up is bounded by 2 minutes.
//
// It never skips: a missing redis-server or clickhouse-server fails the test with the
// install hint, because a skipped integration test reads as a passing one.
func ForTest(t testing.TB) *Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Config{UseEnv: true})
	if err != nil {
		t.Fatalf("devstack: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("devstack: close: %v", err)
		}
	})
	return s
}

// RedisClusterForTest starts a three-master Redis Cluster (StartRedisCluster) in a directory
// of the test's and stops it in t.Cleanup. Start-up is bounded by a minute and takes about
// two seconds. Like ForTest it never skips: a missing redis-server fails the test. Unlike
// ForTest it ignores MCPULSE_REDIS_URL: the cluster is always embedded.
func RedisClusterForTest(t testing.TB) *RedisCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc, err := StartRedisCluster(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("devstack: %v", err)
	}
	t.Cleanup(func() {
		if err := rc.Close(); err != nil {
			t.Errorf("devstack: close redis cluster: %v", err)
		}
	})
	return rc
}

// ClickHouseClusterForTest starts a ClickHouse cluster of shards × replicas servers and a
// ZooKeeper (StartClickHouseCluster) in a directory of the test's and stops it in t.Cleanup.
// Start-up is bounded by 2 minutes; a 2×2 cluster takes about 2.5 s.
//
// When ZooKeeper (java or the Debian package zookeeper) or clickhouse-server is missing it
// skips t, saying what to install, unless the environment variable CI is set: CI installs
// them (.ci/run), so there a missing one fails t rather than reads as a pass.
func ClickHouseClusterForTest(t testing.TB, shards, replicas int) *ClickHouseCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cc, err := StartClickHouseCluster(ctx, ClusterConfig{Shards: shards, Replicas: replicas, Dir: t.TempDir()})
	SkipOrFail(t, err)
	t.Cleanup(func() {
		if err := cc.Close(); err != nil {
			t.Errorf("devstack: close clickhouse cluster: %v", err)
		}
	})
	return cc
}

// SkipOrFail ends t for err returned by a start: a *MissingBinaryError skips t when the
// environment variable CI is unset; any other error, or any error under CI, fails it. A nil
// err does nothing. It is for helpers that share one cluster between a package's tests.
func SkipOrFail(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var missing *MissingBinaryError
	if errors.As(err, &missing) && os.Getenv("CI") == "" {
		t.Skipf("devstack: %v (CI=true makes this a failure)", err)
	}
	t.Fatalf("devstack: %v", err)
}
