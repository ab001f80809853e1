package gateway_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// A wrong key is refused before the body is decoded: the bodies below are valid only up to
// their key and malformed after it (a truncated batch, a gzip stream cut short), so a gateway
// that decoded first would answer 400, or 413 for the oversized one.
func TestWrongKeyIsRefusedBeforeTheBodyIsDecoded(t *testing.T) {
	f := newFixture(t, nil)
	const wrong = "phc_wrong_key"
	events := bytes.Repeat([]byte(`{"event":"$mcp_tool_call","distinct_id":"d","properties":{"$mcp_tool_name":"t"}},`), 2000)
	truncatedBatch := append([]byte(`{"api_key":"`+wrong+`","batch":[`), events...) // never closed
	gz := gzipBytes(t, append(append([]byte(`{"api_key":"`+wrong+`","batch":[`), events...), []byte(`{}]}`)...))
	cutGzip := gz[:len(gz)*3/4]
	// Inflates to more than MaxDecompressedBytes.
	huge := gzipBytes(t, append(append([]byte(`{"api_key":"`+wrong+`","batch":[`), bytes.Repeat(events, 70)...), []byte(`{}]}`)...))
	cases := []struct {
		name    string
		path    string
		body    []byte
		headers []string
	}{
		{"key first, rest truncated", "/batch/", truncatedBatch, nil},
		{"gzip, key first, stream cut short", "/batch/", cutGzip, []string{"Content-Encoding", "gzip"}},
		{"gzip inflating beyond the limit", "/batch/", huge, []string{"Content-Encoding", "gzip"}},
		{"wrong bearer on /batch/, body garbage", "/batch/", []byte("{not json"), []string{"Authorization", "Bearer " + wrong}},
		{"wrong ?api_key=, body garbage", "/e/?api_key=" + wrong, []byte("{not json"), nil},
		{"v1 wrong bearer, body garbage", "/v1/events", []byte("{not json"), []string{"Authorization", "Bearer " + wrong}},
		{"v1 no key, body garbage", "/v1/events", []byte("{not json"), nil},
	}
	for _, c := range cases {
		res, r := f.post(c.path, c.body, c.headers...)
		if res.StatusCode != http.StatusUnauthorized || r.Status != "unauthorized" {
			t.Errorf("%s: %d %+v, want 401", c.name, res.StatusCode, r)
		}
	}
}

// Keys wherever SDKs put them are found in one pass (last in the body as posthog-python sends
// it, in each event's properties as posthog-js does); a property named token deeper inside an
// event (tool arguments) is data, not a key.
func TestKeysAnywhereSDKsPutThem(t *testing.T) {
	f := newFixture(t, nil)
	withNested := toolCall(1)
	withNested["properties"].(map[string]any)["$mcp_parameters"] = map[string]any{"token": "[redacted]", "api_key": "sk-live"}
	keyLast := func(key string) []byte {
		b := mustJSON(t, map[string]any{"batch": []any{withNested}})
		return append(b[:len(b)-1], []byte(`,"api_key":"`+key+`"}`)...)
	}
	jsToken := func(n int, key string) map[string]any {
		ev := toolCall(n)
		ev["properties"].(map[string]any)["token"] = key
		return ev
	}
	for _, c := range []struct {
		name string
		body []byte
		want int
	}{
		{"key last, known", keyLast(testKey), http.StatusOK},
		{"key last, unknown", keyLast("phc_wrong"), http.StatusUnauthorized},
		{"posthog-js tokens, all known", mustJSON(t, []any{jsToken(2, testKey), jsToken(3, "second-key")}), http.StatusOK},
		{"posthog-js tokens, the second unknown", mustJSON(t, []any{jsToken(4, testKey), jsToken(5, "phc_wrong")}), http.StatusUnauthorized},
		{"only nested token-like properties", mustJSON(t, []any{withNested}), http.StatusUnauthorized},
	} {
		res, r := f.post("/batch/", c.body)
		if res.StatusCode != c.want {
			t.Errorf("%s: %d %+v, want %d", c.name, res.StatusCode, r, c.want)
		}
		if c.want == http.StatusUnauthorized && !strings.Contains(r.Error, "API key") {
			t.Errorf("%s: error %q does not say what is wrong", c.name, r.Error)
		}
	}
}

// A body whose only api_key or token is not a string is refused saying so, not as if it had
// no key; a string key elsewhere in the request still authorizes it as before.
func TestKeyThatIsNotAStringIsNamed(t *testing.T) {
	f := newFixture(t, nil)
	for name, body := range map[string]map[string]any{
		"number":          {"api_key": 5, "batch": []any{toolCall(1)}},
		"null":            {"api_key": nil, "batch": []any{toolCall(1)}},
		"object":          {"token": map[string]any{"k": testKey}, "batch": []any{toolCall(1)}},
		"event array key": {"batch": []any{map[string]any{"event": "$pageview", "api_key": []any{testKey}}}},
	} {
		res, r := f.post("/batch/", mustJSON(t, body))
		if res.StatusCode != http.StatusUnauthorized || !strings.Contains(r.Error, "not a string") {
			t.Errorf("%s: %d %q, want 401 saying the key is not a string", name, res.StatusCode, r.Error)
		}
	}
	res, r := f.post("/batch/", mustJSON(t, map[string]any{"api_key": testKey, "token": nil, "batch": []any{toolCall(2)}}))
	if res.StatusCode != http.StatusOK || r.Accepted != 1 {
		t.Errorf("a string api_key beside a null token: %d %+v, want 200", res.StatusCode, r)
	}
}
