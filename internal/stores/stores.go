// Package stores opens mcpulse's connections to ClickHouse and Redis from the MCPULSE_*
// settings, with the options the rest of the code relies on.
package stores

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	neturl "net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"
)

// Environment variables naming the services (DESIGN.md §7).
const (
	EnvKafkaBrokers  = "MCPULSE_KAFKA_BROKERS"
	EnvRedisURL      = "MCPULSE_REDIS_URL"
	EnvClickHouseDSN = "MCPULSE_CLICKHOUSE_DSN"
)

// KafkaBrokersFromEnv splits MCPULSE_KAFKA_BROKERS ("host:port,host:port"); nil when unset.
func KafkaBrokersFromEnv() []string {
	return SplitBrokers(os.Getenv(EnvKafkaBrokers))
}

// SplitBrokers splits a comma-separated broker list, dropping blanks.
func SplitBrokers(s string) []string {
	var out []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// ParseBrokers splits a comma-separated broker list (a --brokers value or $MCPULSE_KAFKA_BROKERS)
// as SplitBrokers does and checks every entry: host:port with a port from 1 to 65535. A bad entry
// is an error naming it and where it came from; an empty list is not (each caller says which
// flag or variable to set).
func ParseBrokers(s string) ([]string, error) {
	list := SplitBrokers(s)
	for _, b := range list {
		host, port, err := net.SplitHostPort(b)
		n, perr := strconv.Atoi(port)
		if err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("Kafka broker %q (--brokers or $%s) is not host:port, e.g. kafka:9092", b, EnvKafkaBrokers)
		}
	}
	return list, nil
}

// DefaultClickHouseConns is the most connections OpenClickHouse keeps open to ClickHouse, all
// of them kept when idle, unless the DSN sets max_open_conns (or max_idle_conns). A consumer
// holds one per raw table open for the life of a batch (its rows are streamed into one INSERT
// per table), as many for the batch before while its INSERTs end, and its other inserts and
// queries use a few more, its inserts into the views' feeds among them: 2 × 10 raw tables + 2
// feeds + 4 = 26 (consumers' asyncEndConns, which a test holds this to).
const DefaultClickHouseConns = 26

// DefaultClickHouseReadTimeout is how long OpenClickHouse's connections wait for a server's
// answer when the DSN sets no read_timeout.
const DefaultClickHouseReadTimeout = 60 * time.Second

// OpenClickHouse connects over the native protocol (the HTTP protocol fails on 18.16:
// DESIGN.md §4) and pings. dsn is clickhouse://user:password@host:port/database?options.
func OpenClickHouse(ctx context.Context, dsn string) (driver.Conn, error) {
	if dsn == "" {
		return nil, fmt.Errorf("no ClickHouse DSN: set %s or pass --clickhouse", EnvClickHouseDSN)
	}
	opts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("ClickHouse DSN (--clickhouse or $%s) is not clickhouse://[user:password@]host:port/database (native protocol): %w", EnvClickHouseDSN, err)
	}
	opts.Protocol = clickhouse.Native
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 5 * time.Second
	}
	if opts.ReadTimeout == 0 {
		opts.ReadTimeout = DefaultClickHouseReadTimeout
	}
	if opts.MaxOpenConns == 0 {
		opts.MaxOpenConns = DefaultClickHouseConns
	}
	// Every connection a batch's concurrent inserts opened stays open for the next batch: the
	// driver's default keeps 5 idle, so each batch of a consumer (several raw tables, then the
	// rollup tables, each on its own connection) dialled and greeted the others again. With
	// FreeBufOnConnRelease an idle connection holds no insert buffer. The DSN's max_idle_conns
	// still wins.
	if opts.MaxIdleConns == 0 {
		opts.MaxIdleConns = opts.MaxOpenConns
	}
	// An idle connection would otherwise keep the buffer its largest insert grew (megabytes for
	// a block of raw rows), on every connection concurrent inserts used: live heap that a
	// process under a soft memory limit pays for in garbage collection.
	opts.FreeBufOnConnRelease = true
	// A block being sent is written to the socket whenever the connection's buffer passes this
	// many bytes (after the column that passed it), instead of once encoded whole: the buffer
	// a connection grows from empty for each insert (FreeBufOnConnRelease) then stays near
	// 1 MiB rather than the block's size (megabytes of raw rows), copied less as it grows.
	// The DSN's max_compression_buffer still wins.
	if opts.MaxCompressionBuffer == 0 {
		opts.MaxCompressionBuffer = 1 << 20
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("open ClickHouse: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := conn.Ping(pctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("ClickHouse at %s: %w", strings.Join(opts.Addr, ","), err)
	}
	return conn, nil
}

// OpenRedis connects to the Redis at url and pings it. url is either one redis:// (or
// rediss://) URL, redis://[user:password@]host:port/db, for a single server, or a
// comma-separated list of Redis Cluster seed addresses, each a plain host:port or a URL
// without a database ("127.0.0.1:7000,127.0.0.1:7001" or
// "redis://127.0.0.1:7000,redis://127.0.0.1:7001"); credentials and TLS come from the URL
// entries and must agree among them. A comma is what selects the cluster client, so a
// cluster reached through a single seed is written with a trailing comma.
func OpenRedis(ctx context.Context, url string) (redis.UniversalClient, error) {
	quietRedisOnce.Do(func() { redis.SetLogger(redisDebugLog{}) })
	if url == "" {
		return nil, fmt.Errorf("no Redis URL: set %s or pass --redis", EnvRedisURL)
	}
	var client redis.UniversalClient
	var where string // for messages: addresses, never a password
	if strings.Contains(url, ",") {
		opts, err := clusterOptions(url)
		if err != nil {
			return nil, err
		}
		client = redis.NewClusterClient(opts)
		where = "cluster " + strings.Join(opts.Addrs, ",")
	} else {
		opts, err := redis.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("Redis URL (--redis or $%s) is not redis://[user:password@]host:port/db (rediss:// for TLS): %w", EnvRedisURL, err)
		}
		client = redis.NewClient(opts)
		where = opts.Addr
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := client.Ping(pctx).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("Redis at %s: %w", where, err)
	}
	return client, nil
}

// clusterOptions parses OpenRedis' comma-separated cluster form.
func clusterOptions(url string) (*redis.ClusterOptions, error) {
	opts := &redis.ClusterOptions{}
	var first *redis.Options // the first URL entry: its credentials and TLS apply to all
	for _, entry := range SplitBrokers(url) {
		if !strings.Contains(entry, "://") {
			if _, port, err := net.SplitHostPort(entry); err != nil || port == "" {
				return nil, fmt.Errorf("Redis cluster address %q: want host:port or redis://host:port", entry)
			}
			opts.Addrs = append(opts.Addrs, entry)
			continue
		}
		o, err := redis.ParseURL(entry)
		if err != nil {
			return nil, fmt.Errorf("Redis cluster address %q: %w", redactURL(entry), err)
		}
		if o.DB != 0 {
			return nil, fmt.Errorf("Redis cluster address %q: Redis Cluster has only database 0, not %d", redactURL(entry), o.DB)
		}
		if first == nil {
			first = o
			opts.Username, opts.Password, opts.TLSConfig = o.Username, o.Password, o.TLSConfig
		} else if o.Username != first.Username || o.Password != first.Password || (o.TLSConfig == nil) != (first.TLSConfig == nil) {
			return nil, fmt.Errorf("Redis cluster addresses disagree on credentials or TLS (redis:// vs rediss://): %q", redactURL(url))
		}
		opts.Addrs = append(opts.Addrs, o.Addr)
	}
	if len(opts.Addrs) == 0 {
		return nil, fmt.Errorf("Redis cluster URL %q names no address", url)
	}
	return opts, nil
}

// redactURL hides the password of every URL in a comma-separated list, for messages.
func redactURL(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		if u, err := neturl.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}

// EvictionPolicyError is CheckEvictionPolicy's refusal: the Redis at Addr evicts keys under
// memory pressure, which would silently drop suppression and cooldown records (DESIGN.md §5).
type EvictionPolicyError struct {
	Addr   string // the server's host:port
	Policy string // its maxmemory-policy, e.g. "volatile-lru"
}

func (e *EvictionPolicyError) Error() string {
	return fmt.Sprintf("redis at %s has maxmemory-policy %q, which can evict interview suppression and cooldown keys; "+
		"set \"maxmemory-policy noeviction\" (and appendonly yes) or pass --allow-eviction", e.Addr, e.Policy)
}

// EvictionPolicyUncheckedError is CheckEvictionPolicy's error when the Redis at Addr refused
// CONFIG GET (managed services often disable or rename CONFIG), so its maxmemory-policy is
// unknown. Err is the server's reply.
type EvictionPolicyUncheckedError struct {
	Addr string
	Err  error
}

func (e *EvictionPolicyUncheckedError) Error() string {
	return fmt.Sprintf("could not check the maxmemory-policy of redis at %s (CONFIG GET maxmemory-policy: %v); "+
		"mcpulse requires \"noeviction\" so interview suppression and cooldown keys are never evicted: "+
		"confirm it in your provider's settings, then pass --allow-eviction to start without the check", e.Addr, e.Err)
}

func (e *EvictionPolicyUncheckedError) Unwrap() error { return e.Err }

// CheckEvictionPolicy requires maxmemory-policy noeviction on the Redis behind rdb: on every
// master of a cluster client (and every shard of a ring), on the server of any other client.
// It returns nil when all say noeviction; otherwise an *EvictionPolicyError for a server with
// another policy, an *EvictionPolicyUncheckedError for one that refused CONFIG GET, or the
// connection error; with several servers failing, their errors joined (errors.As finds each).
func CheckEvictionPolicy(ctx context.Context, rdb redis.UniversalClient) error {
	var (
		mu   sync.Mutex
		errs []error
	)
	check := func(ctx context.Context, node *redis.Client) error {
		if err := checkNodeEvictionPolicy(ctx, node, node.Options().Addr); err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		return nil // keep visiting the other nodes: report every offender
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, check)
	case *redis.Ring:
		err = c.ForEachShard(ctx, check)
	case *redis.Client:
		err = check(ctx, c)
	default:
		err = checkNodeEvictionPolicy(ctx, rdb, fmt.Sprintf("%T", rdb))
	}
	if err != nil {
		return fmt.Errorf("checking redis maxmemory-policy: %w", err)
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errors.Join(errs...)
}

func checkNodeEvictionPolicy(ctx context.Context, node redis.Cmdable, addr string) error {
	res, err := node.ConfigGet(ctx, "maxmemory-policy").Result()
	var reply redis.Error
	if errors.As(err, &reply) && !transientReply(err) {
		// The server answered, and not with a passing state: CONFIG is disabled, renamed
		// ("unknown command") or denied by an ACL (NOPERM).
		return &EvictionPolicyUncheckedError{Addr: addr, Err: err}
	}
	if err != nil {
		return fmt.Errorf("redis at %s: CONFIG GET maxmemory-policy: %w", addr, err)
	}
	policy, ok := res["maxmemory-policy"]
	if !ok {
		return &EvictionPolicyUncheckedError{Addr: addr, Err: errors.New("no maxmemory-policy in the reply")}
	}
	if !strings.EqualFold(policy, "noeviction") {
		return &EvictionPolicyError{Addr: addr, Policy: policy}
	}
	return nil
}

// transientReply reports whether a server error reply describes a passing state (loading,
// failover, cluster reconfiguration) rather than a refusal.
func transientReply(err error) bool {
	msg := err.Error()
	for _, p := range []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "MOVED", "ASK", "READONLY", "ERR max number of clients"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

var quietRedisOnce sync.Once

// redisDebugLog sends go-redis's own log lines (connection-pool retries and the like, with
// file:line prefixes) to slog at Debug: mcpulse reports a Redis failure once, in its own words.
type redisDebugLog struct{}

// Printf implements go-redis's internal.Logging.
func (redisDebugLog) Printf(ctx context.Context, format string, v ...any) {
	slog.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}
