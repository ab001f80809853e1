package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/mcpulse/mcpulse/ingest"
)

// Defaults of Config.
const (
	// DefaultListen is Config.Listen's default.
	DefaultListen = ":8080"
	// DefaultMaxBodyBytes is Config.MaxBodyBytes's default: 1 MiB of request body as sent
	// (compressed or not).
	DefaultMaxBodyBytes = 1 << 20
	// DefaultMaxDecompressedBytes is Config.MaxDecompressedBytes's default: 10 MiB once a
	// gzip body is inflated.
	DefaultMaxDecompressedBytes = 10 << 20
	// DefaultMaxEvents is Config.MaxEvents's default: events in one request.
	DefaultMaxEvents = 10000
	// MaxReportedErrors is how many bad events a 400 answer lists; the rest are counted in
	// Response.ErrorsOmitted, so a small request of many bad events cannot make a huge answer.
	MaxReportedErrors = 100
	// maxPlausibleSkew bounds the sent_at correction: a client clock off by more than this is
	// not a clock error but a bad sent_at, which is then ignored.
	maxPlausibleSkew = 366 * 24 * time.Hour
	// DefaultKafkaTimeout is Config.KafkaTimeout's default: how long a request waits for
	// Kafka to acknowledge its events before answering 503.
	DefaultKafkaTimeout = 10 * time.Second
	// DefaultReadyTimeout is Config.ReadyTimeout's default (the /readyz metadata request).
	DefaultReadyTimeout = 2 * time.Second
	// DefaultShutdownTimeout is Config.ShutdownTimeout's default.
	DefaultShutdownTimeout = 30 * time.Second
	// DefaultRetryAfter is Config.RetryAfter's default: the Retry-After of a 503.
	DefaultRetryAfter = 5 * time.Second
)

// Config configures a Gateway. Zero values mean the documented default; negative sizes and
// durations are errors (see Validate).
type Config struct {
	// Listen is the address ListenAndServe listens on. Default: ":8080".
	Listen string
	// APIKeys are the accepted project API keys (PostHog's api_key / token, or a Bearer token
	// on /v1/events and /v1/traces). At least one is required. They are never logged.
	APIKeys []string
	// Brokers are the Kafka bootstrap brokers /readyz sends its metadata request to. Required.
	Brokers []string
	// MaxBodyBytes caps the request body as sent; a larger one is 413. Default: 1 MiB.
	MaxBodyBytes int64
	// MaxDecompressedBytes caps a gzip body once inflated, enforced while inflating (a gzip
	// bomb is 413 without being inflated in memory). Default: 10 MiB.
	MaxDecompressedBytes int64
	// TransitAllowance is how far behind the receive time a request's sent_at may be and still
	// be read as transit delay rather than a slow client clock: a request whose sent_at is b
	// behind has every time (timestamp, properties.responded_at) moved forward by
	// b − TransitAllowance, nothing when b is smaller. A sent_at ahead of the receive time is
	// always a fast clock and is corrected in full, less FastClockTolerance (see clock.go).
	// Default: DefaultTransitAllowance (150 s, PostHog capture's deadband).
	TransitAllowance time.Duration
	// KafkaTimeout bounds the wait for Kafka's acknowledgement of a request's events; past it
	// the request is 503 with Retry-After. Default: 10s.
	KafkaTimeout time.Duration
	// MaxEvents caps the events of one request, and the spans of one /v1/traces request (413
	// above). Default: DefaultMaxEvents.
	MaxEvents int
	// ReadyTimeout bounds /readyz's metadata request. Default: 2s.
	ReadyTimeout time.Duration
	// ShutdownTimeout bounds the draining of in-flight requests when ListenAndServe's context
	// ends. Default: 30s.
	ShutdownTimeout time.Duration
	// RetryAfter is the Retry-After of a 503 (rounded up to whole seconds). Default: 5s.
	RetryAfter time.Duration
	// Logger receives request failures (never API keys or bodies). Default: slog.Default().
	Logger *slog.Logger
	// Now is the clock (tests). Default: time.Now.
	Now func() time.Time
	// OnUnrouted, when set, receives the valid events of other names ($pageview, ...) that a
	// request acknowledged (normalized: project key removed, uuid and timestamp filled in;
	// they are also published, to be counted per name), after the request was answered, on the request's goroutine. It
	// is not called for a request answered 503 (the client retries it). Optional.
	OnUnrouted func(events []ingest.Envelope)
}

func (c *Config) setDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxDecompressedBytes == 0 {
		c.MaxDecompressedBytes = DefaultMaxDecompressedBytes
	}
	if c.TransitAllowance == 0 {
		c.TransitAllowance = DefaultTransitAllowance
	}
	if c.MaxEvents == 0 {
		c.MaxEvents = DefaultMaxEvents
	}
	if c.KafkaTimeout == 0 {
		c.KafkaTimeout = DefaultKafkaTimeout
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports every problem at once (errors.Join, each naming its field). Zero values
// are valid (they mean the default), except APIKeys and Brokers, which are required.
func (c Config) Validate() error {
	var errs []error
	if len(c.APIKeys) == 0 {
		errs = append(errs, errors.New("APIKeys: at least one API key is required"))
	}
	for i, k := range c.APIKeys {
		if k == "" {
			errs = append(errs, fmt.Errorf("APIKeys[%d]: empty", i))
		}
	}
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("Brokers: at least one host:port is required"))
	}
	for i, b := range c.Brokers {
		if host, port, err := net.SplitHostPort(b); err != nil || host == "" || port == "" {
			errs = append(errs, fmt.Errorf("Brokers[%d]: %q is not host:port", i, b))
		}
	}
	if c.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("MaxBodyBytes: %d is negative", c.MaxBodyBytes))
	}
	if c.MaxDecompressedBytes < 0 {
		errs = append(errs, fmt.Errorf("MaxDecompressedBytes: %d is negative", c.MaxDecompressedBytes))
	}
	if c.ShutdownTimeout > 0 && c.KafkaTimeout > 0 && c.ShutdownTimeout <= c.KafkaTimeout {
		errs = append(errs, fmt.Errorf("ShutdownTimeout: %s must exceed KafkaTimeout %s, or a request waiting on Kafka at shutdown loses its answer", c.ShutdownTimeout, c.KafkaTimeout))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"TransitAllowance", c.TransitAllowance}, {"KafkaTimeout", c.KafkaTimeout}, {"ReadyTimeout", c.ReadyTimeout},
		{"ShutdownTimeout", c.ShutdownTimeout}, {"RetryAfter", c.RetryAfter},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: %s is negative", d.name, d.v))
		}
	}
	return errors.Join(errs...)
}
