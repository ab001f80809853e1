package safetext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"hx-rlo\u202egnp.exe":          `hx-rlo\u202egnp.exe`,
		"plain_tool-name.v2":           "plain_tool-name.v2",
		"Größe 表 🙂 a b":                "Größe 表 🙂 a b",
		"a\u2066b\u2069c\u200ed\u061c": `a\u2066b\u2069c\u200ed\u061c`,
		"line\nbreak\ttab\x00nul\x7f":  `line\nbreak\ttab\x00nul\x7f`,
		"c1\u0085 ls\u2028 ps\u2029":   `c1\u0085 ls\u2028 ps\u2029`,
		"zw\u200b\ufeff":               `zw\u200b\ufeff`,
		"tag\U000E0041":                `tag\U000e0041`,
		"bad\xffutf8":                  `bad\ufffdutf8`,
		"":                             "",
	} {
		got := Escape(in)
		if got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
		if strings.IndexFunc(got, Hidden) >= 0 || !utf8.ValidString(got) {
			t.Errorf("Escape(%q) = %q still holds a hidden character", in, got)
		}
		if again := Escape(got); again != got {
			t.Errorf("Escape is not idempotent on %q: %q", got, again)
		}
	}
}

func FuzzEscape(f *testing.F) {
	for _, s := range []string{"hx-rlo\u202egnp.exe", "a\xffb", "\u2028", "ok"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Escape(s)
		if strings.IndexFunc(got, Hidden) >= 0 || !utf8.ValidString(got) {
			t.Fatalf("Escape(%q) = %q holds a hidden character", s, got)
		}
		if Escape(got) != got {
			t.Fatalf("Escape(%q) not idempotent", s)
		}
	})
}

func TestQuoteShowsAShortEscapedPrefix(t *testing.T) {
	long := strings.Repeat("x", 100*1024)
	for in, want := range map[string]string{
		"yesterday":                   `"yesterday"`,
		`say "hi"\`:                   `"say \"hi\"\\"`,
		"hx-rlo\u202egnp\n\xff\ufffd": `"hx-rlo\u202egnp\n\xff\ufffd"`,
		"":                            `""`,
		strings.Repeat("é", 64):       `"` + strings.Repeat("é", 64) + `"`,
		strings.Repeat("é", 65):       `"` + strings.Repeat("é", 64) + `"… (130 bytes)`,
		long:                          `"` + long[:64] + `"… (102400 bytes)`,
	} {
		got := Quote(in)
		if got != want {
			t.Errorf("Quote(%.80q) = %q, want %q", in, got, want)
		}
		if strings.IndexFunc(got, Hidden) >= 0 || !utf8.ValidString(got) {
			t.Errorf("Quote(%.80q) = %q holds a hidden character", in, got)
		}
	}
}
