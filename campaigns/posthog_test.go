package campaigns_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/campaigns"
	"github.com/mcpulse/mcpulse/campaigns/campaignstest"
)

const testKey = "phx_test0123456789abcdef"

// Fetch follows PostHog's pages and returns the flags a saved file of the same list holds, so
// the API source lints exactly like the file source.
func TestFetchPaginatesLikeTheFile(t *testing.T) {
	srv := campaignstest.NewServer(t, "testdata/api", "2", testKey)
	got, err := campaigns.Fetch(context.Background(), campaigns.FetchOptions{Host: srv.URL + "/", ProjectID: "2", APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	if n := srv.Requests.Load(); n != 2 {
		t.Errorf("%d requests, want 2 pages", n)
	}
	want, err := campaigns.ReadFile("testdata/valid_api.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fetched flags differ from the file's:\n%+v\n%+v", got, want)
	}
	opts := campaigns.Options{ExclusionCohort: 641799}
	if a, b := campaigns.Lint(got, opts), campaigns.Lint(want, opts); !reflect.DeepEqual(a, b) || a.Errors+a.Warnings != 0 {
		t.Fatalf("lint differs or finds problems: %+v", a)
	}
}

func TestFetchUnauthorized(t *testing.T) {
	srv := campaignstest.NewServer(t, "testdata/api", "2", testKey)
	_, err := campaigns.Fetch(context.Background(), campaigns.FetchOptions{Host: srv.URL, ProjectID: "2", APIKey: "phx_wrong"})
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "Personal API key found in request Authorization header is invalid.") ||
		!strings.Contains(err.Error(), campaigns.EnvPersonalAPIKey) {
		t.Fatalf("error %v", err)
	}
	if strings.Contains(err.Error(), "phx_wrong") {
		t.Fatalf("error shows the key: %v", err)
	}
	if _, err := campaigns.Fetch(context.Background(), campaigns.FetchOptions{Host: srv.URL, ProjectID: "2"}); err == nil || !strings.Contains(err.Error(), campaigns.EnvPersonalAPIKey) {
		t.Fatalf("no key: %v", err)
	}
	if _, err := campaigns.Fetch(context.Background(), campaigns.FetchOptions{Host: srv.URL, ProjectID: "2/../3", APIKey: testKey}); err == nil {
		t.Fatal("a project id with a slash was accepted")
	}
}

// A "next" link to another host is refused before the key is sent there, and a link that
// repeats a page ends the loop.
func TestFetchNextLinks(t *testing.T) {
	var foreign int
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { foreign++ }))
	defer other.Close()
	for name, next := range map[string]string{"foreign host": other.URL + "/api/projects/2/feature_flags/?offset=100", "loop": "?limit=100"} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"count": 1, "next": "` + next + `", "previous": null, "results": [{"key": "a", "active": true, "filters": {"groups": []}}]}`))
			}))
			defer srv.Close()
			_, err := campaigns.Fetch(context.Background(), campaigns.FetchOptions{Host: srv.URL, ProjectID: "2", APIKey: testKey})
			if err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if foreign != 0 {
		t.Fatalf("%d requests reached the foreign host", foreign)
	}
}

// A PostHog that does not answer, or answers too slowly, fails within the timeout with an error
// naming the host; one that cannot be reached names it too.
func TestFetchTimeout(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); slow.Close() })
	// A body that starts, then stalls: the timeout covers reading it too.
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"count": 1, "next": null, "results": [`))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(stall.Close)
	for _, srv := range []*httptest.Server{slow, stall} {
		start := time.Now()
		_, err := campaigns.Fetch(context.Background(), campaigns.FetchOptions{Host: srv.URL, ProjectID: "2", APIKey: testKey, Timeout: 200 * time.Millisecond})
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("took %s", took)
		}
		if want := "PostHog feature-flags API on " + srv.URL + " did not answer within 200ms"; err == nil || err.Error() != want {
			t.Errorf("error %v, want %q", err, want)
		}
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	_, err := campaigns.Fetch(context.Background(), campaigns.FetchOptions{Host: closed.URL, ProjectID: "2", APIKey: testKey})
	if err == nil || !strings.Contains(err.Error(), "PostHog feature-flags API on "+closed.URL+" cannot be reached") {
		t.Errorf("unreachable: %v", err)
	}
	if _, err := campaigns.Fetch(context.Background(), campaigns.FetchOptions{Host: slow.URL, ProjectID: "2", APIKey: testKey, Timeout: -time.Second}); err == nil {
		t.Error("a negative timeout was accepted")
	}
	if campaigns.DefaultFetchTimeout != 30*time.Second {
		t.Errorf("default timeout %s", campaigns.DefaultFetchTimeout)
	}
}
