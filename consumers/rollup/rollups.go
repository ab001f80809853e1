package rollup

import (
	"math"
	"strings"
	"time"

	"github.com/mcpulse/mcpulse/misuse"
)

// DurationBucketBoundsMs are the upper bounds, in milliseconds, of the buckets of
// tool_call_stats_hourly.duration_buckets: bucket i counts the calls whose $mcp_duration_ms d
// has DurationBucketBoundsMs[i-1] < d <= DurationBucketBoundsMs[i]; the last bound is +Inf.
// The SQL side holds the same list in view mcpulse.v_duration_bucket_bounds (migration 0015; a
// test compares them). Changing it needs a migration that rewrites both.
var DurationBucketBoundsMs = []float64{5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, math.Inf(1)}

// maxDurationMs caps a duration before it is added to duration_sum_us (1e12 ms, about 31
// years), so the sum of microseconds cannot overflow; the SQL recomputation caps it alike.
const maxDurationMs = 1e12

// The rollup tables of migration 0015.
var (
	// ToolCallStats is tool_call_stats_hourly: per hour, tool, client and MCP server (name and
	// version), the tool calls by outcome and by where their ignored keys came from, and their
	// durations (count, sum in microseconds, buckets).
	ToolCallStats = &Table{
		Name: "mcpulse.tool_call_stats_hourly",
		Dims: []Dim{{"hour", DimHour}, {"tool_name", DimString}, {"client_name", DimString}, {"server_name", DimString}, {"server_version", DimString}},
		Measures: []string{"calls", "errors", "successful_calls", "measurable_calls", "calls_with_ignored_keys",
			"keys_reported", "keys_from_response", "keys_from_schema",
			"not_measurable_no_schema", "not_measurable_truncated", "not_measurable_other",
			"validation_errors", "unknown_tool_calls", "duration_count", "duration_sum_us"},
		Array: "duration_buckets", ArrayLen: len(DurationBucketBoundsMs),
	}
	// IgnoredKeyPaths is ignored_key_paths_hourly: per hour, tool, MCP server and ignored key
	// path, the successful calls whose (counted) ignored keys list the path. Closed hours are
	// sealed without the partition (SealClosedHours).
	IgnoredKeyPaths = &Table{
		Name:     "mcpulse.ignored_key_paths_hourly",
		Dims:     []Dim{{"hour", DimHour}, {"tool_name", DimString}, {"server_name", DimString}, {"server_version", DimString}, {"key_path", DimString}},
		Measures: []string{"occurrences"},
	}
	// GateReasonCalls is gate_reason_calls_hourly: per hour, campaign, first failing
	// recruitment gate, client and capability support (0 no, 1 yes, 2 unknown), the tool calls.
	// Its people (a set, not a sum) are sealed into plain counts per closed hour, with its
	// calls (SealClosedHours; readers count unsealed hours from the raw rows).
	GateReasonCalls = &Table{
		Name: "mcpulse.gate_reason_calls_hourly",
		Dims: []Dim{{"hour", DimHour}, {"campaign_id", DimString}, {"reason", DimString}, {"client_name", DimString},
			{"url_support", DimUInt8}, {"form_support", DimUInt8}},
		Measures: []string{"calls"},
	}
	// EventsByName is events_by_name_hourly: per hour and `event` name, the events stored.
	EventsByName = &Table{
		Name:     "mcpulse.events_by_name_hourly",
		Dims:     []Dim{{"hour", DimHour}, {"event", DimString}},
		Measures: []string{"events"},
	}
)

// Tables are the rollup tables, in the order a Store is made with.
func Tables() []*Table {
	return []*Table{ToolCallStats, IgnoredKeyPaths, GateReasonCalls, EventsByName}
}

// Positions of ToolCallStats's measures.
const (
	mCalls = iota
	mErrors
	mSuccessful
	mMeasurable
	mWithIgnoredKeys
	mKeysReported
	mKeysFromResponse
	mKeysFromSchema
	mNoSchema
	mTruncated
	mNotMeasurableOther
	mValidationErrors
	mUnknownTool
	mDurationCount
	mDurationSumUs
	mBuckets // first bucket
)

// ToolCall is what the rollups read of one stored tool call (its raw tool_calls row).
type ToolCall struct {
	Timestamp     time.Time
	Tool          string // the effective tool (tool_calls.tool_name)
	Client        string
	Server        string
	ServerVersion string
	IsError       bool
	DurationMs    *float64
	// CountedIgnoredKeys are the ignored key paths less the client-injected ones
	// (tool_calls.counted_ignored_keys).
	CountedIgnoredKeys []string
	// Source is where the ignored keys came from (tool_calls.ignored_keys_source, a
	// misuse.Source; "" for calls stored before the derivation existed: measurable, from no
	// source), Reason why they were not measurable (tool_calls.ignored_keys_reason).
	Source      misuse.Source
	Reason      misuse.Reason
	ErrorClass  misuse.ErrorClass // tool_calls.error_class
	UnknownTool bool              // tool_calls.unknown_tool: the server version does not list the tool
	CampaignID  string
	GateReason  string // the first failing recruitment gate, "" for none
	URLSupport  uint8  // 0 no, 1 yes, 2 unknown
	FormSupport uint8
}

// Adder adds events to a Batch, reusing its buffers: not safe for concurrent use. The zero
// value is ready.
type Adder struct {
	key  KeyBuilder
	vals []uint64
	seen map[string]bool
}

// AddToolCall adds the stored tool call tc, read from stream s, to every rollup that counts
// it (tool_call_stats_hourly, ignored_key_paths_hourly, gate_reason_calls_hourly; the event
// count is AddEvent's).
func (a *Adder) AddToolCall(b *Batch, s Stream, tc *ToolCall) {
	v := a.values(ToolCallStats.width())
	v[mCalls] = 1
	ok := !tc.IsError
	if tc.IsError {
		v[mErrors] = 1
	} else {
		v[mSuccessful] = 1
		switch tc.Source {
		case misuse.SourceNotMeasurable:
			switch tc.Reason {
			case misuse.ReasonNoSchema:
				v[mNoSchema] = 1
			case misuse.ReasonArgumentsTruncated, misuse.ReasonArgumentsRedacted, misuse.ReasonSchemaTruncated:
				v[mTruncated] = 1 // the SDK cut or redacted what the derivation needed
			default:
				v[mNotMeasurableOther] = 1
			}
		case misuse.SourceReported:
			v[mKeysReported] = 1
		case misuse.SourceResponse:
			v[mKeysFromResponse] = 1
		case misuse.SourceSchema:
			v[mKeysFromSchema] = 1
		}
		if tc.Source != misuse.SourceNotMeasurable {
			v[mMeasurable] = 1
			if len(tc.CountedIgnoredKeys) > 0 {
				v[mWithIgnoredKeys] = 1
			}
		}
	}
	if strings.HasPrefix(string(tc.ErrorClass), "validation_") {
		v[mValidationErrors] = 1
	}
	if tc.UnknownTool || tc.ErrorClass == misuse.ClassUnknownTool {
		v[mUnknownTool] = 1 // not listed by the server version, or refused as unknown by it
	}
	if d := tc.DurationMs; d != nil && *d >= 0 {
		v[mDurationCount] = 1
		v[mDurationSumUs] = uint64(min(*d, maxDurationMs) * 1000)
		v[mBuckets+durationBucket(*d)] = 1
	}
	b.Add(s, ToolCallStats, a.key.Reset(tc.Timestamp).String(tc.Tool).String(tc.Client).String(tc.Server).String(tc.ServerVersion), v...)

	if ok && tc.Source != misuse.SourceNotMeasurable && len(tc.CountedIgnoredKeys) > 0 {
		if a.seen == nil {
			a.seen = map[string]bool{}
		}
		clear(a.seen)
		for _, k := range tc.CountedIgnoredKeys {
			if a.seen[k] {
				continue // a path listed twice is one occurrence of the call
			}
			a.seen[k] = true
			b.Add(s, IgnoredKeyPaths, a.key.Reset(tc.Timestamp).String(tc.Tool).String(tc.Server).String(tc.ServerVersion).String(k), 1)
		}
	}
	if tc.GateReason != "" {
		b.Add(s, GateReasonCalls, a.key.Reset(tc.Timestamp).String(tc.CampaignID).String(tc.GateReason).String(tc.Client).UInt8(tc.URLSupport).UInt8(tc.FormSupport), 1)
	}
}

// AddEvent counts one stored event of name at, read from stream s, in events_by_name_hourly.
func (a *Adder) AddEvent(b *Batch, s Stream, name string, at time.Time) {
	b.Add(s, EventsByName, a.key.Reset(at).String(name), 1)
}

func (a *Adder) values(n int) []uint64 {
	if cap(a.vals) < n {
		a.vals = make([]uint64, n)
	}
	a.vals = a.vals[:n]
	clear(a.vals)
	return a.vals
}

// durationBucket is the index of the bucket of d milliseconds.
func durationBucket(d float64) int {
	for i, b := range DurationBucketBoundsMs {
		if d <= b {
			return i
		}
	}
	return len(DurationBucketBoundsMs) - 1 // NaN; validation refuses it
}
