package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterNodes is the number of masters of a RedisCluster (no replicas).
const clusterNodes = 3

// clusterReadyTimeout bounds the wait for cluster_state:ok on every node once the slots are
// assigned. A master refuses to turn its state ok during its first 2 s (Redis'
// CLUSTER_WRITABLE_DELAY), so a healthy cluster takes about two seconds.
const clusterReadyTimeout = 30 * time.Second

// RedisCluster is a running three-master Redis Cluster of redis-server children on loopback,
// with the 16384 slots split evenly and no replicas. Create it with StartRedisCluster (or
// RedisClusterForTest) and Close it.
type RedisCluster struct {
	// Addrs are the masters' client addresses, "127.0.0.1:PORT", in slot order (the first
	// serves slots 0-5460).
	Addrs []string
	// Dir holds one subdirectory per node (node-0, ...) with its nodes.conf and log.
	Dir string

	log       *slog.Logger
	tempDir   bool
	nodes     []*child
	busPorts  []int // cluster bus port of each node
	closeOnce sync.Once
	closeErr  error
}

// URL returns the comma-separated address list that stores.OpenRedis opens as a cluster
// client: "redis://127.0.0.1:P1,redis://127.0.0.1:P2,redis://127.0.0.1:P3".
func (rc *RedisCluster) URL() string {
	urls := make([]string, len(rc.Addrs))
	for i, a := range rc.Addrs {
		urls[i] = "redis://" + a
	}
	return strings.Join(urls, ",")
}

// StartRedisCluster starts three cluster-enabled redis-server children on free loopback ports,
// each in its own subdirectory of dir (a fresh temporary directory, removed on Close, when
// dir is ""), assigns them a third of the slots each with CLUSTER ADDSLOTSRANGE, joins them
// with CLUSTER MEET, and waits until every node reports cluster_state:ok and sees three
// masters. Unlike the stack's redis it has no persistence (a throw-away cluster); like it,
// maxmemory-policy noeviction.
// ctx bounds the start-up only; Close stops the nodes. log receives start and stop progress at
// Info; nil discards it. Start-up takes about two seconds (see clusterReadyTimeout).
//
// Errors: a *MissingBinaryError when redis-server is not installed; otherwise an error
// carrying the tail of the failing node's log. On error every node already started is stopped.
func StartRedisCluster(ctx context.Context, dir string, log *slog.Logger) (*RedisCluster, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	bin, err := findRedis()
	if err != nil {
		return nil, err
	}
	began := time.Now()
	rc := &RedisCluster{log: log}
	if dir == "" {
		if rc.Dir, err = os.MkdirTemp("", "mcpulse-redis-cluster-"); err != nil {
			return nil, fmt.Errorf("devstack: creating temporary cluster dir: %w", err)
		}
		rc.tempDir = true
	} else {
		if rc.Dir, err = filepath.Abs(dir); err != nil {
			return nil, fmt.Errorf("devstack: cluster dir %q: %w", dir, err)
		}
	}
	if err := rc.startNodes(ctx, bin); err != nil {
		rc.Close()
		return nil, err
	}
	if err := rc.form(ctx); err != nil {
		rc.Close()
		return nil, err
	}
	log.Info("devstack: redis cluster ready", "addrs", rc.Addrs, "took", time.Since(began).Round(time.Millisecond))
	return rc, nil
}

// clusterNodeArgs is the command line of one node. The cluster bus port is given explicitly
// (by default it is the client port + 10000, which may be taken or beyond 65535), and the
// announced IP is fixed so CLUSTER SLOTS never reports an empty host.
func clusterNodeArgs(bin string, port, busPort int, dir string) []string {
	return []string{bin,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--protected-mode", "no",
		"--daemonize", "no",
		"--dir", dir,
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-port", strconv.Itoa(busPort),
		"--cluster-announce-ip", "127.0.0.1",
		"--cluster-node-timeout", "5000",
		"--save", "",
		"--appendonly", "no",
		"--maxmemory-policy", "noeviction",
		"--logfile", "",
		"--loglevel", "warning",
	}
}

// startNodes starts the three nodes and waits for each to answer PING, choosing fresh ports
// for all of them when one loses a port race.
func (rc *RedisCluster) startNodes(ctx context.Context, bin string) error {
	var lastErr error
	for range startAttempts {
		ports, err := freePorts(2 * clusterNodes) // client ports, then bus ports
		if err != nil {
			return err
		}
		rc.nodes, rc.Addrs, rc.busPorts = nil, nil, nil
		lastErr = nil
		for i := range clusterNodes {
			dir := filepath.Join(rc.Dir, "node-"+strconv.Itoa(i))
			// A stale nodes.conf would make the node remember an earlier cluster.
			if err := os.RemoveAll(dir); err != nil {
				return fmt.Errorf("devstack: cluster node dir: %w", err)
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("devstack: cluster node dir: %w", err)
			}
			c, err := startChild("redis-server", clusterNodeArgs(bin, ports[i], ports[clusterNodes+i], dir), dir, filepath.Join(dir, "redis.log"), nil)
			if err != nil {
				lastErr = err
				break
			}
			rc.nodes = append(rc.nodes, c)
			rc.Addrs = append(rc.Addrs, "127.0.0.1:"+strconv.Itoa(ports[i]))
			rc.busPorts = append(rc.busPorts, ports[clusterNodes+i])
		}
		portRace := false
		if lastErr == nil {
			var wg sync.WaitGroup
			errs := make([]error, len(rc.nodes))
			raced := make([]bool, len(rc.nodes))
			for i, c := range rc.nodes {
				wg.Go(func() {
					client := rc.nodeClient(i)
					defer client.Close()
					if err := waitHealthy(ctx, c, redisHealthTimeout, func(ctx context.Context) error {
						return client.Ping(ctx).Err()
					}); err != nil {
						errs[i] = c.failure(err)
						raced[i] = c.logMentions("already in use")
					}
				})
			}
			wg.Wait()
			if lastErr = errors.Join(errs...); lastErr == nil {
				return nil
			}
			for _, r := range raced {
				portRace = portRace || r
			}
		}
		rc.stopNodes()
		if !portRace {
			break
		}
	}
	return lastErr
}

// nodeClient is a plain (non-cluster) client of node i, for administration.
func (rc *RedisCluster) nodeClient(i int) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: rc.Addrs[i], MaxRetries: -1, DialTimeout: 2 * time.Second})
}

// form assigns the slots, introduces the nodes to each other and waits until the cluster is
// ok everywhere.
func (rc *RedisCluster) form(ctx context.Context) error {
	clients := make([]*redis.Client, len(rc.nodes))
	for i := range rc.nodes {
		clients[i] = rc.nodeClient(i)
		defer clients[i].Close()
	}
	const slots = 16384
	for i, client := range clients {
		first, last := i*slots/clusterNodes, (i+1)*slots/clusterNodes-1
		if err := client.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", first, last).Err(); err != nil {
			return rc.nodes[i].failure(fmt.Errorf("CLUSTER ADDSLOTSRANGE %d %d: %w", first, last, err))
		}
	}
	// Every node meets every other, so none waits for gossip to learn of the third.
	for i, client := range clients {
		for j := range clients {
			if i == j {
				continue
			}
			host, port, _ := strings.Cut(rc.Addrs[j], ":")
			busPort := rc.busPorts[j]
			if err := client.Do(ctx, "CLUSTER", "MEET", host, port, busPort).Err(); err != nil {
				return rc.nodes[i].failure(fmt.Errorf("CLUSTER MEET %s %s %d: %w", host, port, busPort, err))
			}
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(clients))
	for i, client := range clients {
		wg.Go(func() {
			err := waitHealthy(ctx, rc.nodes[i], clusterReadyTimeout, func(ctx context.Context) error {
				return clusterReady(ctx, client)
			})
			if err != nil {
				errs[i] = rc.nodes[i].failure(fmt.Errorf("cluster not ready: %w", err))
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// clusterReady is nil once the node reports cluster_state:ok with every slot served and
// knows three masters that all serve slots.
func clusterReady(ctx context.Context, client *redis.Client) error {
	info, err := client.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	if fields["cluster_state"] != "ok" || fields["cluster_slots_ok"] != "16384" {
		return fmt.Errorf("cluster_state:%s cluster_slots_ok:%s", fields["cluster_state"], fields["cluster_slots_ok"])
	}
	nodes, err := client.ClusterNodes(ctx).Result()
	if err != nil {
		return err
	}
	masters := 0
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		// <id> <ip:port@cport> <flags> <master> <ping-sent> <pong-recv> <epoch> <link> <slot>...
		f := strings.Fields(line)
		if len(f) < 9 || f[7] != "connected" {
			continue
		}
		flags := "," + f[2] + ","
		if strings.Contains(flags, ",master,") && !strings.Contains(flags, ",fail") && !strings.Contains(flags, ",handshake,") && !strings.Contains(flags, ",noaddr,") {
			masters++
		}
	}
	if masters != clusterNodes {
		return fmt.Errorf("sees %d connected masters serving slots, want %d", masters, clusterNodes)
	}
	return nil
}

// stopNodes stops every node started so far.
func (rc *RedisCluster) stopNodes() error {
	var wg sync.WaitGroup
	errs := make([]error, len(rc.nodes))
	for i, c := range rc.nodes {
		wg.Go(func() { errs[i] = c.stop(10 * time.Second) })
	}
	wg.Wait()
	rc.nodes = nil
	return errors.Join(errs...)
}

// Close stops the nodes (SIGTERM, then SIGKILL after 10 s) and removes a temporary directory.
// It is idempotent and safe for concurrent use; later calls return the first call's result.
func (rc *RedisCluster) Close() error {
	rc.closeOnce.Do(func() {
		err := rc.stopNodes()
		if rc.tempDir {
			err = errors.Join(err, os.RemoveAll(rc.Dir))
		}
		rc.closeErr = err
		rc.log.Info("devstack: redis cluster stopped", "err", err)
	})
	return rc.closeErr
}
