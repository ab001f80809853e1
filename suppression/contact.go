package suppression

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/internal/safetext"
	sqlq "github.com/mcpulse/mcpulse/sql"
)

// Contact-policy violation kinds: one per rule of the MCP server's recruitment policy that the
// stored events can show broken (DESIGN.md §8, "Contact policy, complete"). ViolationKinds
// lists them in order.
const (
	// ViolationSentWhileSuppressed is an invitation sent while the identity had accepted or
	// declined, or was in a cooldown: a gate that failed in the MCP server.
	ViolationSentWhileSuppressed = "sent_while_suppressed"
	// ViolationRepeatWithin7Days is an invitation sent less than 7 days after the identity's
	// previous one.
	ViolationRepeatWithin7Days = "repeat_within_7_days"
	// ViolationBeforeThresholds is an invitation sent before its conversation met the warm-up
	// thresholds in force (successful product calls, seconds since the first product call),
	// recounted from the stored tool calls under the invitation's distinct_id, client and
	// conversation.
	ViolationBeforeThresholds = "invited_before_thresholds"
	// ViolationURLUnsupported is an invitation to a request that said it does not support URL
	// elicitation (interview_recruitment_url_supported false; null proves nothing).
	ViolationURLUnsupported = "url_elicitation_unsupported"
	// ViolationExcludedSurface is an invitation on a surface other than mcp, or on a
	// task-bound request, as the invitation's own properties say.
	ViolationExcludedSurface = "excluded_surface_or_task"
	// ViolationDuplicateEvaluation is a second (or later) invitation from one evaluation: the
	// same identity and request id as an earlier invitation.
	ViolationDuplicateEvaluation = "two_invitations_one_evaluation"
	// ViolationExcludedPerson is an invitation to a member of the recruitment exclusion cohort.
	ViolationExcludedPerson = "excluded_person"
)

// ViolationKind describes one kind: its name and what it means, for --help and the panel.
type ViolationKind struct {
	Kind, Meaning string
}

// ViolationKinds is the table of kinds, in the order reports list them.
var ViolationKinds = []ViolationKind{
	{ViolationSentWhileSuppressed, "sent while the identity had accepted, declined, or was in a cooldown"},
	{ViolationRepeatWithin7Days, "sent less than 7 days after the identity's previous invitation"},
	{ViolationBeforeThresholds, "sent before the conversation's recounted successful product calls and age met the thresholds in force"},
	{ViolationURLUnsupported, "sent to a request whose client said it lacks URL elicitation"},
	{ViolationExcludedSurface, "sent on a surface other than mcp, or on a task-bound request"},
	{ViolationDuplicateEvaluation, "a second invitation from one evaluation (same request id)"},
	{ViolationExcludedPerson, "sent to a member of the recruitment exclusion cohort"},
}

// RepeatWindow is how soon a second invitation to the same identity counts as a repeat.
const RepeatWindow = 7 * 24 * time.Hour

// Violation is one invitation that broke the contact policy. DistinctID is the raw distinct_id
// (untrusted text): only the CLI's own report and the suppression pages show it.
type Violation struct {
	Kind                 string    `json:"kind"`
	InvitationID         string    `json:"invitation_id"`
	SentAt               time.Time `json:"sent_at"`
	CampaignID           string    `json:"campaign_id"`
	IdentityHash         string    `json:"identity_hash"`
	DistinctID           string    `json:"distinct_id"`
	StateAtSend          string    `json:"state_at_send,omitempty"`          // for sent_while_suppressed
	PreviousInvitationID string    `json:"previous_invitation_id,omitempty"` // for repeat_within_7_days and two_invitations_one_evaluation
	// Detail is a one-line explanation, caller-chosen text escaped (safetext.Escape).
	Detail string `json:"detail,omitempty"`
	// EvaluationID is the request id two invitations shared (two_invitations_one_evaluation).
	EvaluationID string `json:"evaluation_id,omitempty"`
	// For invited_before_thresholds: the recounted successful product calls and conversation
	// age in seconds, the thresholds in force, and the server's own counters
	// (interview_recruitment_completed_calls, _session_age_seconds) when they disagree with
	// the recount (nil when they agree or were not sent).
	RecountedCalls       *int64   `json:"recounted_calls,omitempty"`
	RecountedAgeSeconds  *float64 `json:"recounted_age_seconds,omitempty"`
	MinCompletedCalls    *int64   `json:"min_completed_calls,omitempty"`
	MinSessionAgeSeconds *int64   `json:"min_session_age_seconds,omitempty"`
	ReportedCalls        *int64   `json:"reported_calls,omitempty"`
	ReportedAgeSeconds   *float64 `json:"reported_age_seconds,omitempty"`
}

// CampaignViolations counts one campaign's invitations and violations, one field per kind.
type CampaignViolations struct {
	Invitations         int `json:"invitations"`
	SentWhileSuppressed int `json:"sent_while_suppressed"`
	RepeatWithin7Days   int `json:"repeat_within_7_days"`
	BeforeThresholds    int `json:"invited_before_thresholds"`
	URLUnsupported      int `json:"url_elicitation_unsupported"`
	ExcludedSurface     int `json:"excluded_surface_or_task"`
	DuplicateEvaluation int `json:"two_invitations_one_evaluation"`
	ExcludedPerson      int `json:"excluded_person"`
}

// Count is the campaign's count of kind (0 for an unknown kind).
func (c CampaignViolations) Count(kind string) int {
	switch kind {
	case ViolationSentWhileSuppressed:
		return c.SentWhileSuppressed
	case ViolationRepeatWithin7Days:
		return c.RepeatWithin7Days
	case ViolationBeforeThresholds:
		return c.BeforeThresholds
	case ViolationURLUnsupported:
		return c.URLUnsupported
	case ViolationExcludedSurface:
		return c.ExcludedSurface
	case ViolationDuplicateEvaluation:
		return c.DuplicateEvaluation
	case ViolationExcludedPerson:
		return c.ExcludedPerson
	}
	return 0
}

func (c *CampaignViolations) add(kind string) {
	switch kind {
	case ViolationSentWhileSuppressed:
		c.SentWhileSuppressed++
	case ViolationRepeatWithin7Days:
		c.RepeatWithin7Days++
	case ViolationBeforeThresholds:
		c.BeforeThresholds++
	case ViolationURLUnsupported:
		c.URLUnsupported++
	case ViolationExcludedSurface:
		c.ExcludedSurface++
	case ViolationDuplicateEvaluation:
		c.DuplicateEvaluation++
	case ViolationExcludedPerson:
		c.ExcludedPerson++
	}
}

// ContactAudit is the result of AuditContactPolicy.
type ContactAudit struct {
	Since       time.Time                     `json:"since"`
	Invitations int                           `json:"invitations"`
	Violations  []Violation                   `json:"violations"`
	ByCampaign  map[string]CampaignViolations `json:"by_campaign"`
	// ByKind counts the violations per kind (every kind of ViolationKinds, 0 included).
	ByKind map[string]int `json:"by_kind"`
	// Excluded is how many distinct ids the exclusion list held (0: the check had no list).
	Excluded int `json:"excluded_members"`
}

// InvitationIDs lists the offending invitation ids of kind, in the audit's order.
func (a *ContactAudit) InvitationIDs(kind string) []string {
	var out []string
	for _, v := range a.Violations {
		if v.Kind == kind {
			out = append(out, v.InvitationID)
		}
	}
	return out
}

// contactHistory is one identity's recruitment history: invitations, responses and resets.
type contactHistory struct {
	invitations []contactInvitation
	responses   []Response
	resets      []time.Time
}

type contactInvitation struct {
	at                          time.Time
	invitationID, campaign, did string
	flag                        string
	urlSupported                *uint8
	reportedCalls               *int64
	reportedAge                 *float64
	props                       invitationProps
}

// AuditContactPolicy is AuditContactPolicyWith under the default options: the default
// non-product tools and no exclusion list.
func AuditContactPolicy(ctx context.Context, ch driver.Conn, since, now time.Time, dryRun bool) (*ContactAudit, error) {
	return AuditContactPolicyWith(ctx, ch, since, now, dryRun, ContactPolicyOptions{})
}

// AuditContactPolicyWith replays the event log to check that the contact policy was honoured:
// every invitation sent at or after since is judged by each rule of ViolationKinds.
//
// Suppression: the state at an invitation is the Fold of the identity's responses dated at or
// before it, under its last reset at or before it, at the invitation's time (so a cooldown
// ending exactly then no longer holds); responses and resets at the same instant as the
// invitation count before it. A repeat is an invitation less than RepeatWindow after the
// identity's previous one. The further kinds read what the invitation event carries
// (DESIGN.md §8): the warm-up recount needs its `$mcp_conversation_id` (the client is its
// `$mcp_client_name`, ” when absent), the surface rule its `interview_recruitment_surface` or
// `interview_recruitment_task_bound`, the evaluation rule its `interview_recruitment_request_id`;
// an invitation without them is not judged by that rule. Thresholds come from the flag
// payload version in force at the invitation (table flag_payload_versions, by feature_flag and
// campaign_id as variant), else campaigns.DefaultCompletedCalls and DefaultSessionAgeSecs.
//
// The violations are stored in table contact_policy_violations (re-running replaces them)
// unless dryRun. Errors are ClickHouse's, wrapped with what was being read or written.
func AuditContactPolicyWith(ctx context.Context, ch driver.Conn, since, now time.Time, dryRun bool, opts ContactPolicyOptions) (*ContactAudit, error) {
	histories := map[string]*contactHistory{}
	history := func(h string) *contactHistory {
		if histories[h] == nil {
			histories[h] = &contactHistory{}
		}
		return histories[h]
	}
	if err := eachResponse(ctx, ch, func(h string, r Response) {
		history(h).responses = append(history(h).responses, r)
	}); err != nil {
		return nil, err
	}
	// Every reset, not only the last, lifts the suppression in force at its time.
	if err := eachReset(ctx, ch, func(h string, m resetMark) {
		history(h).resets = append(history(h).resets, m.at)
	}); err != nil {
		return nil, err
	}
	rows, err := ch.Query(ctx, sqlq.Query("suppression_invitations"))
	if err != nil {
		return nil, fmt.Errorf("read invitations: %w", err)
	}
	needCalls := false
	for rows.Next() {
		var (
			h, props string
			ms       int64
			i        contactInvitation
		)
		if err := rows.Scan(&h, &i.did, &i.campaign, &i.invitationID, &ms, &i.flag, &i.urlSupported,
			&i.reportedCalls, &i.reportedAge, &props); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read invitations: %w", err)
		}
		i.at = time.UnixMilli(ms).UTC()
		i.props = parseInvitationProps(props)
		needCalls = needCalls || i.props.conversation != ""
		history(h).invitations = append(history(h).invitations, i)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read invitations: %w", err)
	}
	var (
		warm     *warmup
		payloads payloadVersions
	)
	if needCalls {
		if warm, err = readWarmup(ctx, ch, opts.nonProduct()); err != nil {
			return nil, err
		}
		if payloads, err = readPayloadVersions(ctx, ch); err != nil {
			return nil, err
		}
	}

	audit := &ContactAudit{Since: since, ByCampaign: map[string]CampaignViolations{}, Violations: []Violation{},
		ByKind: map[string]int{}, Excluded: len(opts.Excluded)}
	for _, k := range ViolationKinds {
		audit.ByKind[k.Kind] = 0
	}
	for h, hist := range histories {
		sort.SliceStable(hist.invitations, func(i, j int) bool { return hist.invitations[i].at.Before(hist.invitations[j].at) })
		sort.SliceStable(hist.responses, func(i, j int) bool { return hist.responses[i].At.Before(hist.responses[j].At) })
		var lastInvite *contactInvitation
		evaluations := map[string]*contactInvitation{} // request id → its first invitation
		for i := range hist.invitations {
			e := &hist.invitations[i]
			first := evaluations[e.props.requestID]
			if e.props.requestID != "" && first == nil {
				evaluations[e.props.requestID] = e
			}
			if !e.at.Before(since) {
				c := audit.ByCampaign[e.campaign]
				c.Invitations++
				audit.Invitations++
				found := func(v Violation) {
					v.InvitationID, v.SentAt, v.CampaignID, v.IdentityHash, v.DistinctID = e.invitationID, e.at, e.campaign, h, e.did
					c.add(v.Kind)
					audit.ByKind[v.Kind]++
					audit.Violations = append(audit.Violations, v)
				}
				if state := hist.stateAt(e.at); state != "" {
					found(Violation{Kind: ViolationSentWhileSuppressed, StateAtSend: state, Detail: "state " + state})
				}
				if lastInvite != nil && e.at.Sub(lastInvite.at) < RepeatWindow && lastInvite.invitationID != e.invitationID {
					found(Violation{Kind: ViolationRepeatWithin7Days, PreviousInvitationID: lastInvite.invitationID,
						Detail: "previous invitation " + safetext.Quote(lastInvite.invitationID)})
				}
				if e.props.conversation != "" {
					if v, bad := warm.judge(e, payloads.thresholdsAt(e.flag, e.campaign, e.at)); bad {
						found(v)
					}
				}
				if e.urlSupported != nil && *e.urlSupported == 0 {
					found(Violation{Kind: ViolationURLUnsupported, Detail: "interview_recruitment_url_supported false"})
				}
				if why := e.props.excludedSurface(); why != "" {
					found(Violation{Kind: ViolationExcludedSurface, Detail: why})
				}
				if first != nil && first.invitationID != e.invitationID {
					found(Violation{Kind: ViolationDuplicateEvaluation, PreviousInvitationID: first.invitationID, EvaluationID: e.props.requestID,
						Detail: "request " + safetext.Quote(e.props.requestID) + " already invited " + safetext.Quote(first.invitationID)})
				}
				if opts.Excluded[e.did] {
					found(Violation{Kind: ViolationExcludedPerson, Detail: "distinct_id in the exclusion list" + opts.sourceSuffix()})
				}
				audit.ByCampaign[e.campaign] = c
			}
			lastInvite = e
		}
	}
	sort.Slice(audit.Violations, func(i, j int) bool {
		a, b := audit.Violations[i], audit.Violations[j]
		if !a.SentAt.Equal(b.SentAt) {
			return a.SentAt.Before(b.SentAt)
		}
		return a.Kind+a.InvitationID < b.Kind+b.InvitationID
	})
	if dryRun || len(audit.Violations) == 0 {
		return audit, nil
	}
	batch, err := ch.PrepareBatch(ctx, `INSERT INTO mcpulse.contact_policy_violations (kind, invitation_id, sent_at, campaign_id,
identity_hash, distinct_id, state_at_send, previous_invitation_id, detected_at, detail, evaluation_id, recounted_calls,
recounted_age_seconds, min_completed_calls, min_session_age_seconds, reported_calls, reported_age_seconds)`)
	if err != nil {
		return nil, fmt.Errorf("store violations: %w", err)
	}
	for _, v := range audit.Violations {
		if err := batch.Append(v.Kind, v.InvitationID, v.SentAt, v.CampaignID, v.IdentityHash, v.DistinctID, v.StateAtSend,
			v.PreviousInvitationID, now.UTC(), v.Detail, v.EvaluationID, v.RecountedCalls, v.RecountedAgeSeconds,
			v.MinCompletedCalls, v.MinSessionAgeSeconds, v.ReportedCalls, v.ReportedAgeSeconds); err != nil {
			_ = batch.Abort()
			return nil, fmt.Errorf("BUG: append violation: %w", err)
		}
	}
	if err := batch.Send(); err != nil {
		return nil, fmt.Errorf("store violations: %w", err)
	}
	return audit, nil
}

// stateAt is the identity's suppression state at t ("" when none): the Fold of its responses
// dated at or before t under its last reset at or before t. responses must be sorted by time.
func (hist *contactHistory) stateAt(t time.Time) string {
	var reset *time.Time
	for i := range hist.resets {
		if r := &hist.resets[i]; !r.After(t) && (reset == nil || r.After(*reset)) {
			reset = r
		}
	}
	n := sort.Search(len(hist.responses), func(i int) bool { return hist.responses[i].At.After(t) })
	if win := Fold(reset, hist.responses[:n], t); win >= 0 {
		return hist.responses[win].Record.Response
	}
	return ""
}
