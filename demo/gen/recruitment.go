package gen

import (
	"hash/fnv"
	"math"
	"strconv"
	"time"
)

// Recruitment flows: an invitation, perhaps booking-link opens (first and repeated), perhaps
// a response (on time or late), and sometimes a follow-up: a later invitation after a cancel
// or no answer (possibly in another campaign), a late cancel after a decline.

const answerWindow = 10 * time.Minute

// flowState is per-identity bookkeeping so no identity gets two responses in the same second
// (the suppression fold breaks ties nowhere, so the corpus avoids them).
type flowState struct {
	respondedAt map[string]map[int64]bool // identity key → responded_at seconds used
}

// recruitment generates about budget recruitment events (never more).
func (g *generator) recruitment(budget int) []*event {
	st := &flowState{respondedAt: map[string]map[int64]bool{}}
	var out []*event
	next := 0 // special users first, then random ones
	for len(out) < budget {
		var u *user
		if next < len(specialIDs)+2 {
			u = g.users[next]
			next++
		} else {
			u = g.users[g.rng.IntN(len(g.users))]
		}
		c := &campaigns[g.pick(campWeights)]
		t0 := g.timeIn(g.start, g.end.Add(-2*time.Minute), false)
		flow := g.flow(st, u, c, t0, 0)
		if room := budget - len(out); len(flow) > room {
			flow = flow[:room] // the invitation comes first, so what remains is consistent
		}
		out = append(out, flow...)
	}
	return out
}

// flow generates one invitation to u at t0 and what follows it, in generation order
// (invitation first).
func (g *generator) flow(st *flowState, u *user, c *campaign, t0 time.Time, depth int) []*event {
	invID := g.newUUID(t0)
	inv := g.recruitEvent(evInvite, u, c, invID, t0, t0)
	inv.rec.diag = &diagRec{
		reason:         "invited",
		url:            pickTri(g, 0.9, 0.0, 0.1),
		form:           pickTri(g, 0.4, 0.45, 0.15),
		campaignID:     c.id,
		completedCalls: int64(3 + g.rng.IntN(40)),
		sessionAge:     strconv.FormatFloat(math.Round((300+g.rng.Float64()*7000)*10)/10, 'f', -1, 64),
	}
	inv.rec.protocol, inv.rec.client = invitationSession(invID)
	out := []*event{inv}

	// The response, if any.
	var response string
	var respondedAt time.Time
	if g.chance(0.72) {
		switch r := g.rng.Float64(); {
		case r < 0.33:
			response = "accept"
		case r < 0.70:
			response = "decline"
		default:
			response = "cancel"
		}
		var delay time.Duration
		switch r := g.rng.Float64(); {
		case r < LateResponseRate:
			delay = answerWindow + time.Second + time.Duration(g.rng.Int64N(int64(3*time.Hour)))
		case r < LateResponseRate+0.01:
			delay = answerWindow // exactly on the boundary: still answered
		default:
			delay = 4*time.Second + time.Duration(g.rng.Int64N(int64(answerWindow-5*time.Second)))
		}
		respondedAt = g.freeSecond(st, u, t0.Add(delay).Truncate(time.Second))
		if !respondedAt.Before(g.end) {
			response = ""
		}
	}
	if response != "" {
		out = append(out, g.responseEvent(u, c, invID, t0, response, respondedAt))
	}

	// Booking-link opens: mostly after an accept.
	openP, from := 0.15, t0.Add(10*time.Second)
	switch response {
	case "accept":
		openP, from = 0.85, respondedAt.Add(2*time.Second)
	case "decline", "cancel":
		openP = 0.05
	}
	if g.chance(openP) {
		t := from.Add(time.Duration(g.rng.Int64N(int64(2 * time.Minute)))).Truncate(time.Second)
		for n := 1 + boolInt(g.chance(0.35))*(1+g.rng.IntN(3)); n > 0 && t.Before(g.end); n-- {
			out = append(out, g.recruitEvent(evOpen, u, c, invID, t, t0))
			t = t.Add(time.Duration(30+g.rng.IntN(3600)) * time.Second)
		}
	}

	// Follow-ups.
	if depth < 3 {
		switch {
		case response == "decline" && g.chance(0.12):
			// A late cancel of the same invitation: the decline (permanent) must win.
			at := g.freeSecond(st, u, respondedAt.Add(15*time.Minute+time.Duration(g.rng.Int64N(int64(2*time.Hour)))).Truncate(time.Second))
			if at.Before(g.end) {
				out = append(out, g.responseEvent(u, c, invID, t0, "cancel", at))
			}
		case (response == "cancel" && g.chance(0.3)) || (response == "" && g.chance(0.1)) || (response == "accept" && g.chance(0.05)):
			base := t0
			if response != "" {
				base = respondedAt
			}
			t1 := base.Add(30*time.Minute + time.Duration(g.rng.Int64N(int64(10*time.Hour)))).Truncate(time.Second)
			if t1.Before(g.end.Add(-2 * time.Minute)) {
				c2 := c
				if g.chance(0.4) {
					c2 = &campaigns[g.pick(campWeights)]
				}
				out = append(out, g.flow(st, u, c2, t1, depth+1)...)
			}
		}
	}
	return out
}

// pickTri returns true, false or null with the given chances.
func pickTri(g *generator, pTrue, pFalse, pNull float64) tri {
	switch r := g.rng.Float64() * (pTrue + pFalse + pNull); {
	case r < pTrue:
		return triTrue
	case r < pTrue+pFalse:
		return triFalse
	}
	return triNull
}

// freeSecond returns t, or the next second no response of u's identity has used yet.
func (g *generator) freeSecond(st *flowState, u *user, t time.Time) time.Time {
	instance := u.instance
	if instance == "" {
		instance = g.cfg.InstanceURL
	}
	key := instance + "\x00" + u.id
	used := st.respondedAt[key]
	if used == nil {
		used = map[int64]bool{}
		st.respondedAt[key] = used
	}
	for used[t.Unix()] {
		t = t.Add(time.Second)
	}
	used[t.Unix()] = true
	return t
}

// recruitEvent builds an invitation or open of invitation invID (sent at sentAt) at t.
func (g *generator) recruitEvent(name string, u *user, c *campaign, invID string, t, sentAt time.Time) *event {
	e := &event{seq: g.nextSeq(), name: name, distinctID: u.id, ts: t}
	e.uuid = g.newUUID(t)
	e.tsText = formatTS(t, g.zone(), false)
	e.rec = &recruitRec{
		campaignID:   c.id,
		invitationID: invID,
		featureFlag:  c.flag,
		instanceURL:  g.instanceURLFor(u),
		sentAt:       sentAt,
	}
	return e
}

// responseEvent builds a response given at respondedAt. Most carry responded_at and arrive
// within seconds; some arrive much later (out of order); some lack responded_at, which then
// defaults to the timestamp.
func (g *generator) responseEvent(u *user, c *campaign, invID string, sentAt time.Time, response string, respondedAt time.Time) *event {
	ts, txt := respondedAt, ""
	if g.chance(0.7) {
		txt = formatTS(respondedAt, g.zone(), false)
		delay := time.Duration(g.rng.IntN(4)) * time.Second
		if g.chance(0.04) {
			delay = time.Duration(20+g.rng.IntN(70)) * time.Minute
		}
		ts = respondedAt.Add(delay)
		if !ts.Before(g.end) {
			ts = respondedAt
		}
	}
	e := g.recruitEvent(evResponse, u, c, invID, ts, sentAt)
	e.rec.response = response
	e.rec.respondedAt = respondedAt
	e.rec.respondedTxt = txt
	return e
}

// invitationProtocols are the protocol versions the invited sessions negotiated, per mille:
// both paths (2026-07-28's input_required, the earlier revisions' SSE elicitation/create),
// and some invitations the path cannot be told of (no version, or one not date-shaped).
var invitationProtocols = []struct {
	version  string // "" absent
	perMille uint64
}{
	{"2026-07-28", 450}, {"2025-11-25", 330}, {"2025-06-18", 100}, {"2025-03-26", 20},
	{"", 60}, {"DRAFT-2026-v2", 40},
}

// invitationSession returns the protocol version and client an invitation's session had ("" for
// absent), derived from its id so the rest of the corpus draws the same random numbers.
func invitationSession(invID string) (protocol, client string) {
	h := fnv.New64a()
	h.Write([]byte(invID))
	x := h.Sum64()
	r := x % 1000
	for _, p := range invitationProtocols {
		if r < p.perMille {
			protocol = p.version
			break
		}
		r -= p.perMille
	}
	w := float64((x>>20)%10000) / 10000 * sumWeights(clientWeights)
	for i, c := range clients {
		if w < c.weight || i == len(clients)-1 {
			return protocol, c.name
		}
		w -= c.weight
	}
	return protocol, ""
}

func sumWeights(ws []float64) float64 {
	var t float64
	for _, w := range ws {
		t += w
	}
	return t
}

// ProtocolPath is the protocol path of an invitation whose session negotiated version v,
// restating panel_campaign_funnel_by_path's mapping: input_required from 2026-07-28 on (a
// date-shaped version), sse_elicitation_create for the earlier revisions, else unknown.
func ProtocolPath(v string) string {
	switch v {
	case "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25":
		return "sse_elicitation_create"
	}
	if len(v) == 10 && v >= "2026-07-28" && dateShaped(v) {
		return "input_required"
	}
	return "unknown"
}

func dateShaped(v string) bool {
	for i := 0; i < len(v); i++ {
		if i == 4 || i == 7 {
			if v[i] != '-' {
				return false
			}
		} else if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return true
}
