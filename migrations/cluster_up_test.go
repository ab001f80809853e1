package migrations_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
	"github.com/mcpulse/mcpulse/stack"
)

// shared is the package's one 2×2 ClickHouse cluster (four servers and a ZooKeeper, about
// 400 MB), started by the first test that needs it and stopped by TestMain.
var shared struct {
	once sync.Once
	cc   *stack.ClickHouseCluster
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.cc != nil {
		shared.cc.Close()
	}
	os.Exit(code)
}

// cluster2x2 returns the shared cluster, skipping or failing t as stack.SkipOrFail does when
// it cannot start.
func cluster2x2(t *testing.T) *stack.ClickHouseCluster {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		shared.cc, shared.err = stack.StartClickHouseCluster(ctx, stack.ClusterConfig{Shards: 2, Replicas: 2})
	})
	stack.SkipOrFail(t, shared.err)
	return shared.cc
}

// loadedDDLTimeout is the DDL timeout of the tests' migrations, above the default 30 s: a 2×2
// migration on the shared 2-core machine under load took 55.8 s once against about 30, and a
// statement that outlives the timeout fails the run. It stays 5 s under the client's 60 s
// read timeout.
const loadedDDLTimeout = 55 * time.Second

func openHost(t *testing.T, h stack.ClickHouseHost) driver.Conn {
	t.Helper()
	conn, err := stores.OpenClickHouse(context.Background(), h.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// The cluster's acceptance point: the schema migrated through a host of shard 1 is seen as up
// to date through every host of shard 2, because schema_migrations is one table replicated on
// every host; every host holds the same tables, every stored one replicated.
func TestClusterUpThroughOneShardIsUpToDateThroughTheOther(t *testing.T) {
	cc := cluster2x2(t)
	ctx := context.Background()
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]driver.Conn, len(cc.Hosts))
	for i, h := range cc.Hosts {
		conns[i] = openHost(t, h)
	}
	var before uint64 // the cluster is shared: with -count above 1 it is migrated already
	if err := conns[0].QueryRow(ctx, "SELECT count() FROM system.databases WHERE name = ?", migrations.Database).Scan(&before); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	applied, err := migrations.UpWith(ctx, conns[0], nil, migrations.Options{Cluster: cc.Name, DDLTimeout: loadedDDLTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("migrated a 2×2 cluster in %s", time.Since(began).Round(time.Millisecond))
	if before == 0 && len(applied) != len(all) {
		t.Fatalf("first run applied %d migrations, want %d", len(applied), len(all))
	}
	for i := 2; i < len(cc.Hosts); i++ { // shard 2's hosts
		again, err := migrations.UpWith(ctx, conns[i], nil, migrations.Options{Cluster: cc.Name, DDLTimeout: loadedDDLTimeout})
		if err != nil {
			t.Fatalf("second run through %s: %v", cc.Hosts[i].Name(), err)
		}
		if len(again) != 0 {
			t.Errorf("second run through %s applied %d migrations, want none (up to date)", cc.Hosts[i].Name(), len(again))
		}
	}
	var want []string
	for i, conn := range conns {
		vs, err := migrations.AppliedVersions(ctx, conn)
		if err != nil || len(vs) != len(all) {
			t.Errorf("%s: %d applied versions (%v), want %d", cc.Hosts[i].Name(), len(vs), err, len(all))
		}
		var tables []string
		rows, err := conn.Query(ctx, "SELECT name, engine FROM system.tables WHERE database = 'mcpulse' ORDER BY name")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var name, engine string
			if err := rows.Scan(&name, &engine); err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(engine, "MergeTree") && !strings.HasPrefix(engine, "Replicated") {
				t.Errorf("%s: mcpulse.%s is a %s, not replicated", cc.Hosts[i].Name(), name, engine)
			}
			tables = append(tables, name+" "+engine)
		}
		rows.Close()
		if i == 0 {
			want = tables
		} else if strings.Join(tables, ",") != strings.Join(want, ",") {
			t.Errorf("%s holds tables\n%v\nwant those of %s\n%v", cc.Hosts[i].Name(), tables, cc.Hosts[0].Name(), want)
		}
	}
}

// With one replica killed, a cluster migration fails in seconds, before any DDL, naming the
// host that is down and the bound of each check, instead of an ON CLUSTER statement waiting
// for it until the client's read timeout.
func TestClusterUpWithAReplicaDownFailsFastNamingIt(t *testing.T) {
	cc := cluster2x2(t)
	ctx := context.Background()
	down := len(cc.Hosts) - 1 // shard 2, replica 2
	if err := cc.KillHost(down); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cc.StartHost(context.Background(), down); err != nil {
			t.Errorf("restart %s: %v", cc.Hosts[down].Name(), err)
		}
	})
	conn := openHost(t, cc.Hosts[0])
	began := time.Now()
	_, err := migrations.UpWith(ctx, conn, nil, migrations.Options{Cluster: cc.Name, PreflightTimeout: 5 * time.Second})
	took := time.Since(began)
	t.Logf("failed in %s: %v", took.Round(time.Millisecond), err)
	var pe *migrations.PreflightError
	if !errors.As(err, &pe) {
		t.Fatalf("UpWith error %v, want a *PreflightError", err)
	}
	h := cc.Hosts[down]
	want := "127.0.0.1:" + itoa(h.TCPPort) + " (shard 2, replica 2) unreachable"
	if len(pe.Unreachable) != 1 || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "bounded by 5s") {
		t.Errorf("error names %d unreachable hosts:\n%v\nwant exactly %q and the bound 5s", len(pe.Unreachable), err, want)
	}
	if took > 10*time.Second {
		t.Errorf("took %s to fail, want well under the 5 s bound of one check and the client's 60 s read timeout", took)
	}

	// Past the preflight, an ON CLUSTER statement waits for the host that is down for the DDL
	// timeout, which arrives at 18.16 as asked (DDLTimeoutSettings), not for its default 180 s.
	settings, err := migrations.DDLTimeoutSettings(conn, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	err = conn.Exec(clickhouse.Context(ctx, clickhouse.WithSettings(settings)), "CREATE DATABASE IF NOT EXISTS mcpulse_ddl_probe ON CLUSTER "+cc.Name)
	took = time.Since(began)
	t.Logf("ON CLUSTER with a host down and a 2 s DDL timeout: %s: %v", took.Round(time.Millisecond), err)
	var ex *clickhouse.Exception
	if !errors.As(err, &ex) || ex.Code != 159 {
		t.Errorf("ON CLUSTER with a host down: %v, want TIMEOUT_EXCEEDED (159)", err)
	}
	if took < 2*time.Second || took > 8*time.Second {
		t.Errorf("ON CLUSTER with a host down failed after %s, want about the 2 s DDL timeout", took)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// With ZooKeeper down, a cluster migration fails within the preflight's bound, naming every
// host that cannot read it, and runs nothing.
func TestClusterUpWithZooKeeperDownFailsNamingIt(t *testing.T) {
	cc := cluster2x2(t)
	ctx := context.Background()
	conn := openHost(t, cc.Hosts[0])
	if err := cc.StopZooKeeper(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	restart := func() {
		if restarted {
			return
		}
		restarted = true
		if err := cc.StartZooKeeper(context.Background()); err != nil {
			t.Errorf("restart zookeeper: %v", err)
		}
	}
	t.Cleanup(restart)
	began := time.Now()
	_, err := migrations.UpWith(ctx, conn, nil, migrations.Options{Cluster: cc.Name, PreflightTimeout: 3 * time.Second})
	took := time.Since(began)
	t.Logf("failed in %s: %v", took.Round(time.Millisecond), err)
	var pe *migrations.PreflightError
	if !errors.As(err, &pe) {
		t.Fatalf("UpWith error %v, want a *PreflightError", err)
	}
	if len(pe.NoZooKeeper) != len(cc.Hosts) || !strings.Contains(err.Error(), "cannot read ZooKeeper") || !strings.Contains(err.Error(), "bounded by 3s") {
		t.Errorf("%d hosts without ZooKeeper in\n%v\nwant all %d, and the bound 3s", len(pe.NoZooKeeper), err, len(cc.Hosts))
	}
	if took > 8*time.Second {
		t.Errorf("took %s to fail, want about the 3 s bound", took)
	}
	restart()
	// The servers find ZooKeeper again: a preflight passes within a minute.
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err = migrations.Preflight(ctx, conn, cc.Name, 3*time.Second); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("preflight still failing a minute after ZooKeeper came back: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("preflight passes %s after the failed run", time.Since(began).Round(time.Millisecond))
}
