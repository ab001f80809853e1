package gateway

import (
	"net/url"
	"strings"

	"github.com/mcpulse/mcpulse/internal/safetext"
)

// maxQueryParams is the most parameters a URL query or a form body may hold, counted as
// net/url counts them (the "&" separators plus one). It is net/url's own default limit
// (GODEBUG urlmaxqueryparams): past it url.ParseQuery returns no values at all, which
// r.URL.Query() hides, so the request would be read as carrying no api_key, compression or
// data field.
const maxQueryParams = 10000

// parseQuery parses a URL query or an application/x-www-form-urlencoded body (what says
// which, for the message) strictly: more than maxQueryParams parameters, a bad %-escape or a
// ";" separator is a 400 saying so, never a request read with some of its parameters
// silently dropped. The message quotes at most net/url's error (which names only the bad
// escape), escaped, and never the query.
func parseQuery(raw, what string) (url.Values, *httpError) {
	if n := strings.Count(raw, "&") + 1; n > maxQueryParams {
		return nil, badRequest("%s: too many parameters (%d; at most %d)", what, n, maxQueryParams)
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		msg := safetext.Escape(err.Error())
		if len(msg) > 200 {
			msg = safetext.Quote(msg)
		}
		return nil, badRequest("%s: malformed: %s (separate parameters with &, and write %% as %%25)", what, msg)
	}
	return q, nil
}
