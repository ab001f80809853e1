package gen

import (
	"fmt"
	"strings"
)

// user is one person (one distinct_id on one PostHog instance).
type user struct {
	id string
	// instance is the user's PostHog instance; "" is the default instance, whose events carry
	// `instance_url` only some of the time.
	instance string
}

// Non-default PostHog instances users authenticate against.
var instances = []string{"https://eu.posthog.com", "https://posthog.acme-corp.example"}

// specialIDs are distinct_ids with characters that trip careless code: quotes, backslashes,
// markup, non-Latin scripts, emoji, a tab, U+2028 (raw in the JSON, as JSON.stringify writes
// it) and an id of exactly 200 characters (the limit; 201 is malformed).
var specialIDs = []string{
	"o'brien@example.ie",
	`"quoted" user`,
	"李雷@例子.公司",
	"zoë.ñandú",
	"line\u2028separator",
	"emoji-🚀-user",
	`back\slash\user`,
	"<script>alert('x')</script>",
	"tab\tuser",
	"long-" + strings.Repeat("é", 195),
}

var (
	firstNames = []string{"alice", "bob", "carol", "dmitri", "eve", "fatima", "gao", "hana", "ivan", "jun", "kofi", "lena", "mateo", "nadia", "omar", "priya"}
	lastNames  = []string{"smith", "garcia", "chen", "okafor", "novak", "kim", "silva", "haddad", "muller", "tanaka", "rossi", "patel"}
	domains    = []string{"example.com", "acme.example", "startup.example", "corp.example.org"}
)

// makeUsers builds n users: the special ids first (so small corpora use them), a distinct_id
// shared by two instances (two identities), then PostHog-style uuid, email and numeric ids.
func (g *generator) makeUsers(n int) []*user {
	var us []*user
	for _, id := range specialIDs {
		us = append(us, &user{id: id, instance: g.pickInstance()})
	}
	us = append(us, &user{id: "42"}, &user{id: "42", instance: instances[0]})
	for len(us) < n {
		var id string
		switch r := g.rng.Float64(); {
		case r < 0.55:
			id = g.newUUID(g.timeIn(g.start.Add(-90*24*3600e9), g.start, true))
		case r < 0.80:
			id = fmt.Sprintf("%s.%s%d@%s", firstNames[g.rng.IntN(len(firstNames))], lastNames[g.rng.IntN(len(lastNames))],
				g.rng.IntN(100), domains[g.rng.IntN(len(domains))])
		default:
			id = fmt.Sprint(1000 + g.rng.IntN(9_000_000))
		}
		us = append(us, &user{id: id, instance: g.pickInstance()})
	}
	return us
}

func (g *generator) pickInstance() string {
	switch r := g.rng.Float64(); {
	case r < 0.60:
		return ""
	case r < 0.90:
		return instances[0]
	default:
		return instances[1]
	}
}

// instanceURLFor returns the instance_url an event of u carries ("" for absent): always for
// non-default instances, half the time for the default one (InstanceURLRate overall).
func (g *generator) instanceURLFor(u *user) string {
	if u.instance != "" {
		return u.instance
	}
	if g.chance(0.5) {
		return g.cfg.InstanceURL
	}
	return ""
}
