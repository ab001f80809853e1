package schemacheck

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/demo/mcptest"
)

// The whole path a scheduled check takes: a real MCP server (the official Go SDK) serves a
// corpus set over Streamable HTTP and over stdio, LoadFromServer lists it page by page, and
// Check's figures equal the ones Node computed from the corpus files on its own
// (testdata/jsvectors.json, "corpus": JSON.stringify lengths after injection, and the nested
// description coverage written in JavaScript by make-vectors.js).
func TestCheckOfServedSetsEqualsNodeFigures(t *testing.T) {
	node := jsVectors(t).Corpus
	sets := []string{"github", "posthog", "sentry", "kubernetes-core", "kubernetes-full"}
	for _, set := range sets {
		prefix := mcptest.Sets[set]
		want := map[string]jsVectorCorpus{}
		for _, c := range node {
			if c.File == prefix || strings.HasPrefix(c.File, prefix+"/") {
				want[c.Name] = c
			}
		}
		if len(want) == 0 {
			t.Fatalf("%s: no Node figures for %s", set, prefix)
		}
		var wantOversized, wantNested, wantDescribed int
		for _, w := range want {
			if w.InjectedLength >= DefaultCharLimit {
				wantOversized++
			}
			wantNested += w.Nested
			wantDescribed += w.Described
		}
		served, err := mcptest.LoadSet(corpusRoot, set)
		if err != nil {
			t.Fatal(err)
		}
		srv := newCorpusHTTPServer(t, served)
		t.Setenv(stdioServerEnv, "corpus")
		sources := map[string]Source{
			"http":  {URL: srv.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer test-token"}, Timeout: 20 * time.Second},
			"stdio": {Command: []string{os.Args[0], corpusRoot, set, strconv.Itoa(testPageSize)}, Timeout: 20 * time.Second},
		}
		for transport, src := range sources {
			t.Run(set+"/"+transport, func(t *testing.T) {
				tools, err := LoadFromServer(context.Background(), src)
				if err != nil {
					t.Fatal(err)
				}
				r := Check(tools, Settings{ServerName: set})
				if r.Tools != len(want) || r.Oversized != wantOversized || r.NestedProperties != wantNested || r.DescribedNestedProperties != wantDescribed {
					t.Errorf("tools %d, oversized %d, nested %d/%d; Node: %d, %d, %d/%d",
						r.Tools, r.Oversized, r.DescribedNestedProperties, r.NestedProperties, len(want), wantOversized, wantDescribed, wantNested)
				}
				wantCoverage := 1.0
				if wantNested > 0 {
					wantCoverage = float64(wantDescribed) / float64(wantNested)
				}
				if r.NestedDescriptionCoverage != wantCoverage {
					t.Errorf("coverage %v, Node %v", r.NestedDescriptionCoverage, wantCoverage)
				}
				for _, tr := range r.PerTool {
					w, ok := want[tr.Name]
					switch {
					case !ok:
						t.Errorf("tool %q served but not in the corpus", tr.Name)
					case tr.SchemaChars != w.InjectedLength || tr.Nested != w.Nested || tr.Described != w.Described ||
						tr.FullNested != w.FullNested || tr.FullDescribed != w.FullDescribed:
						t.Errorf("%s: size %d, coverage %d/%d, full %d/%d; Node %d, %d/%d, %d/%d", tr.Name,
							tr.SchemaChars, tr.Described, tr.Nested, tr.FullDescribed, tr.FullNested,
							w.InjectedLength, w.Described, w.Nested, w.FullDescribed, w.FullNested)
					}
				}
			})
		}
	}
}
