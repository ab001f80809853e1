package consumers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/redis/go-redis/v9"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/ingest"
)

// RunUntilDrained against brokers that never answer gives up with ErrKafkaUnreachable after
// DrainUnreachableTimeout, instead of retrying for ever.
func TestRunUntilDrainedGivesUpWhenKafkaIsUnreachable(t *testing.T) {
	const dead = "127.0.0.1:1"                                            // nothing listens on port 1
	ch, err := clickhouse.Open(&clickhouse.Options{Addr: []string{dead}}) // connects lazily
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	rdb := redis.NewClient(&redis.Options{Addr: dead}) // connects lazily
	defer rdb.Close()
	pub, err := ingest.NewPublisher(ingest.PublisherConfig{Brokers: []string{dead}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	c, err := consumers.New(consumers.Config{Brokers: []string{dead}, Redis: rdb, ClickHouse: ch, DeadLetters: pub,
		DrainUnreachableTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound for a broken test, not a speed claim
	defer cancel()
	err = c.RunUntilDrained(ctx)
	if !errors.Is(err, ingest.ErrKafkaUnreachable) {
		t.Fatalf("RunUntilDrained = %v, want an error wrapping ErrKafkaUnreachable", err)
	}
	if ctx.Err() != nil {
		t.Fatal("RunUntilDrained returned only when the test's own deadline passed")
	}
}
