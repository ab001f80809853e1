// Package details finds identifying details in an agent's stated intent ($mcp_intent, the
// text the MCP analytics SDK asks the agent for in a tool call's context argument) and masks
// them, so an intent-prompt trial can count how often a prompt version lets an agent write
// them (DESIGN.md §8, "Intent prompt trials").
//
// Every kind is one row of Patterns: its name, its RE2 expressions and the placeholder that
// replaces a match in Mask. The patterns are plain regular expressions rather than a
// detector library: the maintained Go scanners on the module proxy (gitleaks v8,
// DefangLabs/secret-detector) find secrets only, none of the personal details (email, phone,
// IP address, home-directory user names), and gitleaks brings a large dependency tree. The
// table is tested against the hand-labelled intents of intents/testdata/labelled.jsonl,
// precision and recall per kind (details_test.go).
package details

import (
	"strings"
)

// Kind names one kind of identifying detail. The names are stored (tool_calls.intent_details)
// and shown on the dashboards: never rename one.
type Kind string

// The kinds, in Patterns' order.
const (
	Email          Kind = "email"           // a mailbox: someone@example.com
	IPAddress      Kind = "ip_address"      // an IPv4 or IPv6 address
	Phone          Kind = "phone"           // a phone number with a + prefix or separators
	URLCredentials Kind = "url_credentials" // a URL carrying user:password@ or a token/key/signature parameter
	APIKey         Kind = "api_key"         // an API key or token: phc_/phx_, sk-, ghp_, xoxb-, AKIA..., JWT, Bearer ...
	ID             Kind = "id"              // a UUID or a numeric id of 8 digits or more
	HomePath       Kind = "home_path"       // a home-directory path naming a user: /home/ana, /Users/ana, C:\Users\ana
)

// Pattern is one kind's row of the table: a match of any of Exprs (RE2, as Go's regexp
// reads it) is a detail of kind Kind. Needles and quick say when the expressions are tried at
// all (a text they rule out is clean for the kind even if an expression would match it);
// can only spares expressions that cannot match and never changes a result.
type Pattern struct {
	Kind        Kind
	Placeholder string // replaces a match in Mask: "[email]", ...
	Exprs       []string
	// Needles, when set, holds per expression (same index) lowercase ASCII strings one of
	// which the lowercased text (strings.ToLower) must contain for the expression to be
	// tried; each expression is then tried on its own, in order, on the text the ones before
	// it left. Without Needles, Exprs are tried as one alternation.
	Needles [][]string
	// Reject, when set, drops a match that the text around it shows is no detail: a dotted
	// version number is not an IP address, a Unix time not an id. before and after are the
	// whole text before and after the match.
	Reject func(before, match, after string) bool
	// quick, when set, is a test of the text without which none of Exprs is tried.
	quick func(f facts) bool
	// can, when set, holds per regular expression tried (per expression with Needles, one
	// for the alternation without) a necessary condition for it to match: false only for a
	// text it cannot match, so the expression is skipped.
	can []func(f facts) bool
	re  []expr
}

// Patterns is the table of kinds, in the order Mask applies them (a URL's token before the
// key inside it, a key before the long numbers inside it).
var Patterns = []*Pattern{
	{Kind: URLCredentials, Placeholder: "[url-with-credentials]", Exprs: []string{
		// scheme://user:password@host
		`(?i)\b[a-z][a-z0-9+.\-]*://[^\s/:@]+:[^\s/@]+@[^\s]*`,
		// a query or fragment parameter that carries a secret
		`(?i)\b[a-z][a-z0-9+.\-]*://[^\s]*[?&#](?:token|access_token|refresh_token|id_token|api_key|apikey|api-key|key|secret|client_secret|password|passwd|pwd|sig|signature|x-amz-signature|x-amz-credential|auth|authorization|session|sessionid|session_id|code|jwt)=[^\s&#]+[^\s]*`,
	}, quick: func(f facts) bool { return f.has(':') && strings.Contains(f.s, "://") }},
	{Kind: APIKey, Placeholder: "[api-key]", Exprs: []string{
		`\bph[cxs]_[A-Za-z0-9]{16,}`,                                                      // PostHog project, personal and secret keys
		`\bsk-(?:proj-|ant-(?:api[0-9][0-9]-)?|live-)?[A-Za-z0-9_\-]{16,}`,                // OpenAI, Anthropic and alike
		`\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}`,                                          // Stripe
		`\bgh[pousr]_[A-Za-z0-9]{30,}`,                                                    // GitHub tokens
		`\bgithub_pat_[A-Za-z0-9_]{30,}`,                                                  // GitHub fine-grained tokens
		`\bglpat-[A-Za-z0-9_\-]{20,}`,                                                     // GitLab
		`\bxox[abprse]-[A-Za-z0-9\-]{10,}`,                                                // Slack
		`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`,                                                   // AWS access key ids
		`\bAIza[0-9A-Za-z_\-]{35}`,                                                        // Google API keys
		`\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}`,              // JWT
		`(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{20,}=*`,                                        // an Authorization header's token
		`(?i)\b(?:api[_\-]?key|secret|token|password)\s*[:=]\s*["']?[A-Za-z0-9._\-]{16,}`, // key=value
	}, Needles: [][]string{
		{"phc_", "phx_", "phs_"}, {"sk-"}, {"k_live_", "k_test_"}, {"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, {"github_pat_"},
		{"glpat-"}, {"xox"}, {"akia", "asia"}, {"aiza"}, {"eyj"}, {"bearer"}, {"key", "secret", "token", "password"},
	}, can: []func(f facts) bool{
		func(f facts) bool { return f.has('_') && f.before('_', "phc", "phx", "phs") },
		func(f facts) bool { return f.has('-') && f.before('-', "sk") },
		func(f facts) bool { return f.has('_') && f.before('_', "k_live", "k_test") },
		func(f facts) bool { return f.has('_') && f.before('_', "ghp", "gho", "ghu", "ghs", "ghr") },
		func(f facts) bool { return f.has('_') && f.before('_', "github_pat") },
		func(f facts) bool { return f.has('-') && f.before('-', "glpat") },
		func(f facts) bool { return f.has('-') && f.before('-', "xoxa", "xoxb", "xoxp", "xoxr", "xoxs", "xoxe") },
		func(f facts) bool {
			return f.has('A') && (strings.Contains(f.s, "AKIA") || strings.Contains(f.s, "ASIA"))
		},
		func(f facts) bool { return f.has('z') && strings.Contains(f.s, "AIza") },
		func(f facts) bool { return f.has('J') && strings.Contains(f.s, "eyJ") },
		func(f facts) bool { return containsFoldASCII(f.s, "bearer") },
		func(f facts) bool { return (f.has(':') || f.has('=')) && f.keyValue() },
	}},
	{Kind: Email, Placeholder: "[email]", Exprs: []string{
		`(?i)\b[a-z0-9][a-z0-9._%+\-]*@[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?)*\.[a-z]{2,}\b`,
	}, quick: func(f facts) bool { return f.has('@') }},
	{Kind: HomePath, Placeholder: "[home-path]", Exprs: []string{
		`(?:/home|/Users|/var/home|/export/home)/[A-Za-z0-9_][A-Za-z0-9._\-]*`,
		`(?i)\b[a-z]:\\{1,2}(?:users|documents and settings)\\{1,2}[a-z0-9_][a-z0-9._\-]*`,
	}, quick: func(f facts) bool {
		s := f.s
		return f.has('/') && (strings.Contains(s, "/home/") || strings.Contains(s, "/Users/") || strings.Contains(s, "/export/home/")) ||
			f.has('\\') && strings.Contains(s, `:\`)
	}},
	{Kind: IPAddress, Placeholder: "[ip-address]", Exprs: []string{
		`\b(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\b`,
		`(?i)\b(?:[0-9a-f]{1,4}:){7}[0-9a-f]{1,4}\b`,
		`(?i)(?:\b[0-9a-f]{1,4}:)+:(?:[0-9a-f]{1,4}(?::[0-9a-f]{1,4})*)?\b`,
		`(?:^|[\s\[(])::1\b`,
	}, Needles: [][]string{{"."}, {":"}, {"::"}, {"::1"}},
		quick: func(f facts) bool { return f.digits > 0 },
		can: []func(f facts) bool{
			func(f facts) bool { return f.has('.') && f.around('.', isDigit, isDigit) },
			func(f facts) bool { return f.has(':') && strings.Count(f.s, ":") >= 7 },
			func(f facts) bool { return f.has(':') && f.around(':', isHex, isColon) },
			func(f facts) bool { return f.has(':') },
		},
		Reject: versionNumber},
	{Kind: Phone, Placeholder: "[phone]", Exprs: []string{
		// +CC then groups: +44 20 7946 0958, +1-415-555-0132, +4930123456
		`\+[1-9][0-9]{0,2}[\s.\-]?(?:\(?[0-9]{1,4}\)?[\s.\-]?){1,5}[0-9]{2,10}\b`,
		// (415) 555-0132, 415-555-0132, 415.555.0132, 020 7946 0958
		`(?:\([0-9]{2,4}\)\s?|\b[0-9]{2,4}[\s.\-])[0-9]{3,4}[\s.\-][0-9]{4}\b`,
	}, quick: func(f facts) bool { return f.digits >= 7 },
		can: []func(f facts) bool{func(f facts) bool {
			return f.has('+') && f.around('+', nil, isDigit1to9) || f.digitRun() >= 4
		}}},
	{Kind: ID, Placeholder: "[id]", Exprs: []string{
		`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`,
		`\b[0-9]{8,}\b`,
	}, quick: func(f facts) bool { return f.digits >= 8 },
		can: []func(f facts) bool{func(f facts) bool {
			return f.digitRun() >= 8 || f.has('-') && f.hexBeforeDash()
		}},
		Reject: unixTime},
}

func init() {
	for _, p := range Patterns {
		if p.Needles != nil && len(p.Needles) != len(p.Exprs) {
			panic("BUG: details: " + string(p.Kind) + " has needles for some expressions only")
		}
		if p.Needles == nil {
			p.re = []expr{compile(strings.Join(p.Exprs, "|"))}
		} else {
			for _, e := range p.Exprs {
				p.re = append(p.re, compile(e))
			}
		}
		if p.can != nil && len(p.can) != len(p.re) {
			panic("BUG: details: " + string(p.Kind) + " has conditions for some expressions only")
		}
	}
}

// Kinds lists every kind, in Patterns' order.
func Kinds() []Kind {
	out := make([]Kind, len(Patterns))
	for i, p := range Patterns {
		out[i] = p.Kind
	}
	return out
}

// Find returns the kinds of identifying detail text holds, in Patterns' order, each once
// (nil for none). A detail a kind earlier in Patterns covers is not counted again as a later
// kind: the long number inside a token URL is the URL's, not an id.
func Find(text string) []Kind {
	_, kinds := scan(text)
	return kinds
}

// Mask returns text with every identifying detail replaced by its kind's placeholder, and the
// kinds found (as Find). Text without details is returned as it is.
func Mask(text string) (string, []Kind) {
	return scan(text)
}

func scan(text string) (string, []Kind) {
	var kinds []Kind
	cur := text
	f := read(cur)
	for _, p := range Patterns {
		if p.quick != nil && !p.quick(f) {
			continue
		}
		found := false
		for i := range p.re {
			if p.can != nil && !p.can[i](f) {
				continue
			}
			if p.Needles != nil && !lowerContainsAny(cur, p.Needles[i]) {
				continue
			}
			if next, ok := replace(cur, &p.re[i], p); ok {
				cur, found = next, true
				f = read(cur)
			}
		}
		if found {
			kinds = append(kinds, p.Kind)
		}
	}
	return cur, kinds
}

// replace replaces x's matches in s (those p.Reject keeps) by p's placeholder, and says
// whether there was one.
func replace(s string, x *expr, p *Pattern) (string, bool) {
	var b strings.Builder
	last, found := 0, false
	for _, m := range x.findAll(s) {
		if p.Reject != nil && p.Reject(s[:m[0]], s[m[0]:m[1]], s[m[1]:]) {
			continue
		}
		if !found {
			b.Grow(len(s))
			found = true
		}
		b.WriteString(s[last:m[0]])
		b.WriteString(p.Placeholder)
		last = m[1]
	}
	if !found {
		return s, false
	}
	b.WriteString(s[last:])
	return b.String(), true
}

// versionNumber reports whether a dotted match follows a word naming a version ("version
// 10.2.1.4", "v1.2.3.4", "build 4.0.0.1"): a four-part version, not an IPv4 address.
func versionNumber(before, match, _ string) bool {
	if !strings.Contains(match, ".") {
		return false
	}
	before = strings.ToLower(before)
	if strings.HasSuffix(before, "v") {
		return true
	}
	before = strings.TrimRight(before, " ")
	for _, w := range []string{"version", "build", "release", "sdk"} {
		if strings.HasSuffix(before, w) {
			return true
		}
	}
	return false
}

// unixTime reports whether a 10- or 13-digit match is called a time by the words next to it
// ("1700000000 unix time", "epoch 1700000000000"): a date, not an id.
func unixTime(before, match, after string) bool {
	if len(match) != 10 && len(match) != 13 {
		return false
	}
	near := strings.ToLower(before[max(0, len(before)-20):] + " " + after[:min(len(after), 20)])
	for _, w := range []string{"unix", "epoch", "timestamp"} {
		if strings.Contains(near, w) {
			return true
		}
	}
	return false
}
