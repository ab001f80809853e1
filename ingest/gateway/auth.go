package gateway

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/subtle"
	"io"
	"net/http"
	"net/url"
	"strings"

	segjson "github.com/segmentio/encoding/json"
)

// A request's API keys are checked before its body is decoded, so a wrong key costs next to
// nothing: first the keys outside the body (Authorization: Bearer, ?api_key=, ?token=), before
// the body is read; then, for a gzip body, the keys in its first headBytes once inflated (SDKs
// put api_key first); then every key of the body, in one allocation-free pass of a JSON
// tokenizer that stops at the first unknown key. Only then is the body decoded. At least one
// key must be present and every key present must be known.

// headBytes is how much of a gzip body is inflated to look for its key before the whole body is.
const headBytes = 64 << 10

// keyCheck accumulates the keys of one request.
type keyCheck struct {
	g       *Gateway
	checked map[string]bool // key -> known (each distinct key is hashed once)
	found   int
	unknown bool
	// notString is set when an api_key or token in the body is a number, null, object or array:
	// not a key, but the reason a request without any other key has none.
	notString bool
}

func (g *Gateway) newKeyCheck() *keyCheck { return &keyCheck{g: g, checked: map[string]bool{}} }

// add checks one key; it reports false once any key of the request is unknown.
func (c *keyCheck) add(key string) bool {
	c.found++
	known, seen := c.checked[key]
	if !seen {
		known = c.g.known(key)
		c.checked[key] = known
	}
	if !known {
		c.unknown = true
	}
	return !c.unknown
}

// outsideBody adds the keys the request carries outside its body: its Authorization header
// and q, its URL query (parseQuery). It returns an error message for a malformed
// Authorization header ("" otherwise).
func (c *keyCheck) outsideBody(r *http.Request, q url.Values) string {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
			return "malformed Authorization header (want Bearer <api key>)"
		}
		c.add(strings.TrimSpace(tok))
	}
	for _, name := range []string{"api_key", "token"} {
		if k := q.Get(name); k != "" {
			c.add(k)
		}
	}
	return ""
}

// verdict is the 401 message for the keys seen so far, or "" when they authorize the request.
func (c *keyCheck) verdict(form bodyForm) string {
	switch {
	case c.unknown:
		return "unknown API key"
	case c.found > 0:
		return ""
	case c.notString:
		return "missing API key: an api_key or token in the body is not a string"
	case form == formEnvelopes:
		return "missing API key: send Authorization: Bearer <api key>"
	default:
		return "missing API key: send api_key (or token) in the body"
	}
}

// inBody adds the project keys of a PostHog body (JSON): api_key or token of the body,
// properties.token of a single event, and api_key or properties.token of each event of an
// array or of batch. It stops at the first unknown key. complete is false when the tokenizer
// stopped on malformed JSON before the end (the keys after it were not seen).
func (c *keyCheck) inBody(data []byte) (complete bool) {
	var path []scope // the open objects and arrays, outermost first
	var key string   // the key whose value comes next ("" in an array)
	t := segjson.NewTokenizer(data)
	for t.Next() {
		switch t.Delim {
		case '{', '[':
			if isKeyPath(path, key) {
				c.notString = true
			}
			path = append(path, scope{array: t.Delim == '[', key: key})
			key = ""
		case '}', ']':
			if len(path) > 0 {
				path = path[:len(path)-1]
			}
			key = ""
		case 0:
			if t.IsKey {
				key = string(t.String())
				continue
			}
			if !isKeyPath(path, key) {
				continue
			}
			if !t.Value.String() {
				c.notString = true
			} else if !c.add(string(t.String())) {
				return true
			}
		}
	}
	return t.Err == nil
}

// scope is an open object or array of a JSON document and the key it is the value of.
type scope struct {
	array bool
	key   string
}

// isKeyPath reports whether a string under key, inside the open values path, is a project key:
// the body's api_key or token; an event's api_key, token or properties.token, the event being
// the body, an element of the body's array, or an element of its batch.
func isKeyPath(path []scope, key string) bool {
	switch {
	case len(path) >= 3 && !path[0].array && path[1].array && path[1].key == "batch" && !path[2].array:
		path = path[2:] // {"batch":[event, ...]}
	case len(path) >= 2 && path[0].array && !path[1].array:
		path = path[1:] // [event, ...]
	}
	switch {
	case len(path) == 1 && !path[0].array:
		return key == "api_key" || key == "token"
	case len(path) == 2 && !path[0].array && !path[1].array && path[1].key == "properties":
		return key == "token"
	}
	return false
}

// inflatedHead returns up to n bytes of a gzip body once inflated (fewer when it ends or is
// corrupt): enough to read a key sent first without inflating the whole body.
func inflatedHead(body []byte, n int64) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil
	}
	defer zr.Close()
	head, _ := io.ReadAll(io.LimitReader(zr, n))
	return head
}

func (g *Gateway) known(key string) bool {
	h := sha256.Sum256([]byte(key))
	ok := 0
	for i := range g.keys {
		ok |= subtle.ConstantTimeCompare(h[:], g.keys[i][:])
	}
	return ok == 1
}
