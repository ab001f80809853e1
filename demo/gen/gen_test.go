package gen

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpulse/mcpulse/demo/outcome"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/misuse"
	"github.com/mcpulse/mcpulse/suppression"
)

var testEnd = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func generate(t *testing.T, cfg Config) ([]byte, *outcome.Outcome) {
	t.Helper()
	var buf bytes.Buffer
	o, err := Generate(cfg, &buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), o
}

func lines(data []byte) [][]byte {
	out := bytes.SplitAfter(data, []byte{'\n'})
	if len(out) > 0 && len(out[len(out)-1]) == 0 {
		out = out[:len(out)-1]
	}
	return out
}

func TestDeterministic(t *testing.T) {
	cfg := Config{Events: 3000, Seed: 42, End: testEnd}
	a, oa := generate(t, cfg)
	b, ob := generate(t, cfg)
	if !bytes.Equal(a, b) {
		t.Fatal("two runs with the same config differ")
	}
	if !reflect.DeepEqual(oa, ob) {
		t.Fatal("two runs give different expected outcomes")
	}
	c, _ := generate(t, Config{Events: 3000, Seed: 43, End: testEnd})
	if bytes.Equal(a, c) {
		t.Fatal("different seeds give the same corpus")
	}
	d, _ := generate(t, Config{Events: 3000, Seed: 42, End: testEnd, InstanceURL: "https://eu.posthog.com"})
	if bytes.Equal(a, d) {
		t.Fatal("the instance URL does not matter")
	}
}

func TestWriteFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	cfg := Config{Events: 500, Seed: 5, End: testEnd}
	o, err := WriteFiles(cfg, path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := generate(t, cfg)
	if !bytes.Equal(data, want) {
		t.Error("the file differs from Generate's output")
	}
	read, err := outcome.Read(path + ".expected.json")
	if err != nil {
		t.Fatal(err)
	}
	if diff := outcome.Compare(o, read, testEnd); len(diff) > 0 {
		t.Errorf("expected file round trip differs: %v", diff[:min(5, len(diff))])
	}
	if _, err := WriteFiles(cfg, "-"); err == nil {
		t.Error("WriteFiles accepted -")
	}
}

// TestLinesParse checks every valid line against ingest.Parse, every malformed one fails it,
// and the other line-level promises (uuid v7, time window, duplicates byte for byte).
func TestLinesParse(t *testing.T) {
	const n = 4000 // 20 malformed lines: every kind twice
	g, err := newGenerator(Config{Events: n, Seed: 9, End: testEnd, InstanceURL: DefaultInstanceURL})
	if err != nil {
		t.Fatal(err)
	}
	c, err := g.build()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := g.write(c, &buf); err != nil {
		t.Fatal(err)
	}
	all := lines(buf.Bytes())
	if len(all) != n || c.lines != n {
		t.Fatalf("%d lines written, %d counted, want %d", len(all), c.lines, n)
	}
	malformed := map[string]bool{}
	for _, m := range c.malformed {
		malformed[string(m.line)] = true
	}
	if len(malformed) != roundCount(n, MalformedRate) {
		t.Fatalf("%d distinct malformed lines, want %d", len(malformed), roundCount(n, MalformedRate))
	}
	seen := map[string]bool{}
	rejected, dups := 0, 0
	for i, line := range all {
		if bytes.ContainsAny(line[:len(line)-1], "\n\r") {
			t.Fatalf("line %d has a raw line break", i+1)
		}
		ev, err := ingest.Parse(line)
		if malformed[string(line)] {
			if err == nil {
				t.Errorf("malformed line %d passed ingest.Parse: %s", i+1, line)
			}
			rejected++
			continue
		}
		if err != nil {
			t.Fatalf("line %d: %v\n%s", i+1, err, line)
		}
		if seen[string(line)] {
			dups++
		}
		seen[string(line)] = true
		if ev.UUID.Version() != 7 || ev.UUID.Variant() != uuid.RFC4122 {
			t.Fatalf("line %d: uuid %s is not v7 / RFC 4122", i+1, ev.UUID)
		}
		var ms int64
		for _, b := range ev.UUID[:6] {
			ms = ms<<8 | int64(b)
		}
		if ms != ev.Timestamp.UnixMilli() {
			t.Fatalf("line %d: uuid time %d is not the event time %d", i+1, ms, ev.Timestamp.UnixMilli())
		}
		if ev.Timestamp.Before(testEnd.Add(-Window)) || !ev.Timestamp.Before(testEnd) {
			t.Fatalf("line %d: timestamp %s outside the window", i+1, ev.Timestamp)
		}
		if tc := ev.ToolCall; tc != nil {
			if tc.IsError && len(tc.IgnoredKeys) > 0 {
				t.Fatalf("line %d: an error call reports ignored keys", i+1)
			}
			for j := 1; j < len(tc.IgnoredKeys); j++ {
				if tc.IgnoredKeys[j-1] > tc.IgnoredKeys[j] {
					t.Fatalf("line %d: ignored keys not sorted: %q", i+1, tc.IgnoredKeys)
				}
			}
		}
		if r := ev.Recruitment; r != nil && r.Response != "" && r.RespondedAt.After(ev.Timestamp) {
			t.Fatalf("line %d: responded after the event was sent", i+1)
		}
	}
	if rejected != len(c.malformed) || dups != len(c.dups) {
		t.Errorf("%d rejected lines, %d duplicates; want %d and %d", rejected, dups, len(c.malformed), len(c.dups))
	}
}

func TestMalformedKinds(t *testing.T) {
	g, _ := newGenerator(Config{Events: 1, Seed: 1, End: testEnd, InstanceURL: DefaultInstanceURL})
	g.users = g.makeUsers(40)
	for i := range 3 * len(malformedKinds) {
		line := g.malformedLine(i)
		kind := malformedKinds[i%len(malformedKinds)]
		if bytes.Count(line, []byte{'\n'}) != 1 || line[len(line)-1] != '\n' {
			t.Fatalf("%s: not one line: %q", kind, line)
		}
		_, err := ingest.Parse(line)
		if err == nil {
			t.Fatalf("%s passed ingest.Parse: %s", kind, line)
		}
		if kind == "event_not_string" && !strings.HasPrefix(err.Error(), "event: must be a string") {
			t.Errorf("event_not_string: %v", err)
		}
	}
}

// TestOutcomeMatchesParsedCorpus recomputes the expected outcome from what ingest.Parse reads
// in the written lines (deduplicated by uuid), so what the generator says it wrote and what
// it wrote cannot drift apart.
func TestOutcomeMatchesParsedCorpus(t *testing.T) {
	for _, reports := range []bool{false, true} {
		t.Run(fmt.Sprint("reports=", reports), func(t *testing.T) { outcomeMatchesParsedCorpus(t, reports) })
	}
}

func outcomeMatchesParsedCorpus(t *testing.T, reports bool) {
	cfg := Config{Events: 6000, Seed: 11, End: testEnd, InstanceURL: DefaultInstanceURL, Reports: reports}
	data, want := generate(t, cfg)
	if reports != (len(want.SDKEvents) > 0) {
		t.Fatalf("reports %v: %d SDK event rows expected", reports, len(want.SDKEvents))
	}
	got := recompute(t, data, cfg.InstanceURL)
	if diff := outcome.Compare(want, got, time.Time{}); len(diff) > 0 {
		t.Fatalf("%d differences, first: %v", len(diff), diff[:min(8, len(diff))])
	}
	if got.Tables["dead_letters"] != int64(want.Corpus.Malformed) {
		t.Errorf("dead letters %d, want %d", got.Tables["dead_letters"], want.Corpus.Malformed)
	}
}

func recompute(t *testing.T, data []byte, defaultInstance string) *outcome.Outcome {
	t.Helper()
	o := &outcome.Outcome{EventsByKind: map[string]int64{}, Tables: map[string]int64{}, Suppression: map[string]outcome.Suppression{}}
	type fk struct{ day, c, f string }
	sent := map[string]time.Time{}
	paths := map[string][2]string{} // invitation id → protocol path, client
	var evs []*ingest.Event
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		ev, err := ingest.Parse(sc.Bytes())
		if err != nil {
			o.Tables["dead_letters"]++
			continue
		}
		if seen[ev.UUID.String()] {
			continue
		}
		seen[ev.UUID.String()] = true
		evs = append(evs, ev)
		if ev.Kind == ingest.KindInvitationSent {
			sent[ev.Recruitment.InvitationID] = ev.Timestamp
			// The session properties are kept in the properties column (Extra).
			var extra struct {
				Protocol string `json:"$mcp_protocol_version"`
				Client   string `json:"$mcp_client_name"`
			}
			if err := json.Unmarshal(ev.Extra, &extra); err != nil {
				t.Fatal(err)
			}
			if extra.Client == "" {
				extra.Client = "unknown"
			}
			paths[ev.Recruitment.InvitationID] = [2]string{ProtocolPath(extra.Protocol), extra.Client}
		}
	}
	byPath := map[[2]string][7]map[string]bool{}
	rates := map[[3]string]*outcome.IgnoredKeyRate{}
	keys := map[[3]string]int64{}
	misused := map[[2]string]*outcome.ToolMisuse{}
	type gk struct {
		h, c, r, cl string
		u, f        string
	}
	gates := map[gk]map[string]int64{}
	funnel := map[fk][7]map[string]bool{}
	resp := map[string][]*ingest.Event{}
	flag := func(b *bool) string {
		if b == nil {
			return "null"
		}
		if *b {
			return "1"
		}
		return "0"
	}
	sdkEvents := map[outcome.SDKEvent]int{} // key fields only → index in o.SDKEvents
	sdkEvent := func(kind, subject, client string, failed bool) {
		k := outcome.SDKEvent{Kind: kind, Subject: subject, ClientName: client}
		i, ok := sdkEvents[k]
		if !ok {
			i = len(o.SDKEvents)
			sdkEvents[k] = i
			o.SDKEvents = append(o.SDKEvents, k)
		}
		o.SDKEvents[i].Events++
		if failed {
			o.SDKEvents[i].Errors++
		}
	}
	for _, ev := range evs {
		o.EventsByKind[ev.Kind.String()]++
		hour := ev.Timestamp.Truncate(time.Hour).Format(hourLayout)
		switch {
		case ev.Feedback != nil:
			subject := ev.Feedback.Type
			if ev.Kind == ingest.KindMissingCapability {
				subject = ev.Feedback.Intent
			}
			sdkEvent(ev.Kind.Name, subject, ev.Feedback.ClientName, ev.Feedback.IsError)
			continue
		case ev.Resource != nil:
			sdkEvent(ev.Kind.Name, ev.Resource.Name, ev.Resource.ClientName, ev.Resource.IsError)
			continue
		case ev.Identify != nil:
			sdkEvent(ev.Kind.Name, "", ev.Identify.ClientName, false)
			continue
		}
		if tc := ev.ToolCall; tc != nil {
			o.Tables["tool_calls"]++
			k := [3]string{hour, tc.EffectiveTool(), tc.ClientName}
			m := misused[[2]string{hour, k[1]}]
			if m == nil {
				m = &outcome.ToolMisuse{Hour: hour, ToolName: k[1]}
				misused[[2]string{hour, k[1]}] = m
			}
			m.Calls++
			if tc.IsError {
				m.Errors++
			}
			switch class := misuse.ClassifyError(tc.ErrorMessage); {
			case class.IsValidation():
				m.ValidationErrors++
			case class == misuse.ClassUnknownTool:
				m.UnknownToolCalls++
			}
			r := rates[k]
			if r == nil {
				r = &outcome.IgnoredKeyRate{Hour: hour, ToolName: k[1], ClientName: k[2]}
				rates[k] = r
			}
			if !tc.IsError {
				r.SuccessfulCalls++
				counted := ingest.MustKeyFilter(ingest.DefaultClientInjectedKeys).Counted(tc.IgnoredKeys)
				if len(counted) > 0 {
					r.CallsWithIgnoredKeys++
				}
				for _, key := range counted {
					keys[[3]string{hour, k[1], key}]++
				}
			}
			if tc.Reason != "" {
				g := gk{hour, tc.CampaignID, tc.Reason, tc.ClientName, flag(tc.URLSupported), flag(tc.FormSupported)}
				if gates[g] == nil {
					gates[g] = map[string]int64{}
				}
				gates[g][ev.DistinctID]++
			}
			continue
		}
		o.Tables["recruitment_events"]++
		r := ev.Recruitment
		s := sent[r.InvitationID]
		key := fk{s.Format(dayLayout), r.CampaignID, r.FeatureFlag}
		f, ok := funnel[key]
		if !ok {
			for i := range f {
				f[i] = map[string]bool{}
			}
			funnel[key] = f
		}
		pk, ok := paths[r.InvitationID]
		if !ok {
			pk = [2]string{"unknown", "unknown"}
		}
		fp, ok := byPath[pk]
		if !ok {
			for i := range fp {
				fp[i] = map[string]bool{}
			}
			byPath[pk] = fp
		}
		switch ev.Kind {
		case ingest.KindInvitationSent:
			f[0][r.InvitationID], fp[0][r.InvitationID] = true, true
			f[1][ev.DistinctID], fp[1][ev.DistinctID] = true, true
		case ingest.KindBookingLinkOpened:
			f[2][r.InvitationID], fp[2][r.InvitationID] = true, true
		case ingest.KindInvitationResponse:
			i := map[string]int{"accept": 3, "decline": 4, "cancel": 5}[r.Response]
			f[i][r.InvitationID], fp[i][r.InvitationID] = true, true
			if !r.RespondedAt.After(s.Add(600 * time.Second)) {
				f[6][r.InvitationID], fp[6][r.InvitationID] = true, true
			}
			inst := r.InstanceURL
			if inst == "" {
				inst = defaultInstance
			}
			h := ingest.IdentityHash(inst, ev.DistinctID)
			resp[h] = append(resp[h], ev)
		}
	}
	for _, r := range rates {
		o.IgnoredKeyRates = append(o.IgnoredKeyRates, *r)
	}
	for _, m := range misused {
		o.ToolMisuse = append(o.ToolMisuse, *m)
	}
	for k, n := range keys {
		o.IgnoredKeys = append(o.IgnoredKeys, outcome.IgnoredKey{Hour: k[0], ToolName: k[1], KeyPath: k[2], Occurrences: n})
	}
	u8 := func(s string) *uint8 {
		if s == "null" {
			return nil
		}
		v := uint8(s[0] - '0')
		return &v
	}
	for k, people := range gates {
		var calls int64
		for _, n := range people {
			calls += n
		}
		o.GateReasons = append(o.GateReasons, outcome.GateReason{Hour: k.h, CampaignID: k.c, Reason: k.r, ClientName: k.cl,
			URLSupported: u8(k.u), FormSupported: u8(k.f), Calls: calls, People: int64(len(people))})
	}
	for k, f := range funnel {
		o.Funnel = append(o.Funnel, outcome.FunnelDay{Day: k.day, CampaignID: k.c, FeatureFlag: k.f,
			Invitations: int64(len(f[0])), People: int64(len(f[1])), FirstOpens: int64(len(f[2])),
			Accepted: int64(len(f[3])), Declined: int64(len(f[4])), Cancelled: int64(len(f[5])),
			Unanswered: int64(len(f[0]) - len(f[6]))})
	}
	for k, f := range byPath {
		o.FunnelByPath = append(o.FunnelByPath, outcome.FunnelPath{Path: k[0], ClientName: k[1],
			Invitations: int64(len(f[0])), People: int64(len(f[1])), FirstOpens: int64(len(f[2])), Answered: int64(len(f[6])),
			Accepted: int64(len(f[3])), Declined: int64(len(f[4])), Cancelled: int64(len(f[5])),
			Unanswered: int64(len(f[0]) - len(f[6]))})
	}
	// Suppression, folded from the parsed lines with the consumers' rules (suppression.Fold).
	for h, list := range resp {
		folded := make([]suppression.Response, len(list))
		for i, ev := range list {
			folded[i] = suppression.NewResponse(ev.DistinctID, ev.Recruitment.CampaignID, ev.Recruitment.Response, ev.Recruitment.RespondedAt)
		}
		i := suppression.Fold(nil, folded, time.Time{})
		if i < 0 {
			continue
		}
		cur := list[i]
		s := outcome.Suppression{DistinctID: cur.DistinctID, CampaignID: cur.Recruitment.CampaignID,
			Response: folded[i].Record.Response, RespondedAt: cur.Recruitment.RespondedAt.Format(time.RFC3339)}
		if s.Response == suppression.StateCooldown {
			s.ExpiresAt = cur.Recruitment.RespondedAt.Add(suppression.CooldownPeriod).Format(time.RFC3339)
		}
		o.Suppression[h] = s
	}
	return o
}

// TestTinyCorpus pins numbers read off the generated file by hand (50 lines, seed 1).
func TestTinyCorpus(t *testing.T) {
	data, o := generate(t, Config{Events: 50, Seed: 1, End: testEnd})
	all := lines(data)
	if len(all) != 50 {
		t.Fatalf("%d lines", len(all))
	}
	check := func(what string, got, want int64) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %d, want %d", what, got, want)
		}
	}
	check("duplicates", int64(o.Corpus.Duplicates), 1)
	check("malformed", int64(o.Corpus.Malformed), 0)
	check("tool_call", o.EventsByKind["tool_call"], tinyToolCalls)
	check("invitation_sent", o.EventsByKind["invitation_sent"], tinyInvitations)
	check("response", o.EventsByKind["response"], tinyResponses)
	check("link_opened", o.EventsByKind["link_opened"], tinyOpens)
	check("tables.tool_calls", o.Tables["tool_calls"], tinyToolCalls)
	check("tables.recruitment_events", o.Tables["recruitment_events"], tinyInvitations+tinyResponses+tinyOpens)
	check("tables.dead_letters", o.Tables["dead_letters"], 0)
	var succ, withKeys int64
	for _, r := range o.IgnoredKeyRates {
		succ += r.SuccessfulCalls
		withKeys += r.CallsWithIgnoredKeys
	}
	check("successful calls", succ, tinySuccessful)
	check("calls with ignored keys", withKeys, tinyWithKeys)
	check("suppression records", int64(len(o.Suppression)), tinySuppressions)
	for h, s := range tinySuppression {
		if got := o.Suppression[h]; got != s {
			t.Errorf("suppression %s = %+v, want %+v", h, got, s)
		}
	}
	var unanswered int64
	for _, f := range o.Funnel {
		unanswered += f.Unanswered
	}
	check("unanswered", unanswered, tinyUnanswered)
}

// TestRates checks the stated rates roughly hold on a 20,000-line corpus.
func TestRates(t *testing.T) {
	const n = 20000
	data, o := generate(t, Config{Events: n, Seed: 2024, End: testEnd})
	var calls, errs, succ, counted, injected, diag, nullURL, unknownReason, recruit, withURL int64
	var responses, late int64
	sent := map[string]time.Time{}
	known := map[string]bool{}
	for _, r := range gateReasons {
		known[r.reason] = true
	}
	for _, line := range lines(data) {
		ev, err := ingest.Parse(line)
		if err != nil {
			continue
		}
		if tc := ev.ToolCall; tc != nil {
			calls++
			if tc.IsError {
				errs++
			} else {
				succ++
				c := ingest.MustKeyFilter(ingest.DefaultClientInjectedKeys).Counted(tc.IgnoredKeys)
				if len(c) > 0 {
					counted++
				}
				if len(c) < len(tc.IgnoredKeys) {
					injected++
				}
			}
			if tc.Reason != "" {
				diag++
				if tc.URLSupported == nil {
					nullURL++
				}
				if !known[tc.Reason] {
					unknownReason++
				}
			}
			continue
		}
		recruit++
		if strings.Contains(string(line), `"instance_url"`) {
			withURL++
		}
		switch ev.Kind {
		case ingest.KindInvitationSent:
			sent[ev.Recruitment.InvitationID] = ev.Timestamp
		case ingest.KindInvitationResponse:
			responses++
			if ev.Recruitment.RespondedAt.Sub(sent[ev.Recruitment.InvitationID]) > 10*time.Minute {
				late++
			}
		}
	}
	within := func(what string, got, want, tol float64) {
		t.Helper()
		if got < want-tol || got > want+tol {
			t.Errorf("%s = %.4f, want %.3f ± %.3f", what, got, want, tol)
		} else {
			t.Logf("%s = %.4f (stated %.3f)", what, got, want)
		}
	}
	f := func(a, b int64) float64 { return float64(a) / float64(b) }
	within("duplicate lines", f(int64(o.Corpus.Duplicates), n), DuplicateRate, 0.0001)
	within("malformed lines", f(int64(o.Corpus.Malformed), n), MalformedRate, 0.0001)
	within("tool-call share", f(calls, calls+recruit), ToolCallShare, 0.01)
	within("tool error rate", f(errs, calls), ToolErrorRate, 0.012)
	within("misplaced-key rate", f(counted, succ), MisplacedKeyRate, 0.015)
	within("client-injected rate", f(injected, succ), ClientInjectedKeyRate, 0.008)
	within("diagnostics rate", f(diag, calls), DiagnosticsRate, 0.015)
	within("null url_supported", f(nullURL, diag), NullCapabilityRate, 0.03) // per session, so it varies more
	within("unknown reasons", f(unknownReason, diag), UnknownReasonRate, 0.003)
	within("instance_url present", f(withURL, recruit), InstanceURLRate, 0.04)
	// Late answers include late cancels after declines, so somewhat above the stated rate.
	within("late responses", f(late, responses), LateResponseRate+0.03, 0.04)

	states := map[string]int{}
	for _, s := range o.Suppression {
		states[s.Response]++
	}
	if states["booking_link_accepted"] == 0 || states["do_not_ask_again"] == 0 || states["cooldown"] == 0 {
		t.Errorf("suppression states %v: want all three", states)
	}
}

// TestManifest checks the embedded schema files against their MANIFEST.tsv rows.
func TestManifest(t *testing.T) {
	manifest, err := toolSchemaFiles.ReadFile(toolSchemaDir + "/MANIFEST.tsv")
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(string(manifest)), "\n")
	listed := map[string]bool{}
	for _, row := range rows[1:] {
		cols := strings.Split(row, "\t")
		if len(cols) != 6 {
			t.Fatalf("bad row %q", row)
		}
		data, err := toolSchemaFiles.ReadFile(toolSchemaDir + "/" + cols[0])
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if hex.EncodeToString(sum[:]) != cols[5] {
			t.Errorf("%s: sha256 differs from the manifest", cols[0])
		}
		listed[cols[0]] = true
	}
	entries, _ := toolSchemaFiles.ReadDir(toolSchemaDir)
	for _, e := range entries {
		if e.Name() != "MANIFEST.tsv" && !listed[e.Name()] {
			t.Errorf("%s is not in MANIFEST.tsv", e.Name())
		}
	}
}

// Numbers read off `mcpulse gen --events 50 --seed 1 --end 2026-03-01T00:00:00Z` by hand (and
// with a few lines of Python, hashing json.dumps([instance, id], ensure_ascii=False,
// separators=(",", ":")) for the identities). Any change to the generator changes them.
const (
	tinyToolCalls    = 39
	tinyInvitations  = 6
	tinyResponses    = 4
	tinyOpens        = 0
	tinySuccessful   = 34 // 5 error calls
	tinyWithKeys     = 3  // list-errors: reason; get_file_contents: with_details; exec→apm-spans-count: serviceNames
	tinySuppressions = 4
	tinyUnanswered   = 2 // 6 invitations, 4 answered within 10 minutes
)

var tinySuppression = map[string]outcome.Suppression{
	"6efc293d6f5f139f5b845c7a7bd88b8b85ad7a977d31e85f01a4a84817755c35": {
		DistinctID: "emoji-🚀-user", CampaignID: "onboarding-2026q4", Response: "booking_link_accepted", RespondedAt: "2026-02-28T20:05:22Z"},
	"6d1b3f542385efbb872280c1df2ad38750e46487acffc2e525960052664fb1d7": {
		DistinctID: "李雷@例子.公司", CampaignID: "mcp-exec-study", Response: "cooldown", RespondedAt: "2026-02-28T20:18:51Z", ExpiresAt: "2026-03-07T20:18:51Z"},
	"83f441c12a4af92f73b30ac6aae95c3f312b994c2861e5b04f1540f2f0147b96": {
		DistinctID: "line\u2028separator", CampaignID: "onboarding-2026q4", Response: "do_not_ask_again", RespondedAt: "2026-02-28T20:39:58Z"},
	"312575911deaa45c76308cd2c8b2e4ec656add1473026d2be6e6bf24738c1fcc": {
		DistinctID: `"quoted" user`, CampaignID: "onboarding-2026q4", Response: "do_not_ask_again", RespondedAt: "2026-02-28T22:06:38Z"},
}

func TestSpanBoundsTimestamps(t *testing.T) {
	for _, span := range []time.Duration{24 * time.Hour, 3 * time.Hour} {
		data, _ := generate(t, Config{Events: 2000, Seed: 3, End: testEnd, Span: span})
		var earliest time.Time
		for i, line := range lines(data) {
			ev, err := ingest.Parse(line)
			if err != nil {
				continue // a malformed line
			}
			if ev.Timestamp.Before(testEnd.Add(-span)) || !ev.Timestamp.Before(testEnd) {
				t.Fatalf("span %s, line %d: timestamp %s outside [%s, %s)", span, i+1, ev.Timestamp, testEnd.Add(-span), testEnd)
			}
			if earliest.IsZero() || ev.Timestamp.Before(earliest) {
				earliest = ev.Timestamp
			}
		}
		if earliest.After(testEnd.Add(-span * 9 / 10)) {
			t.Errorf("span %s: the earliest event is at %s, not spread over the span", span, earliest)
		}
	}
	if _, err := Generate(Config{Events: 10, End: testEnd, Span: time.Minute}, io.Discard); err == nil {
		t.Error("a span under an hour was accepted")
	}
}

// TestDemoShapeShowsMisuse checks that the demo shape, which `make demo` runs, gives the
// tool-diagnostics panels validation errors and calls to unlisted tools to draw, each with
// the SDK wording the pipeline classifies.
func TestDemoShapeShowsMisuse(t *testing.T) {
	for _, shape := range []Shape{ShapeDemo, ShapeSDK} {
		cfg := Config{Events: 20000, Seed: 3, End: testEnd, InstanceURL: DefaultInstanceURL, Shape: shape}
		_, want := generate(t, cfg)
		var calls, validation, unknown int64
		for _, m := range want.ToolMisuse {
			calls += m.Calls
			validation += m.ValidationErrors
			unknown += m.UnknownToolCalls
		}
		if calls == 0 || validation == 0 || unknown == 0 {
			t.Errorf("%s shape: %d calls, %d validation errors, %d unknown-tool calls; want some of each", shape, calls, validation, unknown)
		}
		if shape == ShapeDemo && float64(unknown)/float64(calls) < demoUnknownToolRate/2 {
			t.Errorf("demo shape: %d unknown-tool calls of %d; want about %.1f%%", unknown, calls, demoUnknownToolRate*100)
		}
	}
}

// ProtocolPath restates panel_campaign_funnel_by_path's mapping: date-shaped revisions from
// 2026-07-28 on take the input_required path, the earlier revisions invited on the SSE
// elicitation/create path, anything else is unknown.
func TestProtocolPath(t *testing.T) {
	for v, want := range map[string]string{
		"2026-07-28": "input_required", "2027-01-15": "input_required",
		"2025-11-25": "sse_elicitation_create", "2025-06-18": "sse_elicitation_create",
		"2025-03-26": "sse_elicitation_create", "2024-11-05": "sse_elicitation_create",
		"": "unknown", "DRAFT-2026-v2": "unknown", "2025-10-01": "unknown", "2026-07-28 ": "unknown", "2026-7-280": "unknown",
	} {
		if got := ProtocolPath(v); got != want {
			t.Errorf("ProtocolPath(%q) = %q, want %q", v, got, want)
		}
	}
}
