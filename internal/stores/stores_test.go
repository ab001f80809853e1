package stores_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"

	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/stack"
)

// setPolicy sets maxmemory-policy on one server and restores the previous one at cleanup (an
// external Redis chosen through MCPULSE_REDIS_URL is left as it was found).
func setPolicy(t *testing.T, node redis.Cmdable, policy string) {
	t.Helper()
	ctx := context.Background()
	prev, err := node.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := node.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := node.ConfigSet(context.Background(), "maxmemory-policy", prev["maxmemory-policy"]).Err(); err != nil {
			t.Errorf("restoring maxmemory-policy: %v", err)
		}
	})
}

func TestCheckEvictionPolicy(t *testing.T) {
	s := stack.ForTest(t)
	ctx := context.Background()
	rdb, err := stores.OpenRedis(ctx, s.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	client, ok := rdb.(*redis.Client)
	if !ok {
		t.Skipf("MCPULSE_REDIS_URL names a %T; this test sets the policy of a single server", rdb)
	}
	addr := client.Options().Addr

	t.Run("noeviction passes", func(t *testing.T) {
		setPolicy(t, rdb, "noeviction")
		if err := stores.CheckEvictionPolicy(ctx, rdb); err != nil {
			t.Fatalf("CheckEvictionPolicy: %v", err)
		}
	})
	for _, policy := range []string{"allkeys-lru", "volatile-ttl", "volatile-lru"} {
		t.Run(policy+" is refused", func(t *testing.T) {
			setPolicy(t, rdb, policy)
			err := stores.CheckEvictionPolicy(ctx, rdb)
			var pe *stores.EvictionPolicyError
			if !errors.As(err, &pe) {
				t.Fatalf("CheckEvictionPolicy = %v (%T), want *EvictionPolicyError", err, err)
			}
			if pe.Policy != policy || pe.Addr != addr {
				t.Errorf("error %+v, want policy %q at %s", pe, policy, addr)
			}
			for _, want := range []string{addr, `"` + policy + `"`, "suppression and cooldown keys", `"maxmemory-policy noeviction"`, "--allow-eviction"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q lacks %q", err, want)
				}
			}
		})
	}

	t.Run("CONFIG refused is reported as unchecked", func(t *testing.T) {
		// Managed Redis disables CONFIG; an ACL user without it gets the same kind of refusal.
		const user = "mcpulse-no-config"
		if err := rdb.Do(ctx, "ACL", "SETUSER", user, "on", ">secret", "~*", "&*", "+@all", "-config").Err(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Do(context.Background(), "ACL", "DELUSER", user) })
		opts := *client.Options()
		opts.Username, opts.Password = user, "secret"
		limited := redis.NewClient(&opts)
		defer limited.Close()
		err := stores.CheckEvictionPolicy(ctx, limited)
		var ue *stores.EvictionPolicyUncheckedError
		if !errors.As(err, &ue) {
			t.Fatalf("CheckEvictionPolicy = %v (%T), want *EvictionPolicyUncheckedError", err, err)
		}
		var pe *stores.EvictionPolicyError
		if errors.As(err, &pe) {
			t.Errorf("an unchecked policy must not read as a known one: %v", err)
		}
		for _, want := range []string{"could not check", addr, "NOPERM", "--allow-eviction"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("message %q lacks %q", err, want)
			}
		}
	})
}

func TestRedisClusterThroughOpenRedis(t *testing.T) {
	rc := stack.RedisClusterForTest(t)
	ctx := context.Background()
	if len(rc.Addrs) != 3 {
		t.Fatalf("Addrs = %v, want 3", rc.Addrs)
	}
	forms := map[string]string{
		"URL()":          rc.URL(),
		"host:port list": strings.Join(rc.Addrs, ","),
		"mixed, spaces":  "redis://" + rc.Addrs[0] + " , " + rc.Addrs[1],
		"one seed":       rc.Addrs[2] + ",",
	}
	for name, url := range forms {
		t.Run(name, func(t *testing.T) {
			rdb, err := stores.OpenRedis(ctx, url)
			if err != nil {
				t.Fatalf("OpenRedis(%q): %v", url, err)
			}
			defer rdb.Close()
			cluster, ok := rdb.(*redis.ClusterClient)
			if !ok {
				t.Fatalf("OpenRedis(%q) = %T, want a cluster client", url, rdb)
			}
			// Keys spread over every master; each is readable back through the cluster.
			seen := map[string]bool{}
			for i := range 30 {
				key := "k" + strings.Repeat("x", i)
				if err := rdb.Set(ctx, key, i, 0).Err(); err != nil {
					t.Fatal(err)
				}
				if got, err := rdb.Get(ctx, key).Int(); err != nil || got != i {
					t.Fatalf("GET %s = %d, %v", key, got, err)
				}
				node, err := cluster.MasterForKey(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				seen[node.Options().Addr] = true
			}
			if len(seen) != 3 {
				t.Errorf("keys landed on masters %v, want all 3", seen)
			}
			if err := stores.CheckEvictionPolicy(ctx, rdb); err != nil {
				t.Errorf("CheckEvictionPolicy on the cluster: %v", err)
			}
		})
	}

	t.Run("CheckEvictionPolicy visits every master", func(t *testing.T) {
		rdb, err := stores.OpenRedis(ctx, rc.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer rdb.Close()
		node := redis.NewClient(&redis.Options{Addr: rc.Addrs[2]})
		t.Cleanup(func() { node.Close() }) // after setPolicy's restore
		setPolicy(t, node, "volatile-lru")
		err = stores.CheckEvictionPolicy(ctx, rdb)
		var pe *stores.EvictionPolicyError
		if !errors.As(err, &pe) || pe.Addr != rc.Addrs[2] || pe.Policy != "volatile-lru" {
			t.Fatalf("CheckEvictionPolicy = %v, want volatile-lru at %s", err, rc.Addrs[2])
		}
	})

	t.Run("Close stops every node", func(t *testing.T) {
		if err := rc.Close(); err != nil {
			t.Fatal(err)
		}
		for _, a := range rc.Addrs {
			if conn, err := net.DialTimeout("tcp", a, time.Second); err == nil {
				conn.Close()
				t.Errorf("%s still accepts connections after Close", a)
			}
		}
	})
}

func TestOpenRedisRejectsBadClusterURLs(t *testing.T) {
	for _, url := range []string{
		"redis://127.0.0.1:7000/1,redis://127.0.0.1:7001/1",          // cluster has only db 0
		"127.0.0.1,127.0.0.1:7001",                                   // no port
		"redis://a:pw@127.0.0.1:7000,redis://b:pw@127.0.0.1:7001",    // credentials disagree
		"rediss://127.0.0.1:7000,redis://127.0.0.1:7001",             // TLS disagrees
		"http://127.0.0.1:7000,127.0.0.1:7001",                       // not redis
		" , ",                                                        // nothing
		"redis://:hunter2@127.0.0.1:7000/3,redis://127.0.0.1:7001/3", // password not echoed
	} {
		_, err := stores.OpenRedis(context.Background(), url)
		if err == nil {
			t.Errorf("OpenRedis(%q) succeeded", url)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("OpenRedis(%q) error echoes the password: %v", url, err)
		}
	}
}

// A single Redis URL that does not parse is refused saying which setting and what shape is
// wanted, without echoing the URL (it may hold a password).
func TestOpenRedisNamesTheWantedURLShape(t *testing.T) {
	for _, url := range []string{"notaurl", "http://127.0.0.1:6379", "redis://:hunter2@127.0.0.1:6379/x"} {
		_, err := stores.OpenRedis(context.Background(), url)
		if err == nil || !strings.Contains(err.Error(), "--redis") || !strings.Contains(err.Error(), "redis://") {
			t.Errorf("OpenRedis(%q) = %v, want the flag and the URL shape named", url, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("OpenRedis(%q) error echoes the password: %v", url, err)
		}
	}
}

// ParseBrokers keeps well-formed host:port entries, drops blanks, and names a bad entry and
// the settings it came from.
func TestParseBrokers(t *testing.T) {
	got, err := stores.ParseBrokers(" kafka-1:9092, ,[::1]:19092,")
	if err != nil || strings.Join(got, "|") != "kafka-1:9092|[::1]:19092" {
		t.Errorf("ParseBrokers = %q, %v", got, err)
	}
	if got, err := stores.ParseBrokers(" , "); err != nil || len(got) != 0 {
		t.Errorf("ParseBrokers of blanks = %q, %v, want none and no error", got, err)
	}
	for _, bad := range []string{"garbage", "kafka:9092,host:port", ":9092", "kafka:0", "kafka:70000", "kafka:"} {
		_, err := stores.ParseBrokers(bad)
		if err == nil || !strings.Contains(err.Error(), "--brokers") || !strings.Contains(err.Error(), "not host:port") {
			t.Errorf("ParseBrokers(%q) = %v, want the bad entry named", bad, err)
		}
	}
}

// A ClickHouse DSN that does not parse is refused saying which setting and what shape is
// wanted (the driver's own "parse dsn address failed" says neither), without the password.
func TestOpenClickHouseNamesTheWantedDSNShape(t *testing.T) {
	for _, dsn := range []string{"notadsn", "clickhouse://default:hunter2@127.0.0.1:%zz/default"} {
		_, err := stores.OpenClickHouse(context.Background(), dsn)
		if err == nil || !strings.Contains(err.Error(), "--clickhouse") || !strings.Contains(err.Error(), "clickhouse://") {
			t.Errorf("OpenClickHouse(%q) = %v, want the flag and the DSN shape named", dsn, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("OpenClickHouse(%q) error echoes the password: %v", dsn, err)
		}
	}
}

// TestOpenClickHouseKeepsEveryConnectionIdle runs as many queries at once as the pool allows and
// checks that each connection stays open once released, ready for the next batch's inserts.
func TestOpenClickHouseKeepsEveryConnectionIdle(t *testing.T) {
	s := stack.ForTest(t)
	ctx := context.Background()
	conn, err := stores.OpenClickHouse(ctx, s.ClickHouseDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if st := conn.Stats(); st.MaxIdleConns != stores.DefaultClickHouseConns || st.MaxOpenConns != stores.DefaultClickHouseConns {
		t.Fatalf("pool = %+v, want %d open and idle", st, stores.DefaultClickHouseConns)
	}
	// Each result is read no further than its first row, so its stream of many small blocks
	// holds its connection until Close: the pool must open every one of them at once.
	var open []driver.Rows
	for range stores.DefaultClickHouseConns {
		rows, err := conn.Query(ctx, "SELECT number FROM system.numbers LIMIT 20000 SETTINGS max_block_size = 100")
		if err != nil {
			t.Fatal(err)
		}
		if !rows.Next() {
			t.Fatalf("no first row: %v", rows.Err())
		}
		open = append(open, rows)
	}
	if st := conn.Stats(); st.Open != stores.DefaultClickHouseConns {
		t.Fatalf("%d results held open use %d connections (%+v), want one each", stores.DefaultClickHouseConns, st.Open, st)
	}
	for _, rows := range open {
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// The driver releases a connection from its result's reading goroutine, which may still be
	// returning it to the pool when Close returns: wait for that, never for a dial.
	st := conn.Stats()
	for deadline := time.Now().Add(10 * time.Second); st.Idle != stores.DefaultClickHouseConns && time.Now().Before(deadline); st = conn.Stats() {
		time.Sleep(10 * time.Millisecond)
	}
	if st.Idle != stores.DefaultClickHouseConns {
		t.Errorf("after %d results held at once the pool keeps %d idle connections (%+v), want all %d",
			stores.DefaultClickHouseConns, st.Idle, st, stores.DefaultClickHouseConns)
	}
}
