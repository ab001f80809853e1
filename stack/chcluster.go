package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// ClusterName is the remote_servers name of every ClickHouseCluster: the NAME of
// "mcpulse migrate up --cluster NAME".
const ClusterName = "mcpulse_cluster"

// DDLQueuePath is the Keeper path of the cluster's distributed DDL queue. ClickHouse 18.16
// starts no DDL worker without a <distributed_ddl> section, and then fails every ON CLUSTER
// statement with "DDL background thread is not initialized".
const DDLQueuePath = "/clickhouse/task_queue/ddl"

// maxClusterHosts bounds Shards × Replicas: each server takes about 90 MB with the schema.
const maxClusterHosts = 16

// ClusterConfig configures StartClickHouseCluster.
type ClusterConfig struct {
	// Shards is the number of shards of the cluster. Default: 1.
	Shards int
	// Replicas is the number of replicas of every shard. Default: 1.
	Replicas int
	// Dir holds zookeeper/ and one directory per server (s1r1, s1r2, ...), each with its
	// config, data and logs. It is created if missing and kept on Close.
	// Default: "" — a fresh temporary directory, removed on Close.
	Dir string
	// Logger receives start and stop progress at Info. Default: discards everything.
	Logger *slog.Logger
}

func (c *ClusterConfig) setDefaults() {
	if c.Shards == 0 {
		c.Shards = 1
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every problem with the configuration at once (after defaults are applied,
// as StartClickHouseCluster does).
func (c ClusterConfig) Validate() error {
	var errs []error
	if c.Shards < 1 {
		errs = append(errs, fmt.Errorf("devstack: Shards must be at least 1, got %d", c.Shards))
	}
	if c.Replicas < 1 {
		errs = append(errs, fmt.Errorf("devstack: Replicas must be at least 1, got %d", c.Replicas))
	}
	if c.Shards >= 1 && c.Replicas >= 1 && c.Shards*c.Replicas > maxClusterHosts {
		errs = append(errs, fmt.Errorf("devstack: Shards × Replicas must be at most %d servers, got %d × %d", maxClusterHosts, c.Shards, c.Replicas))
	}
	return errors.Join(errs...)
}

// ClickHouseHost is one clickhouse-server of a ClickHouseCluster.
type ClickHouseHost struct {
	// Shard and Replica are 1-based; they are the host's {shard} and {replica} macros.
	Shard, Replica int
	// DSN is clickhouse://default@127.0.0.1:TCPPort/default?dial_timeout=5s.
	DSN string
	// TCPPort (native protocol), HTTPPort and InterserverPort (replication fetches) are
	// loopback ports.
	TCPPort, HTTPPort, InterserverPort int
	// Dir holds the server's config.xml, data and logs.
	Dir string
}

// Name is "s<shard>r<replica>", the host's directory name.
func (h ClickHouseHost) Name() string { return fmt.Sprintf("s%dr%d", h.Shard, h.Replica) }

// ClickHouseCluster is a running ClickHouse cluster of child processes on loopback: one
// standalone ZooKeeper and Shards × Replicas clickhouse-server processes, each configured with
// its {shard} and {replica} macros, the ZooKeeper, the cluster ClusterName under
// remote_servers (every shard with internal_replication, so a Distributed table writes one
// replica and replication copies it), an interserver HTTP port and the distributed DDL
// queue at DDLQueuePath. Create it with StartClickHouseCluster (or ClickHouseClusterForTest)
// and Close it.
type ClickHouseCluster struct {
	// Name is ClusterName.
	Name string
	// Shards and Replicas are the configured sizes.
	Shards, Replicas int
	// Hosts are the servers, shard by shard: shard 1's replicas in order, then shard 2's.
	Hosts []ClickHouseHost
	// ZooKeeperAddr is the ZooKeeper's client address, "127.0.0.1:PORT".
	ZooKeeperAddr string
	// Dir is the cluster's directory (ClusterConfig.Dir, made absolute).
	Dir string

	log     *slog.Logger
	tempDir bool
	argv    []string // the clickhouse-server command

	mu        sync.Mutex // guards zk and servers against concurrent stops and starts
	zk        *zooKeeper
	servers   []*child // per host; nil once stopped
	closeOnce sync.Once
	closeErr  error
}

// StartClickHouseCluster starts ZooKeeper, then every server in parallel, and waits until each
// server answers as itself (its identity macro) and reads ZooKeeper (system.zookeeper), so an
// ON CLUSTER statement can run as soon as it returns. A 2×2 cluster starts in about 2.5 s.
// ctx bounds the start-up only; Close stops the processes. Each server takes about 90 MB of
// memory once migrated; ZooKeeper's JVM is capped at a 256 MiB heap.
//
// Errors: an invalid ClusterConfig; a *MissingBinaryError when clickhouse-server, java or the
// ZooKeeper jar (Debian package zookeeper) is missing; otherwise an error carrying the tail of
// the failing process's log. On error everything already started is stopped.
func StartClickHouseCluster(ctx context.Context, cfg ClusterConfig) (*ClickHouseCluster, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	argv, err := findClickHouse()
	if err != nil {
		return nil, err
	}
	java, jar, err := findZooKeeper()
	if err != nil {
		return nil, err
	}
	began := time.Now()
	cc := &ClickHouseCluster{Name: ClusterName, Shards: cfg.Shards, Replicas: cfg.Replicas, log: cfg.Logger, argv: argv}
	if cfg.Dir == "" {
		if cc.Dir, err = os.MkdirTemp("", "mcpulse-ch-cluster-"); err != nil {
			return nil, fmt.Errorf("devstack: creating temporary cluster dir: %w", err)
		}
		cc.tempDir = true
	} else {
		if cc.Dir, err = filepath.Abs(cfg.Dir); err != nil {
			return nil, fmt.Errorf("devstack: cluster dir %q: %w", cfg.Dir, err)
		}
	}
	if cc.zk, err = startZooKeeper(ctx, java, jar, filepath.Join(cc.Dir, "zookeeper"), 0); err != nil {
		cc.Close()
		return nil, err
	}
	cc.ZooKeeperAddr = cc.zk.addr()
	cc.log.Info("devstack: zookeeper ready", "addr", cc.ZooKeeperAddr, "pid", cc.zk.c.pid())
	if err := cc.startServers(ctx); err != nil {
		cc.Close()
		return nil, err
	}
	cc.log.Info("devstack: clickhouse cluster ready", "cluster", cc.Name, "shards", cc.Shards, "replicas", cc.Replicas,
		"dsn", cc.Hosts[0].DSN, "took", time.Since(began).Round(time.Millisecond))
	return cc, nil
}

// clusterProfile is merged into a cluster server's default profile, for the sharded layout's
// Distributed tables (docs/DESIGN.md §8, "A sharded cluster"): insert_distributed_sync makes
// an insert return once every shard stored its rows (a writer reads back what it wrote), and
// distributed_product_mode 'allow' lets a JOIN or IN read a Distributed table on both sides,
// each shard running the right side over the whole cluster (18.16's default refuses it, code
// 288). load_balancing 'in_order' makes a Distributed insert and a Distributed read through
// one host use the same replica of each shard (its own for its shard, the first listed for
// the others), so a writer reads back what it wrote without waiting for the other replicas to
// fetch it (with 'random', the default, a read right after a sync insert could pick a replica
// that has not fetched the part yet). clickhouse-go cannot send the string settings to 18.16
// per query. None of them touches a cluster without Distributed tables.
const clusterProfile = `<?xml version="1.0"?>
<!-- generated by mcpulse stack -->
<yandex>
    <profiles><default>
        <insert_distributed_sync>1</insert_distributed_sync>
        <distributed_product_mode>allow</distributed_product_mode>
        <load_balancing>in_order</load_balancing>
    </default></profiles>
</yandex>
`

// clickHouseHostConfig is a cluster server's config.xml: the single server's, with the
// shard and replica macros, ZooKeeper, remote_servers, the interserver port and the
// distributed DDL queue.
func clickHouseHostConfig(h ClickHouseHost, hosts []ClickHouseHost, shards int, zkPort int) string {
	var rs strings.Builder
	for s := 1; s <= shards; s++ {
		rs.WriteString("            <shard>\n                <internal_replication>true</internal_replication>\n")
		for _, o := range hosts {
			if o.Shard == s {
				fmt.Fprintf(&rs, "                <replica><host>127.0.0.1</host><port>%d</port></replica>\n", o.TCPPort)
			}
		}
		rs.WriteString("            </shard>\n")
	}
	macros := fmt.Sprintf("<shard>%d</shard><replica>%s</replica>", h.Shard, h.Name())
	extra := fmt.Sprintf(`    <interserver_http_host>127.0.0.1</interserver_http_host>
    <interserver_http_port>%d</interserver_http_port>
    <zookeeper>
        <node><host>127.0.0.1</host><port>%d</port></node>
        <session_timeout_ms>30000</session_timeout_ms>
    </zookeeper>
    <remote_servers>
        <%s>
%s        </%s>
    </remote_servers>
    <distributed_ddl><path>%s</path></distributed_ddl>
`, h.InterserverPort, zkPort, ClusterName, rs.String(), ClusterName, DDLQueuePath)
	return clickHouseConfig(h.Dir, h.TCPPort, h.HTTPPort, macros, extra)
}

// startServers chooses ports for every server, writes their configs and starts them, then
// waits for all; when one loses a port race, all are stopped and started on fresh ports.
func (cc *ClickHouseCluster) startServers(ctx context.Context) error {
	n := cc.Shards * cc.Replicas
	var lastErr error
	for range startAttempts {
		ports, err := freePorts(3 * n)
		if err != nil {
			return err
		}
		cc.Hosts = make([]ClickHouseHost, 0, n)
		for s := 1; s <= cc.Shards; s++ {
			for r := 1; r <= cc.Replicas; r++ {
				i := len(cc.Hosts)
				h := ClickHouseHost{Shard: s, Replica: r, TCPPort: ports[3*i], HTTPPort: ports[3*i+1], InterserverPort: ports[3*i+2]}
				h.Dir = filepath.Join(cc.Dir, h.Name())
				h.DSN = fmt.Sprintf("clickhouse://default@127.0.0.1:%d/default?dial_timeout=5s", h.TCPPort)
				cc.Hosts = append(cc.Hosts, h)
			}
		}
		for _, h := range cc.Hosts {
			if err := prepareClickHouseDir(h.Dir); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(h.Dir, "users.d", "cluster.xml"), []byte(clusterProfile), 0o644); err != nil {
				return fmt.Errorf("devstack: writing clickhouse users.d: %w", err)
			}
			conf := clickHouseHostConfig(h, cc.Hosts, cc.Shards, cc.zk.port)
			if err := os.WriteFile(filepath.Join(h.Dir, "config.xml"), []byte(conf), 0o644); err != nil {
				return fmt.Errorf("devstack: writing clickhouse config: %w", err)
			}
		}
		cc.servers = make([]*child, n)
		errs := make([]error, n)
		raced := make([]bool, n)
		var wg sync.WaitGroup
		for i := range cc.Hosts {
			wg.Go(func() {
				c, err := cc.startServer(ctx, i)
				if err != nil {
					errs[i] = err
					raced[i] = c != nil && c.logMentions("already in use")
					return
				}
				cc.servers[i] = c
			})
		}
		wg.Wait()
		if lastErr = errors.Join(errs...); lastErr == nil {
			return nil
		}
		cc.stopServers()
		portRace := false
		for _, r := range raced {
			portRace = portRace || r
		}
		if !portRace {
			break
		}
	}
	return lastErr
}

// startServer starts host i from its config.xml and waits until it answers as itself and
// reads ZooKeeper. On failure the child (if started) is stopped and returned with the error,
// so its log can be read.
func (cc *ClickHouseCluster) startServer(ctx context.Context, i int) (*child, error) {
	h := cc.Hosts[i]
	args := append(append([]string(nil), cc.argv...), "--config-file="+filepath.Join(h.Dir, "config.xml"))
	c, err := startChild("clickhouse-server "+h.Name(), args, h.Dir, filepath.Join(h.Dir, "stderr.log"),
		[]string{"CLICKHOUSE_WATCHDOG_ENABLE=0"})
	if err != nil {
		return nil, err
	}
	c.extra = []string{filepath.Join(h.Dir, "server.err.log")}
	if err := pingClickHouse(ctx, c, h.DSN, h.Dir); err != nil {
		err = c.failure(err)
		_ = c.stop(5 * time.Second)
		return c, err
	}
	if err := waitZooKeeperSeen(ctx, c, h.DSN); err != nil {
		err = c.failure(err)
		_ = c.stop(5 * time.Second)
		return c, err
	}
	cc.log.Info("devstack: clickhouse host ready", "host", h.Name(), "dsn", h.DSN, "pid", c.pid())
	return c, nil
}

// waitZooKeeperSeen waits until the server at dsn lists ZooKeeper's root.
func waitZooKeeperSeen(ctx context.Context, c *child, dsn string) error {
	opts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("BUG: generated clickhouse DSN %q: %w", dsn, err)
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return err
	}
	defer conn.Close()
	return waitHealthy(ctx, c, zooKeeperHealthTimeout, func(ctx context.Context) error {
		var n uint64
		return conn.QueryRow(ctx, "SELECT count() FROM system.zookeeper WHERE path = '/'").Scan(&n)
	})
}

// stopServers stops every running server in parallel (SIGTERM, SIGKILL after 20 s).
func (cc *ClickHouseCluster) stopServers() error {
	var wg sync.WaitGroup
	errs := make([]error, len(cc.servers))
	for i, c := range cc.servers {
		if c != nil {
			wg.Go(func() { errs[i] = c.stop(20 * time.Second) })
		}
	}
	wg.Wait()
	for i := range cc.servers {
		cc.servers[i] = nil
	}
	return errors.Join(errs...)
}

// Host returns the host of shard and replica (1-based), or false when there is none.
func (cc *ClickHouseCluster) Host(shard, replica int) (ClickHouseHost, bool) {
	for _, h := range cc.Hosts {
		if h.Shard == shard && h.Replica == replica {
			return h, true
		}
	}
	return ClickHouseHost{}, false
}

// KillHost kills server i of Hosts with SIGKILL (a host lost, not shut down) and waits for it
// to exit. It is an error when i is out of range or the server is not running.
func (cc *ClickHouseCluster) KillHost(i int) error {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if i < 0 || i >= len(cc.servers) || cc.servers[i] == nil {
		return fmt.Errorf("devstack: no running clickhouse host %d", i)
	}
	c := cc.servers[i]
	_ = c.cmd.Process.Kill()
	<-c.done
	cc.servers[i] = nil
	cc.log.Info("devstack: clickhouse host killed", "host", cc.Hosts[i].Name())
	return nil
}

// StartHost starts server i of Hosts again, on its ports and data, after KillHost, and waits
// until it answers and reads ZooKeeper. It is an error when the server is running.
func (cc *ClickHouseCluster) StartHost(ctx context.Context, i int) error {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if i < 0 || i >= len(cc.servers) || cc.servers[i] != nil {
		return fmt.Errorf("devstack: clickhouse host %d is running or does not exist", i)
	}
	c, err := cc.startServer(ctx, i)
	if err != nil {
		return err
	}
	cc.servers[i] = c
	return nil
}

// StopZooKeeper stops the cluster's ZooKeeper (SIGTERM; SIGKILL after 10 s, reported as an
// error); its data stay. It is an error when ZooKeeper is not running.
func (cc *ClickHouseCluster) StopZooKeeper() error {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.zk == nil || cc.zk.c.exited() {
		return errors.New("devstack: zookeeper is not running")
	}
	err := cc.zk.c.stop(10 * time.Second)
	cc.log.Info("devstack: zookeeper stopped", "err", err)
	return err
}

// StartZooKeeper starts the cluster's ZooKeeper again after StopZooKeeper, on its port and
// data, and waits until it answers as itself (the servers reconnect by themselves). It is an
// error when ZooKeeper is running or its port was taken meanwhile.
func (cc *ClickHouseCluster) StartZooKeeper(ctx context.Context) error {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.zk == nil || !cc.zk.c.exited() {
		return errors.New("devstack: zookeeper is running")
	}
	zk, err := startZooKeeper(ctx, cc.zk.java, cc.zk.jar, cc.zk.dir, cc.zk.port)
	if err != nil {
		return err
	}
	cc.zk = zk
	return nil
}

// Close stops the servers (SIGTERM, SIGKILL after 20 s), then ZooKeeper, and removes a
// temporary directory. It is idempotent and safe for concurrent use; later calls return the
// first call's result.
func (cc *ClickHouseCluster) Close() error {
	cc.closeOnce.Do(func() {
		cc.mu.Lock()
		defer cc.mu.Unlock()
		err := cc.stopServers()
		if cc.zk != nil {
			err = errors.Join(err, cc.zk.c.stop(10*time.Second))
		}
		if cc.tempDir {
			err = errors.Join(err, os.RemoveAll(cc.Dir))
		}
		cc.closeErr = err
		cc.log.Info("devstack: clickhouse cluster stopped", "err", err)
	})
	return cc.closeErr
}
