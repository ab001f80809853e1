package details

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// Labelled is one hand-labelled intent of intents/testdata/labelled.jsonl: its text and the
// kinds of identifying detail a reader finds in it (a detail inside a URL with credentials
// counts as that URL only).
type labelled struct {
	Text  string `json:"text"`
	Kinds []Kind `json:"kinds"`
}

func readLabelled(t testing.TB) []labelled {
	f, err := os.Open("../testdata/labelled.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []labelled
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		var l labelled
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		for _, k := range l.Kinds {
			if !slices.Contains(Kinds(), k) {
				t.Fatalf("line %d: unknown kind %q", n, k)
			}
		}
		out = append(out, l)
	}
	return out
}

// TestPrecisionRecallPerKind reports, per kind, precision and recall of Find over the
// hand-labelled set and holds both to 0.95.
func TestPrecisionRecallPerKind(t *testing.T) {
	set := readLabelled(t)
	if len(set) < 200 {
		t.Fatalf("%d labelled intents, want at least 200", len(set))
	}
	type counts struct{ tp, fp, fn int }
	per := map[Kind]*counts{}
	for _, k := range Kinds() {
		per[k] = &counts{}
	}
	for _, l := range set {
		got := Find(l.Text)
		for _, k := range Kinds() {
			g, w := slices.Contains(got, k), slices.Contains(l.Kinds, k)
			switch {
			case g && w:
				per[k].tp++
			case g:
				per[k].fp++
				t.Logf("false %s: %q", k, l.Text)
			case w:
				per[k].fn++
				t.Logf("missed %s: %q", k, l.Text)
			}
		}
	}
	for _, k := range Kinds() {
		c := per[k]
		precision := float64(c.tp) / float64(max(c.tp+c.fp, 1))
		recall := float64(c.tp) / float64(max(c.tp+c.fn, 1))
		t.Logf("%-16s labelled %3d  precision %.3f  recall %.3f  (tp %d, fp %d, fn %d)", k, c.tp+c.fn, precision, recall, c.tp, c.fp, c.fn)
		if c.tp+c.fn < 8 {
			t.Errorf("%s: only %d labelled intents hold it, want at least 8", k, c.tp+c.fn)
		}
		if precision < 0.95 || recall < 0.95 {
			t.Errorf("%s: precision %.3f, recall %.3f; want both at least 0.95", k, precision, recall)
		}
	}
}

// TestMaskHidesEveryDetail checks that no labelled detail survives Mask: the masked text has
// no detail left and keeps a placeholder per kind found.
func TestMaskHidesEveryDetail(t *testing.T) {
	for _, l := range readLabelled(t) {
		masked, kinds := Mask(l.Text)
		if again := Find(masked); len(again) != 0 {
			t.Errorf("%q masked as %q still holds %v", l.Text, masked, again)
		}
		for _, k := range kinds {
			p := Patterns[slices.IndexFunc(Patterns, func(p *Pattern) bool { return p.Kind == k })]
			if !strings.Contains(masked, p.Placeholder) {
				t.Errorf("%q masked as %q lacks %s", l.Text, masked, p.Placeholder)
			}
		}
		if len(kinds) == 0 && masked != l.Text {
			t.Errorf("%q without details was changed to %q", l.Text, masked)
		}
	}
}

func TestFindExamples(t *testing.T) {
	for _, c := range []struct {
		text string
		want []Kind
	}{
		{"", nil},
		{"build 10.2.1.4 crashes", nil},
		{"host 10.2.1.4 is down", []Kind{IPAddress}},
		{"key phc_0123456789abcdefABCDEF", []Kind{APIKey}},
		{"me@x.io from /home/me", []Kind{Email, HomePath}},
	} {
		if got := Find(c.text); !slices.Equal(got, c.want) {
			t.Errorf("Find(%q) = %v, want %v", c.text, got, c.want)
		}
	}
}

// BenchmarkMask is the consumer's cost per tool call: Mask over the labelled intents in turn.
func BenchmarkMask(b *testing.B) {
	set := readLabelled(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Mask(set[i%len(set)].Text)
	}
}

// BenchmarkMaskText is Mask's cost per text (ns/op is per text), over texts without details
// ("clean") and with them ("details") apart: the labelled intents, which hold many near
// misses (URLs without credentials, version numbers, dates), and the demo generator's intents,
// mostly plain English as agents write it.
func BenchmarkMaskText(b *testing.B) {
	var sets [4][]string // labelled clean, labelled with details, demo clean, demo with details
	for _, l := range readLabelled(b) {
		i := min(len(l.Kinds), 1)
		sets[i] = append(sets[i], l.Text)
	}
	for _, s := range demoIntents {
		_, kinds := referenceMask(s)
		i := 2 + min(len(kinds), 1)
		sets[i] = append(sets[i], s)
	}
	for i, name := range []string{"labelled-clean", "labelled-details", "demo-clean", "demo-details"} {
		set := sets[i]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				Mask(set[i%len(set)])
			}
		})
	}
}
