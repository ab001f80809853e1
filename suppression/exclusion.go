package suppression

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mcpulse/mcpulse/campaigns"
	"github.com/mcpulse/mcpulse/internal/safetext"
)

// ReadExclusionMembers reads the recruitment exclusion cohort's members from a file of
// distinct ids, one a line; blank lines and lines starting with '#' are skipped and a line's
// surrounding spaces and its "\r" are dropped (a distinct id is otherwise taken as written).
// "-" reads stdin. Errors are the file's, or a line over 64 KiB.
func ReadExclusionMembers(path string, stdin io.Reader) (map[string]bool, error) {
	var r io.Reader = stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("exclusion members: %w", err)
		}
		defer f.Close()
		r = f
	}
	out := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimSuffix(sc.Text(), "\r"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out[line] = true
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("exclusion members %s: %w", safetext.Quote(path), err)
	}
	return out, nil
}

// CohortSource says where FetchCohortMembers reads a cohort: Host (scheme and host, e.g.
// https://us.posthog.com), ProjectID, CohortID and a personal API key with cohort:read and
// person:read. Client defaults to http.DefaultClient. Timeout bounds each page's request, its
// body included; 0 means campaigns.DefaultFetchTimeout.
type CohortSource struct {
	Host, ProjectID string
	CohortID        int64
	APIKey          string
	Client          *http.Client
	Timeout         time.Duration
}

// MaxCohortPages bounds how many pages FetchCohortMembers follows.
const MaxCohortPages = 10000

// FetchCohortMembers reads every distinct id of every person in a PostHog cohort:
// GET {Host}/api/projects/{ProjectID}/cohorts/{CohortID}/persons/ with "Authorization: Bearer
// <key>", following the answer's "next" links (PostHog's paginated answer: "results", each a
// person with "distinct_ids", "next", "previous"). The key is only sent to Host: a "next" link
// elsewhere, a repeated one or more than MaxCohortPages pages is an error, as is a page not read
// in full within the timeout (naming the host) or a status other
// than 200 (with PostHog's "detail", escaped, at most 300 characters; never the key).
func FetchCohortMembers(ctx context.Context, src CohortSource) (map[string]bool, error) {
	if src.APIKey == "" {
		return nil, fmt.Errorf("no PostHog personal API key: set %s", campaigns.EnvPersonalAPIKey)
	}
	if src.ProjectID == "" || strings.ContainsAny(src.ProjectID, "/?#% ") || strings.IndexFunc(src.ProjectID, safetext.Hidden) >= 0 {
		return nil, fmt.Errorf("PostHog project id %s is not a project id", safetext.Quote(src.ProjectID))
	}
	if src.CohortID <= 0 {
		return nil, fmt.Errorf("PostHog cohort id %d is not a cohort id", src.CohortID)
	}
	base, err := url.Parse(strings.TrimRight(src.Host, "/"))
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" {
		return nil, fmt.Errorf("PostHog host %s is not an http(s) URL", safetext.Quote(src.Host))
	}
	client := src.Client
	if client == nil {
		client = http.DefaultClient
	}
	timeout := src.Timeout
	if timeout <= 0 {
		timeout = campaigns.DefaultFetchTimeout
	}
	page := base.JoinPath("api", "projects", src.ProjectID, "cohorts", strconv.FormatInt(src.CohortID, 10), "persons/")
	seen := map[string]bool{}
	out := map[string]bool{}
	for n := 0; ; n++ {
		if n == MaxCohortPages {
			return nil, fmt.Errorf("PostHog cohort persons API: more than %d pages", MaxCohortPages)
		}
		seen[page.String()] = true
		pctx, cancel := context.WithTimeout(ctx, timeout)
		next, err := fetchCohortPage(pctx, client, page.String(), src.APIKey, out)
		late := pctx.Err() == context.DeadlineExceeded && ctx.Err() == nil
		cancel()
		if late {
			return nil, fmt.Errorf("PostHog cohort persons API on %s did not answer within %s", safetext.Quote(base.Host), timeout)
		}
		if err != nil {
			return nil, err
		}
		if next == "" {
			return out, nil
		}
		u, err := page.Parse(next)
		if err != nil || u.Scheme != base.Scheme || u.Host != base.Host {
			return nil, fmt.Errorf("PostHog cohort persons API: next page %s is not on %s; not sending the key there", safetext.Quote(next), safetext.Quote(base.Scheme+"://"+base.Host))
		}
		if seen[u.String()] {
			return nil, fmt.Errorf("PostHog cohort persons API: next page %s was already read", safetext.Quote(next))
		}
		page = u
	}
}

func fetchCohortPage(ctx context.Context, client *http.Client, pageURL, key string, into map[string]bool) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, pageURL, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("PostHog cohort persons API: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		detail := campaigns.APIErrorDetail(resp.Body)
		return "", fmt.Errorf("PostHog cohort persons API answered %s%s", safetext.Escape(resp.Status), detail)
	}
	var page struct {
		Results []struct {
			DistinctIDs []string `json:"distinct_ids"`
		} `json:"results"`
		Next *string `json:"next"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(&page); err != nil {
		return "", fmt.Errorf("PostHog cohort persons API: not a page of persons: %w", err)
	}
	for _, p := range page.Results {
		for _, id := range p.DistinctIDs {
			if id != "" {
				into[id] = true
			}
		}
	}
	if page.Next == nil {
		return "", nil
	}
	return *page.Next, nil
}
