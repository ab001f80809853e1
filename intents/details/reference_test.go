package details

import (
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"
)

// referenceQuick is each kind's test, as the straightforward scan had it, without which none
// of the kind's expressions is tried: s is the text, digits how many ASCII digits it has.
var referenceQuick = map[Kind]func(s string, digits int) bool{
	URLCredentials: func(s string, _ int) bool { return strings.Contains(s, "://") },
	Email:          func(s string, _ int) bool { return strings.IndexByte(s, '@') >= 0 },
	HomePath: func(s string, _ int) bool {
		return strings.Contains(s, "/home/") || strings.Contains(s, "/Users/") || strings.Contains(s, "/export/home/") ||
			strings.Contains(s, `:\`)
	},
	IPAddress: func(_ string, digits int) bool { return digits > 0 },
	Phone:     func(_ string, digits int) bool { return digits >= 7 },
	ID:        func(_ string, digits int) bool { return digits >= 8 },
}

// referenceMask is Mask done the straightforward way, which Mask must agree with on every
// text: per row, lowercase the text for the needles, count its digits, and run every
// expression the row's test and needles let through (MatchString, then ReplaceAll).
func referenceMask(text string) (string, []Kind) {
	var kinds []Kind
	digits := referenceDigits(text)
	cur, lower := text, ""
	for _, p := range Patterns {
		if q := referenceQuick[p.Kind]; q != nil && !q(cur, digits) {
			continue
		}
		found := false
		for i, re := range referenceRegexps(p) {
			if p.Needles != nil {
				if lower == "" {
					lower = strings.ToLower(cur)
				}
				if !slices.ContainsFunc(p.Needles[i], func(n string) bool { return strings.Contains(lower, n) }) {
					continue
				}
			}
			var next string
			ok := false
			if p.Reject == nil {
				if ok = re.MatchString(cur); ok {
					next = re.ReplaceAllLiteralString(cur, p.Placeholder)
				}
			} else {
				var b strings.Builder
				last := 0
				for _, m := range re.FindAllStringIndex(cur, -1) {
					if p.Reject(cur[:m[0]], cur[m[0]:m[1]], cur[m[1]:]) {
						continue
					}
					ok = true
					b.WriteString(cur[last:m[0]])
					b.WriteString(p.Placeholder)
					last = m[1]
				}
				b.WriteString(cur[last:])
				next = b.String()
			}
			if ok {
				cur, found, lower = next, true, ""
			}
		}
		if found {
			kinds = append(kinds, p.Kind)
			digits = referenceDigits(cur)
		}
	}
	return cur, kinds
}

var referenceCompiled sync.Map // *Pattern to []*regexp.Regexp

// referenceRegexps compiles p's expressions as the straightforward scan runs them: one
// alternation without Needles, else each on its own.
func referenceRegexps(p *Pattern) []*regexp.Regexp {
	if res, ok := referenceCompiled.Load(p); ok {
		return res.([]*regexp.Regexp)
	}
	var res []*regexp.Regexp
	if p.Needles == nil {
		res = []*regexp.Regexp{regexp.MustCompile(strings.Join(p.Exprs, "|"))}
	} else {
		for _, e := range p.Exprs {
			res = append(res, regexp.MustCompile(e))
		}
	}
	referenceCompiled.Store(p, res)
	return res
}

func referenceDigits(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			n++
		}
	}
	return n
}

// demoIntents are the demo generator's intents (sdkIntents in demo/gen/sdk.go).
var demoIntents = []string{
	"Looking up the records the user asked about so the assistant can answer their question about recent activity.",
	"Checking the current state of the project before making the change the user requested in this conversation.",
	"Gathering the numbers for a weekly report so the user can review how their product is doing.",
	"Finding the item the user described so the assistant can update it with the details they gave.",
	"Verifying a previous step worked as expected before moving on to the next part of the task.",
	"Collecting context about an error the user reported to help diagnose what went wrong and why.",
	"Listing the available resources so the assistant can pick the right one for the user's request.",
	"Reading the relevant file so the assistant can explain the code the user is asking about.",
	"Looking up the person jane.doe@example.com so the assistant can show her recent events.",
	"Checking why requests from 203.0.113.42 fail before answering the user's question.",
	"Reading /home/mkowalski/app/config.ts that the user mentioned to explain the error.",
	"Testing the capture call with key phc_Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2 the user pasted.",
}

// edgeCases are texts near the expressions' edges, where a fast test could disagree with
// the expressions: case, non-ASCII letters that lowercase (or fold) to ASCII ones, near
// misses of every shape.
var edgeCases = []string{
	"",
	"a",
	"BEARER abcdefghijklmnopqrstuvwxyz0123",
	"Authorization: Bearer    abcdefghijklmnopqrstuvwxyz0123==",
	"bearer short",
	"BeArEr\tabcdefghijklmnopqrstuvwxyz0123",
	"KEY=abcdefghijklmnopqrstu",
	"API_KEY: 'abcdefghijklmnopqrstu'",
	"apikey=abcdefghijklmnopqrstu and Api-Key = abcdefghijklmnopqrstu",
	"TOKEN   :   abcdefghijklmnopqrstu",
	"Password=abcdefghijklmnopqrstu",
	"my secret: abcdefghijklmnop!",
	"the key: is here",
	"\u212Aey=abcdefghijklmnopqrstu",               // KELVIN SIGN lowercases to k
	"to\u212Aen: abcdefghijklmnopqrstu",            // KELVIN SIGN inside the word
	"\u017Fecret=abcdefghijklmnopqrstu",            // LONG S folds to s but does not lowercase to it
	"\u017Fecret=abcdefghijklmnopqrstu the key",    // ... the needle elsewhere lets the expression run
	"pa\u017F\u017Fword=abcdefghijklmnopqrstu",     // no needle
	"pa\u017F\u017Fword=abcdefghijklmnopqrstu KEY", // needle in caps
	"\u0130key=abcdefghijklmnopqrstu",              // capital I with dot above lowercases to i
	"AP\u0130_KEY=abcdefghijklmnopqrstu",
	"BEAR\u212AER abcdefghijklmnopqrstuvwxyz",
	"invalid \xff\xfekey=abcdefghijklmnopqrstu \xe2\x84",
	"\xe2\x84\xaaey=abcdefghijklmnopqrstu",
	"\xe2\x84key=abcdefghijklmnopqrstu",
	"Jane.Doe@Example.COM wrote",
	"MAIL ME AT ANA@EXAMPLE.ORG",
	"user@localhost is no email",
	"a@b.c",
	"fe80::1ff:fe23:4567:890a",
	"FE80::1FF:FE23:4567:890A",
	"2001:0db8:85a3:0000:0000:8a2e:0370:7334",
	"2001:DB8:85A3:0:0:8A2E:370:7334",
	"dead:beef:cafe:babe:dead:beef:cafe:babe",
	"dead:beef:cafe:babe:dead:beef:cafe:babe 1",
	"listen on ::1 port 8080",
	"listen on [::1]:8080",
	"(::1)",
	"::1",
	"a::1",
	"std::vector and Foo::bar()",
	"abcd::",
	"1::",
	"version 10.2.1.4",
	"v10.2.1.4",
	"Version   10.2.1.4 and 10.2.1.5",
	"build 4.0.0.1 on 192.168.0.1",
	"SDK 1.2.3.4",
	"s\u212A 1.2.3.4",
	"sd\u212A 1.2.3.4",
	"verS\u0130on 1.2.3.4",
	"256.1.1.1 and 1.1.1.256",
	"0.0.0.0",
	"1.2.3",
	"3.14 and 2.718",
	"1700000000 unix time",
	"epoch 1700000000000",
	"TIMESTAMP 1700000000",
	"id 12345678",
	"id 1234567",
	"order 123456789012 shipped",
	"1234567 and 8",
	"call +44 20 7946 0958",
	"call +1-415-555-0132",
	"+4930123456",
	"(415) 555-0132",
	"415-555-0132",
	"415.555.0132",
	"020 7946 0958",
	"+0 123 4567",
	"12-34-56-78",
	"550e8400-e29b-41d4-a716-446655440000",
	"550E8400-E29B-41D4-A716-446655440000",
	"DEADBEEF-DEAD-BEEF-DEAD-BEEFDEADBEEF",
	"550e8400-e29b-41d4-a716-44665544000",
	`C:\Users\ana\Documents`,
	`c:\\users\\ana`,
	`D:\Documents and Settings\bob`,
	"C:\\U\u017Fers\\ana", // LONG S folds to s in (?i)users
	`C:\Program Files\x`,
	"/home/ana/x and /Users/Bob and /var/home/c and /export/home/d",
	"/HOME/ana",
	"/home/",
	"https://user:pass@example.com/x",
	"HTTPS://USER:PASS@EXAMPLE.COM",
	"https://example.com/cb?code=abc123&state=x",
	"https://example.com/#access_token=abc",
	"https://example.com/?TOKEN=abc",
	"see https://example.com/docs",
	"phc_0123456789abcdefABCDEF",
	"PHC_0123456789abcdefABCDEF",
	"phx_0123456789abcdef",
	"sk-proj-0123456789abcdefghij",
	"sk-ant-api03-0123456789abcdefghij",
	"SK-0123456789abcdefghij",
	"rk_live_0123456789abcdefgh",
	"sk_test_0123456789abcdefgh",
	"ghp_0123456789abcdefghijklmnopqrstuvwxyz",
	"github_pat_0123456789abcdefghijklmnopqrstuvwxyz",
	"glpat-0123456789abcdefghij",
	"xoxb-0123456789-abcdef",
	"XOXB-0123456789-abcdef",
	"AKIAIOSFODNN7EXAMPLE",
	"akiaiosfodnn7example",
	"ASIAIOSFODNN7EXAMPLE1",
	"AIzaSyA0123456789abcdefghijklmnopqrstu",
	"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
	"EYJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
	"key phc_0123456789abcdefABCDEF from 10.0.0.1 and me@x.io in /home/me, id 12345678",
	"https://a:b@c.io/?token=phc_0123456789abcdefABCDEF&n=123456789",
	"token=https://example.com/?key=abcdefghijklmnopqrstuvwxyz",
	"Stra\u00dfe M\u00fcller \u65e5\u672c\u8a9e \U0001F600 1.2.3.4",
	"\u212A\u212A\u212A\u0130\u0130\u0130",
	"\xff:\xff//\xff@\xff",
}

func corpus(t *testing.T) []string {
	var texts []string
	for _, l := range readLabelled(t) {
		texts = append(texts, l.Text)
	}
	texts = append(texts, demoIntents...)
	return append(texts, edgeCases...)
}

func checkSame(t *testing.T, text string) {
	t.Helper()
	gotMasked, gotKinds := Mask(text)
	wantMasked, wantKinds := referenceMask(text)
	if gotMasked != wantMasked || !slices.Equal(gotKinds, wantKinds) {
		t.Errorf("Mask(%q) = %q, %v; the reference gives %q, %v", text, gotMasked, gotKinds, wantMasked, wantKinds)
	}
	if got := Find(text); !slices.Equal(got, wantKinds) {
		t.Errorf("Find(%q) = %v; the reference gives %v", text, got, wantKinds)
	}
}

// TestMaskMatchesReference holds Mask to the straightforward scan on the labelled intents,
// the demo's intents and the edge cases, each alone, in upper and lower case, and joined.
func TestMaskMatchesReference(t *testing.T) {
	texts := corpus(t)
	for _, s := range texts {
		checkSame(t, s)
		checkSame(t, strings.ToUpper(s))
		checkSame(t, strings.ToLower(s))
	}
	for i := 1; i < len(texts); i++ {
		checkSame(t, texts[i-1]+" "+texts[i])
	}
}

// FuzzMaskMatchesReference holds Mask to the straightforward scan on any text.
func FuzzMaskMatchesReference(f *testing.F) {
	for _, s := range demoIntents {
		f.Add(s)
	}
	for _, s := range edgeCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		checkSame(t, text)
	})
}

// TestLowerContainsMatchesToLower holds lowerContainsAny to strings.ToLower then
// strings.Contains for every rune (and every invalid byte) between two ASCII letters: the
// needles' test must neither gain nor lose a text.
func TestLowerContainsMatchesToLower(t *testing.T) {
	check := func(mid string) {
		s := "e" + mid + "y"
		lower := strings.ToLower(s)
		needles := []string{"eky", "eiy", "esy", "ey"}
		if l := strings.ToLower(mid); l != "" {
			needles = append(needles, "e"+string(l[0]&0x7f)+"y")
		}
		for _, n := range needles {
			if got, want := lowerContainsAny(s, []string{n}), strings.Contains(lower, n); got != want {
				t.Fatalf("lowerContainsAny(%q, %q) = %v, strings.ToLower gives %v", s, n, got, want)
			}
		}
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		check(string(r))
	}
	for b := 0x80; b < 0x100; b++ {
		check(string([]byte{byte(b)}))
	}
}
