package gateway_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/ingest"
)

// A query or form body that net/url cannot read whole is a 400 saying so, with a short
// message: never a request read as if the dropped parameters (an api_key, the compression,
// the data field) were absent.
func TestStrictQueryParsing(t *testing.T) {
	f := newFixture(t, nil)
	many := strings.Repeat("p=1&", 10_000) + "api_key=" + testKey // 10,001 parameters
	body := batchBody(t, "", toolCall(1))
	for _, c := range []struct{ name, path string }{
		{"10,001 parameters", "/batch/?" + many},
		{"bad escape", "/batch/?ver=1&x=%zz" + strings.Repeat("y", 100<<10)},
		{"semicolon", "/batch/?ver=1;compression=gzip"},
	} {
		res, r := f.post(c.path, body)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(r.Error, "URL query") || len(r.Error) > 300 {
			t.Errorf("%s: %d %.400q, want 400 naming the query in a short message", c.name, res.StatusCode, r.Error)
		}
	}
	form := "data=" + url.QueryEscape(string(body)) + strings.Repeat("&p=1", 10_000)
	res, r := f.post("/batch/", []byte(form), "Content-Type", "application/x-www-form-urlencoded")
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(r.Error, "form body: too many parameters (10001; at most 10000)") {
		t.Errorf("form body of 10,001 parameters: %d %q, want 400", res.StatusCode, r.Error)
	}
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/v1/traces?"+many, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testKey)
	tres, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(tres.Body)
	tres.Body.Close()
	if tres.StatusCode != http.StatusBadRequest || len(msg) > 300 {
		t.Errorf("/v1/traces with 10,001 parameters: %d %.300q, want a short 400", tres.StatusCode, msg)
	}
	if n := len(f.messages(ingest.TopicToolCalls)); n != 0 {
		t.Errorf("%d messages published by refused requests", n)
	}
	// A neighbour with an ordinary query (posthog-js's) is accepted.
	if res, r := f.post("/batch/?ip=1&_=1767225600000&ver=1.200.0", batchBody(t, "", toolCall(2))); res.StatusCode != http.StatusOK || r.Accepted != 1 {
		t.Errorf("ordinary query: %d %+v, want 200", res.StatusCode, r)
	}
}
