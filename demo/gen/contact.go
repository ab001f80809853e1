package gen

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/mcpulse/mcpulse/demo/outcome"
	"github.com/mcpulse/mcpulse/suppression"
)

// Contact-policy cases (Config.ContactViolations): for each further kind of the contact-policy
// audit, n invitations that break exactly that rule, and n that break none, each to a person
// of its own with its own conversation warmed up by stored tool calls. They carry the
// properties the audit reads (DESIGN.md §8, "Contact policy, complete"); the random
// recruitment flows carry none of them and never a false interview_recruitment_url_supported,
// so the audit finds the further kinds there nowhere.

// ContactExclusionSuffix is appended to the corpus path for the file of excluded distinct ids.
const ContactExclusionSuffix = ".excluded.txt"

// contactCase builds one case: its events and, when it breaks a rule, the offending invitation.
type contactCase struct {
	kind string // "" for a clean case
	n    int
}

// contactCases generates the cases and records what the audit must find in g.contact.
func (g *generator) contactCases(n int) []*event {
	cp := &outcome.ContactPolicy{Counts: map[string]int64{}, InvitationIDs: map[string][]string{}, ByCampaign: map[string]map[string]int64{}}
	kinds := []string{suppression.ViolationBeforeThresholds, suppression.ViolationURLUnsupported, suppression.ViolationExcludedSurface,
		suppression.ViolationDuplicateEvaluation, suppression.ViolationExcludedPerson}
	for _, k := range kinds {
		cp.Counts[k] = 0
		cp.InvitationIDs[k] = []string{}
	}
	var out []*event
	for i := range n {
		for _, k := range append([]string{""}, kinds...) {
			evs, offending, campaignID := g.contactCase(contactCase{kind: k, n: i}, cp)
			out = append(out, evs...)
			if k == "" {
				continue
			}
			cp.Counts[k]++
			cp.InvitationIDs[k] = append(cp.InvitationIDs[k], offending)
			if cp.ByCampaign[campaignID] == nil {
				cp.ByCampaign[campaignID] = map[string]int64{}
			}
			cp.ByCampaign[campaignID][k]++
		}
	}
	for _, ids := range cp.InvitationIDs {
		slices.Sort(ids)
	}
	slices.Sort(cp.Members)
	g.contact = cp
	return out
}

// contactCase returns the case's events, the offending invitation id ("" for a clean case)
// and its campaign.
func (g *generator) contactCase(cc contactCase, cp *outcome.ContactPolicy) ([]*event, string, string) {
	tag := cc.kind
	if tag == "" {
		tag = "clean"
	}
	u := &user{id: fmt.Sprintf("contact-%s-%d@cases.example", tag, cc.n)}
	c := &campaigns[cc.n%len(campaigns)]
	cl := &clients[0] // claude-code: URL elicitation
	t0 := g.timeIn(g.start, g.end.Add(-10*time.Minute), false)
	s := &session{u: u, c: cl, version: cl.versions[0], conversationID: g.newUUID(t0), sessionID: g.newUUID(t0)}

	// The warm-up: 4 successful product calls 45 s apart, a documentation lookup and a failed
	// call (neither counts); the invitation 150 s after the first call.
	okCalls, inviteAt := 4, t0.Add(150*time.Second)
	reportedCalls := int64(4)
	if cc.kind == suppression.ViolationBeforeThresholds {
		if cc.n%2 == 0 {
			okCalls, reportedCalls = 2, 3 // too few; the server's counter disagrees
		} else {
			inviteAt = t0.Add(100 * time.Second) // too young: 3 calls within 100 s
			okCalls, reportedCalls = 3, 3
		}
	}
	var out []*event
	for i := range okCalls {
		out = append(out, g.contactCall(s, g.productTool(), false, t0.Add(time.Duration(i)*45*time.Second+123*time.Millisecond)))
	}
	out = append(out, g.contactCall(s, "search_docs", false, t0.Add(5*time.Second+7*time.Millisecond)))
	out = append(out, g.contactCall(s, g.productTool(), true, t0.Add(10*time.Second+11*time.Millisecond)))

	invite := func(at time.Time, requestID string) *event {
		invID := g.newUUID(at)
		e := g.recruitEvent(evInvite, u, c, invID, at, at)
		age := at.Sub(t0).Seconds()
		e.rec.diag = &diagRec{reason: "invited", url: triTrue, form: triTrue, campaignID: c.id, completedCalls: reportedCalls,
			sessionAge: strconv.FormatFloat(age, 'f', -1, 64)}
		if cc.kind == suppression.ViolationBeforeThresholds && cc.n%2 == 0 {
			e.rec.diag.sessionAge = "150"
		}
		e.rec.client, e.rec.conversationID = cl.name, s.conversationID
		e.rec.surface, e.rec.taskBound, e.rec.requestID = suppression.SurfaceMCP, triFalse, requestID
		return e
	}
	inv := invite(inviteAt, g.newUUID(inviteAt))
	out = append(out, inv)
	offending := inv.rec.invitationID
	switch cc.kind {
	case "":
		offending = ""
	case suppression.ViolationURLUnsupported:
		inv.rec.diag.url, inv.rec.diag.form = triFalse, triTrue // form only
	case suppression.ViolationExcludedSurface:
		if cc.n%2 == 0 {
			inv.rec.surface = "posthog_ai"
		} else {
			inv.rec.taskBound = triTrue
		}
	case suppression.ViolationDuplicateEvaluation:
		second := invite(inviteAt.Add(2*time.Second), inv.rec.requestID)
		out = append(out, second)
		offending = second.rec.invitationID
	case suppression.ViolationExcludedPerson:
		cp.Members = append(cp.Members, u.id)
	}
	return out, offending, c.id
}

// productTool returns a direct tool that counts as a product call.
func (g *generator) productTool() string {
	for {
		if t := g.pickDirectTool(); !slices.Contains(suppression.DefaultNonProductTools, t.Name) {
			return t.Name
		}
	}
}

// contactCall is one tool call of a contact case's conversation.
func (g *generator) contactCall(s *session, tool string, failed bool, t time.Time) *event {
	e := &event{seq: g.nextSeq(), name: evToolCall, distinctID: s.u.id, ts: t}
	e.uuid = g.newUUID(t)
	e.tsText = formatTS(t, time.UTC, true)
	e.tool = &toolCallRec{
		toolName: tool, isError: failed, durationMs: "85", clientName: s.c.name, clientVersion: s.version,
		mode: "tools", conversationID: s.conversationID, sessionID: s.sessionID, source: "posthog",
		sessionStart: t, ignoredForm: 2,
	}
	if failed {
		e.tool.errorType, e.tool.ignoredForm = "api_error", 3
	}
	return e
}
