package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// The access check is cookie-free on purpose. A cookie would be sent by the browser on any
// request to this origin, including ones another site triggers, so it would need CSRF
// defences and a login page; a token that must be in the request itself (an Authorization
// header, which a cross-site page cannot set, or ?token= in a link the user was given) and
// basic auth (which browsers prompt for natively) need neither. A ?token= is carried on the
// page's own links and form, and pages send "Referrer-Policy: no-referrer" and load nothing
// from other origins, so the token does not leak through Referer headers. It does show in
// the address bar and browser history: prefer the header or basic auth where that matters.

// authorizer checks a request against the configured token and basic-auth credentials. Secrets
// are compared as SHA-256 digests with subtle.ConstantTimeCompare, so neither the content nor
// the length of a secret leaks through timing.
type authorizer struct {
	token          *[32]byte
	user, password *[32]byte
	realm          string
}

func newAuthorizer(cfg Config) authorizer {
	a := authorizer{realm: "mcpulse dashboards"}
	digest := func(s string) *[32]byte { d := sha256.Sum256([]byte(s)); return &d }
	if cfg.Token != "" {
		a.token = digest(cfg.Token)
	}
	if cfg.BasicUser != "" {
		a.user, a.password = digest(cfg.BasicUser), digest(cfg.BasicPassword)
	}
	return a
}

// enabled reports whether any credential is configured.
func (a authorizer) enabled() bool { return a.token != nil || a.user != nil }

func equal(want *[32]byte, got string) bool {
	d := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(want[:], d[:]) == 1
}

// allowed reports whether r carries an accepted credential; queryToken is true when the token
// came from ?token= (so the page's links must carry it on).
func (a authorizer) allowed(r *http.Request) (ok, queryToken bool) {
	if !a.enabled() {
		return true, false
	}
	if a.token != nil {
		if h := r.Header.Get("Authorization"); len(h) > 7 && strings.EqualFold(h[:7], "Bearer ") && equal(a.token, strings.TrimSpace(h[7:])) {
			return true, false
		}
		if t := tokenInQuery(r); t != "" && equal(a.token, t) {
			return true, true
		}
	}
	if a.user != nil {
		if u, p, ok := r.BasicAuth(); ok {
			// Both comparisons always run, so timing does not tell which one failed.
			userOK, passOK := equal(a.user, u), equal(a.password, p)
			if userOK && passOK {
				return true, false
			}
		}
	}
	return false, false
}

// challenge answers 401 with the WWW-Authenticate challenges (RFC 9110 §11.6.1) of the
// configured schemes.
func (a authorizer) challenge(w http.ResponseWriter) {
	var ways []string
	if a.token != nil {
		w.Header().Add("WWW-Authenticate", `Bearer realm="`+a.realm+`"`)
		ways = append(ways, "send the header Authorization: Bearer TOKEN", "add ?token=TOKEN to the URL")
	}
	if a.user != nil {
		w.Header().Add("WWW-Authenticate", `Basic realm="`+a.realm+`", charset="UTF-8"`)
		ways = append(ways, "log in with basic auth")
	}
	textError(w, http.StatusUnauthorized, "authentication required: "+strings.Join(ways, ", or "))
}
