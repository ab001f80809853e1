package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/forward"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/ingest/gateway"
	"github.com/mcpulse/mcpulse/internal/obs"
	"github.com/mcpulse/mcpulse/internal/shutdown"
	"github.com/mcpulse/mcpulse/internal/stores"
)

// gatewayAPIKeysEnv names the environment variable holding comma-separated API keys.
const gatewayAPIKeysEnv = "MCPULSE_API_KEYS"

func newGatewayCmd() *cobra.Command {
	var (
		cfg                     gateway.Config
		brokers, keysFile       string
		instanceURL, logFmt     string
		posthogHost, posthogKey string
		forwardUnhandled        bool
		metricsListen           string
	)
	cmd := &cobra.Command{
		Use:   "gateway --listen ADDR [--api-keys-file F] [--brokers host:port,...]",
		Short: "Run the HTTP ingest gateway: PostHog's capture API, /v1/events and OTLP traces (/v1/traces) → Kafka",
		Long: `gateway accepts events over HTTP and publishes them to Kafka (acks from all in-sync
replicas) before answering:

  POST /batch/ /capture/ /e/ /i/v0/e/   PostHog's capture API: a single event, an array, or
                                         {"api_key"|"token", "batch": [...], "sent_at"}; gzip via
                                         Content-Encoding or ?compression=gzip-js; the data= form
                                         body (base64 or plain JSON). Point a PostHog SDK's host here.
  POST /v1/events                        a JSON array or JSON Lines of mcpulse envelopes, with
                                         Authorization: Bearer <api key>
  POST /v1/traces                        OTLP/HTTP traces (protobuf or JSON, gzip), with
                                         Authorization: Bearer <api key>: the MCP spans become
                                         the same events, the rest are counted and dropped
  GET  /healthz /readyz /metrics         liveness, Kafka reachability, Prometheus metrics

Every event is validated and published: tool calls, the MCP analytics SDK's tools lists,
initializes, exceptions, feedback, missing-capability reports, resources and prompts requests
and identifies, and the interview recruitment events, each to its topic; valid events
of other names ($pageview, ...) are published too, to be counted per name, and reported as
unrouted, never an error. A batch with invalid events is answered 400 naming
each by index and field, and its valid events are still published. Kafka unavailable or too
slow: 503 with Retry-After.

Client clocks: an event without uuid (or with "") gets one derived from the event as sent; an
event without timestamp is dated at receipt (or by its offset, milliseconds before sending). A
request's sent_at (posthog-js: ?_=milliseconds) is compared with the receive time: a client
clock that is ahead is corrected in full (less 1s of noise); one that is behind by more than
--transit-allowance is corrected by the excess (a late delivery is not a slow clock). The same
shift applies to every time of the request (each timestamp, a response's responded_at);
the client's raw values are kept as $mcpulse_client_timestamp, $mcpulse_client_responded_at,
$mcpulse_client_sent_at, $mcpulse_client_offset_ms, next to $mcpulse_received_at.

OpenTelemetry: an MCP server (or client) exporting spans points its OTLP/HTTP trace exporter here:
OTEL_EXPORTER_OTLP_ENDPOINT=http://<gateway> (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=
http://<gateway>/v1/traces) and OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20<api key>.
Spans following the OpenTelemetry semantic conventions for MCP (MCP Python SDK v2, FastMCP),
@traceloop/instrumentation-mcp's and @shinzolabs/instrumentation-mcp's become tool calls
(with an exception when failed), tools lists and initializes, each with a uuid from its trace
and span ids (a retried export is stored once) and its duration from the span; the attributes
read are listed in package ingest/otlp. The capture API's limits apply: --max-body-bytes,
--max-decompressed-bytes, and at most 10,000 spans per request (as events per request). The
answer is an ExportTraceServiceResponse whose partial_success counts the MCP spans rejected,
with the reason; headers Mcpulse-Spans-Mapped, -Dropped and -Rejected count the spans; a
malformed body is 400 and a Content-Type other than protobuf or JSON 415, saying why. Semantic-
convention CLIENT spans are dropped (a server's own spans are the measure): export the server's.

A request's key: api_key or token in the body, api_key or properties.token in its events,
Authorization: Bearer, or ?api_key= / ?token=; at least one, and every one known. Keys outside
the body are checked before it is read, and the body's before it is decoded (an unknown key is
401 at once).

API keys come from --api-keys-file (one per line; blank lines and # comments ignored) and from
$` + gatewayAPIKeysEnv + ` (comma-separated); at least one is required. Keys are never logged.

With --posthog-host and --forward-unhandled, the events the gateway does not route are
forwarded unchanged (uuid kept) to that PostHog project through posthog-go, after the request
is answered; the queue is flushed on shutdown.

On SIGINT/SIGTERM the gateway stops accepting connections and drains in-flight requests.`,
		Example: `  MCPULSE_API_KEYS=phc_abc mcpulse gateway --listen :8080 --brokers kafka:9092
  mcpulse gateway --listen 127.0.0.1:8080 --api-keys-file /etc/mcpulse/api-keys
  # then, in the MCP server: new PostHog(key, { host: "http://127.0.0.1:8080" })
  # or, for OpenTelemetry spans:
  #   OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:8080 OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer%20phc_abc"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keys, err := gatewayAPIKeys(keysFile, os.Getenv(gatewayAPIKeysEnv))
			if err != nil {
				return err
			}
			if len(keys) == 0 {
				return fmt.Errorf("no API keys: pass --api-keys-file or set %s", gatewayAPIKeysEnv)
			}
			cfg.APIKeys = keys
			if cfg.Brokers, err = stores.ParseBrokers(brokers); err != nil {
				return err
			}
			if len(cfg.Brokers) == 0 {
				return fmt.Errorf("no Kafka brokers: set %s or pass --brokers", stores.EnvKafkaBrokers)
			}
			log, err := newLogger(logFmt)
			if err != nil {
				return err
			}
			cfg.Logger = log
			pub, err := ingest.NewPublisher(ingest.PublisherConfig{Brokers: cfg.Brokers, DefaultInstanceURL: instanceURL, Logger: log})
			if err != nil {
				return err
			}
			closing := &stopBudget{log: log}
			defer closing.close("flushing the Kafka writer", pub.Close)
			shutdown.Allow(cfg.ShutdownTimeout + shutdown.Grace) // the drain the operator chose, then the closes
			if forwardUnhandled && posthogHost == "" {
				return errors.New("--forward-unhandled needs --posthog-host")
			}
			if posthogHost != "" {
				if posthogKey == "" {
					return errors.New("--posthog-host needs --posthog-api-key (or $" + posthogAPIKeyEnv + ")")
				}
				fw, err := forward.New(posthogHost, posthogKey, log)
				if err != nil {
					return err
				}
				defer func() {
					closing.close("flushing the PostHog queue", fw.Close) // queued events (after the gateway drained its requests)
					log.Info("posthog forwarding stopped", "queued", fw.Queued(), "failed", fw.Failed())
				}()
				if forwardUnhandled {
					cfg.OnUnrouted = func(evs []ingest.Envelope) { fw.Unhandled(evs...) }
				}
			}
			gw, err := gateway.New(cfg, pub)
			if err != nil {
				return err
			}
			stopMetrics, err := serveMetrics(cmd.Context(), metricsListen, gw.Registry(), log, obs.KafkaCheck(cfg.Brokers, ingest.ConsumedTopics...))
			if err != nil {
				return err
			}
			defer stopMetrics()
			log.Info("gateway starting", "listen", cfg.Listen, "brokers", strings.Join(cfg.Brokers, ","), "api_keys", len(keys))
			return gw.ListenAndServe(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Listen, "listen", gateway.DefaultListen, "address to listen on, host:port")
	f.StringVar(&keysFile, "api-keys-file", "", "file of accepted API keys, one per line (also $"+gatewayAPIKeysEnv+", comma-separated)")
	f.StringVar(&brokers, "brokers", os.Getenv(stores.EnvKafkaBrokers), "Kafka brokers, comma-separated (default $"+stores.EnvKafkaBrokers+")")
	f.StringVar(&instanceURL, "instance-url", ingest.DefaultInstanceURL,
		"PostHog instance URL used for the identity hash (message key) of recruitment events without instance_url; must match the consumers'")
	f.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", gateway.DefaultMaxBodyBytes, "largest request body as sent (413 above)")
	f.Int64Var(&cfg.MaxDecompressedBytes, "max-decompressed-bytes", gateway.DefaultMaxDecompressedBytes, "largest body once gzip is inflated (413 above)")
	f.DurationVar(&cfg.TransitAllowance, "transit-allowance", gateway.DefaultTransitAllowance,
		"how far behind the receive time a request's sent_at may be and still count as transit delay, not a slow clock (times move forward only by the excess)")
	f.DurationVar(&cfg.KafkaTimeout, "kafka-timeout", gateway.DefaultKafkaTimeout, "how long a request waits for Kafka's acknowledgement before 503")
	f.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", gateway.DefaultShutdownTimeout, "how long shutdown waits for in-flight requests")
	f.StringVar(&posthogHost, "posthog-host", "", "PostHog instance to forward to (e.g. https://us.i.posthog.com)")
	f.StringVar(&posthogKey, "posthog-api-key", os.Getenv(posthogAPIKeyEnv), "PostHog project API key for --posthog-host (default $"+posthogAPIKeyEnv+")")
	f.BoolVar(&forwardUnhandled, "forward-unhandled", false, "forward the events the gateway does not route ($pageview, ...) to --posthog-host")
	f.StringVar(&logFmt, "log-format", "text", "log format: text or json")
	f.StringVar(&metricsListen, "metrics-listen", "", "also serve /metrics, /healthz and /readyz on this host:port, apart from --listen (\"\" = only on --listen)")
	return cmd
}

// posthogAPIKeyEnv names the environment variable holding the PostHog project API key that
// mcpulse forwards derived events with.
const posthogAPIKeyEnv = "MCPULSE_POSTHOG_API_KEY"

// gatewayAPIKeys reads the keys of file (one per line, blank lines and # comments skipped) and
// of env (comma-separated), without duplicates.
func gatewayAPIKeys(file, env string) ([]string, error) {
	var keys []string
	seen := map[string]bool{}
	add := func(k string) {
		if k = strings.TrimSpace(k); k != "" && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	if file != "" {
		fh, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("--api-keys-file: %w", err)
		}
		defer fh.Close()
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); !strings.HasPrefix(line, "#") {
				add(line)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("--api-keys-file: %w", err)
		}
		if len(keys) == 0 {
			return nil, errors.New("--api-keys-file: no API key in the file")
		}
	}
	for _, k := range strings.Split(env, ",") {
		add(k)
	}
	return keys, nil
}
