// Package outcome is the shape of what a generated corpus should produce in the stores (the
// `F.expected.json` file `mcpulse gen` writes) and the comparison `mcpulse demo` and the
// end-to-end tests make against what ClickHouse and Redis actually hold.
package outcome

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"sort"
	"time"
)

// Outcome is the expected (or observed) result of consuming one corpus. Row slices are sorted
// by their key columns (see Normalize); times are UTC, formatted "2006-01-02 15:04:05" for hours
// and "2006-01-02" for days.
type Outcome struct {
	// Corpus describes the generated file; it is not compared.
	Corpus Corpus `json:"corpus"`

	// EventsByKind counts distinct valid events per kind ("tool_call", "invitation_sent",
	// "link_opened", "response").
	EventsByKind map[string]int64 `json:"events_by_kind"`
	// Tables counts rows per ClickHouse table after deduplication: "tool_calls",
	// "recruitment_events", "dead_letters".
	Tables map[string]int64 `json:"tables"`

	IgnoredKeyRates []IgnoredKeyRate `json:"ignored_key_rates_hourly"`
	IgnoredKeys     []IgnoredKey     `json:"ignored_keys_hourly"`
	GateReasons     []GateReason     `json:"gate_reasons_hourly"`
	Funnel          []FunnelDay      `json:"recruitment_funnel_daily"`
	// FunnelByPath is the funnel over the whole corpus per protocol path and client
	// (sql/queries/panel_campaign_funnel_by_path.sql over every day and campaign).
	FunnelByPath []FunnelPath `json:"recruitment_funnel_by_path"`

	// ToolMisuse is v_tool_call_stats_hourly summed per hour and tool: calls, failed calls, the
	// calls refused for their input (error class validation_*) and the calls to a tool the
	// server does not list (unknown_tool, or refused as unknown).
	ToolMisuse []ToolMisuse `json:"tool_misuse_hourly"`

	// ServedSchemas are the tool input schemas served per server name and version, as the
	// $mcp_tools_list events carried them (v_served_tool_schemas): one row per distinct
	// schema text, with the first and last time it was listed.
	ServedSchemas []ServedSchema `json:"served_tool_schemas,omitempty"`

	// SDKEvents count the MCP analytics SDK's reports and requests besides tool calls
	// (sql/queries/outcome_sdk_events.sql): per kind, subject and client, the events stored and
	// the failed ones.
	SDKEvents []SDKEvent `json:"sdk_events,omitempty"`

	// Suppression maps identity hash to the record Redis must hold at the end of the run.
	Suppression map[string]Suppression `json:"suppression"`

	// ContactPolicy is what the contact-policy audit must find in a corpus generated with
	// contact-policy violations (gen's ContactViolations); nil otherwise. Compare leaves it to
	// the audit's own test.
	ContactPolicy *ContactPolicy `json:"contact_policy,omitempty"`
}

// ContactPolicy is the contact-policy audit's expected answer for the kinds the generator
// injects (suppression.ViolationKinds after the first two, which the recruitment flows cause
// on their own and are not counted here): per kind, how many violations and their invitation
// ids (sorted); per campaign, the counts per kind. ExclusionMembers names the file of
// excluded distinct ids the audit must be given (next to the corpus); Members holds them
// and is not written.
type ContactPolicy struct {
	Counts           map[string]int64            `json:"counts"`
	InvitationIDs    map[string][]string         `json:"invitation_ids"`
	ByCampaign       map[string]map[string]int64 `json:"by_campaign"`
	ExclusionMembers string                      `json:"exclusion_members"`
	Members          []string                    `json:"-"`
}

// ServedSchema is one row of v_served_tool_schemas. Truncated is 1 when the SDK cut or
// redacted the schema; FirstSeen and LastSeen are hours-format times (to the second).
type ServedSchema struct {
	ServerName    string `json:"server_name"`
	ServerVersion string `json:"server_version"`
	ToolName      string `json:"tool_name"`
	SchemaSHA256  string `json:"schema_sha256"`
	Truncated     uint8  `json:"truncated"`
	FirstSeen     string `json:"first_seen"`
	LastSeen      string `json:"last_seen"`
}

func (s ServedSchema) key() string {
	return s.ServerName + " " + s.ServerVersion + " " + s.ToolName + " " + s.SchemaSHA256
}

// SDKEvent is one row of outcome_sdk_events. Kind is the event kind's short name
// (missing_capability, feedback, resources_list, resource_read, prompts_list, prompt_get,
// identify); Subject is what the event is about: the text of a missing capability, a
// feedback's type, a resource's uri, a prompt's name, ” for listings and identifies.
type SDKEvent struct {
	Kind       string `json:"kind"`
	Subject    string `json:"subject"`
	ClientName string `json:"client_name"`
	Events     int64  `json:"events"`
	Errors     int64  `json:"errors"`
}

func (s SDKEvent) key() string { return s.Kind + " " + s.Subject + " " + s.ClientName }

// Corpus describes a generated JSONL corpus.
type Corpus struct {
	Seed        int64  `json:"seed"`
	Events      int    `json:"events"`       // --events asked for
	Lines       int    `json:"lines"`        // lines written, duplicates and malformed included
	Duplicates  int    `json:"duplicates"`   // lines repeating an earlier line's uuid exactly
	Malformed   int    `json:"malformed"`    // lines that must be dead-lettered
	End         string `json:"end"`          // RFC 3339; no event is later than this
	InstanceURL string `json:"instance_url"` // default instance URL the identity hashes assume
}

// IgnoredKeyRate is one row of v_ignored_key_rates_hourly (without the derived rate).
type IgnoredKeyRate struct {
	Hour                 string `json:"hour"`
	ToolName             string `json:"tool_name"`
	ClientName           string `json:"client_name"`
	SuccessfulCalls      int64  `json:"successful_calls"`
	CallsWithIgnoredKeys int64  `json:"calls_with_ignored_keys"`
}

// IgnoredKey is one row of v_ignored_keys_hourly.
type IgnoredKey struct {
	Hour        string `json:"hour"`
	ToolName    string `json:"tool_name"`
	KeyPath     string `json:"key_path"`
	Occurrences int64  `json:"occurrences"`
}

// GateReason is one row of v_gate_reasons_hourly; nil capability flags mean unknown.
type GateReason struct {
	Hour          string `json:"hour"`
	CampaignID    string `json:"campaign_id"`
	Reason        string `json:"reason"`
	ClientName    string `json:"client_name"`
	URLSupported  *uint8 `json:"url_supported"`
	FormSupported *uint8 `json:"form_supported"`
	Calls         int64  `json:"calls"`
	People        int64  `json:"people"`
}

// ToolMisuse is one hour and tool of v_tool_call_stats_hourly, summed over clients and
// server versions.
type ToolMisuse struct {
	Hour             string `json:"hour"`
	ToolName         string `json:"tool_name"`
	Calls            int64  `json:"calls"`
	Errors           int64  `json:"errors"`
	ValidationErrors int64  `json:"validation_errors"`
	UnknownToolCalls int64  `json:"unknown_tool_calls"`
}

// FunnelDay is one row of v_recruitment_funnel_daily.
type FunnelDay struct {
	Day         string `json:"day"`
	CampaignID  string `json:"campaign_id"`
	FeatureFlag string `json:"feature_flag"`
	Invitations int64  `json:"invitations"`
	People      int64  `json:"people"`
	FirstOpens  int64  `json:"first_opens"`
	Accepted    int64  `json:"accepted"`
	Declined    int64  `json:"declined"`
	Cancelled   int64  `json:"cancelled"`
	Unanswered  int64  `json:"unanswered"`
}

// FunnelPath is one row of panel_campaign_funnel_by_path over the whole range: Path is
// input_required, sse_elicitation_create or unknown; ClientName is the invitation's client,
// "unknown" when it named none. People are distinct within the row.
type FunnelPath struct {
	Path        string `json:"path"`
	ClientName  string `json:"client_name"`
	Invitations int64  `json:"invitations"`
	People      int64  `json:"people"`
	FirstOpens  int64  `json:"first_opens"`
	Answered    int64  `json:"answered"`
	Accepted    int64  `json:"accepted"`
	Declined    int64  `json:"declined"`
	Cancelled   int64  `json:"cancelled"`
	Unanswered  int64  `json:"unanswered"`
}

func (f FunnelPath) key() string { return f.Path + " " + f.ClientName }

// Suppression is the `mcp:interview:{hash}:response` record expected for one identity.
// Response is "booking_link_accepted", "do_not_ask_again" or "cooldown". ExpiresAt is set for a
// cooldown (RespondedAt + 7 days, RFC 3339); once it has passed, the record must be absent.
type Suppression struct {
	DistinctID  string `json:"distinct_id"`
	CampaignID  string `json:"campaign_id"`
	Response    string `json:"response"`
	RespondedAt string `json:"responded_at"`
	ExpiresAt   string `json:"expires_at,omitempty"`
}

// Normalize sorts every row slice by its key columns so two outcomes compare row by row.
func (o *Outcome) Normalize() {
	sort.Slice(o.IgnoredKeyRates, func(i, j int) bool {
		a, b := o.IgnoredKeyRates[i], o.IgnoredKeyRates[j]
		return less(a.Hour, b.Hour, a.ToolName, b.ToolName, a.ClientName, b.ClientName)
	})
	sort.Slice(o.IgnoredKeys, func(i, j int) bool {
		a, b := o.IgnoredKeys[i], o.IgnoredKeys[j]
		return less(a.Hour, b.Hour, a.ToolName, b.ToolName, a.KeyPath, b.KeyPath)
	})
	sort.Slice(o.GateReasons, func(i, j int) bool {
		a, b := o.GateReasons[i], o.GateReasons[j]
		return less(a.Hour, b.Hour, a.CampaignID, b.CampaignID, a.Reason, b.Reason, a.ClientName, b.ClientName,
			flag(a.URLSupported), flag(b.URLSupported), flag(a.FormSupported), flag(b.FormSupported))
	})
	sort.Slice(o.Funnel, func(i, j int) bool {
		a, b := o.Funnel[i], o.Funnel[j]
		return less(a.Day, b.Day, a.CampaignID, b.CampaignID, a.FeatureFlag, b.FeatureFlag)
	})
	sort.Slice(o.FunnelByPath, func(i, j int) bool { return o.FunnelByPath[i].key() < o.FunnelByPath[j].key() })
	sort.Slice(o.ToolMisuse, func(i, j int) bool {
		a, b := o.ToolMisuse[i], o.ToolMisuse[j]
		return less(a.Hour, b.Hour, a.ToolName, b.ToolName)
	})
	sort.Slice(o.ServedSchemas, func(i, j int) bool { return o.ServedSchemas[i].key() < o.ServedSchemas[j].key() })
	sort.Slice(o.SDKEvents, func(i, j int) bool { return o.SDKEvents[i].key() < o.SDKEvents[j].key() })
}

func flag(p *uint8) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

// less compares pairs (a0, b0, a1, b1, ...) lexicographically.
func less(pairs ...string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i] != pairs[i+1] {
			return pairs[i] < pairs[i+1]
		}
	}
	return false
}

// Write stores o as indented JSON at path.
func Write(path string, o *Outcome) error {
	o.Normalize()
	data, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// Read loads an Outcome written by Write.
func Read(path string) (*Outcome, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var o Outcome
	if err := json.Unmarshal(data, &o); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	o.Normalize()
	return &o, nil
}

// Compare lists every difference between want and got, one readable line each (empty when they
// agree). Cooldown records in want whose ExpiresAt is at or before now are expected absent.
func Compare(want, got *Outcome, now time.Time) []string {
	want.Normalize()
	got.Normalize()
	var out []string
	out = append(out, compareCounts("events", want.EventsByKind, got.EventsByKind)...)
	out = append(out, compareCounts("table", want.Tables, got.Tables)...)
	out = append(out, compareRows("ignored_key_rates_hourly", want.IgnoredKeyRates, got.IgnoredKeyRates,
		func(r IgnoredKeyRate) string { return r.Hour + " " + r.ToolName + " " + r.ClientName })...)
	out = append(out, compareRows("ignored_keys_hourly", want.IgnoredKeys, got.IgnoredKeys,
		func(r IgnoredKey) string { return r.Hour + " " + r.ToolName + " " + r.KeyPath })...)
	out = append(out, compareRows("gate_reasons_hourly", want.GateReasons, got.GateReasons,
		func(r GateReason) string {
			return r.Hour + " " + r.CampaignID + " " + r.Reason + " " + r.ClientName + " url=" + flag(r.URLSupported) + " form=" + flag(r.FormSupported)
		})...)
	out = append(out, compareRows("recruitment_funnel_daily", want.Funnel, got.Funnel,
		func(r FunnelDay) string { return r.Day + " " + r.CampaignID + " " + r.FeatureFlag })...)
	out = append(out, compareRows("recruitment_funnel_by_path", want.FunnelByPath, got.FunnelByPath, FunnelPath.key)...)
	out = append(out, compareRows("tool_misuse_hourly", want.ToolMisuse, got.ToolMisuse,
		func(r ToolMisuse) string { return r.Hour + " " + r.ToolName })...)
	out = append(out, compareRows("served_tool_schemas", want.ServedSchemas, got.ServedSchemas, ServedSchema.key)...)
	out = append(out, compareRows("sdk_events", want.SDKEvents, got.SDKEvents, SDKEvent.key)...)

	live := map[string]Suppression{}
	for h, s := range want.Suppression {
		if s.ExpiresAt != "" {
			if exp, err := time.Parse(time.RFC3339, s.ExpiresAt); err == nil && !exp.After(now) {
				continue
			}
		}
		live[h] = s
	}
	for _, h := range slices.Sorted(maps.Keys(live)) {
		g, ok := got.Suppression[h]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("suppression %s: want %s (%s), missing", h, live[h].Response, live[h].RespondedAt))
		case !sameSuppression(live[h], g):
			out = append(out, fmt.Sprintf("suppression %s: want %+v, got %+v", h, live[h], g))
		}
	}
	for _, h := range slices.Sorted(maps.Keys(got.Suppression)) {
		if _, ok := live[h]; !ok {
			out = append(out, fmt.Sprintf("suppression %s: unexpected record %+v", h, got.Suppression[h]))
		}
	}
	return out
}

func sameSuppression(a, b Suppression) bool {
	ta, ea := time.Parse(time.RFC3339Nano, a.RespondedAt)
	tb, eb := time.Parse(time.RFC3339Nano, b.RespondedAt)
	sameTime := a.RespondedAt == b.RespondedAt || (ea == nil && eb == nil && ta.Equal(tb))
	return a.DistinctID == b.DistinctID && a.CampaignID == b.CampaignID && a.Response == b.Response && sameTime
}

func compareCounts(what string, want, got map[string]int64) []string {
	var out []string
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if want[k] != got[k] {
			out = append(out, fmt.Sprintf("%s %s: want %d, got %d", what, k, want[k], got[k]))
		}
	}
	return out
}

// compareRows matches rows by key and reports missing, unexpected and differing rows.
func compareRows[R any](table string, want, got []R, key func(R) string) []string {
	var out []string
	gotByKey := make(map[string]R, len(got))
	for _, r := range got {
		gotByKey[key(r)] = r
	}
	seen := make(map[string]bool, len(want))
	for _, w := range want {
		k := key(w)
		seen[k] = true
		g, ok := gotByKey[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s [%s]: want %+v, missing", table, k, w))
		case !reflect.DeepEqual(g, w): // DeepEqual: GateReason holds *uint8 flags
			out = append(out, fmt.Sprintf("%s [%s]: want %+v, got %+v", table, k, w, g))
		}
	}
	for _, g := range got {
		if k := key(g); !seen[k] {
			out = append(out, fmt.Sprintf("%s [%s]: unexpected %+v", table, k, g))
		}
	}
	return out
}
