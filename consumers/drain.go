package consumers

import (
	"context"
	"errors"
	"fmt"

	"github.com/segmentio/kafka-go"
)

// drained reports whether the group has committed every partition of its topics up to the
// partition's end offset (high watermark).
func (c *Consumer) drained(ctx context.Context) (bool, error) {
	lag, err := c.Lag(ctx)
	if err != nil {
		return false, err
	}
	for _, l := range lag {
		if l.Lag > 0 {
			return false, nil
		}
	}
	return true, nil
}

// PartitionLag is how far the group's committed offset is behind one partition's end.
type PartitionLag struct {
	Topic     string
	Partition int
	Committed int64 // next offset the group will read; -1 when nothing was committed
	End       int64 // high watermark: the offset the next produced message will get
	Lag       int64 // messages not yet committed
}

// Lag asks the brokers for the group's committed offsets and the partitions' end offsets.
func (c *Consumer) Lag(ctx context.Context) ([]PartitionLag, error) {
	meta, err := c.client.Metadata(ctx, &kafka.MetadataRequest{Topics: c.cfg.Topics})
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	partitions := map[string][]int{}
	ends := map[string][]kafka.OffsetRequest{}
	for _, t := range meta.Topics {
		if t.Error != nil {
			return nil, fmt.Errorf("metadata for topic %s: %w", t.Name, t.Error)
		}
		for _, p := range t.Partitions {
			partitions[t.Name] = append(partitions[t.Name], p.ID)
			ends[t.Name] = append(ends[t.Name], kafka.LastOffsetOf(p.ID))
		}
	}
	committed, err := c.client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: c.cfg.GroupID, Topics: partitions})
	if err != nil {
		return nil, fmt.Errorf("committed offsets: %w", err)
	}
	// A group that has not committed yet may not exist: nothing is committed then.
	if committed.Error != nil && !errors.Is(committed.Error, kafka.GroupIdNotFound) {
		return nil, fmt.Errorf("committed offsets: %w", committed.Error)
	}
	listed, err := c.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: ends})
	if err != nil {
		return nil, fmt.Errorf("end offsets: %w", err)
	}
	commitOf := map[string]map[int]int64{}
	for topic, ps := range committed.Topics {
		commitOf[topic] = map[int]int64{}
		for _, p := range ps {
			if p.Error != nil {
				return nil, fmt.Errorf("committed offset %s/%d: %w", topic, p.Partition, p.Error)
			}
			commitOf[topic][p.Partition] = p.CommittedOffset
		}
	}
	var out []PartitionLag
	for topic, ps := range listed.Topics {
		for _, p := range ps {
			if p.Error != nil {
				return nil, fmt.Errorf("end offset %s/%d: %w", topic, p.Partition, p.Error)
			}
			l := PartitionLag{Topic: topic, Partition: p.Partition, Committed: -1, End: p.LastOffset}
			if off, ok := commitOf[topic][p.Partition]; ok {
				l.Committed = off
			}
			start := max(l.Committed, p.FirstOffset, 0)
			l.Lag = max(l.End-start, 0)
			out = append(out, l)
		}
	}
	return out, nil
}
