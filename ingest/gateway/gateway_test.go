package gateway_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/ingest/gateway"
)

func TestEndpointsAndBodyForms(t *testing.T) {
	f := newFixture(t, nil)
	n := 0
	next := func() map[string]any { n++; return toolCall(n) }
	withToken := func(ev map[string]any) map[string]any {
		ev["properties"].(map[string]any)["token"] = testKey
		return ev
	}
	single := func(ev map[string]any) []byte { ev["api_key"] = testKey; return mustJSON(t, ev) }
	cases := []struct {
		name    string
		path    string
		body    []byte
		headers []string
		events  int
	}{
		{"batch JSON", "/batch/", batchBody(t, "", next(), next()), nil, 2},
		{"batch without trailing slash", "/batch", batchBody(t, "", next()), nil, 1},
		{"batch gzip Content-Encoding", "/batch/", gzipBytes(t, batchBody(t, "", next())), []string{"Content-Encoding", "gzip"}, 1},
		{"batch token instead of api_key", "/batch/", mustJSON(t, map[string]any{"token": testKey, "batch": []any{next()}}), nil, 1},
		{"e gzip-js query", "/e/?compression=gzip-js", gzipBytes(t, batchBody(t, "", next())), []string{"Content-Type", "text/plain"}, 1},
		{"capture single event", "/capture/", single(next()), nil, 1},
		{"i/v0/e array with properties.token", "/i/v0/e/", mustJSON(t, []any{withToken(next()), withToken(next())}), nil, 2},
		{"e form data base64", "/e/", []byte("data=" + url.QueryEscape(base64.StdEncoding.EncodeToString(batchBody(t, "", next())))),
			[]string{"Content-Type", "application/x-www-form-urlencoded"}, 1},
		{"e form data plain JSON", "/e/", []byte("data=" + url.QueryEscape(string(single(next())))),
			[]string{"Content-Type", "application/x-www-form-urlencoded"}, 1},
		{"e form data gzip-js", "/e/?compression=gzip-js", gzipBytes(t, []byte("data="+url.QueryEscape(string(single(next()))))),
			[]string{"Content-Type", "application/x-www-form-urlencoded"}, 1},
		{"JSON sent with a form Content-Type (curl -d)", "/batch/", batchBody(t, "", next()),
			[]string{"Content-Type", "application/x-www-form-urlencoded"}, 1},
		{"v1 events JSON array", "/v1/events", mustJSON(t, []any{next(), next()}), []string{"Authorization", "Bearer " + testKey}, 2},
		{"v1 events JSONL", "/v1/events", append(append(mustJSON(t, next()), "\n\n"...), append(mustJSON(t, next()), '\n')...), []string{"Authorization", "Bearer second-key"}, 2},
		{"v1 events gzip", "/v1/events", gzipBytes(t, mustJSON(t, next())), []string{"Authorization", "Bearer " + testKey, "Content-Encoding", "gzip"}, 1},
	}
	for _, c := range cases {
		res, r := f.post(c.path, c.body, c.headers...)
		if res.StatusCode != http.StatusOK || r.Status != "ok" || r.Accepted != c.events {
			t.Errorf("%s: %d %+v, want 200 ok with %d accepted", c.name, res.StatusCode, r, c.events)
		}
	}
	want := n
	msgs := f.messages(ingest.TopicToolCalls)
	if len(msgs) != want {
		t.Fatalf("%d messages on %s, want %d", len(msgs), ingest.TopicToolCalls, want)
	}
	for i, m := range msgs {
		env := envelopeOf(t, m)
		if env.UUID != uuidN(i+1) {
			t.Errorf("message %d: uuid %s, want %s", i, env.UUID, uuidN(i+1))
		}
		if string(m.Key) != env.DistinctID {
			t.Errorf("message %d: key %q, want distinct_id %q", i, m.Key, env.DistinctID)
		}
		if _, ok := env.Properties["token"]; ok {
			t.Errorf("message %d keeps the project token in its properties", i)
		}
		if string(env.Properties["$lib"]) != `"posthog-node"` {
			t.Errorf("message %d: $lib %s, want kept", i, env.Properties["$lib"])
		}
	}
	if strings.Contains(f.logs.String(), testKey) {
		t.Error("the API key appears in the logs")
	}
}

func TestRecruitmentIsRoutedByIdentityHash(t *testing.T) {
	f := newFixture(t, nil)
	res, r := f.post("/batch/", batchBody(t, "", invitation(1), toolCall(2)))
	if res.StatusCode != 200 || r.Accepted != 2 {
		t.Fatalf("%d %+v", res.StatusCode, r)
	}
	msgs := f.messages(ingest.TopicRecruitment)
	if len(msgs) != 1 {
		t.Fatalf("%d recruitment messages, want 1", len(msgs))
	}
	want := ingest.IdentityHash(ingest.DefaultInstanceURL, "user-1")
	if string(msgs[0].Key) != want {
		t.Errorf("key %q, want identity hash %q", msgs[0].Key, want)
	}
}

func TestUnroutedEventsAreAcknowledged(t *testing.T) {
	f := newFixture(t, nil)
	identify := map[string]any{"event": "$pageview", "distinct_id": "user-9", "uuid": uuidN(90),
		"timestamp": base.Format(time.RFC3339), "properties": map[string]any{"$current_url": "https://example.com/"}}
	toolsList := map[string]any{"event": "$mcp_tools_list", "distinct_id": "user-9", "uuid": uuidN(91)} // no timestamp, no properties
	res, r := f.post("/batch/", batchBody(t, "", identify, toolsList, toolCall(1)))
	if res.StatusCode != 200 || r.Accepted != 2 || r.Unrouted != 1 || len(r.Errors) != 0 {
		t.Fatalf("%d %+v, want 200 with 2 accepted (the tool call and the tools list), 1 unrouted", res.StatusCode, r)
	}
	// The unrouted $pageview is published too, so that the consumers count it per name.
	published := map[string]bool{}
	for _, m := range f.messages(ingest.TopicToolCalls) {
		published[envelopeOf(t, m).Event] = true
	}
	if !published["$pageview"] || !published["$mcp_tools_list"] || !published[ingest.EventToolCall] {
		t.Errorf("published events %v, want all three names", published)
	}
	body := scrape(t, f)
	for _, line := range []string{
		`mcpulse_gateway_events_unrouted_total 1`,
		`mcpulse_gateway_events_accepted_total{kind="tool_call"} 1`,
		`mcpulse_gateway_events_accepted_total{kind="tools_list"} 1`,
		`mcpulse_gateway_requests_total{code="200",endpoint="/batch/"} 1`,
	} {
		if !strings.Contains(body, line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
}

func scrape(t *testing.T, f *fixture) string {
	t.Helper()
	res, err := http.Get(f.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return string(data)
}

func TestAuth(t *testing.T) {
	f := newFixture(t, nil)
	const wrong = "phc_wrong_key_should_never_be_logged"
	cases := []struct {
		name    string
		path    string
		body    []byte
		headers []string
	}{
		{"batch without key", "/batch/", mustJSON(t, map[string]any{"batch": []any{toolCall(1)}}), nil},
		{"batch unknown key", "/batch/", mustJSON(t, map[string]any{"api_key": wrong, "batch": []any{toolCall(1)}}), nil},
		{"capture unknown token in properties", "/capture/", mustJSON(t, map[string]any{"event": "$pageview", "properties": map[string]any{"token": wrong, "distinct_id": "x"}}), nil},
		{"batch known key, one event with unknown token", "/batch/", mustJSON(t, map[string]any{"api_key": testKey, "batch": []any{
			toolCall(1), map[string]any{"event": "$pageview", "api_key": wrong}}}), nil},
		{"v1 without Authorization", "/v1/events", mustJSON(t, toolCall(1)), nil},
		{"v1 unknown bearer", "/v1/events", mustJSON(t, toolCall(1)), []string{"Authorization", "Bearer " + wrong}},
		{"v1 not bearer", "/v1/events", mustJSON(t, toolCall(1)), []string{"Authorization", "Basic " + testKey}},
	}
	for _, c := range cases {
		res, r := f.post(c.path, c.body, c.headers...)
		if res.StatusCode != http.StatusUnauthorized || r.Status != "unauthorized" || r.Error == "" || r.Accepted != 0 {
			t.Errorf("%s: %d %+v, want 401 with a JSON error", c.name, res.StatusCode, r)
		}
		if strings.Contains(r.Error, wrong) || strings.Contains(r.Error, testKey) {
			t.Errorf("%s: the error quotes the key: %q", c.name, r.Error)
		}
	}
	if msgs := f.messages(ingest.TopicToolCalls); len(msgs) != 0 {
		t.Errorf("%d messages published by unauthorized requests", len(msgs))
	}
	if logs := f.logs.String(); strings.Contains(logs, wrong) || strings.Contains(logs, testKey) {
		t.Error("an API key appears in the logs")
	}
}

func TestMixedBatchReportsEachBadEventAndStoresTheValidOnes(t *testing.T) {
	f := newFixture(t, nil)
	noTool := toolCall(2)
	delete(noTool["properties"].(map[string]any), "$mcp_tool_name")
	badUUIDAndTime := toolCall(4)
	badUUIDAndTime["uuid"] = "not-a-uuid"
	badUUIDAndTime["timestamp"] = "yesterday"
	badResponse := invitation(6)
	badResponse["event"] = ingest.EventInvitationResponse
	badResponse["properties"].(map[string]any)["response"] = "maybe"
	futureResponse := invitation(7) // outranks ops resets until 2099 (ingest.CheckClock)
	futureResponse["event"] = ingest.EventInvitationResponse
	futureResponse["properties"].(map[string]any)["response"] = "decline"
	futureResponse["properties"].(map[string]any)["responded_at"] = "2099-01-01T00:00:00Z"
	res, r := f.post("/batch/", batchBody(t, "", toolCall(1), noTool, toolCall(3), badUUIDAndTime, invitation(5), badResponse, futureResponse))
	if res.StatusCode != http.StatusBadRequest || r.Status != "invalid" || r.Accepted != 3 {
		t.Fatalf("%d %+v, want 400 invalid with 3 accepted", res.StatusCode, r)
	}
	got := map[int][]string{}
	for _, e := range r.Errors {
		for _, p := range e.Problems {
			got[e.Index] = append(got[e.Index], p.Path)
		}
	}
	want := map[int][]string{
		1: {"properties.$mcp_tool_name"},
		3: {"uuid", "timestamp"},
		5: {"properties.response"},
		6: {"properties.responded_at"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors by index %v, want %v (%+v)", got, want, r.Errors)
	}
	if n := len(f.messages(ingest.TopicToolCalls)); n != 2 {
		t.Errorf("%d tool calls published, want 2", n)
	}
	if n := len(f.messages(ingest.TopicRecruitment)); n != 1 {
		t.Errorf("%d recruitment events published, want 1", n)
	}
}

func TestRepeatedUUIDInOneBatchIsPublishedOnce(t *testing.T) {
	f := newFixture(t, nil)
	again := toolCall(1)
	again["timestamp"] = base.Add(time.Hour).Format(time.RFC3339)
	res, r := f.post("/batch/", batchBody(t, "", toolCall(1), toolCall(2), again, toolCall(1)))
	if res.StatusCode != 200 || r.Accepted != 2 || r.Duplicates != 2 || len(r.Errors) != 0 {
		t.Fatalf("%d %+v, want 200 with 2 accepted and 2 duplicates", res.StatusCode, r)
	}
	if n := len(f.messages(ingest.TopicToolCalls)); n != 2 {
		t.Errorf("%d messages, want 2", n)
	}
}

func TestMissingUUIDIsDerivedDeterministically(t *testing.T) {
	f := newFixture(t, nil)
	ev := toolCall(1)
	delete(ev, "uuid")
	for range 2 {
		if res, r := f.post("/batch/", batchBody(t, "", ev)); res.StatusCode != 200 || r.Accepted != 1 {
			t.Fatalf("%d %+v", res.StatusCode, r)
		}
	}
	msgs := f.messages(ingest.TopicToolCalls)
	if len(msgs) != 2 || envelopeOf(t, msgs[0]).UUID != envelopeOf(t, msgs[1]).UUID {
		t.Fatalf("a retried event without uuid must get the same uuid: %d messages", len(msgs))
	}
}

func TestGzipFailures(t *testing.T) {
	f := newFixture(t, nil)
	full := gzipBytes(t, batchBody(t, "", toolCall(1), toolCall(2), toolCall(3)))
	res, r := f.post("/batch/", full[:len(full)-10], "Content-Encoding", "gzip")
	if res.StatusCode != http.StatusBadRequest || r.Accepted != 0 || !strings.Contains(r.Error, "truncated") {
		t.Errorf("truncated gzip: %d %+v, want 400 truncated", res.StatusCode, r)
	}
	res, r = f.post("/batch/", []byte("not gzip at all"), "Content-Encoding", "gzip")
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("not gzip: %d %+v, want 400", res.StatusCode, r)
	}
	res, _ = f.post("/batch/", batchBody(t, "", toolCall(1)), "Content-Encoding", "br")
	if res.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("brotli: %d, want 415", res.StatusCode)
	}
	if n := len(f.messages(ingest.TopicToolCalls)); n != 0 {
		t.Errorf("%d messages published from broken bodies, want 0", n)
	}
}

func TestGzipBombIs413(t *testing.T) {
	f := newFixture(t, nil)
	// 1 GiB of spaces after a valid prefix compresses to about 1 MiB; use 200 MiB (~200 KiB).
	var buf bytes.Buffer
	zw := newGzipWriter(&buf)
	zw.Write([]byte(`{"api_key":"` + testKey + `","batch":[`))
	chunk := bytes.Repeat([]byte(" "), 1<<20)
	for range 200 {
		zw.Write(chunk)
	}
	zw.Write([]byte(`]}`))
	zw.Close()
	if buf.Len() > 1<<20 {
		t.Fatalf("bomb is %d bytes compressed, over the body cap", buf.Len())
	}
	res, r := f.post("/batch/", buf.Bytes(), "Content-Encoding", "gzip")
	if res.StatusCode != http.StatusRequestEntityTooLarge || r.Accepted != 0 {
		t.Errorf("gzip bomb: %d %+v, want 413", res.StatusCode, r)
	}
}

func TestOversizedBodyIs413(t *testing.T) {
	f := newFixture(t, func(c *gateway.Config) { c.MaxBodyBytes = 64 << 10 })
	big := toolCall(1)
	big["properties"].(map[string]any)["padding"] = strings.Repeat("x", 100<<10)
	res, r := f.post("/batch/", batchBody(t, "", big, toolCall(2)))
	if res.StatusCode != http.StatusRequestEntityTooLarge || r.Accepted != 0 {
		t.Errorf("%d %+v, want 413", res.StatusCode, r)
	}
	// Random (incompressible) bytes over the cap, gzip-encoded: 413 too.
	noise := make([]byte, 80<<10)
	rand.Read(noise)
	res, _ = f.post("/batch/", gzipBytes(t, noise), "Content-Encoding", "gzip")
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("large gzip body: %d, want 413", res.StatusCode)
	}
	if n := len(f.messages(ingest.TopicToolCalls)); n != 0 {
		t.Errorf("%d messages published, want 0", n)
	}
}

func TestKafkaDownIs503WithRetryAfter(t *testing.T) {
	f := newFixture(t, func(c *gateway.Config) { c.KafkaTimeout = 2 * time.Second; c.RetryAfter = 3 * time.Second })
	if res, r := f.post("/batch/", batchBody(t, "", toolCall(1))); res.StatusCode != 200 {
		t.Fatalf("before the outage: %d %+v", res.StatusCode, r)
	}
	f.cluster.Close()
	start := time.Now()
	res, r := f.post("/batch/", batchBody(t, "", toolCall(2), toolCall(3)))
	if res.StatusCode != http.StatusServiceUnavailable || r.Status != "unavailable" || r.Accepted != 0 {
		t.Errorf("%d %+v, want 503 unavailable with nothing accepted", res.StatusCode, r)
	}
	if got := res.Header.Get("Retry-After"); got != "3" {
		t.Errorf("Retry-After %q, want 3", got)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("503 took %s", d)
	}
	ready, err := http.Get(f.srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	ready.Body.Close()
	if ready.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz with Kafka down: %d, want 503", ready.StatusCode)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	f := newFixture(t, nil)
	for _, p := range []string{"/healthz", "/readyz"} {
		res, err := http.Get(f.srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("%s: %d, want 200", p, res.StatusCode)
		}
	}
	res, err := http.Get(f.srv.URL + "/batch/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /batch/: %d, want 405", res.StatusCode)
	}
}

func TestShutdownDrainsInFlightRequests(t *testing.T) {
	f := newFixture(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- f.gw.Serve(ctx, ln) }()

	body := batchBody(t, "", toolCall(1), toolCall(2))
	pr, pw := io.Pipe()
	req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/batch/", pr)
	req.ContentLength = int64(len(body))
	type result struct {
		res *http.Response
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		done <- result{res, err}
	}()
	pw.Write(body[:10]) // the request is in flight, its body half sent
	time.Sleep(200 * time.Millisecond)
	cancel() // shutdown begins
	time.Sleep(200 * time.Millisecond)
	pw.Write(body[10:])
	pw.Close()
	r := <-done
	if r.err != nil {
		t.Fatalf("in-flight request failed during shutdown: %v", r.err)
	}
	r.res.Body.Close()
	if r.res.StatusCode != 200 {
		t.Errorf("in-flight request: %d, want 200", r.res.StatusCode)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if n := len(f.messages(ingest.TopicToolCalls)); n != 2 {
		t.Errorf("%d messages, want 2", n)
	}
}

func TestConfigValidate(t *testing.T) {
	_, err := gateway.New(gateway.Config{APIKeys: []string{""}, Brokers: []string{"nohost"}, MaxBodyBytes: -1, KafkaTimeout: -time.Second}, &ingest.Publisher{})
	if err == nil {
		t.Fatal("want an error")
	}
	for _, field := range []string{"APIKeys[0]", "Brokers[0]", "MaxBodyBytes", "KafkaTimeout"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %s", err, field)
		}
	}
}

// posthog-go sends an identify's person properties as top-level $set and $set_once: the gateway
// moves them into properties (where the identify kind reads them), and $set sent in properties
// wins over a top-level one.
func TestTopLevelPersonPropertiesMoveIntoProperties(t *testing.T) {
	f := newFixture(t, nil)
	top := map[string]any{"event": "$identify", "distinct_id": "user-7", "uuid": uuidN(70), "timestamp": base.Format(time.RFC3339),
		"$set": map[string]any{"plan": "team"}, "$set_once": map[string]any{"first_seen_via": "go"}, "properties": map[string]any{"$lib": "posthog-go"}}
	both := map[string]any{"event": "$identify", "distinct_id": "user-8", "uuid": uuidN(71), "timestamp": base.Format(time.RFC3339),
		"$set": map[string]any{"plan": "top"}, "properties": map[string]any{"$set": map[string]any{"plan": "properties"}}}
	res, r := f.post("/batch/", batchBody(t, "", top, both))
	if res.StatusCode != 200 || r.Accepted != 2 || len(r.Errors) != 0 {
		t.Fatalf("%d %+v, want both identifies accepted", res.StatusCode, r)
	}
	got := map[string][2]string{}
	for _, m := range f.messages(ingest.TopicToolCalls) {
		ev, err := ingest.Parse(m.Value)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Identify == nil {
			t.Fatalf("%s: not an identify", m.Value)
		}
		got[ev.DistinctID] = [2]string{ev.Identify.Set, ev.Identify.SetOnce}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(m.Value, &raw); err != nil {
			t.Fatal(err)
		}
		if _, ok := raw["$set"]; ok {
			t.Errorf("%s: $set left at the top level", m.Value)
		}
	}
	want := map[string][2]string{"user-7": {`{"plan":"team"}`, `{"first_seen_via":"go"}`}, "user-8": {`{"plan":"properties"}`, ""}}
	if !maps.Equal(got, want) {
		t.Errorf("person properties %v, want %v", got, want)
	}
}
