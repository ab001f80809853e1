package alerts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"gopkg.in/yaml.v3"

	"github.com/mcpulse/mcpulse/internal/safetext"
)

// Receiver kinds.
const (
	// KindWebhook POSTs the Alertmanager webhook JSON (version 4) to URL, so anything that
	// takes Alertmanager notifications (Alertmanager-compatible tools, incident managers,
	// a small HTTP handler) takes mcpulse's.
	KindWebhook = "webhook"
	// KindSlack POSTs Slack incoming-webhook JSON (text and blocks) to URL.
	KindSlack = "slack"
)

// Receiver is one notification target.
type Receiver struct {
	// Name is what rules list in receivers.
	Name string `yaml:"name"`
	// Kind is KindWebhook or KindSlack (YAML "type").
	Kind string `yaml:"type"`
	// URL is the endpoint. Prefer URLEnv: a Slack webhook URL is a secret.
	URL string `yaml:"url"`
	// URLEnv names the environment variable holding URL.
	URLEnv string `yaml:"url_env"`
}

// ReceiversConfig is the receivers file `mcpulse scheduler --alert-receivers` reads.
type ReceiversConfig struct {
	// ExternalURL is the dashboards' base URL (e.g. https://mcpulse.example.com): notifications
	// link to the alerts dashboard there. Optional.
	ExternalURL string     `yaml:"external_url"`
	Receivers   []Receiver `yaml:"receivers"`
}

// LoadReceivers reads a receivers file; getenv reads the url_env variables (os.Getenv when
// nil). The error lists every problem: an unknown field or type, a missing or unset URL, a
// URL that is not http(s), a repeated name.
func LoadReceivers(file string, getenv func(string) string) (ReceiversConfig, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return ReceiversConfig{}, err
	}
	var c ReceiversConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return ReceiversConfig{}, fmt.Errorf("%s: %w", file, err)
	}
	var errs []error
	seen := map[string]bool{}
	for i := range c.Receivers {
		r := &c.Receivers[i]
		where := fmt.Sprintf("%s: receiver %q", file, r.Name)
		if r.Name == "" {
			where = fmt.Sprintf("%s: receiver #%d", file, i+1)
			errs = append(errs, fmt.Errorf("%s: name is missing", where))
		} else if seen[r.Name] {
			errs = append(errs, fmt.Errorf("%s: the name is used twice", where))
		}
		seen[r.Name] = true
		if r.Kind != KindWebhook && r.Kind != KindSlack {
			errs = append(errs, fmt.Errorf("%s: type %q: want %s or %s", where, r.Kind, KindWebhook, KindSlack))
		}
		switch {
		case r.URL != "" && r.URLEnv != "":
			errs = append(errs, fmt.Errorf("%s: set url or url_env, not both", where))
		case r.URLEnv != "":
			r.URL = getenv(r.URLEnv)
			if r.URL == "" {
				errs = append(errs, fmt.Errorf("%s: $%s is not set", where, r.URLEnv))
				continue
			}
		case r.URL == "":
			errs = append(errs, fmt.Errorf("%s: url_env (or url) is missing", where))
			continue
		}
		if u, err := url.Parse(r.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s: the URL is not an http(s) URL", where))
		}
	}
	if c.ExternalURL != "" {
		if u, err := url.Parse(c.ExternalURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			errs = append(errs, fmt.Errorf("%s: external_url %q is not an http(s) URL", file, c.ExternalURL))
		}
		c.ExternalURL = strings.TrimRight(c.ExternalURL, "/")
	}
	if err := errors.Join(errs...); err != nil {
		return ReceiversConfig{}, err
	}
	return c, nil
}

// byName returns the named receiver.
func (c ReceiversConfig) byName(name string) (Receiver, bool) {
	i := slices.IndexFunc(c.Receivers, func(r Receiver) bool { return r.Name == name })
	if i < 0 {
		return Receiver{}, false
	}
	return c.Receivers[i], true
}

// Delivery defaults: a notification is tried SendAttempts times, each waiting at most
// SendTimeout, with retryablehttp's exponential backoff between (from 1 s, at most 10 s), on a
// connection error, a 429 or a 5xx answer.
const (
	SendAttempts = 3
	SendTimeout  = 10 * time.Second
)

// post sends body as JSON to r's URL, retrying as the Delivery defaults say, and returns how
// many attempts it made. The error never holds the URL (a Slack webhook URL is a secret): it
// says the status, or the network error without the request line.
func post(ctx context.Context, r Receiver, body []byte) (attempts int, err error) {
	client := retryablehttp.NewClient()
	client.Logger = nil // its lines carry the URL
	client.RetryMax = SendAttempts - 1
	client.RetryWaitMin, client.RetryWaitMax = time.Second, 10*time.Second
	client.HTTPClient.Timeout = SendTimeout
	client.ErrorHandler = retryablehttp.PassthroughErrorHandler
	client.RequestLogHook = func(_ retryablehttp.Logger, _ *http.Request, attempt int) { attempts = attempt + 1 }
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, r.URL, body)
	if err != nil {
		return 0, fmt.Errorf("receiver %s: bad request", r.Name)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "mcpulse-alerts")
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return attempts, fmt.Errorf("receiver %s: %d attempts failed: %v", r.Name, attempts, err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return attempts, fmt.Errorf("receiver %s: HTTP %d after %d attempts: %s", r.Name, resp.StatusCode, attempts, strings.TrimSpace(safetext.Escape(string(snippet))))
	}
	return attempts, nil
}

// encode is json.Marshal for a payload (a payload always encodes).
func encode(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("BUG: alert payload does not encode: %v", err))
	}
	return data
}
