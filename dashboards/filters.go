package dashboards

import (
	"cmp"
	"fmt"
	"time"
)

// Filters come from the page URL (?from=...&to=...&campaign=...&client=...&tool=...). A
// panel's filters that apply are exactly the ones named in its Params.
type Filters struct {
	// From and To are the half-open range [From, To), UTC. Zero From means 1970-01-01, zero
	// To means 2106-01-01. Panels over hourly or daily rollups include the hours or days that
	// start in the range.
	From, To time.Time
	// Campaign, Client and Tool select one campaign id, MCP client name or tool name; "" means
	// all.
	Campaign, Client, Tool string
	// Limit is how many rows (or rows per group, for the panels that say so) a panel shows.
	// 0 means the panel's own default (Panel.Limit), else DefaultLimit; values above MaxLimit
	// are cut to it.
	Limit int
	// MinCalls is the fewest calls a rate needs to be drawn or ranked; 0 means
	// DefaultMinCalls. 1 shows every rate.
	MinCalls int
	// Now is the time an open range ends at for the previous-period parameters; zero means
	// time.Now().
	Now time.Time
}

// DefaultMinCalls is Filters.MinCalls when the page sets none: a rate over fewer calls is
// not drawn, so an hour with one call cannot spike a chart to 100%.
const DefaultMinCalls = 10

// DefaultPeriod is the range compared with its previous period when the page sets no start.
const DefaultPeriod = 24 * time.Hour

// Limits of Filters.Limit.
const (
	DefaultLimit = 20
	MaxLimit     = 1000
)

// Range ends: ClickHouse DateTime is seconds since 1970 in a UInt32, and ClickHouse 18.16
// parses nothing after 2105-12-31 23:59:59, so a range is clamped to [minTime, maxTime).
var (
	minTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(2106, 1, 1, 0, 0, 0, 0, time.UTC)
)

// Args returns the bound arguments in p.Params order:
//
//   - "from": the first whole second at or after From (time.Time, UTC), clamped to 1970;
//   - "to": the last whole second before To (time.Time, UTC), so queries compare "<= ?" and a
//     zero To (2106-01-01) binds 2105-12-31 23:59:59, which ClickHouse 18.16 can parse;
//   - "campaign", "client", "tool": the string, "" for all;
//   - "limit": uint64, the panel's Limit (else DefaultLimit) when 0 or negative, at most MaxLimit;
//   - "min_calls": uint64, DefaultMinCalls when 0 or negative;
//   - "period_from", "period_to", "prev_from", "prev_to": the compared range and the previous
//     period of the same length (Previous), each bound like from and to.
//
// An unknown name is a BUG (Load refuses such a panel) and panics.
func (f Filters) Args(p Panel) []any {
	from, to := f.From.UTC(), f.To.UTC()
	if f.From.IsZero() || from.Before(minTime) {
		from = minTime
	}
	if f.To.IsZero() || to.After(maxTime) {
		to = maxTime
	}
	// Whole seconds, as DateTime holds them: t >= From is t >= ceil(From), and t < To is
	// t <= the last second before To.
	first := from.Add(time.Second - time.Nanosecond).Truncate(time.Second)
	last := to.Add(-time.Nanosecond).Truncate(time.Second)
	if !to.After(from) || first.After(last) {
		// An empty range, bound as first > last with both inside what ClickHouse can parse.
		first, last = maxTime.Add(-time.Second), minTime
	}
	limit := f.Limit
	if limit <= 0 {
		limit = cmp.Or(p.Limit, DefaultLimit)
	}
	limit = min(limit, MaxLimit)
	minCalls := f.MinCalls
	if minCalls <= 0 {
		minCalls = DefaultMinCalls
	}
	periodFrom, periodTo, prevFrom, prevTo := f.periods()

	args := make([]any, len(p.Params))
	for i, name := range p.Params {
		switch name {
		case ParamFrom:
			args[i] = first
		case ParamTo:
			args[i] = last
		case ParamCampaign:
			args[i] = f.Campaign
		case ParamClient:
			args[i] = f.Client
		case ParamTool:
			args[i] = f.Tool
		case ParamLimit:
			args[i] = uint64(limit)
		case ParamMinCalls:
			args[i] = uint64(minCalls)
		case ParamPeriodFrom:
			args[i] = periodFrom
		case ParamPeriodTo:
			args[i] = periodTo
		case ParamPrevFrom:
			args[i] = prevFrom
		case ParamPrevTo:
			args[i] = prevTo
		default:
			panic(fmt.Sprintf("BUG: panel %q has unknown param %q", p.ID, name))
		}
	}
	return args
}

// Previous returns the range the previous-period parameters compare with, [From', To'), and
// the current range they stand for, both UTC: with From and To set, the period of the same
// length just before From; with only From set, To is Now; with no From, the current range is
// the DefaultPeriod before To (or Now) and the previous one the DefaultPeriod before that.
func (f Filters) Previous() (prevFrom, prevTo, from, to time.Time) {
	now := f.Now
	if now.IsZero() {
		now = time.Now()
	}
	to = f.To.UTC()
	if f.To.IsZero() || to.After(now) && f.From.IsZero() {
		to = now.UTC().Truncate(time.Second)
	}
	from = f.From.UTC()
	if f.From.IsZero() || from.Before(minTime) {
		from = to.Add(-DefaultPeriod)
	}
	n := to.Sub(from)
	return from.Add(-n), from, from, to
}

// periods binds Previous's two ranges as Args binds from and to: the first whole second
// and the last whole second before each end.
func (f Filters) periods() (periodFrom, periodTo, prevFrom, prevTo time.Time) {
	pf, pt, cf, ct := f.Previous()
	bind := func(a, b time.Time) (time.Time, time.Time) {
		if a.Before(minTime) {
			a = minTime
		}
		if b.After(maxTime) {
			b = maxTime
		}
		first := a.Add(time.Second - time.Nanosecond).Truncate(time.Second)
		last := b.Add(-time.Nanosecond).Truncate(time.Second)
		if !b.After(a) || first.After(last) {
			return maxTime.Add(-time.Second), minTime
		}
		return first, last
	}
	periodFrom, periodTo = bind(cf, ct)
	prevFrom, prevTo = bind(pf, pt)
	return periodFrom, periodTo, prevFrom, prevTo
}
