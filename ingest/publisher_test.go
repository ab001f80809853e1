package ingest_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mcpulse/mcpulse/ingest"
)

const testPartitions = 4

// startKafka starts an in-process Kafka (kfake) with every mcpulse topic, 4 partitions each.
func startKafka(t testing.TB) (*kfake.Cluster, string) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(testPartitions, ingest.AllTopics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, c.ListenAddrs()[0]
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newTestPublisher(t testing.TB, cfg ingest.PublisherConfig) *ingest.Publisher {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	p, err := ingest.NewPublisher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// readTopic reads every message of topic, partition by partition, with a kafka-go Reader.
func readTopic(t testing.TB, addr, topic string) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var all []kafka.Message
	for part := 0; part < testPartitions; part++ {
		conn, err := kafka.DialLeader(ctx, "tcp", addr, topic, part)
		if err != nil {
			t.Fatal(err)
		}
		last, err := conn.ReadLastOffset()
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		if last == 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: topic, Partition: part, MaxWait: 50 * time.Millisecond})
		for {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				r.Close()
				t.Fatalf("reading %s/%d: %v", topic, part, err)
			}
			all = append(all, m)
			if m.Offset >= last-1 {
				break
			}
		}
		r.Close()
	}
	return all
}

func header(m kafka.Message, key string) (string, bool) {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

func mustParse(t testing.TB, data []byte) *ingest.Event {
	t.Helper()
	ev, err := ingest.Parse(data)
	if err != nil {
		t.Fatalf("Parse(%s): %v", data, err)
	}
	return ev
}

func withUUID(n int) string {
	return "0190d2a4-7b1e-7c3a-9f00-" + strings.Repeat("0", 12-len(itoa(n))) + itoa(n)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// watchAcks records the acks field of every Produce request the cluster receives.
func watchAcks(c *kfake.Cluster) func() []int16 {
	var mu sync.Mutex
	var acks []int16
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		acks = append(acks, req.(*kmsg.ProduceRequest).Acks)
		mu.Unlock()
		return nil, nil, false // observe only; the cluster handles it
	})
	return func() []int16 {
		mu.Lock()
		defer mu.Unlock()
		return append([]int16(nil), acks...)
	}
}

func TestPublisherEndToEnd(t *testing.T) {
	c, addr := startKafka(t)
	acks := watchAcks(c)
	p := newTestPublisher(t, ingest.PublisherConfig{Brokers: []string{addr}})

	events := []*ingest.Event{
		mustParse(t, envelope(t, ingest.KindToolCall, map[string]any{"uuid": withUUID(1), "distinct_id": "alice"}, map[string]any{"$mcp_ignored_keys": []string{"a\u2028b"}})),
		mustParse(t, envelope(t, ingest.KindToolCall, map[string]any{"uuid": withUUID(2), "distinct_id": "bob"}, nil)),
		mustParse(t, envelope(t, ingest.KindInvitationSent, map[string]any{"uuid": withUUID(3), "distinct_id": "alice"}, nil)),
		mustParse(t, envelope(t, ingest.KindBookingLinkOpened, map[string]any{"uuid": withUUID(4), "distinct_id": "alice"}, map[string]any{"instance_url": "https://eu.posthog.com"})),
		mustParse(t, envelope(t, ingest.KindInvitationResponse, map[string]any{"uuid": withUUID(5), "distinct_id": "carol\u2028<&>"}, nil)),
	}
	if err := p.Publish(context.Background(), events...); err != nil {
		t.Fatal(err)
	}
	byUUID := map[string]*ingest.Event{}
	for _, ev := range events {
		byUUID[ev.UUID.String()] = ev
	}
	wantKey := map[string]string{
		withUUID(1): "alice",
		withUUID(2): "bob",
		withUUID(3): ingest.IdentityHash(ingest.DefaultInstanceURL, "alice"),
		withUUID(4): ingest.IdentityHash("https://eu.posthog.com", "alice"),
		withUUID(5): ingest.IdentityHash(ingest.DefaultInstanceURL, "carol\u2028<&>"),
	}
	seen := 0
	partitions := []int{0, 1, 2, 3}
	for _, topic := range []string{ingest.TopicToolCalls, ingest.TopicRecruitment} {
		for _, m := range readTopic(t, addr, topic) {
			seen++
			got := mustParse(t, m.Value)
			want := byUUID[got.UUID.String()]
			if want == nil {
				t.Fatalf("unexpected message %s", m.Value)
			}
			if m.Topic != want.Kind.Topic {
				t.Errorf("%s: topic %s, want %s", got.UUID, m.Topic, want.Kind.Topic)
			}
			if string(m.Key) != wantKey[got.UUID.String()] {
				t.Errorf("%s: key %q, want %q", got.UUID, m.Key, wantKey[got.UUID.String()])
			}
			if p := (kafka.Murmur2Balancer{}).Balance(kafka.Message{Key: m.Key}, partitions...); p != m.Partition {
				t.Errorf("%s: partition %d, murmur2 says %d", got.UUID, m.Partition, p)
			}
			if got.Name != want.Name || got.DistinctID != want.DistinctID || !got.Timestamp.Equal(want.Timestamp) || string(got.Properties) != string(want.Properties) {
				t.Errorf("value does not round-trip:\n got %+v\nwant %+v", got, want)
			}
		}
	}
	if seen != len(events) {
		t.Fatalf("read %d messages, want %d", seen, len(events))
	}
	a := acks()
	if len(a) == 0 {
		t.Fatal("no produce request observed")
	}
	for _, v := range a {
		if v != -1 {
			t.Fatalf("produce request with acks=%d; want -1 (all in-sync replicas; kafka-go's Writer{} zero value is 0 = none)", v)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Publish(context.Background(), events[0]); !errors.Is(err, ingest.ErrPublisherClosed) {
		t.Fatalf("Publish after Close: %v", err)
	}
}

func TestPublishRefusesPerMessage(t *testing.T) {
	_, addr := startKafka(t)
	p := newTestPublisher(t, ingest.PublisherConfig{Brokers: []string{addr}})
	good := mustParse(t, envelope(t, ingest.KindToolCall, map[string]any{"uuid": withUUID(9)}, nil))
	big := mustParse(t, envelope(t, ingest.KindToolCall, map[string]any{"uuid": withUUID(10)}, map[string]any{"blob": strings.Repeat("x", ingest.MaxMessageBytes)}))
	unknown := &ingest.Event{Name: "$pageview"}
	err := p.Publish(context.Background(), big, good, nil, unknown)
	var perr *ingest.PublishError
	if !errors.As(err, &perr) {
		t.Fatalf("got %v, want *PublishError", err)
	}
	if perr.Total != 4 || len(perr.Failed) != 3 || perr.Failed[0].Index != 0 || perr.Failed[1].Index != 2 || perr.Failed[2].Index != 3 {
		t.Fatalf("failed: %+v", perr.Failed)
	}
	for _, f := range perr.Failed {
		if !f.Permanent {
			t.Errorf("%+v should be permanent", f)
		}
	}
	if !errors.Is(err, ingest.ErrMessageTooLarge) || !strings.HasPrefix(err.Error(), "3 of 4 events not acknowledged") {
		t.Fatalf("error %q", err)
	}
	msgs := readTopic(t, addr, ingest.TopicToolCalls)
	if len(msgs) != 1 || mustParse(t, msgs[0].Value).UUID != good.UUID {
		t.Fatalf("the good neighbour was not published alone: %d messages", len(msgs))
	}
}

func TestDeadLetterHeaders(t *testing.T) {
	_, addr := startKafka(t)
	p := newTestPublisher(t, ingest.PublisherConfig{Brokers: []string{addr}})
	long := strings.Repeat("é", 400) // 800 bytes
	huge := make([]byte, ingest.MaxDeadLetterPayloadBytes+10)
	letters := []ingest.DeadLetter{
		{ID: "mcp_tool_calls/2/17", Payload: []byte("{bad\n"), Reason: "bad JSON:\r\nunexpected\u2028end\tof input", Source: ingest.TopicToolCalls},
		{ID: "publish:f.jsonl:3", Payload: []byte("x"), Reason: long, Source: ingest.SourcePublish},
		{ID: "publish:f.jsonl:4", Payload: huge, Reason: "line 4: too big", Source: ingest.SourcePublish},
	}
	if err := p.DeadLetter(context.Background(), letters...); err != nil {
		t.Fatal(err)
	}
	err := p.DeadLetter(context.Background(), ingest.DeadLetter{Payload: []byte("x")})
	var perr *ingest.PublishError
	if !errors.As(err, &perr) || !perr.Failed[0].Permanent || !strings.Contains(err.Error(), "without ID, Reason, Source") {
		t.Fatalf("dead letter without ID: %v", err)
	}

	got := map[string]kafka.Message{}
	for _, m := range readTopic(t, addr, ingest.TopicDeadLetters) {
		got[string(m.Key)] = m
	}
	if len(got) != len(letters) {
		t.Fatalf("%d dead letters, want %d", len(got), len(letters))
	}
	for _, dl := range letters {
		m := got[dl.ID]
		if id, _ := header(m, ingest.HeaderDeadLetterID); id != dl.ID {
			t.Errorf("%s: id header %q", dl.ID, id)
		}
		if src, _ := header(m, ingest.HeaderSourceTopic); src != dl.Source {
			t.Errorf("%s: source header %q", dl.ID, src)
		}
		reason, ok := header(m, ingest.HeaderError)
		if !ok || strings.ContainsAny(reason, "\r\n\u2028\t") || len(reason) > ingest.MaxDeadLetterReasonBytes {
			t.Errorf("%s: reason header %q (%d bytes) is not one line of at most %d bytes", dl.ID, reason, len(reason), ingest.MaxDeadLetterReasonBytes)
		}
		if !strings.HasPrefix(dl.Reason, "bad JSON") && !strings.HasPrefix(reason, dl.Reason[:10]) {
			t.Errorf("%s: reason %q", dl.ID, reason)
		}
	}
	if r, _ := header(got["mcp_tool_calls/2/17"], ingest.HeaderError); r != "bad JSON:  unexpected end of input" {
		t.Errorf("one-line reason %q", r)
	}
	if string(got["mcp_tool_calls/2/17"].Value) != "{bad\n" {
		t.Errorf("payload %q", got["mcp_tool_calls/2/17"].Value)
	}
	if r, _ := header(got["publish:f.jsonl:3"], ingest.HeaderError); !strings.HasSuffix(r, "…") {
		t.Errorf("long reason not cut with an ellipsis: %q", r)
	}
	hm := got["publish:f.jsonl:4"]
	if r, _ := header(hm, ingest.HeaderError); len(hm.Value) != ingest.MaxDeadLetterPayloadBytes || !strings.Contains(r, "payload cut") {
		t.Errorf("huge payload: %d bytes kept, reason %q", len(hm.Value), r)
	}
}

func TestPublishRaw(t *testing.T) {
	_, addr := startKafka(t)
	p := newTestPublisher(t, ingest.PublisherConfig{Brokers: []string{addr}})
	if err := p.PublishRaw(context.Background(), ingest.TopicToolCalls, []byte("k"), []byte("{not json"), kafka.Header{Key: "h", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	if err := p.PublishRaw(context.Background(), "", nil, nil); err == nil {
		t.Fatal("empty topic accepted")
	}
	msgs := readTopic(t, addr, ingest.TopicToolCalls)
	if len(msgs) != 1 || string(msgs[0].Value) != "{not json" || string(msgs[0].Key) != "k" {
		t.Fatalf("%+v", msgs)
	}
	if v, _ := header(msgs[0], "h"); v != "v" {
		t.Fatalf("header %q", v)
	}
}

// TestCloseBoundedBrokerDown: with the cluster gone, Publish gives up at its context deadline
// and Close returns within CloseTimeout (+1s slack).
func TestCloseBoundedBrokerDown(t *testing.T) {
	c, addr := startKafka(t)
	const closeTimeout = 2 * time.Second
	p := newTestPublisher(t, ingest.PublisherConfig{Brokers: []string{addr}, CloseTimeout: closeTimeout, WriteTimeout: 30 * time.Second})
	ev := mustParse(t, envelope(t, ingest.KindToolCall, nil, nil))
	if err := p.Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	err := p.Publish(ctx, ev, ev)
	var perr *ingest.PublishError
	if !errors.As(err, &perr) || len(perr.Failed) != 2 || perr.Failed[0].Permanent {
		t.Fatalf("Publish with the broker down: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Publish took %s with a 1s context", d)
	}
	start = time.Now()
	err = p.Close()
	if d := time.Since(start); d > closeTimeout+time.Second {
		t.Fatalf("Close took %s, CloseTimeout %s", d, closeTimeout)
	}
	t.Logf("Close: %v", err)
}

// TestCloseBoundedBrokerHangs: a broker that accepts produce requests and never answers holds
// kafka-go's Writer.Close until WriteTimeout; Close gives up after CloseTimeout and says how
// many messages may be lost.
func TestCloseBoundedBrokerHangs(t *testing.T) {
	c, addr := startKafka(t)
	const closeTimeout = time.Second
	p := newTestPublisher(t, ingest.PublisherConfig{Brokers: []string{addr}, CloseTimeout: closeTimeout, WriteTimeout: 30 * time.Second})
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return nil, nil, true // swallow: no response, connection kept open
	})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	events := []*ingest.Event{
		mustParse(t, envelope(t, ingest.KindToolCall, map[string]any{"distinct_id": "a"}, nil)),
		mustParse(t, envelope(t, ingest.KindToolCall, map[string]any{"distinct_id": "a"}, nil)),
		mustParse(t, envelope(t, ingest.KindToolCall, map[string]any{"distinct_id": "a"}, nil)),
	}
	err := p.Publish(ctx, events...)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Publish against a hanging broker: %v", err)
	}
	start := time.Now()
	err = p.Close()
	if d := time.Since(start); d > closeTimeout+time.Second {
		t.Fatalf("Close took %s, CloseTimeout %s", d, closeTimeout)
	}
	if err == nil || !strings.Contains(err.Error(), "up to 3 message(s) may not have reached Kafka") {
		t.Fatalf("Close error %v", err)
	}
	if again := p.Close(); again == nil || again.Error() != err.Error() {
		t.Fatalf("second Close: %v", again)
	}
}

func TestPublisherConfigValidate(t *testing.T) {
	if err := (ingest.PublisherConfig{Brokers: []string{"localhost:9092"}}).Validate(); err != nil {
		t.Fatalf("zero values must be valid: %v", err)
	}
	err := ingest.PublisherConfig{
		Brokers:            []string{"localhost:9092", "nohost", ""},
		BatchSize:          -1,
		BatchTimeout:       -time.Second,
		WriteTimeout:       -1,
		CloseTimeout:       -1,
		MaxAttempts:        -1,
		DefaultInstanceURL: "us.posthog.com",
	}.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"Brokers[1]", "Brokers[2]", "BatchSize", "BatchTimeout", "WriteTimeout", "CloseTimeout", "MaxAttempts", "DefaultInstanceURL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s: %v", want, err)
		}
	}
	if err := (ingest.PublisherConfig{}).Validate(); err == nil || !strings.Contains(err.Error(), "Brokers: at least one") {
		t.Fatalf("no brokers: %v", err)
	}
	if _, err := ingest.NewPublisher(ingest.PublisherConfig{}); err == nil {
		t.Fatal("NewPublisher without brokers")
	}
}

// TestPublishRetriesSameMessage: a temporary produce error (NOT_LEADER_FOR_PARTITION) is
// retried with the same message, so the event arrives once with its uuid and value unchanged.
func TestPublishRetriesSameMessage(t *testing.T) {
	c, addr := startKafka(t)
	var mu sync.Mutex
	var produced [][]byte
	failed := false
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		req := r.(*kmsg.ProduceRequest)
		mu.Lock()
		defer mu.Unlock()
		for _, tp := range req.Topics {
			for _, pp := range tp.Partitions {
				produced = append(produced, pp.Records)
			}
		}
		if failed {
			return nil, nil, false
		}
		failed = true
		c.KeepControl()
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		resp.SetVersion(req.GetVersion())
		for _, tp := range req.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = tp.Topic
			for _, pp := range tp.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = pp.Partition
				rp.ErrorCode = 6 // NOT_LEADER_OR_FOLLOWER: retriable
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	p := newTestPublisher(t, ingest.PublisherConfig{Brokers: []string{addr}})
	ev := mustParse(t, envelope(t, ingest.KindInvitationSent, nil, nil))
	if err := p.Publish(context.Background(), ev); err != nil {
		t.Fatalf("Publish should have retried: %v", err)
	}
	mu.Lock()
	attempts := len(produced)
	mu.Unlock()
	if attempts < 2 {
		t.Fatalf("%d produce attempts, want a retry", attempts)
	}
	msgs := readTopic(t, addr, ingest.TopicRecruitment)
	want, _ := ev.MarshalJSON()
	if len(msgs) != 1 || string(msgs[0].Value) != string(want) {
		t.Fatalf("after a retry: %d messages, value %s, want %s", len(msgs), msgs[0].Value, want)
	}
}
