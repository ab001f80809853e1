// Package campaignstest serves recorded PostHog feature-flags API pages over HTTP for tests of
// the API source (PostHog itself cannot run in a test).
package campaignstest

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// RecordedHost is the host the recorded pages' "next" and "previous" links name; the server
// rewrites it to its own URL, as PostHog's links name the host they were served from.
const RecordedHost = "https://us.posthog.com"

// Server answers GET /api/projects/{Project}/feature_flags/ like PostHog: with the key
// "Bearer {Key}", page1.json of dir for the first page and page2.json for offset=100 (200,
// application/json); with any other Authorization, 401.json with status 401. Requests counts
// the requests it answered.
type Server struct {
	*httptest.Server
	Requests atomic.Int64
}

// NewServer starts a Server over the pages in dir, closed when the test ends.
func NewServer(t testing.TB, dir, project, key string) *Server {
	t.Helper()
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Requests.Add(1)
		serve := func(status int, name string) {
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			w.Write([]byte(strings.ReplaceAll(string(data), RecordedHost, s.URL)))
		}
		switch {
		case r.Method != http.MethodGet || r.URL.Path != "/api/projects/"+project+"/feature_flags/":
			http.NotFound(w, r)
		case r.Header.Get("Authorization") != "Bearer "+key:
			serve(http.StatusUnauthorized, "401.json")
		case r.URL.Query().Get("offset") == "100":
			serve(http.StatusOK, "page2.json")
		case r.URL.Query().Get("offset") == "":
			serve(http.StatusOK, "page1.json")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}
