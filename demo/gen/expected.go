package gen

import (
	"slices"
	"time"

	"github.com/mcpulse/mcpulse/demo/outcome"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/suppression"
)

// The expected outcome, computed from the generated events with plain maps, restating
// DESIGN.md §3-§4's rules rather than calling the consumer: every rollup counts distinct
// events (duplicate lines add nothing), malformed lines only count as dead letters.

const (
	hourLayout = "2006-01-02 15:04:05"
	dayLayout  = "2006-01-02"
)

// clientInjected tells the client-injected keys apart (the one piece of ingest the expected
// outcome shares with the consumer, by the contract: which keys are not agent mistakes).
var clientInjected = ingest.MustKeyFilter(ingest.DefaultClientInjectedKeys)

type (
	rateKey struct{ hour, tool, client string }
	toolKey struct{ hour, tool string }
	keyKey  struct{ hour, tool, path string }
	gateKey struct {
		hour, campaign, reason, client string
		url, form                      tri // triNull for unknown (absent or null)
	}
	funnelKey struct{ day, campaign, flag string }
	pathKey   struct{ path, client string }
	funnelAcc struct {
		invitations, people, opens, accepted, declined, cancelled, answered map[string]bool
	}
	gateAcc struct {
		calls  int64
		people map[string]bool
	}
)

func newSet() map[string]bool { return map[string]bool{} }

func flagOf(t tri) *uint8 {
	switch t {
	case triFalse:
		v := uint8(0)
		return &v
	case triTrue:
		v := uint8(1)
		return &v
	}
	return nil
}

func unknownAsNull(t tri) tri {
	if t.isKnown() {
		return t
	}
	return triNull
}

// expectedOutcome computes what consuming the corpus must produce.
func expectedOutcome(cfg Config, events []*event, lines, dups, malformed int) *outcome.Outcome {
	o := &outcome.Outcome{
		Corpus: outcome.Corpus{
			Seed: cfg.Seed, Events: cfg.Events, Lines: lines, Duplicates: dups, Malformed: malformed,
			End: cfg.End.UTC().Format(time.RFC3339), InstanceURL: cfg.InstanceURL,
		},
		EventsByKind: map[string]int64{},
		Tables:       map[string]int64{"tool_calls": 0, "recruitment_events": 0, "dead_letters": int64(malformed)},
		Suppression:  map[string]outcome.Suppression{},
	}

	rates := map[rateKey]*outcome.IgnoredKeyRate{}
	keys := map[keyKey]int64{}
	misuse := map[toolKey]*outcome.ToolMisuse{}
	gates := map[gateKey]*gateAcc{}
	funnel := map[funnelKey]*funnelAcc{}
	byPath := map[pathKey]*funnelAcc{}
	// Each invitation's protocol path and client (panel_campaign_funnel_by_path's rule): its
	// opens and responses are counted under them.
	invitationPath := map[string]pathKey{}
	for _, e := range events {
		if e.rec != nil && e.name == evInvite {
			client := e.rec.client
			if client == "" {
				client = "unknown"
			}
			invitationPath[e.rec.invitationID] = pathKey{ProtocolPath(e.rec.protocol), client}
		}
	}
	byIdentity := map[string][]*event{}
	served := map[outcome.ServedSchema]outcome.ServedSchema{} // key fields only → the row
	sdkEvents := map[outcome.SDKEvent]*outcome.SDKEvent{}     // key fields only → the row

	// events holds each event once (duplicate lines are copies made at write time, and
	// newUUID never repeats a uuid), so counting events counts distinct uuids.
	for _, e := range events {
		if r := e.report; r != nil {
			kind := ingest.KindOf(e.name).Name
			o.EventsByKind[kind]++
			subject := r.subject
			if e.name == evResourcesList || e.name == evPromptsList || e.name == evIdentify {
				subject = ""
			}
			k := outcome.SDKEvent{Kind: kind, Subject: subject, ClientName: r.client}
			row := sdkEvents[k]
			if row == nil {
				row = &outcome.SDKEvent{Kind: kind, Subject: subject, ClientName: r.client}
				sdkEvents[k] = row
			}
			row.Events++
			if r.isError {
				row.Errors++
			}
			continue
		}
		if e.sdk != nil {
			if e.name == evToolsList {
				// A listing is stored as its tools' served schemas, not counted as an event.
				x := e.sdk
				at := e.ts.UTC().Truncate(time.Second).Format(hourLayout)
				for _, tl := range x.server.tools {
					k := outcome.ServedSchema{ServerName: x.server.name, ServerVersion: x.version, ToolName: tl.Name, SchemaSHA256: x.server.servedSHA[tl.Name]}
					row, ok := served[k]
					if !ok {
						row = k
						row.FirstSeen, row.LastSeen = at, at
						if x.server.servedCut[tl.Name] {
							row.Truncated = 1
						}
					}
					row.FirstSeen, row.LastSeen = min(row.FirstSeen, at), max(row.LastSeen, at)
					served[k] = row
				}
				continue
			}
			// $mcp_initialize and $exception: counted by kind.
			o.EventsByKind[ingest.KindOf(e.name).Name]++
			continue
		}
		o.EventsByKind[ingest.KindOf(e.name).Name]++
		hour := e.ts.UTC().Truncate(time.Hour).Format(hourLayout)

		if t := e.tool; t != nil {
			o.Tables["tool_calls"]++
			tool := t.effectiveTool()
			mk := toolKey{hour, tool}
			m := misuse[mk]
			if m == nil {
				m = &outcome.ToolMisuse{Hour: hour, ToolName: tool}
				misuse[mk] = m
			}
			m.Calls++
			if t.isError {
				m.Errors++
			}
			if t.validation {
				m.ValidationErrors++
			}
			if t.unknownTool {
				m.UnknownToolCalls++
			}
			rk := rateKey{hour, tool, t.clientName}
			r := rates[rk]
			if r == nil {
				r = &outcome.IgnoredKeyRate{Hour: hour, ToolName: tool, ClientName: t.clientName}
				rates[rk] = r
			}
			if !t.isError {
				r.SuccessfulCalls++
				ignored := t.ignored
				if t.sdk != nil {
					// The SDK shape carries no $mcp_ignored_keys: what counts is what the event
					// lets the pipeline derive, and a call it cannot measure counts none.
					ignored = nil
					if t.sdk.expect.measurable() {
						ignored = t.sdk.expect.keys
					}
				}
				counted := clientInjected.Counted(ignored)
				if len(counted) > 0 {
					r.CallsWithIgnoredKeys++
				}
				for i, k := range counted {
					if !slices.Contains(counted[:i], k) { // occurrences count events, not repeats
						keys[keyKey{hour, tool, k}]++
					}
				}
			}
			if d := t.diag; d != nil && d.reason != "" {
				gk := gateKey{hour, d.campaignID, d.reason, t.clientName, unknownAsNull(d.url), unknownAsNull(d.form)}
				acc := gates[gk]
				if acc == nil {
					acc = &gateAcc{people: newSet()}
					gates[gk] = acc
				}
				acc.calls++
				acc.people[e.distinctID] = true
			}
			continue
		}

		o.Tables["recruitment_events"]++
		r := e.rec
		fk := funnelKey{r.sentAt.UTC().Format(dayLayout), r.campaignID, r.featureFlag}
		f := funnel[fk]
		if f == nil {
			f = &funnelAcc{newSet(), newSet(), newSet(), newSet(), newSet(), newSet(), newSet()}
			funnel[fk] = f
		}
		pk, ok := invitationPath[r.invitationID]
		if !ok {
			pk = pathKey{"unknown", "unknown"}
		}
		fp := byPath[pk]
		if fp == nil {
			fp = &funnelAcc{newSet(), newSet(), newSet(), newSet(), newSet(), newSet(), newSet()}
			byPath[pk] = fp
		}
		switch e.name {
		case evInvite:
			for _, f := range []*funnelAcc{f, fp} {
				f.invitations[r.invitationID] = true
				f.people[e.distinctID] = true
			}
		case evOpen:
			f.opens[r.invitationID] = true
			fp.opens[r.invitationID] = true
		case evResponse:
			for _, f := range []*funnelAcc{f, fp} {
				switch r.response {
				case "accept":
					f.accepted[r.invitationID] = true
				case "decline":
					f.declined[r.invitationID] = true
				case "cancel":
					f.cancelled[r.invitationID] = true
				}
				if !r.respondedAt.After(r.sentAt.Add(answerWindow)) {
					f.answered[r.invitationID] = true
				}
			}
			instance := r.instanceURL
			if instance == "" {
				instance = cfg.InstanceURL
			}
			h := ingest.IdentityHash(instance, e.distinctID)
			byIdentity[h] = append(byIdentity[h], e)
		}
	}

	for _, r := range rates {
		o.IgnoredKeyRates = append(o.IgnoredKeyRates, *r)
	}
	for _, m := range misuse {
		o.ToolMisuse = append(o.ToolMisuse, *m)
	}
	for k, n := range keys {
		o.IgnoredKeys = append(o.IgnoredKeys, outcome.IgnoredKey{Hour: k.hour, ToolName: k.tool, KeyPath: k.path, Occurrences: n})
	}
	for k, acc := range gates {
		o.GateReasons = append(o.GateReasons, outcome.GateReason{
			Hour: k.hour, CampaignID: k.campaign, Reason: k.reason, ClientName: k.client,
			URLSupported: flagOf(k.url), FormSupported: flagOf(k.form),
			Calls: acc.calls, People: int64(len(acc.people)),
		})
	}
	for k, f := range funnel {
		o.Funnel = append(o.Funnel, outcome.FunnelDay{
			Day: k.day, CampaignID: k.campaign, FeatureFlag: k.flag,
			Invitations: int64(len(f.invitations)), People: int64(len(f.people)), FirstOpens: int64(len(f.opens)),
			Accepted: int64(len(f.accepted)), Declined: int64(len(f.declined)), Cancelled: int64(len(f.cancelled)),
			Unanswered: int64(len(f.invitations) - len(f.answered)),
		})
	}
	for k, f := range byPath {
		o.FunnelByPath = append(o.FunnelByPath, outcome.FunnelPath{
			Path: k.path, ClientName: k.client,
			Invitations: int64(len(f.invitations)), People: int64(len(f.people)), FirstOpens: int64(len(f.opens)),
			Answered: int64(len(f.answered)), Accepted: int64(len(f.accepted)), Declined: int64(len(f.declined)),
			Cancelled: int64(len(f.cancelled)), Unanswered: int64(len(f.invitations) - len(f.answered)),
		})
	}
	for _, row := range served {
		o.ServedSchemas = append(o.ServedSchemas, row)
	}
	for _, row := range sdkEvents {
		o.SDKEvents = append(o.SDKEvents, *row)
	}
	for h, responses := range byIdentity {
		if s, ok := foldSuppression(responses); ok {
			o.Suppression[h] = s
		}
	}
	return o
}

// foldSuppression is the record DESIGN.md §3's precedence leaves one identity with, decided by
// the consumers' own rules (suppression.Fold, which the Redis script is tested against): the
// accept/decline with the latest responded_at (booking_link_accepted / do_not_ask_again);
// with none, the latest cancel, a cooldown until responded_at + 7 days. No response is dropped
// as expired here: Compare drops cooldowns that ended by the time it compares.
func foldSuppression(responses []*event) (outcome.Suppression, bool) {
	folded := make([]suppression.Response, len(responses))
	for i, e := range responses {
		folded[i] = suppression.NewResponse(e.distinctID, e.rec.campaignID, e.rec.response, e.rec.respondedAt)
	}
	i := suppression.Fold(nil, folded, time.Time{})
	if i < 0 {
		return outcome.Suppression{}, false
	}
	win := responses[i]
	s := outcome.Suppression{
		DistinctID:  win.distinctID,
		CampaignID:  win.rec.campaignID,
		Response:    folded[i].Record.Response,
		RespondedAt: win.rec.respondedAt.UTC().Format(time.RFC3339),
	}
	if s.Response == suppression.StateCooldown {
		s.ExpiresAt = win.rec.respondedAt.Add(suppression.CooldownPeriod).UTC().Format(time.RFC3339)
	}
	return s, true
}
