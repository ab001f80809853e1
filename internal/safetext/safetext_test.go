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

func TestBound(t *testing.T) {
	short := strings.Repeat("a", MaxName)
	if got := Bound(short, MaxName); got != short {
		t.Fatalf("a value at the bound changed: %q", got)
	}
	if Bounded(short) {
		t.Fatal("a value at the bound reads as bounded")
	}
	long := strings.Repeat("k", 900*1024)
	got := Bound(long, MaxKeyPath)
	want := strings.Repeat("k", MaxKeyPath-len("…[921600 bytes, sha256:123456789012]")) + "…[921600 bytes, sha256:"
	if len(got) > MaxKeyPath || !strings.HasPrefix(got, want) || !Bounded(got) {
		t.Fatalf("Bound(900 KB, %d) = %d bytes %.80q…, want at most the bound, starting %.80q", MaxKeyPath, len(got), got[len(got)-60:], want[len(want)-60:])
	}
	if again := Bound(got, MaxKeyPath); again != got {
		t.Fatalf("Bound is not idempotent: %q", again)
	}
	if Bound(long, MaxKeyPath) != got {
		t.Fatal("Bound is not deterministic")
	}
	// Two values sharing the prefix that is kept stay distinct.
	other := long[:len(long)-1] + "l"
	if b := Bound(other, MaxKeyPath); b == got || len(b) != len(got) {
		t.Fatalf("two long values sharing a prefix bound alike: %q", b[len(b)-60:])
	}
	// The cut falls on a character boundary, whatever the width of the characters.
	for _, unit := range []string{"é", "表", "🙂", "\xff", "a\xbf\xbf\xbf"} {
		for _, limit := range []int{MaxName, MaxName + 1, MaxName + 2, MaxName + 3, 10} {
			s := strings.Repeat(unit, 2000)
			b := Bound(s, limit)
			if len(b) > max(limit, 64) || !Bounded(b) {
				t.Errorf("Bound(%q×2000, %d) = %d bytes, not bounded", unit, limit, len(b))
			}
			if utf8.ValidString(s) && !utf8.ValidString(b) {
				t.Errorf("Bound(%q×2000, %d) cut a character: %q", unit, limit, b)
			}
		}
	}
}

func FuzzBound(f *testing.F) {
	f.Add("hx-rlo\u202egnp.exe", 70)
	f.Add(strings.Repeat("表", 100), 64)
	f.Add(strings.Repeat("\xbf", 100), 65)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		limit = 64 + abs(limit)%2048
		b := Bound(s, limit)
		switch {
		case len(s) <= limit && b != s:
			t.Fatalf("Bound changed a value within its bound: %q", b)
		case len(b) > limit:
			t.Fatalf("Bound(%d bytes, %d) = %d bytes", len(s), limit, len(b))
		case len(s) > limit && (!Bounded(b) || !strings.HasPrefix(s, b[:strings.LastIndex(b, "…[")])):
			t.Fatalf("Bound(%q, %d) = %q: no marker, or not a prefix", s, limit, b)
		case utf8.ValidString(s) && !utf8.ValidString(b):
			t.Fatalf("Bound cut a character: %q", b)
		case Bound(b, limit) != b:
			t.Fatalf("Bound not idempotent on %q", b)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -(n + 1)
	}
	return n
}
