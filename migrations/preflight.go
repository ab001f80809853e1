package migrations

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// DefaultPreflightTimeout bounds each check of Preflight when Options.PreflightTimeout is 0.
const DefaultPreflightTimeout = 10 * time.Second

// ClusterHost is one host of a cluster as the migrating server lists it in system.clusters.
type ClusterHost struct {
	Shard, Replica int    // 1-based, as in system.clusters
	Host           string // host_name
	Port           int    // native protocol port
}

// Addr is "host:port".
func (h ClusterHost) Addr() string { return net.JoinHostPort(h.Host, strconv.Itoa(h.Port)) }

// String is "host:port (shard S, replica R)".
func (h ClusterHost) String() string {
	return fmt.Sprintf("%s (shard %d, replica %d)", h.Addr(), h.Shard, h.Replica)
}

// PreflightError is what Preflight found wrong: the hosts the migrating server cannot reach,
// and the hosts that cannot read ZooKeeper, each with its error.
type PreflightError struct {
	Cluster     string
	Timeout     time.Duration // the bound of each check
	Unreachable map[ClusterHost]error
	NoZooKeeper map[ClusterHost]error
}

// Error lists every problem, one per line after a summary, e.g.
//
//	cluster mcpulse_cluster preflight (each check bounded by 10s): 1 of 4 hosts unreachable; no DDL was run
//	  127.0.0.1:9440 (shard 2, replica 2) unreachable: ...
func (e *PreflightError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster %s preflight (each check bounded by %s):", e.Cluster, e.Timeout)
	var parts []string
	if n := len(e.Unreachable); n > 0 {
		parts = append(parts, fmt.Sprintf(" %d host(s) unreachable", n))
	}
	if n := len(e.NoZooKeeper); n > 0 {
		parts = append(parts, fmt.Sprintf(" %d host(s) cannot read ZooKeeper", n))
	}
	b.WriteString(strings.Join(parts, ","))
	b.WriteString("; no DDL was run (an ON CLUSTER statement waits for every host)")
	for _, p := range []struct {
		what string
		m    map[ClusterHost]error
	}{{"unreachable", e.Unreachable}, {"cannot read ZooKeeper", e.NoZooKeeper}} {
		for _, h := range sortedHosts(p.m) {
			fmt.Fprintf(&b, "\n  %s %s: %v", h, p.what, oneLine(p.m[h]))
		}
	}
	return b.String()
}

func sortedHosts(m map[ClusterHost]error) []ClusterHost {
	out := make([]ClusterHost, 0, len(m))
	for h := range m {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b ClusterHost) int {
		return cmp.Or(cmp.Compare(a.Shard, b.Shard), cmp.Compare(a.Replica, b.Replica))
	})
	return out
}

// oneLine makes a ClickHouse error one line: 18.16's "All connection tries failed" puts its
// cause (Connection refused (host:port)) on later lines, and some errors append a stack trace.
func oneLine(err error) string {
	s := err.Error()
	if i := strings.Index(s, "Stack trace"); i >= 0 {
		s = s[:i]
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 400 {
		s = s[:400] + " ..."
	}
	return s
}

// Preflight checks, before any ON CLUSTER statement, what such a statement needs: conn's
// server lists cluster in system.clusters, reaches every host listed there (a query through
// remote(), server to server, as the DDL queue's hosts are), and every host reads ZooKeeper
// (system.zookeeper at path '/'). The hosts are checked in parallel, each check bounded by
// timeout (DefaultPreflightTimeout when 0). It returns the hosts; the error is a
// *PreflightError naming each failing host, or a plain error when the cluster is unknown to
// conn's server or system.clusters cannot be read.
func Preflight(ctx context.Context, conn driver.Conn, cluster string, timeout time.Duration) ([]ClusterHost, error) {
	if timeout <= 0 {
		timeout = DefaultPreflightTimeout
	}
	if err := ValidClusterName(cluster); err != nil {
		return nil, err
	}
	hosts, err := clusterHosts(ctx, conn, cluster, timeout)
	if err != nil {
		return nil, err
	}
	pe := &PreflightError{Cluster: cluster, Timeout: timeout, Unreachable: map[ClusterHost]error{}, NoZooKeeper: map[ClusterHost]error{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, h := range hosts {
		wg.Go(func() {
			addr := "'" + strings.ReplaceAll(h.Addr(), "'", `\'`) + "'"
			var one uint64
			if err := queryWithin(ctx, timeout, func(ctx context.Context) error {
				return conn.QueryRow(ctx, "SELECT count() FROM remote("+addr+", system.one)").Scan(&one)
			}); err != nil {
				mu.Lock()
				pe.Unreachable[h] = err
				mu.Unlock()
				return
			}
			var nodes uint64
			if err := queryWithin(ctx, timeout, func(ctx context.Context) error {
				return conn.QueryRow(ctx, "SELECT count() FROM remote("+addr+", system.zookeeper) WHERE path = '/'").Scan(&nodes)
			}); err != nil {
				mu.Lock()
				pe.NoZooKeeper[h] = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(pe.Unreachable)+len(pe.NoZooKeeper) > 0 {
		return hosts, pe
	}
	return hosts, nil
}

// clusterHosts reads cluster's hosts from conn's system.clusters.
func clusterHosts(ctx context.Context, conn driver.Conn, cluster string, timeout time.Duration) ([]ClusterHost, error) {
	var hosts []ClusterHost
	err := queryWithin(ctx, timeout, func(ctx context.Context) error {
		rows, err := conn.Query(ctx, "SELECT shard_num, replica_num, host_name, port FROM system.clusters WHERE cluster = ? ORDER BY shard_num, replica_num", cluster)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				shard, replica uint32
				host           string
				port           uint16
			)
			if err := rows.Scan(&shard, &replica, &host, &port); err != nil {
				return err
			}
			hosts = append(hosts, ClusterHost{Shard: int(shard), Replica: int(replica), Host: host, Port: int(port)})
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("cluster %s preflight: read system.clusters (bounded by %s): %w", cluster, timeout, err)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("cluster %s preflight: the server migrated through does not list cluster %s in system.clusters (its remote_servers)", cluster, cluster)
	}
	return hosts, nil
}

// queryWithin runs q under ctx bounded by timeout, and names the bound when it ran out.
func queryWithin(ctx context.Context, timeout time.Duration, q func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := q(ctx)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %s: %w", timeout, err)
	}
	return err
}
