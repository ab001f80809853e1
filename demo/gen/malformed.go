package gen

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/mcpulse/mcpulse/ingest"
)

// malformedKinds name the ways a malformed line breaks the event contract (DESIGN.md §2); the
// i-th malformed line of a corpus is of kind i mod len(malformedKinds), so every kind shows up
// once a corpus has that many malformed lines (N >= 2,000).
var malformedKinds = []string{
	"bad_json",              // the line is cut short
	"missing_uuid",          // no uuid field
	"bad_timestamp",         // not RFC 3339 with an offset
	"tool_name_type",        // $mcp_tool_name is a number or an array
	"response_maybe",        // response "maybe"
	"distinct_id_201",       // distinct_id of 201 characters
	"ignored_keys_21",       // $mcp_ignored_keys with 21 entries
	"event_not_string",      // event 42 (another name, such as $pageview, is a valid event, counted per name)
	"is_error_type",         // $mcp_is_error "yes"
	"missing_invitation_id", // an invitation without invitation_id
}

// malformedLine builds the i-th malformed line (with its trailing newline).
func (g *generator) malformedLine(i int) []byte {
	kind := malformedKinds[i%len(malformedKinds)]
	variant := i / len(malformedKinds)
	t := g.timeIn(g.start, g.end, true)

	tc := g.toolCall(g.newSession(), g.rng.IntN(20), t)
	u := g.users[g.rng.IntN(len(g.users))]
	c := &campaigns[g.pick(campWeights)]
	inv := g.recruitEvent(evInvite, u, c, g.newUUID(t), t.Truncate(1e9), t.Truncate(1e9))

	e, props := tc, tc.properties()
	var line []byte
	switch kind {
	case "bad_json":
		full := appendEvent(nil, e.uuid, e.name, e.distinctID, e.tsText, props)
		cut := len(full) / 2
		for cut > 0 && full[cut] >= 0x80 {
			cut--
		}
		line = full[:cut]
	case "missing_uuid":
		full := appendEvent(nil, e.uuid, e.name, e.distinctID, e.tsText, props)
		line = append([]byte{'{'}, full[len(`{"uuid":"`)+36+len(`",`):]...)
	case "bad_timestamp":
		bad := []string{t.UTC().Format("2006-01-02 15:04:05"), "yesterday", strconv.FormatInt(t.Unix(), 10), "2026-13-45T25:61:00Z"}
		line = appendEvent(nil, e.uuid, e.name, e.distinctID, bad[variant%len(bad)], props)
	case "tool_name_type":
		props[0] = kv{k: props[0].k, v: []string{"42", `["search_code"]`}[variant%2]}
		line = appendEvent(nil, e.uuid, e.name, e.distinctID, e.tsText, props)
	case "response_maybe":
		r := g.responseEvent(u, c, inv.rec.invitationID, inv.ts, "maybe", inv.ts.Add(30e9))
		line = appendEvent(nil, r.uuid, r.name, r.distinctID, r.tsText, r.properties())
	case "distinct_id_201":
		line = appendEvent(nil, e.uuid, e.name, "overlong-"+strings.Repeat("ü", 192), e.tsText, props)
	case "ignored_keys_21":
		keys := make([]string, 21)
		for k := range keys {
			keys[k] = "unknown_" + strconv.Itoa(k+10)
		}
		props = append(props, kv{k: "$mcp_ignored_keys", v: jsonStringArray(keys)}, kv{k: "$mcp_ignored_keys_total", v: "21"})
		props = dropDuplicateKeys(props)
		line = appendEvent(nil, e.uuid, e.name, e.distinctID, e.tsText, props)
	case "event_not_string":
		full := appendEvent(nil, e.uuid, e.name, e.distinctID, e.tsText, props)
		line = bytes.Replace(full, append(append([]byte(`"event":`), ingest.AppendJSString(nil, e.name)...), ','), []byte(`"event":42,`), 1)
	case "is_error_type":
		props = append(props, sv("$mcp_is_error", "yes"))
		props = dropDuplicateKeys(props)
		line = appendEvent(nil, e.uuid, e.name, e.distinctID, e.tsText, props)
	case "missing_invitation_id":
		p := inv.properties()
		kept := p[:0]
		for _, x := range p {
			if x.k != "invitation_id" {
				kept = append(kept, x)
			}
		}
		line = appendEvent(nil, inv.uuid, inv.name, inv.distinctID, inv.tsText, kept)
	}
	return append(line, '\n')
}

// dropDuplicateKeys keeps the last value of each key (the position of its first occurrence).
func dropDuplicateKeys(props []kv) []kv {
	last := map[string]kv{}
	for _, p := range props {
		last[p.k] = p
	}
	out := props[:0]
	seen := map[string]bool{}
	for _, p := range props {
		if seen[p.k] {
			continue
		}
		seen[p.k] = true
		out = append(out, last[p.k])
	}
	return out
}
