package gen

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/mcpulse/mcpulse/ingest"
)

func mustJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return m
}

func TestIgnoredKeys(t *testing.T) {
	cases := []struct {
		name   string
		schema string
		args   string
		want   []string
		total  int
	}{
		{
			name:   "flat: misnamed and invented keys",
			schema: `{"type":"object","properties":{"owner":{"type":"string"},"pullNumber":{"type":"number"}},"required":["owner"]}`,
			args:   `{"owner":"o","pull_number":3,"verbose":true}`,
			want:   []string{"pull_number", "verbose"},
			total:  2,
		},
		{
			name:   "nothing ignored",
			schema: `{"type":"object","properties":{"a":{"type":"string"}}}`,
			args:   `{"a":"x"}`,
			want:   nil,
		},
		{
			name: "parameters named required, properties and type are ordinary parameters",
			schema: `{"type":"object","required":["type"],"properties":{
				"required":{"type":"boolean"},
				"type":{"type":"string"},
				"properties":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}}`,
			args:  `{"required":true,"type":"t","properties":{"name":"n","nmae":"typo"},"items":[1]}`,
			want:  []string{"items", "properties.nmae"},
			total: 2,
		},
		{
			name: "nested objects and arrays of objects, by index",
			schema: `{"type":"object","properties":{"filters":{"type":"object","additionalProperties":false,"properties":{
				"groups":{"type":"array","items":{"type":"object","properties":{
					"properties":{"type":"array","items":{"type":"object","properties":{"key":{"type":"string"},"value":{}}}},
					"rollout_percentage":{"type":"number"}}}}}}}}`,
			args: `{"filters":{"groups":[
				{"properties":[{"key":"k","value":{"anything":1}},{"kye":"typo"}],"rollout_percentage":10},
				{"rollout":50}],"date_from":"-7d"},"owner":"o"}`,
			want:  []string{"filters.date_from", "filters.groups.0.properties.1.kye", "filters.groups.1.rollout", "owner"},
			total: 4,
		},
		{
			name: "additionalProperties true, schema, false",
			schema: `{"type":"object","properties":{
				"params":{"type":"object","additionalProperties":true},
				"labels":{"type":"object","additionalProperties":{"type":"object","properties":{"color":{"type":"string"}}}},
				"strict":{"type":"object","properties":{},"additionalProperties":false}}}`,
			args:  `{"params":{"x":1,"y":{"z":2}},"labels":{"bug":{"color":"red","colour":"red"}},"strict":{"k":1}}`,
			want:  []string{"labels.bug.colour", "strict.k"},
			total: 2,
		},
		{
			name:   "a value with no key constraints is taken whole below the top level",
			schema: `{"type":"object","properties":{"content":{},"inputs":{"type":"object"},"declared_empty":{"type":"object","properties":{}}}}`,
			args:   `{"content":{"type":"doc","x":1},"inputs":{"a":1},"declared_empty":{"b":2}}`,
			want:   []string{"declared_empty.b"},
			total:  1,
		},
		{
			name:   "top level {} means no parameters",
			schema: `{}`,
			args:   `{"a":1,"b":{"c":2}}`,
			want:   []string{"a", "b"},
			total:  2,
		},
		{
			name: "anyOf / oneOf alternatives merged",
			schema: `{"type":"object","properties":{
				"target":{"anyOf":[{"type":"object","properties":{"id":{"type":"number"}},"additionalProperties":false},{"type":"null"}]},
				"item":{"oneOf":[{"type":"object","properties":{"node_id":{"type":"string"}}},{"type":"object","properties":{"item_id":{"type":"number"}}}]}}}`,
			args:  `{"target":{"id":1,"name":"n"},"item":{"node_id":"a","item_id":2,"issue":3}}`,
			want:  []string{"item.issue", "target.name"},
			total: 2,
		},
		{
			name:   "control characters and line separators masked, markup kept",
			schema: `{"type":"object","properties":{}}`,
			args:   `{"note\nfield":1,"line\u2028break":1,"<img src=x onerror=alert(1)>":1,"del\u007f":1,"c1\u0085":1}`,
			want:   []string{"<img src=x onerror=alert(1)>", "c1?", "del?", "line?break", "note?field"},
			total:  5,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, total := ignoredKeys(mustJSON(t, c.schema), mustJSON(t, c.args))
			if !reflect.DeepEqual(got, c.want) || total != c.total {
				t.Errorf("ignoredKeys = %q (total %d), want %q (total %d)", got, total, c.want, c.total)
			}
		})
	}
}

func TestIgnoredKeysCap(t *testing.T) {
	args := map[string]any{}
	for i := range 25 {
		args[fmt.Sprintf("k%02d", i)] = i
	}
	got, total := ignoredKeys(map[string]any{"type": "object", "properties": map[string]any{}}, args)
	if total != 25 || len(got) != maxIgnoredKeys || got[0] != "k00" || got[19] != "k19" {
		t.Errorf("got %d keys %q, total %d; want k00..k19, total 25", len(got), got, total)
	}
}

// maskControl restates ingest.MaskControl on purpose; they must agree.
func TestMaskControlAgreesWithIngest(t *testing.T) {
	for _, s := range []string{"plain", "a\nb", "tab\tx", "\x00\x1f\x7f\u0080\u009f\u00a0", "l\u2028s\u2029p", "é🚀<>&\"\\"} {
		if got, want := maskControl(s), ingest.MaskControl(s); got != want {
			t.Errorf("maskControl(%q) = %q, ingest says %q", s, got, want)
		}
	}
}

func TestEmbeddedSchemas(t *testing.T) {
	c, err := loadTools()
	if err != nil {
		t.Fatal(err)
	}
	servers := map[string]int{}
	for _, tl := range c.byName {
		servers[tl.Server]++
	}
	for _, s := range []string{"github-mcp-server", "posthog", "sentry-mcp", "kubernetes-mcp-server", "posthog-mcp-standalone"} {
		if servers[s] == 0 {
			t.Errorf("no tools from %s", s)
		}
	}
	if len(c.byName) < 40 || c.exec == nil || len(c.execOK) < 5 {
		t.Errorf("%d tools, exec %v, %d exec targets", len(c.byName), c.exec != nil, len(c.execOK))
	}
	// Every tool's own valid arguments have no ignored keys.
	g, _ := newGenerator(Config{Events: 1, Seed: 3})
	for _, name := range sortedMapKeys(c.byName) {
		for range 50 {
			args := g.genArgs(c.byName[name].Schema)
			if keys, _ := ignoredKeys(c.byName[name].Schema, args); len(keys) > 0 {
				t.Fatalf("%s: generated arguments have ignored keys %q", name, keys)
			}
		}
	}
	// Nested reports exist: dotted paths and array indexes.
	var dotted, indexed bool
	for range 3000 {
		tl := c.tools[g.rng.IntN(len(c.tools))]
		args := g.genArgs(tl.Schema)
		g.injectMistakes(tl.Schema, args)
		keys, _ := ignoredKeys(tl.Schema, args)
		if len(clientInjected.Counted(keys)) == 0 {
			t.Fatalf("%s: a mistake left no counted ignored key", tl.Name)
		}
		for _, k := range keys {
			dotted = dotted || containsDot(k)
			indexed = indexed || containsIndex(k)
		}
	}
	if !dotted || !indexed {
		t.Errorf("mistakes never produced nested paths (dotted %v, indexed %v)", dotted, indexed)
	}
}

func containsDot(s string) bool {
	for i := range len(s) {
		if s[i] == '.' {
			return true
		}
	}
	return false
}

func containsIndex(s string) bool {
	for i := 0; i+2 < len(s); i++ {
		if s[i] == '.' && s[i+1] >= '0' && s[i+1] <= '9' && (s[i+2] == '.' || s[i+2] >= '0' && s[i+2] <= '9') {
			return true
		}
	}
	return false
}
