package stack

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// startKafkaOnly starts the embedded Kafka of cfg alone (no redis-server or clickhouse-server)
// and closes it in t.Cleanup.
func startKafkaOnly(t *testing.T, cfg Config) *Stack {
	t.Helper()
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s := &Stack{log: slog.New(slog.DiscardHandler)}
	if err := s.startKafka(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.kafka.Close() })
	return s
}

// metadata asks broker addr for the cluster's brokers and the partitions of topic.
func metadata(ctx context.Context, t *testing.T, addr, topic string) *kafka.MetadataResponse {
	t.Helper()
	// A transport of its own: kafka-go's default one caches metadata.
	transport := &kafka.Transport{}
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(addr), Timeout: 5 * time.Second, Transport: transport}
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		t.Fatalf("metadata from %s: %v", addr, err)
	}
	return meta
}

// Three brokers on their own ports serve every topic with three replicas in sync. A stopped
// broker closes the connections it had accepted, leads nothing and leaves the metadata; it
// comes back on the same address.
func TestThreeBrokersServeThreeReplicasAndAStoppedBrokerDropsItsConnectionsAndComesBack(t *testing.T) {
	s := startKafkaOnly(t, Config{Brokers: 3, Topics: []string{"t"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if len(s.KafkaBrokers) != 3 || len(slices.Compact(slices.Sorted(slices.Values(s.KafkaBrokers)))) != 3 {
		t.Fatalf("KafkaBrokers = %v, want three distinct addresses", s.KafkaBrokers)
	}
	meta := metadata(ctx, t, s.KafkaBrokers[0], "t")
	if len(meta.Brokers) != 3 {
		t.Errorf("metadata lists %d brokers, want 3", len(meta.Brokers))
	}
	for _, p := range meta.Topics[0].Partitions {
		if len(p.Replicas) != 3 || len(p.Isr) != 3 {
			t.Errorf("partition %d: %d replicas, %d in sync; want 3 and 3", p.ID, len(p.Replicas), len(p.Isr))
		}
	}

	conn, err := kafka.DialContext(ctx, "tcp", s.KafkaBrokers[1])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ReadPartitions("t"); err != nil {
		t.Fatalf("broker 1 before the stop: %v", err)
	}

	if err := s.StopKafkaBroker(1); err != nil {
		t.Fatalf("StopKafkaBroker(1): %v", err)
	}
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.ReadPartitions("t"); err == nil {
		t.Error("a connection to the stopped broker still answers")
	}
	if c, err := kafka.DialContext(ctx, "tcp", s.KafkaBrokers[1]); err == nil {
		c.Close()
		t.Error("the stopped broker accepts connections")
	}
	meta = metadata(ctx, t, s.KafkaBrokers[0], "t")
	if len(meta.Brokers) != 2 {
		t.Errorf("with broker 1 stopped the metadata lists %d brokers, want 2", len(meta.Brokers))
	}
	for _, p := range meta.Topics[0].Partitions {
		if p.Leader.ID == 1 {
			t.Errorf("partition %d is led by the stopped broker", p.ID)
		}
	}
	if err := s.StopKafkaBroker(1); err == nil {
		t.Error("stopping a stopped broker succeeded")
	}
	if err := s.StopKafkaBroker(3); err == nil {
		t.Error("stopping broker 3 of 0..2 succeeded")
	}
	if err := s.StopKafkaBroker(0); err != nil {
		t.Fatalf("StopKafkaBroker(0): %v", err)
	}
	if err := s.StopKafkaBroker(2); err == nil || !strings.Contains(err.Error(), "last") {
		t.Errorf("stopping the last broker = %v, want an error naming it the last", err)
	}

	if err := s.StartKafkaBroker(1); err != nil {
		t.Fatalf("StartKafkaBroker(1): %v", err)
	}
	if err := s.StartKafkaBroker(1); err == nil {
		t.Error("starting a running broker succeeded")
	}
	if err := s.StartKafkaBroker(0); err != nil {
		t.Fatalf("StartKafkaBroker(0): %v", err)
	}
	meta = metadata(ctx, t, s.KafkaBrokers[1], "t")
	var addrs []string
	for _, b := range meta.Brokers {
		addrs = append(addrs, net.JoinHostPort(b.Host, strconv.Itoa(b.Port)))
	}
	slices.Sort(addrs)
	if want := slices.Sorted(slices.Values(s.KafkaBrokers)); !slices.Equal(addrs, want) {
		t.Errorf("after the return the metadata lists %v, want %v", addrs, want)
	}
}

func TestBrokersOutsideOneToSixteenAreRefused(t *testing.T) {
	for _, n := range []int{-1, 17} {
		cfg := Config{Brokers: n}
		cfg.setDefaults()
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "Brokers") {
			t.Errorf("Brokers %d: Validate = %v, want an error naming Brokers", n, err)
		}
	}
}

// RestartKafka brings every broker of a persisted cluster back on its port, one stopped with
// StopKafkaBroker included, with the records written before.
func TestRestartKafkaBringsEveryBrokerBackWithTheRecords(t *testing.T) {
	cfg := Config{Brokers: 3, Topics: []string{"t"}, PersistKafka: true}
	cfg.setDefaults()
	s := &Stack{log: slog.New(slog.DiscardHandler), DataDir: t.TempDir()}
	if err := s.startKafka(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.kafka.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	w := &kafka.Writer{Addr: kafka.TCP(s.KafkaBrokers...), Topic: "t", RequiredAcks: kafka.RequireAll, Transport: &kafka.Transport{}}
	defer w.Close()
	var msgs []kafka.Message
	for i := range 12 {
		msgs = append(msgs, kafka.Message{Key: []byte{byte(i)}, Value: []byte{byte(i)}})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	if err := s.StopKafkaBroker(2); err != nil {
		t.Fatal(err)
	}
	if err := s.RestartKafka(0); err != nil {
		t.Fatalf("RestartKafka: %v", err)
	}
	meta := metadata(ctx, t, s.KafkaBrokers[2], "t")
	if len(meta.Brokers) != 3 {
		t.Errorf("after the restart the metadata lists %d brokers, want 3", len(meta.Brokers))
	}
	var records int64
	for _, p := range meta.Topics[0].Partitions {
		conn, err := kafka.DialLeader(ctx, "tcp", net.JoinHostPort(p.Leader.Host, strconv.Itoa(p.Leader.Port)), "t", p.ID)
		if err != nil {
			t.Fatal(err)
		}
		first, last, err := conn.ReadOffsets()
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		records += last - first
	}
	if records != 12 {
		t.Errorf("the partitions hold %d records after the restart, want 12", records)
	}
	if err := s.StopKafkaBroker(2); err != nil {
		t.Errorf("stopping broker 2 after the restart brought it back: %v", err)
	}
}
