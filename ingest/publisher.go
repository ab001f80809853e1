package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/segmentio/kafka-go"
)

// Publisher defaults (see PublisherConfig).
const (
	// DefaultBatchSize is PublisherConfig.BatchSize's default: messages per partition batch.
	DefaultBatchSize = 1000
	// DefaultBatchTimeout is PublisherConfig.BatchTimeout's default.
	DefaultBatchTimeout = 5 * time.Millisecond
	// DefaultWriteTimeout is PublisherConfig.WriteTimeout's default.
	DefaultWriteTimeout = 10 * time.Second
	// DefaultCloseTimeout is PublisherConfig.CloseTimeout's default.
	DefaultCloseTimeout = 10 * time.Second
	// DefaultInstanceURL is PublisherConfig.DefaultInstanceURL's default: PostHog US cloud.
	DefaultInstanceURL = "https://us.posthog.com"
	// DefaultPublishMaxAttempts is PublisherConfig.MaxAttempts's default.
	DefaultPublishMaxAttempts = 8
)

// Size limits of what the Publisher writes.
const (
	// MaxMessageBytes is the largest message (key + value + headers, in bytes) the Publisher
	// sends; a larger one fails at once with ErrMessageTooLarge, without blocking its
	// neighbours. Kafka's default message.max.bytes is 1,048,588 per record batch; the
	// Publisher's batches stay under 1,000,000 bytes, leaving room for batch overhead.
	MaxMessageBytes = 960_000
	// MaxDeadLetterPayloadBytes is how much of a dead letter's payload is kept; the rest is
	// cut and the reason says so.
	MaxDeadLetterPayloadBytes = 512 << 10
	// MaxDeadLetterReasonBytes is the longest HeaderError value, in bytes.
	MaxDeadLetterReasonBytes = 500
)

// writerBatchBytes is kafka-go's BatchBytes: the most message bytes (kafka-go's own estimate)
// in one produce batch. It must be at least MaxMessageBytes plus per-message overhead.
const writerBatchBytes = 1_000_000

// publisherMetadataTTL bounds how long the publisher's kafka-go transport trusts its cached
// cluster metadata (kafka-go's default: 6 s). kafka-go refreshes it on that timer only, not on
// NOT_LEADER_FOR_PARTITION or a refused connection, so after a leader moves or a broker goes
// away every publish retries against the old leader until the cache expires: on three brokers
// (testkit/faults) a publish spanning such a change took up to 8 attempts, about 7 s, with the
// default. The price is one metadata request a second per publisher.
const publisherMetadataTTL = time.Second

// Retry backoff of the Publisher: doubles from retryBackoffMin up to retryBackoffMax.
const (
	retryBackoffMin = 100 * time.Millisecond
	retryBackoffMax = 2 * time.Second
)

// SourcePublish is the HeaderSourceTopic value of dead letters produced by PublishFile (the
// line never reached a topic).
const SourcePublish = "publish"

// Errors of the Publisher.
var (
	// ErrPublisherClosed is returned (wrapped in a *PublishError) for messages handed to a
	// Publisher after Close.
	ErrPublisherClosed = errors.New("publisher is closed")
	// ErrMessageTooLarge is returned (wrapped in a *PublishError) for a message over
	// MaxMessageBytes.
	ErrMessageTooLarge = errors.New("message too large for Kafka")
)

// PublisherConfig configures a Publisher. Zero values mean the documented default; negative
// durations and sizes are errors (see Validate).
type PublisherConfig struct {
	// Brokers are the bootstrap brokers, each "host:port". Required.
	Brokers []string
	// BatchSize is the most messages per partition in one produce request. Default: 1000.
	BatchSize int
	// BatchTimeout is how long a partial batch waits for more messages before it is sent.
	// Default: 5ms (kafka-go's own 1s default adds a second of latency to every lone event).
	BatchTimeout time.Duration
	// WriteTimeout bounds one produce request (and one metadata request). Default: 10s.
	WriteTimeout time.Duration
	// CloseTimeout bounds Close: it never blocks longer, even with the broker down.
	// Default: 10s.
	CloseTimeout time.Duration
	// DefaultInstanceURL is the PostHog instance URL used for a recruitment event's message
	// key (its identity hash) when the event lacks instance_url. It must match the consumers'
	// --instance-url. Default: "https://us.posthog.com".
	DefaultInstanceURL string
	// MaxAttempts is how many times a message failing with a temporary error (broker
	// unreachable, leader moving, timeout) is sent before Publish gives up on it; the wait
	// between attempts doubles from 100ms to at most 2s (about 7s in all with the default).
	// Default: 8.
	MaxAttempts int
	// Compression is the produce batch codec. Default: none.
	Compression kafka.Compression
	// Logger receives retry warnings. Default: slog.Default().
	Logger *slog.Logger
}

func (c *PublisherConfig) setDefaults() {
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.BatchTimeout == 0 {
		c.BatchTimeout = DefaultBatchTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = DefaultCloseTimeout
	}
	if c.DefaultInstanceURL == "" {
		c.DefaultInstanceURL = DefaultInstanceURL
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultPublishMaxAttempts
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every problem with the configuration at once (errors.Join of one error per
// problem, each naming its field): no brokers, a broker that is not host:port, a negative size
// or duration, a DefaultInstanceURL that is not an absolute http(s) URL. Zero values are
// valid (they mean the default).
func (c PublisherConfig) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("Brokers: at least one host:port is required"))
	}
	for i, b := range c.Brokers {
		host, port, err := net.SplitHostPort(b)
		if err != nil || host == "" || port == "" {
			errs = append(errs, fmt.Errorf("Brokers[%d]: %q is not host:port", i, b))
		}
	}
	if c.BatchSize < 0 {
		errs = append(errs, fmt.Errorf("BatchSize: %d is negative", c.BatchSize))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"BatchTimeout", c.BatchTimeout}, {"WriteTimeout", c.WriteTimeout}, {"CloseTimeout", c.CloseTimeout},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: %s is negative", d.name, d.v))
		}
	}
	if c.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("MaxAttempts: %d is negative", c.MaxAttempts))
	}
	if c.DefaultInstanceURL != "" {
		u, err := url.Parse(c.DefaultInstanceURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("DefaultInstanceURL: %q is not an absolute http(s) URL", c.DefaultInstanceURL))
		}
	}
	return errors.Join(errs...)
}

// Publisher writes events to Kafka with kafka-go: one Writer, acks from all in-sync replicas
// (RequiredAcks: RequireAll; a kafka.Writer literal's zero value would be RequireNone), the
// murmur2 key balancer (the default partitioner of the Java client and of kafkajs, which most
// TypeScript MCP servers publish with, so an identity's events from either producer land on the
// same partition and stay in order), short batching. It is safe for concurrent use.
//
// Delivery is at least once. A message that fails with a temporary error is re-sent, the SAME
// message (same key, same value, so the same event uuid), up to MaxAttempts times. kafka-go
// has no idempotent producer, so a retry after a lost acknowledgement can write an event
// twice; consumers deduplicate by uuid (DESIGN.md §5).
type Publisher struct {
	cfg       PublisherConfig
	w         *kafka.Writer
	transport *kafka.Transport
	log       *slog.Logger

	closed      atomic.Bool
	closeOnce   sync.Once
	closeErr    error
	unconfirmed atomic.Int64 // messages handed to the writer and not yet completed by it
}

// NewPublisher validates cfg (after filling in defaults) and returns a Publisher. It does not
// contact the brokers; the first Publish does. Close it when done.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	cfg.Brokers = append([]string(nil), cfg.Brokers...)
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("publisher configuration: %w", err)
	}
	p := &Publisher{cfg: cfg, log: cfg.Logger}
	p.transport = &kafka.Transport{
		ClientID:    "mcpulse-publisher",
		DialTimeout: min(5*time.Second, cfg.WriteTimeout),
		MetadataTTL: publisherMetadataTTL,
	}
	p.w = &kafka.Writer{
		Addr:         kafka.TCP(cfg.Brokers...),
		Balancer:     kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll,
		BatchSize:    cfg.BatchSize,
		BatchBytes:   writerBatchBytes,
		BatchTimeout: cfg.BatchTimeout,
		ReadTimeout:  cfg.WriteTimeout,
		WriteTimeout: cfg.WriteTimeout,
		// The Publisher retries itself, with a backoff that honours the caller's context;
		// kafka-go's own retries sleep uninterruptibly and would hold Close up.
		MaxAttempts: 1,
		Compression: cfg.Compression,
		Transport:   p.transport,
		Completion:  p.completion,
	}
	return p, nil
}

// ErrKafkaUnreachable is wrapped by the error Ping returns when no broker answered.
var ErrKafkaUnreachable = errors.New("Kafka unreachable")

// Ping asks the brokers for the cluster's metadata, retrying until ctx ends or timeout passes,
// and returns an error wrapping ErrKafkaUnreachable (with the last broker error) when none
// answered. Callers use it to fail fast, before reading input they could not publish.
func (p *Publisher) Ping(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(p.cfg.Brokers...), Timeout: timeout, Transport: p.transport}
	backoff := 100 * time.Millisecond
	for {
		_, err := client.Metadata(ctx, &kafka.MetadataRequest{})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w at %s after %s: %v", ErrKafkaUnreachable, strings.Join(p.cfg.Brokers, ","), timeout, err)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// MessageError is one message a Publisher call could not get acknowledged.
type MessageError struct {
	// Index is the message's position in the call's arguments (events or dead letters).
	Index int
	// Err is the last error seen for it.
	Err error
	// Permanent is true when the message itself was refused (too large, invalid, no topic for
	// its kind, publisher closed): sending it again fails again. When false it failed for the
	// moment (broker unreachable, timeout, cancelled context) after all attempts; it may
	// still have been written, and may be re-sent (consumers deduplicate by uuid).
	Permanent bool
}

// PublishError is the error of a Publish, PublishRaw or DeadLetter call in which some messages
// were not acknowledged by Kafka. Unwrap gives the individual errors, so errors.Is works on
// them (for example errors.Is(err, context.DeadlineExceeded)).
type PublishError struct {
	// Total is how many messages the call was given.
	Total int
	// Failed lists the messages not acknowledged, by Index, in increasing order.
	Failed []MessageError

	what string // "events", "dead letters"; "" means "messages"
}

// Error says how many events (dead letters, messages) were not acknowledged and why the first
// failed: "2 of 5 events not acknowledged by Kafka (#3: <error>; and 1 more)". #N is the Index.
func (e *PublishError) Error() string {
	what := e.what
	if what == "" {
		what = "messages"
	}
	if len(e.Failed) == 0 {
		return fmt.Sprintf("0 of %d %s not acknowledged by Kafka", e.Total, what)
	}
	f := e.Failed[0]
	s := fmt.Sprintf("%d of %d %s not acknowledged by Kafka (#%d: %v", len(e.Failed), e.Total, what, f.Index, f.Err)
	if len(e.Failed) > 1 {
		s += fmt.Sprintf("; and %d more", len(e.Failed)-1)
	}
	return s + ")"
}

// Unwrap returns the error of every failed message.
func (e *PublishError) Unwrap() []error {
	errs := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		errs[i] = f.Err
	}
	return errs
}

// Publish writes events to their topics (Kind.Topic) and returns when Kafka has acknowledged
// every one of them (acks from all in-sync replicas), or when it gives up. The value of each
// message is the event's envelope JSON (Event.MarshalJSON), its key MessageKey with the
// configured DefaultInstanceURL. Temporary failures are retried with the same message, up to
// MaxAttempts, while ctx allows.
//
// It returns nil when all were acknowledged, else a *PublishError naming how many were not
// (and which); the others were written. A nil event or one without a Kind fails permanently.
func (p *Publisher) Publish(ctx context.Context, events ...*Event) error {
	msgs := make([]kafka.Message, 0, len(events))
	index := make([]int, 0, len(events))
	var failed []MessageError
	for i, ev := range events {
		msg, err := p.eventMessage(ev)
		if err != nil {
			failed = append(failed, MessageError{Index: i, Err: err, Permanent: true})
			continue
		}
		msgs = append(msgs, msg)
		index = append(index, i)
	}
	return p.send(ctx, msgs, index, failed, len(events), "events")
}

// ErrNotEncodable is wrapped by the permanent MessageError of an event Publish could not encode
// as JSON (encoding/json refuses, for one, nesting deeper than 10,000 levels); Kafka never saw it.
var ErrNotEncodable = errors.New("not encodable as JSON")

func (p *Publisher) eventMessage(ev *Event) (kafka.Message, error) {
	if ev == nil {
		return kafka.Message{}, errors.New("nil event")
	}
	if ev.Kind == nil {
		return kafka.Message{}, fmt.Errorf("event %s (%s): no kind: not an event Parse returned", ev.UUID, quoteForError(ev.Name))
	}
	value, err := ev.MarshalJSON()
	if err != nil {
		return kafka.Message{}, fmt.Errorf("event %s: %w: %w", ev.UUID, ErrNotEncodable, err)
	}
	return kafka.Message{Topic: ev.Kind.Topic, Key: MessageKey(ev, p.cfg.DefaultInstanceURL), Value: value}, nil
}

// PublishRaw writes one message as given, with the same acknowledgement and retry rules as
// Publish: for the dead-letter and audit topics, and for tests that need malformed messages
// on the event topics. It returns nil or a *PublishError.
func (p *Publisher) PublishRaw(ctx context.Context, topic string, key, value []byte, headers ...kafka.Header) error {
	if topic == "" {
		return &PublishError{Total: 1, Failed: []MessageError{{Err: errors.New("no topic"), Permanent: true}}}
	}
	msg := kafka.Message{Topic: topic, Key: key, Value: value, Headers: headers}
	if err := p.write(ctx, []kafka.Message{msg})[0]; err != nil {
		return &PublishError{Total: 1, Failed: []MessageError{{Err: err, Permanent: !retriable(err)}}}
	}
	return nil
}

// DeadLetter is an event the pipeline could not accept, for TopicDeadLetters.
type DeadLetter struct {
	// ID identifies the dead letter deterministically, so that sending it again is recognised:
	// "publish:<input name>:<line>:<payload hash>" for PublishFile, "<topic>/<partition>/<offset>" for a
	// consumer. It is the message key and the HeaderDeadLetterID value. Required.
	ID string
	// Payload is the bad event as received (any bytes); only the first
	// MaxDeadLetterPayloadBytes are kept.
	Payload []byte
	// Reason says why it was refused, such as "line 7: timestamp: required". It is written on
	// one line (line breaks and other control characters become spaces) and cut to
	// MaxDeadLetterReasonBytes. Required.
	Reason string
	// Source is the topic the event was read from, or SourcePublish / "gateway" when it was
	// refused before reaching a topic. Required.
	Source string
	// Class says why, from a fixed set (ClassOf gives it for an error); sent as the header
	// HeaderErrorClass. Empty means ClassOther.
	Class DeadLetterClass
}

// DeadLetter writes dead letters to TopicDeadLetters, keyed by ID, with headers HeaderError
// (the reason), HeaderSourceTopic (the source) and HeaderDeadLetterID (the ID). A letter
// without ID, Reason or Source fails permanently. It returns nil or a *PublishError whose
// indexes refer to letters.
func (p *Publisher) DeadLetter(ctx context.Context, letters ...DeadLetter) error {
	msgs := make([]kafka.Message, 0, len(letters))
	index := make([]int, 0, len(letters))
	var failed []MessageError
	for i, dl := range letters {
		var missing []string
		for _, f := range []struct{ name, v string }{{"ID", dl.ID}, {"Reason", dl.Reason}, {"Source", dl.Source}} {
			if f.v == "" {
				missing = append(missing, f.name)
			}
		}
		if len(missing) > 0 {
			failed = append(failed, MessageError{Index: i, Err: fmt.Errorf("dead letter without %s", strings.Join(missing, ", ")), Permanent: true})
			continue
		}
		msgs = append(msgs, deadLetterMessage(dl))
		index = append(index, i)
	}
	return p.send(ctx, msgs, index, failed, len(letters), "dead letters")
}

// send writes msgs (index[j] is msgs[j]'s position among the caller's total inputs), adds the
// write failures to the ones the caller found while building the messages, and returns a
// *PublishError naming every failure, or nil.
func (p *Publisher) send(ctx context.Context, msgs []kafka.Message, index []int, failed []MessageError, total int, what string) error {
	for j, err := range p.write(ctx, msgs) {
		if err != nil {
			failed = append(failed, MessageError{Index: index[j], Err: err, Permanent: !retriable(err)})
		}
	}
	if len(failed) == 0 {
		return nil
	}
	sortFailed(failed)
	return &PublishError{Total: total, Failed: failed, what: what}
}

func deadLetterMessage(dl DeadLetter) kafka.Message {
	payload, suffix := dl.Payload, ""
	if len(payload) > MaxDeadLetterPayloadBytes {
		suffix = fmt.Sprintf(" (payload cut to the first %d of %d bytes)", MaxDeadLetterPayloadBytes, len(payload))
		payload = payload[:MaxDeadLetterPayloadBytes]
	}
	reason := cutUTF8(oneLine(dl.Reason), MaxDeadLetterReasonBytes-len(suffix)) + suffix
	return kafka.Message{
		Topic: TopicDeadLetters,
		Key:   []byte(dl.ID),
		Value: payload,
		Headers: []kafka.Header{
			{Key: HeaderError, Value: []byte(reason)},
			{Key: HeaderErrorClass, Value: []byte(cmp.Or(dl.Class, ClassOther))},
			{Key: HeaderSourceTopic, Value: []byte(dl.Source)},
			{Key: HeaderDeadLetterID, Value: []byte(dl.ID)},
		},
	}
}

// oneLine makes s valid UTF-8 on one line: line breaks (\r, \n, U+0085, U+2028, U+2029) and
// every other control character become a space.
func oneLine(s string) string {
	return replaceControl(strings.ToValidUTF8(s, "\uFFFD"), ' ')
}

// cutUTF8 cuts valid UTF-8 s to at most n bytes on a rune boundary, ending with "…" when cut.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	cut := max(n-len(ellipsis), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// messageSize is an upper bound of kafka-go's estimate of a message's size.
func messageSize(m *kafka.Message) int {
	n := 32 + len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		n += 16 + len(h.Key) + len(h.Value)
	}
	return n
}

// callState tracks one WriteMessages call's messages through kafka-go's Completion callback.
type callState struct {
	mu        sync.Mutex
	completed int
}

// completion is the kafka.Writer's Completion callback: it runs once per produced batch.
func (p *Publisher) completion(msgs []kafka.Message, _ error) {
	for i := range msgs {
		if cs, ok := msgs[i].WriterData.(*callState); ok {
			cs.mu.Lock()
			cs.completed++
			cs.mu.Unlock()
		}
		p.unconfirmed.Add(-1)
	}
}

// write sends msgs, retrying those failing with temporary errors, and returns one error per
// message (nil: acknowledged).
func (p *Publisher) write(ctx context.Context, msgs []kafka.Message) []error {
	errs := make([]error, len(msgs))
	pending := make([]int, 0, len(msgs))
	for i := range msgs {
		if n := messageSize(&msgs[i]); n > MaxMessageBytes {
			errs[i] = fmt.Errorf("%w: about %d bytes, at most %d", ErrMessageTooLarge, n, MaxMessageBytes)
			continue
		}
		pending = append(pending, i)
	}
	backoff := retryBackoffMin
	for attempt := 1; len(pending) > 0; attempt++ {
		if p.closed.Load() {
			for _, i := range pending {
				errs[i] = ErrPublisherClosed
			}
			break
		}
		cs := &callState{}
		batch := make([]kafka.Message, len(pending))
		for j, i := range pending {
			batch[j] = msgs[i]
			batch[j].WriterData = cs
		}
		p.unconfirmed.Add(int64(len(batch)))
		err := p.w.WriteMessages(ctx, batch...)

		var retry []int
		var werrs kafka.WriteErrors
		switch {
		case err == nil:
			for _, i := range pending {
				errs[i] = nil
			}
		case errors.As(err, &werrs) && len(werrs) == len(batch):
			for j, i := range pending {
				errs[i] = werrs[j]
				if werrs[j] != nil && retriable(werrs[j]) {
					retry = append(retry, i)
				}
			}
		default:
			if ctx.Err() == nil {
				// Refused before any batch was formed (metadata lookup failed, writer closed):
				// kafka-go will never complete these messages.
				cs.mu.Lock()
				p.unconfirmed.Add(-int64(len(batch) - cs.completed))
				cs.completed = len(batch)
				cs.mu.Unlock()
			} // else kafka-go may still be writing them; Completion accounts for them.
			if errors.Is(err, io.ErrClosedPipe) {
				err = ErrPublisherClosed
			}
			if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
				err = fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
			}
			for _, i := range pending {
				errs[i] = err
				if retriable(err) {
					retry = append(retry, i)
				}
			}
		}
		if len(retry) == 0 || ctx.Err() != nil || attempt >= p.cfg.MaxAttempts {
			break
		}
		p.log.Warn("kafka write failed; retrying the same messages",
			"messages", len(retry), "attempt", attempt, "max_attempts", p.cfg.MaxAttempts,
			"backoff", backoff, "error", errs[retry[0]])
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			for _, i := range retry {
				errs[i] = fmt.Errorf("%w (last error: %v)", ctx.Err(), errs[i])
			}
			return errs
		case <-t.C:
		}
		backoff = min(2*backoff, retryBackoffMax)
		pending = retry
	}
	return errs
}

// retriable tells whether a write error is temporary: sending the same message again may
// succeed (and a context error: it may succeed with more time).
func retriable(err error) bool {
	if err == nil || errors.Is(err, ErrPublisherClosed) || errors.Is(err, io.ErrClosedPipe) ||
		errors.Is(err, ErrMessageTooLarge) {
		return false
	}
	var kerr kafka.Error
	if errors.As(err, &kerr) {
		return kerr.Temporary()
	}
	var temp interface{ Temporary() bool }
	if errors.As(err, &temp) && temp.Temporary() {
		return true
	}
	var nerr net.Error
	if errors.As(err, &nerr) {
		return true // dial failures, timeouts, resets: the broker may come back
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func sortFailed(f []MessageError) {
	for i := 1; i < len(f); i++ {
		for j := i; j > 0 && f[j].Index < f[j-1].Index; j-- {
			f[j], f[j-1] = f[j-1], f[j]
		}
	}
}

// Close flushes what the writer holds and releases its connections. It returns within
// CloseTimeout even when the brokers are unreachable: it then gives up, leaves the flush
// running in the background, and returns an error saying how many messages handed to the
// writer were still unconfirmed (they may not have reached Kafka; a Publish waiting for them
// has reported or will report them as not acknowledged). Publish calls after Close fail with
// ErrPublisherClosed. Calling Close again returns the first call's result.
func (p *Publisher) Close() error {
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		done := make(chan error, 1)
		go func() {
			err := p.w.Close()
			p.transport.CloseIdleConnections()
			done <- err
		}()
		t := time.NewTimer(p.cfg.CloseTimeout)
		defer t.Stop()
		select {
		case err := <-done:
			if err != nil {
				p.closeErr = fmt.Errorf("closing kafka writer: %w", err)
			}
		case <-t.C:
			p.closeErr = fmt.Errorf("kafka writer did not close within %s (brokers %s unreachable?): up to %d message(s) may not have reached Kafka",
				p.cfg.CloseTimeout, strings.Join(p.cfg.Brokers, ","), max(p.unconfirmed.Load(), 0))
		}
	})
	return p.closeErr
}
