package misuse_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mcpulse/mcpulse/misuse"
)

// checkIgnoredKeys asserts the invariants of any derivation outcome.
func checkIgnoredKeys(t *testing.T, got misuse.IgnoredKeys) {
	t.Helper()
	if len(got.Keys) > misuse.MaxKeys || got.Total < len(got.Keys) {
		t.Fatalf("%d keys, total %d", len(got.Keys), got.Total)
	}
	switch got.Source {
	case misuse.SourceNotMeasurable:
		if got.Reason == "" || got.Keys != nil || got.Total != 0 {
			t.Fatalf("not measurable without a reason or with keys: %+v", got)
		}
	case misuse.SourceSchema, misuse.SourceResponse, misuse.SourceReported:
		if got.Reason != "" {
			t.Fatalf("measurable with a reason: %+v", got)
		}
	default:
		t.Fatalf("source %q", got.Source)
	}
	for _, k := range got.Keys {
		if strings.ContainsFunc(k, func(r rune) bool { return r < 0x20 || (r >= 0x7f && r < 0xa0) || r == 0x2028 || r == 0x2029 }) {
			t.Fatalf("unmasked control character in %q", k)
		}
	}
}

// checkValidWalk asserts that Derive trusting params (Call.Valid) has FromParameters' outcome
// when params is valid JSON.
func checkValidWalk(t *testing.T, s *misuse.Schema, params []byte) {
	t.Helper()
	if !json.Valid(params) {
		return
	}
	want := misuse.FromParameters(s, params)
	if got := misuse.Derive(misuse.Call{Parameters: params, Schema: s, Valid: true}); !reflect.DeepEqual(got, want) {
		t.Fatalf("parameters %q: derived trusting them %+v, checking them %+v", params, got, want)
	}
}

// FuzzFromArguments feeds arbitrary schemas and arguments. Nothing may panic, the outcome
// keeps its invariants, a second derivation (through the pooled walker) gives the same
// outcome, and so does a derivation trusting valid JSON (Call.Valid). Seeds: testdata/fuzz/FuzzFromArguments (the SDK fixtures' schemas and arguments,
// $ref cycles, markers, unions).
func FuzzFromArguments(f *testing.F) {
	f.Add([]byte(`{"properties":{"a":{}}}`), []byte(`{"a":1,"b":{"c":2}}`))
	f.Fuzz(func(t *testing.T, schema, args []byte) {
		s, err := misuse.CompileSchema(schema)
		if s == nil {
			t.Fatalf("nil schema (err %v)", err)
		}
		got := misuse.FromArguments(s, args)
		checkIgnoredKeys(t, got)
		if err != nil && got.Source != misuse.SourceNotMeasurable {
			t.Fatalf("schema error %v, yet measurable: %+v", err, got)
		}
		if again := misuse.FromArguments(s, args); !reflect.DeepEqual(got, again) {
			t.Fatalf("second derivation %+v differs from %+v", again, got)
		}
		params := append(append([]byte(`{"request":{"method":"tools/call","params":{"arguments":`), args...), "}}}"...)
		fromCapture := misuse.FromParameters(s, params)
		checkIgnoredKeys(t, fromCapture)
		checkValidWalk(t, s, params)
		if json.Valid(args) && !reflect.DeepEqual(fromCapture, got) {
			t.Fatalf("arguments in a captured request: %+v, alone: %+v", fromCapture, got)
		}
		bare := append(append([]byte(`{"request":{"params":{"arguments":`), args...), "}}}"...)
		if noMethod := misuse.FromParameters(s, bare); !reflect.DeepEqual(noMethod, fromCapture) {
			t.Fatalf("a captured request without its method: %+v, with it: %+v", noMethod, fromCapture)
		}
		checkValidWalk(t, s, bare)
		// Escaped quotes, backslashes and brackets in strings skipped before the arguments.
		checkValidWalk(t, s, append(append([]byte(`{"request":{"id":"x\"},\\","meta":{"k":["]\"}",-1.5e3,true,null]},"method":"tools/call","params":{"name":"t\\","arguments":`), args...), "}}}"...))
		// The custom-dispatcher API's $mcp_parameters: the arguments themselves. An object
		// without a "request" member derives as the arguments do.
		var members map[string]json.RawMessage
		if json.Unmarshal(args, &members) == nil && members != nil && members["request"] == nil {
			if direct := misuse.FromParameters(s, args); !reflect.DeepEqual(direct, got) {
				t.Fatalf("arguments as $mcp_parameters: %+v, as arguments: %+v", direct, got)
			}
			checkValidWalk(t, s, args)
		}
		_ = misuse.SchemaTruncated(schema)
	})
}

// FuzzFromResponse feeds arbitrary tool results. Seeds: testdata/fuzz/FuzzFromResponse.
func FuzzFromResponse(f *testing.F) {
	f.Add([]byte(`{"content":[{"type":"text","text":"Ignored input keys: \"a\", b. x"}]}`))
	f.Fuzz(func(t *testing.T, response []byte) {
		keys, total, ok := misuse.FromResponse(response)
		if !ok && (keys != nil || total != 0) {
			t.Fatalf("not ok with keys %q, total %d", keys, total)
		}
		if ok {
			checkIgnoredKeys(t, misuse.IgnoredKeys{Keys: keys, Total: total, Source: misuse.SourceResponse})
			if len(keys) == 0 {
				t.Fatal("ok without keys")
			}
		}
	})
}

// FuzzClassifyError feeds arbitrary messages. Seeds: testdata/fuzz/FuzzClassifyError.
func FuzzClassifyError(f *testing.F) {
	f.Add("MCP error -32602: Input validation error: Invalid arguments for tool get-sum: Expected number, received string at a")
	f.Fuzz(func(t *testing.T, msg string) {
		c := misuse.ClassifyError(msg)
		switch c {
		case misuse.ClassNone:
			if strings.TrimSpace(msg) != "" {
				t.Fatalf("no class for %q", msg)
			}
		case misuse.ClassValidationType, misuse.ClassValidationRequired, misuse.ClassValidationUnknownKey,
			misuse.ClassValidationOther, misuse.ClassUnknownTool, misuse.ClassOther:
		default:
			t.Fatalf("class %q", c)
		}
		_ = utf8.ValidString(msg)
	})
}

// overLimitByTokens is CheckSchema's answer computed another way, over encoding/json's
// tokens: the first limit the text passes in token order; ok false when encoding/json
// refuses the text.
func overLimitByTokens(schema []byte, lim misuse.SchemaLimits) (o *misuse.OverLimit, ok bool) {
	if len(schema) > lim.MaxBytes {
		return &misuse.OverLimit{Limit: misuse.LimitBytes, Max: lim.MaxBytes, Seen: len(schema)}, true
	}
	type level struct {
		object bool
		tokens int // names and values read in an object
	}
	var stack []level
	members := 0
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil, true
		}
		if err != nil {
			return nil, false
		}
		isName := false
		if n := len(stack); n > 0 && stack[n-1].object {
			if _, str := tok.(string); str && stack[n-1].tokens%2 == 0 {
				isName = true
			}
		}
		if d, delim := tok.(json.Delim); delim && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if n := len(stack); n > 0 {
				stack[n-1].tokens++ // the closed value
			}
			continue
		}
		if isName {
			top := &stack[len(stack)-1]
			if inObject := top.tokens/2 + 1; inObject > lim.MaxProperties {
				return &misuse.OverLimit{Limit: misuse.LimitProperties, Max: lim.MaxProperties, Seen: inObject}, true
			}
			if members++; members > lim.MaxMembers {
				return &misuse.OverLimit{Limit: misuse.LimitMembers, Max: lim.MaxMembers, Seen: members}, true
			}
			top.tokens++
			continue
		}
		if d, delim := tok.(json.Delim); delim {
			stack = append(stack, level{object: d == '{'})
			if len(stack) > lim.MaxDepth {
				return &misuse.OverLimit{Limit: misuse.LimitDepth, Max: lim.MaxDepth, Seen: len(stack)}, true
			}
			continue
		}
		if n := len(stack); n > 0 {
			stack[n-1].tokens++
		}
	}
}

// FuzzCheckSchema: CheckSchema, with small limits so that each is reached, agrees with the
// same limits counted over encoding/json's tokens on every text encoding/json reads.
func FuzzCheckSchema(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"a":{"type":"string"},"b":{"items":[{}]}}}`))
	f.Fuzz(func(t *testing.T, schema []byte) {
		lim := misuse.SchemaLimits{MaxBytes: 200, MaxProperties: 3, MaxMembers: 6, MaxDepth: 4, MaxToolsPerListing: 1}
		want, ok := overLimitByTokens(schema, lim)
		if !ok || !json.Valid(schema) {
			return // not one JSON text: CompileSchema refuses it whatever CheckSchema says
		}
		got := misuse.CheckSchema(schema, lim)
		if (got == nil) != (want == nil) || got != nil && *got != *want {
			t.Fatalf("CheckSchema(%q) = %+v, want %+v", schema, got, want)
		}
	})
}

// FuzzListings feeds a listing page whose one tool has an arbitrary input schema (with small
// limits, so that each is reached, and the default time budget), then a call of that tool
// with arbitrary arguments. Nothing may panic; the call gets the tool's schema (never unknown);
// its outcome keeps its invariants and is the same when judged again (the verdict kept, from
// the cache or on the schema's entry); a schema over a limit is not measured for that reason
// and one within them derives as CompileSchema's. Seeds: testdata/fuzz/FuzzListings (the
// SDK fixtures' schemas, a 2,000-key properties object, $ref cycles).
func FuzzListings(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"a":{"$ref":"#"}},"additionalProperties":false}`), []byte(`{"a":{"a":{"b":1}},"c":2}`))
	f.Fuzz(func(t *testing.T, schema, args []byte) {
		lim := misuse.SchemaLimits{MaxBytes: 64 << 10, MaxProperties: 3000, MaxMembers: 8000, MaxDepth: 32, MaxToolsPerListing: 4}
		l := misuse.NewListings(misuse.ListingsConfig{Schemas: lim})
		at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		l.Observe(misuse.ListingPage{Server: "s", Version: "1", Session: "a", At: at, Pos: misuse.NoPosition,
			Names: []string{"t"}, Tools: []misuse.ServedTool{{Name: "t", InputSchema: schema}}})
		c := misuse.CallAt{Server: "s", Version: "1", Session: "a", At: at.Add(time.Second), Pos: misuse.NoPosition}
		var outcomes [2]misuse.IgnoredKeys
		for i := range outcomes {
			v, err := l.JudgeContext(context.Background(), c, "t")
			if err != nil || v.Unknown || v.Schema == nil || v.From != misuse.ServedSession {
				t.Fatalf("judge %d: %+v, %v; want the session's schema", i, v, err)
			}
			outcomes[i] = misuse.Derive(misuse.Call{Parameters: args, Schema: v.Schema})
			checkIgnoredKeys(t, outcomes[i])
		}
		if !reflect.DeepEqual(outcomes[0], outcomes[1]) {
			t.Fatalf("judged again: %+v, then %+v", outcomes[0], outcomes[1])
		}
		got := outcomes[0]
		if o := misuse.CheckSchema(schema, lim); o != nil {
			if got.Source != misuse.SourceNotMeasurable || got.Reason != misuse.ReasonSchemaOverLimit {
				t.Fatalf("over the %s limit: %+v, want %s", o.Limit, got, misuse.ReasonSchemaOverLimit)
			}
			return
		}
		if got.Reason == misuse.ReasonSchemaOverLimit {
			return // over the time budget (a loaded machine): a verdict of its own
		}
		s, _ := misuse.CompileSchema(schema)
		if want := misuse.Derive(misuse.Call{Parameters: args, Schema: s}); !reflect.DeepEqual(got, want) {
			t.Fatalf("through the listing %+v, compiled alone %+v", got, want)
		}
	})
}
