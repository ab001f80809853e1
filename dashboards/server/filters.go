package server

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcpulse/mcpulse/dashboards"
	"github.com/mcpulse/mcpulse/internal/safetext"
)

// Filter parameters of a page's URL, so a view can be shared as a link.
const (
	paramFrom     = "from"
	paramTo       = "to"
	paramCampaign = "campaign"
	paramClient   = "client"
	paramTool     = "tool"
	paramLimit    = "limit"
	paramMinCalls = "min_calls"
	paramToken    = "token"
)

// maxMinCalls caps ?min_calls=.
const maxMinCalls = 1000000

// maxLimit caps ?limit= so one request cannot ask ClickHouse for an unbounded result.
const maxLimit = 1000

// maxFilterLen caps a text filter (campaign, client, tool) in bytes; distinct ids are at
// most 200 characters (DESIGN.md §2) and names are shorter.
const maxFilterLen = 1000

// timeLayouts are the accepted forms of from and to, all read as UTC unless they carry an
// offset: a date, the value of an <input type="datetime-local">, the form the pages show
// times in (so a label can be pasted), and RFC 3339 (with or without seconds).
var timeLayouts = []string{
	time.DateOnly, "2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02 15:04", time.DateTime,
	time.RFC3339, "2006-01-02T15:04Z07:00",
}

// maxQueryParams is the most parameters a URL query may hold, counted as net/url counts them
// (the "&" separators plus one). It is net/url's own default limit (GODEBUG
// urlmaxqueryparams): past it url.ParseQuery returns no values at all, which a caller that
// drops the error would read as "no filters".
const maxQueryParams = 10000

// maxProblems caps how many problems one 400 answer lists; the rest are counted.
const maxProblems = 10

// filterForm is what the page's filter form shows: the values as the URL gave them.
type filterForm struct {
	From, To, Campaign, Client, Tool, Limit, MinCalls string
}

// badRequest is a query-parameter problem; its message is shown to the caller with status 400.
type badRequest struct{ msg string }

func (b *badRequest) Error() string { return b.msg }

// queryValues parses a URL's raw query strictly: more than maxQueryParams parameters, a bad
// %-escape or a ";" separator is a *badRequest saying so (quoting at most the bad escape
// itself, never the query), where r.URL.Query() would return what it could parse and drop
// the error.
func queryValues(rawQuery string) (url.Values, error) {
	if n := strings.Count(rawQuery, "&") + 1; n > maxQueryParams {
		return nil, &badRequest{msg: fmt.Sprintf("bad query: too many query parameters (%d; at most %d)", n, maxQueryParams)}
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, &badRequest{msg: "malformed query: " + safetext.Escape(err.Error()) +
			" (separate parameters with &, and write % as %25)"}
	}
	return q, nil
}

// tokenInQuery is the ?token= of r's query, "" when there is none or the query is malformed
// (queryValues).
func tokenInQuery(r *http.Request) string {
	q, err := queryValues(r.URL.RawQuery)
	if err != nil {
		return ""
	}
	return q.Get(paramToken)
}

// requestFilters reads the filters of r's URL: queryValues, then parseFilters.
func requestFilters(r *http.Request) (dashboards.Filters, filterForm, error) {
	q, err := queryValues(r.URL.RawQuery)
	if err != nil {
		return dashboards.Filters{}, filterForm{}, err
	}
	return parseFilters(q)
}

// parseFilters reads the filters of q. Empty values mean "not set" (an HTML form submits
// every field). Unknown and repeated parameters are refused, so a mistyped link does not
// silently show unfiltered figures.
func parseFilters(q url.Values) (dashboards.Filters, filterForm, error) {
	var (
		f    dashboards.Filters
		form filterForm
		errs []string
	)
	known := []string{paramFrom, paramTo, paramCampaign, paramClient, paramTool, paramLimit, paramMinCalls, paramToken}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if !slices.Contains(known, k) {
			errs = append(errs, fmt.Sprintf("unknown parameter %s (known: %s)", safetext.Quote(k), strings.Join(known[:len(known)-1], ", ")))
			continue
		}
		if len(q[k]) > 1 {
			errs = append(errs, fmt.Sprintf("parameter %s is given %d times; give it once", k, len(q[k])))
		}
	}
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return strings.TrimSpace(v[0])
		}
		return ""
	}
	parseTime := func(k string) time.Time {
		s := get(k)
		if s == "" {
			return time.Time{}
		}
		for _, layout := range timeLayouts {
			if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
				if t.Year() < 1970 || t.Year() > 2105 {
					errs = append(errs, fmt.Sprintf("%s=%s is outside 1970-01-01 to 2105-12-31 (ClickHouse DateTime)", k, safetext.Quote(s)))
				}
				return t.UTC()
			}
		}
		errs = append(errs, fmt.Sprintf("%s=%s is not a time: use 2006-01-02, 2006-01-02T15:04, 2006-01-02 15:04:05 (UTC) or RFC 3339", k, safetext.Quote(s)))
		return time.Time{}
	}
	text := func(k string) string {
		s := get(k)
		if !utf8.ValidString(s) {
			errs = append(errs, fmt.Sprintf("%s is not valid UTF-8", k))
		} else if len(s) > maxFilterLen {
			errs = append(errs, fmt.Sprintf("%s is %d bytes long; at most %d", k, len(s), maxFilterLen))
		}
		return s
	}
	form = filterForm{From: get(paramFrom), To: get(paramTo), Campaign: get(paramCampaign), Client: get(paramClient), Tool: get(paramTool), Limit: get(paramLimit), MinCalls: get(paramMinCalls)}
	f.From, f.To = parseTime(paramFrom), parseTime(paramTo)
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		errs = append(errs, fmt.Sprintf("from (%s) must be before to (%s): the range is [from, to)", f.From.Format(time.RFC3339), f.To.Format(time.RFC3339)))
	}
	f.Campaign, f.Client, f.Tool = text(paramCampaign), text(paramClient), text(paramTool)
	if s := get(paramLimit); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxLimit {
			errs = append(errs, fmt.Sprintf("limit=%s must be a whole number from 1 to %d", safetext.Quote(s), maxLimit))
		} else {
			f.Limit = n
		}
	}
	if s := get(paramMinCalls); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxMinCalls {
			errs = append(errs, fmt.Sprintf("min_calls=%s must be a whole number from 1 to %d", safetext.Quote(s), maxMinCalls))
		} else {
			f.MinCalls = n
		}
	}
	if len(errs) > maxProblems {
		errs = append(errs[:maxProblems], fmt.Sprintf("and %d more problems", len(errs)-maxProblems))
	}
	if len(errs) > 0 {
		return dashboards.Filters{}, form, &badRequest{msg: "bad query parameters: " + strings.Join(errs, "; ")}
	}
	return f, form, nil
}

// filterQuery is the URL query that reproduces form (empty fields left out), plus token when
// the page was opened with ?token= so the page's own links keep working.
func filterQuery(form filterForm, token string) url.Values {
	q := url.Values{}
	for _, kv := range [][2]string{
		{paramFrom, form.From}, {paramTo, form.To}, {paramCampaign, form.Campaign},
		{paramClient, form.Client}, {paramTool, form.Tool}, {paramLimit, form.Limit}, {paramMinCalls, form.MinCalls}, {paramToken, token},
	} {
		if kv[1] != "" {
			q.Set(kv[0], kv[1])
		}
	}
	return q
}

// filterUse says, for each filter the page offers, whether a panel's query takes it.
type filterUse struct {
	Name    string // "time range", "campaign", "client", "tool", "limit", "min calls"
	Applies bool
}

// panelFilters lists the page's filters and whether p's Params use each.
func panelFilters(p dashboards.Panel) []filterUse {
	has := func(names ...string) bool {
		for _, n := range names {
			if slices.Contains(p.Params, n) {
				return true
			}
		}
		return false
	}
	return []filterUse{
		{"time range", has(dashboards.ParamFrom, dashboards.ParamTo, dashboards.ParamPeriodFrom, dashboards.ParamPeriodTo)},
		{"campaign", has(dashboards.ParamCampaign)},
		{"client", has(dashboards.ParamClient)},
		{"tool", has(dashboards.ParamTool)},
		{"limit", has(dashboards.ParamLimit)},
		{"min calls", p.Rate != nil || has(dashboards.ParamMinCalls)},
	}
}
