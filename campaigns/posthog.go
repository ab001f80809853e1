package campaigns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/mcpulse/mcpulse/internal/safetext"
)

// EnvPersonalAPIKey names the environment variable that holds the PostHog personal API key
// the API source uses (never a flag, so it stays out of shell history and process lists).
const EnvPersonalAPIKey = "MCPULSE_POSTHOG_PERSONAL_API_KEY"

// DefaultPostHogHost is PostHog Cloud US's API host.
const DefaultPostHogHost = "https://us.posthog.com"

// MaxPages bounds how many pages Fetch follows (at 100 flags a page, 100,000 flags), so a
// server that keeps answering with a "next" link cannot keep it running forever.
const MaxPages = 1000

// DefaultFetchTimeout bounds each request Fetch makes (one page: connecting, the answer and
// its body) when FetchOptions.Timeout is 0: 30 seconds.
const DefaultFetchTimeout = 30 * time.Second

// FetchOptions say where Fetch reads the flags: Host (scheme and host, e.g.
// https://us.posthog.com or a self-hosted instance), ProjectID and a personal API key with
// read access to feature flags. Client defaults to http.DefaultClient.
type FetchOptions struct {
	Host      string
	ProjectID string
	APIKey    string
	// APIKeyEnv names the variable APIKey came from, for messages (default EnvPersonalAPIKey).
	APIKeyEnv string
	Client    *http.Client
	// Timeout bounds each page's request, body included; 0 means DefaultFetchTimeout. A
	// negative one is an error.
	Timeout time.Duration
}

// Fetch reads every flag of a project from PostHog's feature-flags API:
// GET {Host}/api/projects/{ProjectID}/feature_flags/?limit=100 with "Authorization: Bearer
// <personal API key>", following the list's "next" links (PostHog's paginated list: "count",
// "next", "previous", "results"). The key is only ever sent to Host: a "next" link to another
// scheme or host is an error, as is a repeated one or more than MaxPages pages. A status other
// than 200 is an error that carries PostHog's "detail" text (escaped, at most 300 characters),
// e.g. for a 401 why the key was rejected; the key itself is never shown. A page that is not
// read in full within the timeout (FetchOptions.Timeout, DefaultFetchTimeout by default) is an
// error naming the host and the timeout; so is a connection failure.
func Fetch(ctx context.Context, opts FetchOptions) ([]Flag, error) {
	if opts.APIKey == "" {
		return nil, fmt.Errorf("no PostHog personal API key: set %s", nonEmpty(opts.APIKeyEnv, EnvPersonalAPIKey))
	}
	if !validProjectID(opts.ProjectID) {
		return nil, fmt.Errorf("PostHog project id %s is not a project id", safetext.Quote(opts.ProjectID))
	}
	base, err := url.Parse(strings.TrimRight(opts.Host, "/"))
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" {
		return nil, fmt.Errorf("PostHog host %s is not an http(s) URL", safetext.Quote(opts.Host))
	}
	client := opts.Client
	if client == nil {
		client = http.DefaultClient
	}
	timeout := opts.Timeout
	switch {
	case timeout < 0:
		return nil, fmt.Errorf("PostHog request timeout %s is negative", timeout)
	case timeout == 0:
		timeout = DefaultFetchTimeout
	}
	host := safetext.Escape(base.Scheme + "://" + base.Host)
	page := base.JoinPath("api", "projects", opts.ProjectID, "feature_flags/")
	page.RawQuery = "limit=100"
	env := opts.APIKeyEnv
	if env == "" {
		env = EnvPersonalAPIKey
	}
	seen := map[string]bool{}
	var all []Flag
	for n := 0; ; n++ {
		if n == MaxPages {
			return nil, fmt.Errorf("PostHog feature-flags API: more than %d pages", MaxPages)
		}
		seen[page.String()] = true
		pctx, cancel := context.WithTimeout(ctx, timeout)
		flags, next, err := fetchPage(pctx, client, page.String(), opts.APIKey, env, host)
		timedOut := errors.Is(pctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
		cancel()
		if err != nil && timedOut {
			return nil, fmt.Errorf("PostHog feature-flags API on %s did not answer within %s", host, timeout)
		}
		if err != nil {
			return nil, err
		}
		all = append(all, flags...)
		if next == "" {
			return all, nil
		}
		u, err := page.Parse(next)
		if err != nil || u.Scheme != base.Scheme || u.Host != base.Host {
			return nil, fmt.Errorf("PostHog feature-flags API: next page %s is not on %s; not sending the key there", safetext.Quote(next), safetext.Quote(base.Scheme+"://"+base.Host))
		}
		if seen[u.String()] {
			return nil, fmt.Errorf("PostHog feature-flags API: next page %s was already read", safetext.Quote(next))
		}
		page = u
	}
}

func fetchPage(ctx context.Context, client *http.Client, pageURL, key, env, host string) ([]Flag, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, pageURL, nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("PostHog feature-flags API on %s cannot be reached: %w", host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		detail := APIErrorDetail(resp.Body)
		hint := ""
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			hint = fmt.Sprintf(" (check %s: a personal API key with feature_flag:read on this project)", env)
		}
		return nil, "", fmt.Errorf("PostHog feature-flags API on %s answered %s%s%s", host, safetext.Escape(resp.Status), detail, hint)
	}
	flags, next, err := DecodeFlags(resp.Body)
	if err != nil {
		return nil, "", fmt.Errorf("PostHog feature-flags API: %w", err)
	}
	return flags, next, nil
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func validProjectID(p string) bool {
	return p != "" && !strings.ContainsAny(p, "/?#% ") && strings.IndexFunc(p, safetext.Hidden) < 0
}

// ReadFile reads a flag definitions file in either of PostHog's shapes (DecodeFlags); a
// "next" link in a saved API page is ignored. "-" reads standard input from stdin.
func ReadFile(path string, stdin io.Reader) ([]Flag, error) {
	var r io.Reader = stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	flags, _, err := DecodeFlags(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", safetext.Escape(path), err)
	}
	return flags, nil
}

// APIErrorDetail reads a refused PostHog API response's body (at most 64 KiB) and returns
// ": " and its "detail" field (PostHog's error shape, {"detail": "..."}), cut to 300
// characters and escaped for display, or "" when the body has none.
func APIErrorDetail(body io.Reader) string {
	data, _ := io.ReadAll(io.LimitReader(body, 64<<10))
	var e struct {
		Detail string `json:"detail"`
	}
	if json.Unmarshal(data, &e) != nil || e.Detail == "" {
		return ""
	}
	if r := []rune(e.Detail); len(r) > 300 {
		e.Detail = string(r[:300]) + "…"
	}
	return ": " + safetext.Escape(e.Detail)
}
