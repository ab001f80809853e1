package suppression

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/campaigns"
	"github.com/mcpulse/mcpulse/internal/safetext"
	sqlq "github.com/mcpulse/mcpulse/sql"
)

// Invitation properties the contact-policy audit reads from recruitment_events.properties
// (the properties no column holds). The first two are the tool-call names the MCP analytics
// SDK already uses; the last three are mcpulse's names for what the server decided (DESIGN.md
// §8, "Contact policy, complete").
const (
	PropClientName   = "$mcp_client_name"
	PropConversation = "$mcp_conversation_id"
	PropSurface      = "interview_recruitment_surface"    // "mcp" is the only surface that may recruit
	PropTaskBound    = "interview_recruitment_task_bound" // bool, or "true"/"false"
	PropRequestID    = "interview_recruitment_request_id" // the evaluated request's id
)

// SurfaceMCP is the only surface allowed to recruit.
const SurfaceMCP = "mcp"

// DefaultNonProductTools are the tool names whose calls never count toward the warm-up:
// discovery, documentation lookups and skills. Calls through exec whose verb is not "call"
// (its discovery commands) never count either, whatever this list says.
var DefaultNonProductTools = []string{
	"exec", "get_more_tools", "tools-list", "search_sentry_tools",
	"docs-search", "search_docs", "get_doc", "docs-get",
	"learn", "skills-list", "skill-get", "skills-search",
}

// A boolean recruitment flag identifies the original campaign BooleanCampaign, the variant
// under which the campaign flag lint stores its payload (campaigns.VariantReport.CampaignID);
// versions stored under the flag value BooleanVariant are read too.
const (
	BooleanCampaign = "mcp-research"
	BooleanVariant  = "true"
)

// WarmupExpiry is how long the server's warm-up counter lives without a product call.
const WarmupExpiry = 24 * time.Hour

// ContactPolicyOptions configure AuditContactPolicyWith. The zero value uses
// DefaultNonProductTools and no exclusion list.
type ContactPolicyOptions struct {
	// NonProductTools are the effective tool names that do not count as product calls; nil
	// means DefaultNonProductTools, an empty non-nil slice none.
	NonProductTools []string
	// Excluded holds the distinct ids of the recruitment exclusion cohort (ReadExclusionMembers,
	// FetchCohortMembers); nil or empty skips the excluded_person rule.
	Excluded map[string]bool
	// ExclusionSource names where Excluded came from ("file x", "PostHog cohort 641799"), for
	// the violations' detail; caller text is escaped there.
	ExclusionSource string
}

func (o ContactPolicyOptions) nonProduct() map[string]bool {
	names := o.NonProductTools
	if names == nil {
		names = DefaultNonProductTools
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}

func (o ContactPolicyOptions) sourceSuffix() string {
	if o.ExclusionSource == "" {
		return ""
	}
	return " (" + safetext.Escape(o.ExclusionSource) + ")"
}

// invitationProps is what the audit reads from an invitation's properties JSON.
type invitationProps struct {
	client, conversation string
	surface              string
	hasSurface           bool
	taskBound            bool
	requestID            string
}

// parseInvitationProps reads the invitation properties from the stored JSON text; a property of
// another type, or text that is not a JSON object, reads as absent.
func parseInvitationProps(text string) invitationProps {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(text), &m) != nil {
		return invitationProps{}
	}
	str := func(k string) (string, bool) {
		var s string
		raw := bytes.TrimSpace(m[k])
		if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return s, true
	}
	var p invitationProps
	p.client, _ = str(PropClientName)
	p.conversation, _ = str(PropConversation)
	p.surface, p.hasSurface = str(PropSurface)
	p.requestID, _ = str(PropRequestID)
	switch t := string(bytes.TrimSpace(m[PropTaskBound])); t {
	case "true", `"true"`:
		p.taskBound = true
	}
	return p
}

// excludedSurface says why the invitation's request could not recruit ("" when it could).
func (p invitationProps) excludedSurface() string {
	var why []string
	if p.hasSurface && p.surface != SurfaceMCP {
		why = append(why, "surface "+safetext.Quote(p.surface))
	}
	if p.taskBound {
		why = append(why, "task-bound request")
	}
	return strings.Join(why, ", ")
}

// thresholds are the warm-up minimums in force for one invitation.
type thresholds struct {
	calls, ageSecs int64
	source         string // "defaults" or "payload version first seen <time>"
}

var defaultThresholds = thresholds{campaigns.DefaultCompletedCalls, campaigns.DefaultSessionAgeSecs, "defaults"}

// payloadVersion is one row of flag_payload_versions.
type payloadVersion struct {
	firstSeen time.Time
	payload   string
	removed   bool
}

// payloadVersions maps flag key + "\x00" + variant to its versions, sorted by firstSeen.
type payloadVersions map[string][]payloadVersion

func readPayloadVersions(ctx context.Context, ch driver.Conn) (payloadVersions, error) {
	rows, err := ch.Query(ctx, sqlq.Query("suppression_flag_payload_versions"))
	if err != nil {
		return nil, fmt.Errorf("read flag payload versions: %w", err)
	}
	defer rows.Close()
	out := payloadVersions{}
	for rows.Next() {
		var (
			flag, variant, payload string
			s                      int64
			removed                uint8
		)
		if err := rows.Scan(&flag, &variant, &s, &payload, &removed); err != nil {
			return nil, fmt.Errorf("read flag payload versions: %w", err)
		}
		k := flag + "\x00" + variant
		out[k] = append(out[k], payloadVersion{time.Unix(s, 0).UTC(), payload, removed == 1})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read flag payload versions: %w", err)
	}
	for _, vs := range out {
		sort.Slice(vs, func(i, j int) bool { return vs[i].firstSeen.Before(vs[j].firstSeen) })
	}
	return out, nil
}

// thresholdsAt returns the thresholds of the payload version of (flag, variant) in force at t
// (the greatest first_seen <= t); with none, a removed variant or a payload whose thresholds
// cannot be read, the defaults. A field absent from the payload takes its default, as the
// server does.
func (pv payloadVersions) thresholdsAt(flag, variant string, t time.Time) thresholds {
	vs := pv[flag+"\x00"+variant]
	if len(vs) == 0 && variant == BooleanCampaign {
		vs = pv[flag+"\x00"+BooleanVariant] // a boolean flag's payload is stored under "true"
	}
	n := sort.Search(len(vs), func(i int) bool { return vs[i].firstSeen.After(t) })
	if n == 0 || vs[n-1].removed {
		return defaultThresholds
	}
	v := vs[n-1]
	text, ok, err := campaigns.PayloadText(json.RawMessage(v.payload))
	if !ok || err != nil {
		text = []byte(v.payload)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(text, &obj) != nil || obj == nil {
		return defaultThresholds
	}
	read := func(name string, def, max int64) (int64, bool) {
		raw, present := obj[name]
		if !present {
			return def, true
		}
		f, err := strconv.ParseFloat(string(bytes.TrimSpace(raw)), 64)
		if err != nil || math.Trunc(f) != f || f < 0 || f > float64(max) {
			return 0, false
		}
		return int64(f), true
	}
	calls, ok1 := read("min_completed_tool_calls", campaigns.DefaultCompletedCalls, campaigns.MaxCompletedToolCalls)
	age, ok2 := read("min_session_age_seconds", campaigns.DefaultSessionAgeSecs, campaigns.MaxSessionAgeSeconds)
	if !ok1 || !ok2 {
		return defaultThresholds
	}
	return thresholds{calls, age, "payload version first seen " + v.firstSeen.Format(time.RFC3339)}
}

// warmCall is one stored tool call under a conversation.
type warmCall struct {
	at      int64 // seconds since the epoch
	product bool  // a product call (any outcome)
	ok      bool  // successful
}

// warmup holds the stored calls per distinct_id, client and conversation, sorted by time.
type warmup struct {
	calls map[string][]warmCall
}

func warmKey(did, client, conversation string) string {
	return did + "\x00" + client + "\x00" + conversation
}

func readWarmup(ctx context.Context, ch driver.Conn, nonProduct map[string]bool) (*warmup, error) {
	rows, err := ch.Query(ctx, sqlq.Query("suppression_conversation_calls"))
	if err != nil {
		return nil, fmt.Errorf("read conversation tool calls: %w", err)
	}
	defer rows.Close()
	w := &warmup{calls: map[string][]warmCall{}}
	for rows.Next() {
		var (
			did, client, conv, tool, verb string
			isError                       uint8
			at                            int64
		)
		if err := rows.Scan(&did, &client, &conv, &tool, &verb, &isError, &at); err != nil {
			return nil, fmt.Errorf("read conversation tool calls: %w", err)
		}
		product := !nonProduct[tool] && (verb == "" || verb == "call")
		k := warmKey(did, client, conv)
		w.calls[k] = append(w.calls[k], warmCall{at: at, product: product, ok: isError == 0})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read conversation tool calls: %w", err)
	}
	for _, cs := range w.calls {
		sort.Slice(cs, func(i, j int) bool { return cs[i].at < cs[j].at })
	}
	return w, nil
}

// recount is the warm-up of the conversation at the invitation: successful product calls
// stored at or before the invitation's second, and seconds from the first product call to the
// invitation, both since the last gap of more than WarmupExpiry between product calls (the
// server's counter expires then). Calls in the invitation's own second count (their order is
// unknown at whole seconds), so the recount never undercounts.
func (w *warmup) recount(inv *contactInvitation) (calls int64, ageSecs float64) {
	cs := w.calls[warmKey(inv.did, inv.props.client, inv.props.conversation)]
	limit := inv.at.Unix()
	start, last := int64(-1), int64(-1)
	for _, c := range cs {
		if c.at > limit {
			break
		}
		if !c.product {
			continue
		}
		if last >= 0 && c.at-last > int64(WarmupExpiry/time.Second) {
			start, calls = -1, 0
		}
		if start < 0 {
			start = c.at
		}
		last = c.at
		if c.ok {
			calls++
		}
	}
	if last >= 0 && float64(inv.at.UnixMilli())/1000-float64(last) > WarmupExpiry.Seconds() {
		return 0, 0
	}
	if start < 0 {
		return calls, 0
	}
	return calls, float64(inv.at.UnixMilli()-start*1000) / 1000
}

// judge reports whether inv came before the thresholds th, with the violation to record.
func (w *warmup) judge(inv *contactInvitation, th thresholds) (Violation, bool) {
	calls, age := w.recount(inv)
	if calls >= th.calls && age >= float64(th.ageSecs) {
		return Violation{}, false
	}
	v := Violation{Kind: ViolationBeforeThresholds, RecountedCalls: &calls, RecountedAgeSeconds: &age,
		MinCompletedCalls: &th.calls, MinSessionAgeSeconds: &th.ageSecs}
	detail := fmt.Sprintf("%d successful product calls over %s s, thresholds %d calls and %d s (%s)",
		calls, strconv.FormatFloat(age, 'f', -1, 64), th.calls, th.ageSecs, th.source)
	if r := inv.reportedCalls; r != nil && *r != calls {
		v.ReportedCalls = r
	}
	if r := inv.reportedAge; r != nil && math.Abs(*r-age) >= 1 {
		v.ReportedAgeSeconds = r
	}
	if v.ReportedCalls != nil || v.ReportedAgeSeconds != nil {
		detail += "; the server counted"
		if r := v.ReportedCalls; r != nil {
			detail += fmt.Sprintf(" %d calls", *r)
		}
		if r := v.ReportedAgeSeconds; r != nil {
			detail += fmt.Sprintf(" %s s", strconv.FormatFloat(*r, 'f', -1, 64))
		}
	}
	v.Detail = detail
	return v, true
}
