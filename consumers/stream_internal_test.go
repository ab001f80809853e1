package consumers

import (
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/consumers/rollup"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/migrations"
)

// A chunk joins a streamed batch only while the batch's INSERTs would write at most
// migrations.MaxPartitionsPerInsert partitions (current ClickHouse refuses more per block, and
// it squashes an INSERT's blocks).
func TestAChunkJoinsABatchWhileItsPartitionsFit(t *testing.T) {
	b := &openBatch{parts: map[int]bool{}}
	for m := range migrations.MaxPartitionsPerInsert - 1 {
		b.parts[24000+m] = true
	}
	for _, tc := range []struct {
		name   string
		months []int
		want   bool
	}{
		{"partitions the batch holds", []int{24000, 24001}, true},
		{"one new partition: at the limit", []int{24000, 30000}, true},
		{"two new partitions: over it", []int{30000, 30001}, false},
		{"no rows", nil, true},
	} {
		chunk := map[int]bool{}
		for _, m := range tc.months {
			chunk[m] = true
		}
		if got := b.fits(chunk); got != tc.want {
			t.Errorf("%s: fits = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A streamed batch closes at BatchSize messages, at a chunk fill cut short, or at the first
// chunk that ends BatchMaxAge or more after the batch's first message was read while less
// than the rest of a batch waits behind it; its age counts from its first chunk, not its
// last, and how much waits behind it from each partition's last high watermark.
func TestAStreamedBatchClosesAtItsSizeACutChunkOrItsMaxAge(t *testing.T) {
	cfg := Config{BatchSize: 100, BatchMaxAge: time.Second}
	unbounded := Config{BatchSize: 100, BatchMaxAge: NoBatchMaxAge}
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	store := rollup.NewStore(nil, rollup.Tables(), 1, nil)
	next := map[int]int64{} // each partition's next offset
	// chunk reads n messages, alternately from partitions 0 and 1, each partition's high
	// watermark behind messages beyond its last one.
	chunk := func(n int, read time.Time, cut bool, behind int64) *prepared {
		msgs := make([]kafka.Message, n)
		for i := range msgs {
			part := i % 2
			msgs[i] = kafka.Message{Topic: "t", Partition: part, Offset: next[part]}
			next[part]++
		}
		for i := range msgs {
			msgs[i].HighWaterMark = next[msgs[i].Partition] + behind
		}
		return &prepared{msgs: msgs, firstRead: read, cut: cut}
	}
	for _, tc := range []struct {
		name   string
		chunks []*prepared
		now    time.Time
		want   bool
	}{
		{"young and small", []*prepared{chunk(40, t0, false, 0)}, t0.Add(900 * time.Millisecond), false},
		{"young, second chunk read late", []*prepared{chunk(40, t0, false, 0), chunk(40, t0.Add(800*time.Millisecond), false, 0)}, t0.Add(999 * time.Millisecond), false},
		{"at its max age by its first chunk", []*prepared{chunk(40, t0, false, 0), chunk(40, t0.Add(800*time.Millisecond), false, 0)}, t0.Add(time.Second), true},
		// 80 read, 2 × 9 behind: the rest of the batch (20) is not waiting.
		{"at its max age, a little behind", []*prepared{chunk(40, t0, false, 0), chunk(40, t0, false, 9)}, t0.Add(time.Second), true},
		// 80 read, 2 × 10 behind: a backlog that fills it.
		{"at its max age, catching up", []*prepared{chunk(40, t0, false, 0), chunk(40, t0, false, 10)}, t0.Add(time.Hour), false},
		// Only each partition's last high watermark counts.
		{"at its max age, caught up", []*prepared{chunk(40, t0, false, 1000), chunk(40, t0, false, 0)}, t0.Add(time.Second), true},
		{"full", []*prepared{chunk(60, t0, false, 0), chunk(40, t0, false, 0)}, t0, true},
		{"full while catching up", []*prepared{chunk(60, t0, false, 1000), chunk(40, t0, false, 1000)}, t0, true},
		{"cut short", []*prepared{chunk(10, t0, true, 0)}, t0, true},
	} {
		b := &openBatch{last: map[topicPartition]kafka.Message{}, rollup: store.NewBatch(),
			result: batchResult{suppression: map[string]int64{}, stored: map[*ingest.Kind]int64{}}, sent: map[string]time.Time{}}
		var last *prepared
		for _, p := range tc.chunks {
			p.rollup = store.NewBatch()
			p.result = batchResult{suppression: map[string]int64{}, stored: map[*ingest.Kind]int64{}}
			b.add(p)
			last = p
		}
		if got := b.full(&cfg, last, tc.now); got != tc.want {
			t.Errorf("%s: full = %v, want %v (opened %v)", tc.name, got, tc.want, b.opened)
		}
		// An empty chunk that fill ended at the batch's age bound (uncut) closes it by the
		// same rule as a chunk with messages.
		if !last.cut && b.messages < cfg.BatchSize {
			if got := b.full(&cfg, &prepared{}, tc.now); got != tc.want {
				t.Errorf("%s, then an empty uncut chunk: full = %v, want %v", tc.name, got, tc.want)
			}
		}
		// With NoBatchMaxAge, age never closes a batch.
		if got, want := b.full(&unbounded, last, tc.now.Add(time.Hour)), b.messages >= 100 || last.cut; got != want {
			t.Errorf("%s, no max age, an hour later: full = %v, want %v", tc.name, got, want)
		}
	}
}

// A raw row falls in one partition per time value: its UTC month with its Kafka partition, so
// the rows of one month read from two Kafka partitions make two, and an invitation response
// with its invitation's send time in another month makes two of its own.
func TestRawRowsFallInAPartitionPerMonthAndKafkaPartition(t *testing.T) {
	keys := rawPartKeys[ingest.RecruitmentRow](true)
	dec := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	nov := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	rows := []ingest.RecruitmentRow{
		{Timestamp: dec, KafkaPartition: 0, InsertedAt: dec},
		{Timestamp: dec, KafkaPartition: 3, InsertedAt: dec},
		{Timestamp: dec, KafkaPartition: 3, InsertedAt: dec, InvitationSentAt: &nov},
	}
	parts := map[int]bool{}
	var own []int
	for i := range rows {
		own = keys(&rows[i], own[:0])
		for _, k := range own {
			parts[k] = true
		}
	}
	month := func(t time.Time) int { y, m, _ := t.Date(); return y*12 + int(m) }
	want := map[int]bool{month(dec) << 32: true, month(dec)<<32 | 3: true, month(nov)<<32 | 3: true}
	if len(parts) != len(want) {
		t.Fatalf("partitions %v, want %v", parts, want)
	}
	for k := range want {
		if !parts[k] {
			t.Errorf("partition %d (month %d, Kafka partition %d) missing from %v", k, k>>32, k&0xffffffff, parts)
		}
	}
	if got := byParts(rows, 2, keys); len(got) != 2 || len(got[0]) != 2 || len(got[1]) != 1 {
		t.Errorf("byParts at most 2 partitions: runs of %v rows, want [2 1]", func() []int {
			var n []int
			for _, r := range got {
				n = append(n, len(r))
			}
			return n
		}())
	}
}
