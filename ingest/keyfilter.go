package ingest

import (
	"fmt"
	"strings"
)

// DefaultClientInjectedKeys are the dotted-path patterns of input keys that MCP clients add to
// tool arguments on their own: the MCP spec's reserved `_meta` object (some clients put it in
// the arguments rather than the request params) and `toolCallId`, which AI SDK based clients
// attach to every call. They stay in the raw rows but are not counted as agent mistakes.
var DefaultClientInjectedKeys = []string{"_meta", "toolCallId"}

// KeyFilter tells which ignored-key paths were injected by the MCP client rather than sent by
// the agent. A pattern is a dotted path whose segments are literal or "*" (any one segment);
// it matches a key path equal to it or below it ("_meta" matches "_meta.progressToken").
// The zero value matches nothing.
type KeyFilter struct {
	patterns [][]string
}

// NewKeyFilter compiles dotted-path patterns. An empty pattern or an empty segment is an error.
func NewKeyFilter(patterns []string) (*KeyFilter, error) {
	f := &KeyFilter{}
	for _, p := range patterns {
		segs := strings.Split(p, ".")
		for _, s := range segs {
			if s == "" {
				return nil, fmt.Errorf("client-injected key pattern %q: empty path segment", p)
			}
		}
		f.patterns = append(f.patterns, segs)
	}
	return f, nil
}

// MustKeyFilter is NewKeyFilter for patterns known at compile time; it panics on a bad pattern.
func MustKeyFilter(patterns []string) *KeyFilter {
	f, err := NewKeyFilter(patterns)
	if err != nil {
		panic(err)
	}
	return f
}

// ClientInjected reports whether keyPath matches one of the patterns.
func (f *KeyFilter) ClientInjected(keyPath string) bool {
	if f == nil || len(f.patterns) == 0 {
		return false
	}
	segs := strings.Split(keyPath, ".")
next:
	for _, p := range f.patterns {
		if len(p) > len(segs) {
			continue
		}
		for i, s := range p {
			if s != "*" && s != segs[i] {
				continue next
			}
		}
		return true
	}
	return false
}

// Counted returns the keys that are agent mistakes: keys minus the client-injected ones, in
// their original order. It returns keys itself when nothing is filtered.
func (f *KeyFilter) Counted(keys []string) []string {
	var out []string
	for i, k := range keys {
		if f.ClientInjected(k) {
			if out == nil {
				out = append(make([]string, 0, len(keys)), keys[:i]...)
			}
			continue
		}
		if out != nil {
			out = append(out, k)
		}
	}
	if out == nil {
		return keys
	}
	return out
}
