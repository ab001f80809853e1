package misuse

import (
	"bytes"
	"testing"
)

// FuzzMayReportKeys checks the one-pass prefilter against the two searches it replaces
// (seeds: testdata/fuzz/FuzzMayReportKeys).
func FuzzMayReportKeys(f *testing.F) {
	for _, s := range []string{
		``, `gnored`, `_ignoredKeys`, `xgnored_ignoredKeys`, `Ignored input keys: "a"`, `Ignored input key`,
		`_ignoredKey`, `gnoredgnored_ignoredKeys`, `{"content":[{"type":"text","text":"{\"_ignoredKeys\":[\"a\"]}"}]}`,
		`Ignored inputIgnored input keys`, `_Ignored input keys`, `xIgnored`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, response []byte) {
		want := bytes.Contains(response, []byte(ignoredKeysField)) || bytes.Contains(response, []byte(noticeWords))
		if got := mayReportKeys(response); got != want {
			t.Fatalf("mayReportKeys(%q) = %v, want %v", response, got, want)
		}
	})
}

// BenchmarkResponsePrefilter compares, on a 1 KB result that names no ignored keys (most
// results), the two searches FromResponse made with the one pass it makes.
func BenchmarkResponsePrefilter(b *testing.B) {
	response := []byte(`{"content":[{"type":"text","text":"` + string(bytes.Repeat([]byte("ten bytes "), 100)) + `"}],"isError":false}`)
	b.Run("two_searches", func(b *testing.B) {
		b.SetBytes(int64(len(response)))
		for b.Loop() {
			_ = bytes.Contains(response, []byte(ignoredKeysField)) || bytes.Contains(response, []byte(noticeWords))
		}
	})
	b.Run("one_pass", func(b *testing.B) {
		b.SetBytes(int64(len(response)))
		for b.Loop() {
			_ = mayReportKeys(response)
		}
	})
}
