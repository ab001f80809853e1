package stack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

func openHost(t *testing.T, h ClickHouseHost) driver.Conn {
	t.Helper()
	opts, err := clickhouse.ParseDSN(h.DSN)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// A 2×2 cluster is a real one: every host lists the four hosts under ClusterName with its own
// shard and replica macros, ON CLUSTER DDL reaches every host, a row inserted on one replica
// is read on the other replica of its shard and not on the other shard, and Close leaves no
// process behind.
func TestClickHouseClusterReplicatesWithinAShardAndRunsDDLOnEveryHost(t *testing.T) {
	began := time.Now()
	cc := ClickHouseClusterForTest(t, 2, 2)
	t.Logf("2×2 cluster started in %s", time.Since(began).Round(time.Millisecond))
	if len(cc.Hosts) != 4 || cc.Name != ClusterName {
		t.Fatalf("cluster %s with %d hosts, want %s with 4", cc.Name, len(cc.Hosts), ClusterName)
	}
	ctx := context.Background()
	conns := make([]driver.Conn, len(cc.Hosts))
	for i, h := range cc.Hosts {
		conns[i] = openHost(t, h)
		var hosts uint64
		if err := conns[i].QueryRow(ctx, "SELECT count() FROM system.clusters WHERE cluster = ?", ClusterName).Scan(&hosts); err != nil || hosts != 4 {
			t.Errorf("%s: system.clusters lists %d hosts (%v), want 4", h.Name(), hosts, err)
		}
		var shard, replica string
		if err := conns[i].QueryRow(ctx, "SELECT anyIf(substitution, macro = 'shard'), anyIf(substitution, macro = 'replica') FROM system.macros").Scan(&shard, &replica); err != nil {
			t.Fatal(err)
		}
		if shard != fmt.Sprint(h.Shard) || replica != h.Name() {
			t.Errorf("%s: macros shard=%s replica=%s", h.Name(), shard, replica)
		}
	}
	for _, st := range []string{
		"CREATE DATABASE IF NOT EXISTS t ON CLUSTER " + ClusterName,
		"CREATE TABLE IF NOT EXISTS t.r ON CLUSTER " + ClusterName + " (a UInt32) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/t/r', '{replica}') ORDER BY a",
	} {
		if err := conns[0].Exec(ctx, st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	if err := conns[0].Exec(ctx, "INSERT INTO t.r SELECT number FROM system.numbers LIMIT 7"); err != nil {
		t.Fatal(err)
	}
	if err := conns[1].Exec(ctx, "SYSTEM SYNC REPLICA t.r"); err != nil {
		t.Fatal(err)
	}
	for i, want := range []uint64{7, 7, 0, 0} {
		var n uint64
		if err := conns[i].QueryRow(ctx, "SELECT count() FROM t.r").Scan(&n); err != nil || n != want {
			t.Errorf("%s holds %d rows (%v), want %d", cc.Hosts[i].Name(), n, err, want)
		}
	}

	pids := []int{cc.zk.c.pid()}
	for _, c := range cc.servers {
		pids = append(pids, c.pid())
	}
	t.Logf("DDL, insert and reads took %s", time.Since(began).Round(time.Millisecond))
	// A server waits up to 10 s for an open client connection to go before it exits.
	for _, c := range conns {
		c.Close()
	}
	closing := time.Now()
	if err := cc.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close took %s", time.Since(closing).Round(time.Millisecond))
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d still alive after Close", pid)
		}
	}
}

func TestClusterConfigValidateListsEveryProblem(t *testing.T) {
	err := ClusterConfig{Shards: -1, Replicas: -2}.Validate()
	if err == nil || !strings.Contains(err.Error(), "Shards") || !strings.Contains(err.Error(), "Replicas") {
		t.Errorf("Validate() = %v, want the Shards and the Replicas problems", err)
	}
	if err := (ClusterConfig{Shards: 5, Replicas: 4}).Validate(); err == nil {
		t.Error("Validate accepted 20 servers")
	}
}

func TestMissingZooKeeperNamesTheDebianPackage(t *testing.T) {
	saved := zooKeeperJar
	zooKeeperJar = "/nonexistent/zookeeper.jar"
	t.Cleanup(func() { zooKeeperJar = saved })
	_, err := StartClickHouseCluster(context.Background(), ClusterConfig{Shards: 1, Replicas: 2})
	var missing *MissingBinaryError
	if !errors.As(err, &missing) || missing.Package != "zookeeper" {
		t.Fatalf("error = %v, want a missing zookeeper", err)
	}
	if want := "/nonexistent/zookeeper.jar not found: install Debian package zookeeper (apt-get install zookeeper)"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
}

// A stack asked for replicas runs a cluster; its single-server controls say so.
func TestStackWithReplicasRunsAClusterAndRefusesSingleServerControls(t *testing.T) {
	if _, _, err := findZooKeeper(); err != nil {
		SkipOrFail(t, err)
	}
	s := startStack(t, Config{Replicas: 2})
	cc := s.ClickHouseCluster
	if cc == nil || len(cc.Hosts) != 2 || s.ClickHouseDSN != cc.Hosts[0].DSN || s.ch != nil {
		t.Fatalf("stack with Replicas 2: cluster %v, DSN %s", cc, s.ClickHouseDSN)
	}
	for name, f := range map[string]func() error{
		"StopClickHouse":   s.StopClickHouse,
		"StartClickHouse":  func() error { return s.StartClickHouse(context.Background()) },
		"FreezeClickHouse": s.FreezeClickHouse,
	} {
		if err := f(); !errors.Is(err, ErrClickHouseCluster) {
			t.Errorf("%s: %v, want ErrClickHouseCluster", name, err)
		}
	}
}
