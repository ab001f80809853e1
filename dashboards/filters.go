package dashboards

import (
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
	// 0 means DefaultLimit; values above MaxLimit are cut to it.
	Limit int
}

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
//   - "limit": uint64, DefaultLimit when 0 or negative, at most MaxLimit.
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
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)

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
		default:
			panic(fmt.Sprintf("BUG: panel %q has unknown param %q", p.ID, name))
		}
	}
	return args
}
