package misuse_test

import (
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/internal/safetext"
	"github.com/mcpulse/mcpulse/misuse"
)

// A key of 900 KB is stored as a bounded, marked path whichever source names it, and two long
// keys that share their first kilobyte stay two paths.
func TestKeyPathsAreBounded(t *testing.T) {
	long := strings.Repeat("k", 900*1024)
	other := long[:len(long)-1] + "\u2028"
	check := func(source string, keys []string) {
		t.Helper()
		if len(keys) != 2 {
			t.Fatalf("%s: %d keys, want 2", source, len(keys))
		}
		for _, k := range keys {
			if len(k) > safetext.MaxKeyPath || !safetext.Bounded(k) || !strings.HasPrefix(k, "kkkk") {
				t.Errorf("%s: key of %d bytes, want at most %d and marked: %.40q…", source, len(k), safetext.MaxKeyPath, k[len(k)-40:])
			}
		}
		if keys[0] == keys[1] {
			t.Errorf("%s: two long keys bound alike", source)
		}
		if keys[0] != misuse.KeyPath(long) || keys[1] != misuse.KeyPath(other) {
			t.Errorf("%s: not bounded as KeyPath bounds it", source)
		}
	}
	args := `{"a":1,"` + long + `":1,"` + strings.ReplaceAll(other, "\u2028", `\u2028`) + `":2}`
	check("schema", derive(t, `{"type":"object","properties":{"a":{}}}`, args).Keys)
	check("reported", misuse.Derive(misuse.Call{Reported: true, ReportedKeys: []string{long, other}}).Keys)
	if k := misuse.KeyPath("series.0.math\n"); k != "series.0.math?" {
		t.Errorf("KeyPath of a short path = %q", k)
	}
}
