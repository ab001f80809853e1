package ingest_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/ingest"
)

type identityVector struct {
	Name        string `json:"name"`
	InstanceURL string `json:"instance_url"`
	DistinctID  string `json:"distinct_id"`
	Stringified string `json:"stringified"`
	Hash        string `json:"hash"`
}

// TestIdentityHashNodeVectors checks IdentityHash against hashes computed by Node.js
// (testdata/identity/make-vectors.js): the MCP servers compute the same hash in JavaScript and
// the Redis keys must agree byte for byte.
func TestIdentityHashNodeVectors(t *testing.T) {
	data, err := os.ReadFile("../testdata/identity/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []identityVector `json:"vectors"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) < 30 {
		t.Fatalf("only %d vectors", len(file.Vectors))
	}
	for _, v := range file.Vectors {
		// Guard the vector file itself: its stringified text must hash to its hash.
		sum := sha256.Sum256([]byte(v.Stringified))
		if hex.EncodeToString(sum[:]) != v.Hash {
			t.Fatalf("%s: vector file inconsistent", v.Name)
		}
		if got := ingest.IdentityHash(v.InstanceURL, v.DistinctID); got != v.Hash {
			t.Errorf("%s: IdentityHash(%q, %q) = %s, want %s (JSON.stringify gave %q)", v.Name, v.InstanceURL, v.DistinctID, got, v.Hash, v.Stringified)
		}
	}
}

// TestIdentityHashNotEncodingJSON shows why IdentityHash quotes strings itself: encoding/json
// escapes U+2028 (and, by default, <, >, &), JSON.stringify does not, so the hashes would differ.
func TestIdentityHashNotEncodingJSON(t *testing.T) {
	const url, id = "https://us.posthog.com", "a\u2028b<c>"
	goJSON, err := json.Marshal([]string{url, id})
	if err != nil {
		t.Fatal(err)
	}
	var noHTML bytes.Buffer
	enc := json.NewEncoder(&noHTML)
	enc.SetEscapeHTML(false)
	if err := enc.Encode([]string{url, id}); err != nil {
		t.Fatal(err)
	}
	jsStringify := "[\"" + url + "\",\"a\u2028b<c>\"]" // what Node's JSON.stringify returns
	if !strings.Contains(string(goJSON), `\u2028`) || !strings.Contains(noHTML.String(), `\u2028`) {
		t.Fatalf("encoding/json no longer escapes U+2028 (%s); revisit the custom quoting", goJSON)
	}
	sum := sha256.Sum256([]byte(jsStringify))
	want := hex.EncodeToString(sum[:])
	if got := ingest.IdentityHash(url, id); got != want {
		t.Fatalf("IdentityHash = %s, want %s", got, want)
	}
	for _, b := range [][]byte{goJSON, bytes.TrimSuffix(noHTML.Bytes(), []byte("\n"))} {
		s := sha256.Sum256(b)
		if hex.EncodeToString(s[:]) == want {
			t.Fatalf("encoding/json output %s would give the same hash; the test proves nothing", b)
		}
	}
}

func TestIdentityHashShape(t *testing.T) {
	a := ingest.IdentityHash("https://us.posthog.com", "x")
	if len(a) != 64 || strings.ToLower(a) != a {
		t.Fatalf("hash %q is not 64 lowercase hex characters", a)
	}
	if ingest.IdentityHash("https://us.posthog.com/", "x") == a {
		t.Fatal("trailing slash must change the hash (URLs are hashed exactly as given)")
	}
	// Invalid UTF-8 is hashed as U+FFFD per invalid byte, as encoding/json decodes it.
	if ingest.IdentityHash("u", "a\xffb") != ingest.IdentityHash("u", "a\uFFFDb") {
		t.Fatal("invalid UTF-8 not hashed as U+FFFD")
	}
}

// A recruitment event whose distinct_id or instance_url Go cannot hold as JavaScript does is
// refused with a clear reason instead of being hashed differently from the MCP server.
func TestRecruitmentEventsWithStringsGoCannotHashLikeJavaScriptAreRefused(t *testing.T) {
	const props = `"properties":{"campaign_id":"c","invitation_id":"i","feature_flag":"f"%s}`
	event := func(distinctID, extra string) []byte {
		return []byte(`{"uuid":"0192f2a0-0000-7000-8000-000000000001","event":"mcp interview invitation sent","distinct_id":` +
			distinctID + `,"timestamp":"2026-11-29T10:00:00Z",` + fmt.Sprintf(props, extra) + `}`)
	}
	cases := []struct {
		name, distinctID, extra, wantPath string
	}{
		{"lone high surrogate", `"a\ud800b"`, "", "distinct_id"},
		{"lone low surrogate", `"\udc00"`, "", "distinct_id"},
		{"high surrogate at the end", `"x\uD83D"`, "", "distinct_id"},
		{"invalid UTF-8 byte", "\"a\xffb\"", "", "distinct_id"},
		{"instance_url with a lone surrogate", `"ok"`, `,"instance_url":"https://x\udfff"`, "properties.instance_url"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ingest.Parse(event(tc.distinctID, tc.extra))
			var v *ingest.ValidationError
			if !errors.As(err, &v) {
				t.Fatalf("Parse error %v, want a ValidationError", err)
			}
			if len(v.Problems) != 1 || v.Problems[0].Path != tc.wantPath || !strings.Contains(v.Problems[0].Problem, "identity hash") {
				t.Errorf("problems %v, want one at %s naming the identity hash", v.Problems, tc.wantPath)
			}
		})
	}
	// Paired surrogates, escaped backslashes before a "u", and raw emoji are fine.
	for _, ok := range []string{`"\ud83d\ude00"`, `"\\ud800"`, `"😀 \u00e9"`} {
		if _, err := ingest.Parse(event(ok, "")); err != nil {
			t.Errorf("distinct_id %s: %v", ok, err)
		}
	}
	// Tool calls are refused too: two different ids must not collapse into one person.
	if _, err := ingest.Parse([]byte(`{"uuid":"0192f2a0-0000-7000-8000-000000000001","event":"$mcp_tool_call","distinct_id":"a\ud800","timestamp":"2026-11-29T10:00:00Z","properties":{"$mcp_tool_name":"t"}}`)); err == nil {
		t.Error("tool call with a lone surrogate in distinct_id accepted")
	}
}

// CheckIdentity refuses, in a distinct_id or instance_url given as a Go string (a command-line
// flag, a line of a file), exactly what Parse refuses in the same bytes inside an event.
func TestCheckIdentityRefusesWhatParseRefuses(t *testing.T) {
	// The strings go into the JSON raw, bytes as given (none needs escaping).
	event := func(distinctID, instanceURL string) []byte {
		return []byte(`{"uuid":"0192f2a0-0000-7000-8000-000000000001","event":"mcp interview invitation sent","distinct_id":"` +
			distinctID + `","timestamp":"2026-11-29T10:00:00Z","properties":{"campaign_id":"c","invitation_id":"i","feature_flag":"f","instance_url":"` +
			instanceURL + `"}}`)
	}
	const url = "https://us.posthog.com"
	for _, tc := range []struct {
		name, distinctID, instanceURL, wantPath string
	}{
		{"invalid byte", "a\xffb", url, "distinct_id"},
		{"a high surrogate encoded on its own", "a\xed\xa0\x80b", url, "distinct_id"},
		{"a low surrogate encoded on its own", "\xed\xbf\xbf", url, "distinct_id"},
		{"a truncated sequence", "x\xf0\x9f\x98", url, "distinct_id"},
		{"too long", strings.Repeat("é", ingest.MaxDistinctIDLength+1), url, "distinct_id"},
		{"instance_url", "ok", "https://x\xed\xa0\x80", "properties.instance_url"},
		{"emoji and accents", "😀 é", url, ""},
		{"the longest allowed", strings.Repeat("é", ingest.MaxDistinctIDLength), url, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, parseErr := ingest.Parse(event(tc.distinctID, tc.instanceURL))
			err := ingest.CheckIdentity(tc.instanceURL, tc.distinctID)
			if (parseErr == nil) != (err == nil) {
				t.Fatalf("CheckIdentity: %v; Parse: %v", err, parseErr)
			}
			if tc.wantPath == "" {
				return
			}
			var v *ingest.ValidationError
			if !errors.As(err, &v) || len(v.Problems) != 1 || v.Problems[0].Path != tc.wantPath || !strings.Contains(parseErr.Error(), v.Problems[0].String()) {
				t.Errorf("CheckIdentity: %v; want the problem Parse reports at %s: %v", err, tc.wantPath, parseErr)
			}
		})
	}
}
