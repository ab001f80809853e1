package obs

import (
	"context"
	"errors"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
)

// RedisCheck is ready when rdb answers PING (on a cluster client, go-redis sends it to one
// node of the cluster).
func RedisCheck(rdb redis.UniversalClient) Check {
	return Check{Name: "redis", Fn: func(ctx context.Context) error {
		return rdb.Ping(ctx).Err()
	}}
}

// ClickHouseCheck is ready when conn answers Ping (the native protocol's ping packet).
func ClickHouseCheck(conn driver.Conn) Check {
	return Check{Name: "clickhouse", Fn: func(ctx context.Context) error {
		return conn.Ping(ctx)
	}}
}

// KafkaCheck is ready when one of brokers answers a metadata request and every topic in
// topics exists (no topics: only the brokers are asked). Each call dials anew, so it also
// notices a broker address that stopped resolving.
func KafkaCheck(brokers []string, topics ...string) Check {
	return Check{Name: "kafka", Fn: func(ctx context.Context) error {
		if len(brokers) == 0 {
			return errors.New("no brokers configured")
		}
		client := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: &kafka.Transport{ClientID: "mcpulse-readyz"}}
		req := &kafka.MetadataRequest{Topics: topics}
		if len(topics) == 0 {
			req.Topics = []string{} // an empty list asks for brokers only; nil would list every topic
		}
		res, err := client.Metadata(ctx, req)
		if err != nil {
			return err
		}
		if len(res.Brokers) == 0 {
			return errors.New("metadata lists no broker")
		}
		for _, t := range res.Topics {
			if t.Error != nil {
				return fmt.Errorf("topic %q: %w", t.Name, t.Error)
			}
		}
		return nil
	}}
}
