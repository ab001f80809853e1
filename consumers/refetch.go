package consumers

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/ingest"
)

// refetchPayloads reads the messages ms (their topic, partition and offset) from Kafka again
// and sets each letters[i].Payload to the bytes of ms[i]: the prepare stage lets a batch's
// message bytes go once its rows are built, and the store stage needs them back only for the
// rare event ClickHouse refuses for good (dead-lettered with its payload). Errors are Kafka's;
// the store is retried.
func (c *Consumer) refetchPayloads(ctx context.Context, ms []*kafka.Message, letters []ingest.DeadLetter) error {
	for i, m := range ms {
		payload, err := c.readMessage(ctx, m.Topic, m.Partition, m.Offset)
		if err != nil {
			return fmt.Errorf("read %s back from Kafka: %w", position(m), err)
		}
		letters[i].Payload = payload
	}
	return nil
}

// readMessage returns the value of the message at offset of topic's partition.
func (c *Consumer) readMessage(ctx context.Context, topic string, partition int, offset int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: c.cfg.Brokers, Topic: topic, Partition: partition, MinBytes: 1, MaxBytes: 16 << 20,
		MaxWait: 250 * time.Millisecond, QueueCapacity: 1,
	})
	defer r.Close()
	if err := r.SetOffset(offset); err != nil {
		return nil, err
	}
	m, err := r.FetchMessage(ctx)
	if err != nil {
		return nil, err
	}
	if m.Offset != offset {
		return nil, fmt.Errorf("offset %d is gone (the log starts at %d)", offset, m.Offset)
	}
	return m.Value, nil
}
