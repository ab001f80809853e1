// Package stores opens mcpulse's connections to ClickHouse and Redis from the MCPULSE_*
// settings, with the options the rest of the code relies on.
package stores

import (
	"context"
	"fmt"
	"os"
	"strings"
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

// OpenClickHouse connects over the native protocol (the HTTP protocol fails on 18.16:
// DESIGN.md §4) and pings. dsn is clickhouse://user:password@host:port/database?options.
func OpenClickHouse(ctx context.Context, dsn string) (driver.Conn, error) {
	if dsn == "" {
		return nil, fmt.Errorf("no ClickHouse DSN: set %s or pass --clickhouse", EnvClickHouseDSN)
	}
	opts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("ClickHouse DSN: %w", err)
	}
	opts.Protocol = clickhouse.Native
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 5 * time.Second
	}
	if opts.ReadTimeout == 0 {
		opts.ReadTimeout = 60 * time.Second
	}
	if opts.MaxOpenConns == 0 {
		opts.MaxOpenConns = 8
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

// OpenRedis connects to the Redis at url (redis://host:port/db, or several comma-separated
// addresses for Redis Cluster) and pings it.
func OpenRedis(ctx context.Context, url string) (redis.UniversalClient, error) {
	if url == "" {
		return nil, fmt.Errorf("no Redis URL: set %s or pass --redis", EnvRedisURL)
	}
	var client redis.UniversalClient
	if strings.Contains(url, ",") {
		client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: SplitBrokers(url)})
	} else {
		opts, err := redis.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("Redis URL: %w", err)
		}
		client = redis.NewClient(opts)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := client.Ping(pctx).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("Redis at %s: %w", url, err)
	}
	return client, nil
}
