package misuse_test

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/misuse"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// at is t0 plus s seconds.
func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// tool is a served tool whose object schema declares keys.
func tool(name string, keys ...string) misuse.ServedTool {
	props := ""
	for i, k := range keys {
		if i > 0 {
			props += ","
		}
		props += fmt.Sprintf("%q:{\"type\":\"string\"}", k)
	}
	return misuse.ServedTool{Name: name, InputSchema: []byte(`{"type":"object","properties":{` + props + `}}`)}
}

// page is a first (or only) page of session's listing at second s, listing tools.
func page(session string, s int, tools ...misuse.ServedTool) misuse.ListingPage {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return misuse.ListingPage{Server: "srv", Version: "1.0", Session: session, At: at(s), Pos: misuse.NoPosition, Names: names, Tools: tools}
}

func call(session string, s int) misuse.CallAt {
	return misuse.CallAt{Server: "srv", Version: "1.0", Session: session, At: at(s), Pos: misuse.NoPosition}
}

// ignored derives the ignored keys of a call with arguments args against v's schema.
func ignored(t *testing.T, v misuse.Verdict, args string) misuse.IgnoredKeys {
	t.Helper()
	return misuse.Derive(misuse.Call{Parameters: []byte(`{"request":{"params":{"arguments":` + args + `}}}`), Schema: v.Schema})
}

// TestListingsPaginated: the pages of one listing accumulate (a call to a first-page tool is
// not unknown once the second page arrives), a listing is complete only with its last page,
// and a new first page starts a new listing.
func TestListingsPaginated(t *testing.T) {
	l := misuse.NewListings(misuse.ListingsConfig{})
	p1 := page("s", 10, tool("alpha", "q"), tool("beta", "q"))
	p1.NextCursor = "page-2"
	p2 := page("s", 12, tool("gamma", "q"))
	p2.Cursor, p2.HasCursor = "page-2", true
	l.Observe(p1)
	l.Observe(p2)

	for _, name := range []string{"alpha", "beta", "gamma"} {
		if v := l.Judge(call("s", 20), name); v.Unknown || v.Schema == nil || v.From != misuse.ServedSession {
			t.Errorf("after both pages, %s: %+v, want its schema from the session", name, v)
		}
	}
	if v := l.Judge(call("s", 20), "delta"); !v.Unknown || v.From != misuse.ServedSession {
		t.Errorf("after both pages, delta: %+v, want unknown", v)
	}
	// Between the pages the listing is incomplete: a tool it lacks is not unknown.
	if v := l.Judge(call("s", 11), "gamma"); v.Unknown || v.Schema != nil {
		t.Errorf("between the pages, gamma: %+v, want neither unknown nor a schema", v)
	}
	if v := l.Judge(call("s", 11), "alpha"); v.Schema == nil {
		t.Errorf("between the pages, alpha: %+v, want its schema", v)
	}

	// A new first page (no cursor) starts over: beta is gone from then on.
	l.Observe(page("s", 30, tool("alpha", "q")))
	if v := l.Judge(call("s", 31), "beta"); !v.Unknown {
		t.Errorf("after a new listing without beta: %+v, want unknown", v)
	}
	if v := l.Judge(call("s", 25), "beta"); v.Unknown || v.Schema == nil {
		t.Errorf("before the new listing, beta: %+v, want its schema", v)
	}

	// A continuation whose cursor no page returned is a listing without its first page: never
	// complete, so it decides no unknown tool.
	orphan := page("o", 40, tool("alpha", "q"))
	orphan.Cursor, orphan.HasCursor = "nobody-returned-this", true
	l.Observe(orphan)
	if v := l.Judge(call("o", 41), "zeta"); v.Unknown {
		t.Errorf("a headless listing decided an unknown tool: %+v", v)
	}
	// An empty cursor is a continuation too (presence, not truthiness, as the SDK reads it).
	e1 := page("e", 50, tool("alpha", "q"))
	e1.NextCursor = "x"
	e2 := page("e", 51, tool("omega", "q"))
	e2.Cursor, e2.HasCursor = "", true
	l.Observe(e1)
	l.Observe(e2)
	if v := l.Judge(call("e", 52), "zeta"); v.Unknown {
		t.Errorf("a page with an empty cursor that no page returned completed a listing: %+v", v)
	}
}

// TestListingsPerSession: each session is judged against its own listing; a key the basic
// session's beta_radar does not declare is ignored there, while the beta session's declares it.
func TestListingsPerSession(t *testing.T) {
	l := misuse.NewListings(misuse.ListingsConfig{})
	l.Observe(page("basic", 10, tool("search", "q"), tool("beta_radar", "query")))
	l.Observe(page("beta", 11, tool("search", "q"), tool("beta_radar", "query", "depth")))
	// The beta session listed last: a per-version listing would judge both by it.
	args := `{"query":"storms","depth":"3"}`
	basic := l.Judge(call("basic", 20), "beta_radar")
	if got := ignored(t, basic, args); got.Source != misuse.SourceSchema || !reflect.DeepEqual(got.Keys, []string{"depth"}) {
		t.Errorf("basic session: %+v, want depth ignored (from the schema)", got)
	}
	beta := l.Judge(call("beta", 20), "beta_radar")
	if got := ignored(t, beta, args); got.Source != misuse.SourceSchema || len(got.Keys) != 0 {
		t.Errorf("beta session: %+v, want nothing ignored", got)
	}
	// A tool only one session was served is unknown in the other.
	l.Observe(page("narrow", 12, tool("search", "q")))
	if v := l.Judge(call("narrow", 20), "beta_radar"); !v.Unknown || v.From != misuse.ServedSession {
		t.Errorf("narrow session, beta_radar: %+v, want unknown", v)
	}
	// The same listing served to many sessions is stored once.
	for i := range 50 {
		l.Observe(page(fmt.Sprint("many-", i), 13+i, tool("search", "q"), tool("beta_radar", "query")))
	}
	if st := l.Stats(); st.Listings != 3 || st.Schemas != 3 {
		t.Errorf("stats %+v: want 3 distinct listings and 3 distinct schemas", st)
	}
}

// TestListingsRuntimeRemoval: a re-list after list_changed applies from its time on, whatever
// order the listings are observed in.
func TestListingsRuntimeRemoval(t *testing.T) {
	for _, order := range []string{"time order", "re-list first"} {
		l := misuse.NewListings(misuse.ListingsConfig{})
		first, relist := page("s", 10, tool("alpha", "q"), tool("legacy", "q")), page("s", 30, tool("alpha", "q"))
		if order == "time order" {
			l.Observe(first)
			l.Observe(relist)
		} else {
			l.Observe(relist)
			l.Observe(first)
		}
		if v := l.Judge(call("s", 20), "legacy"); v.Unknown || v.Schema == nil {
			t.Errorf("%s: call before the removal: %+v, want the earlier listing's schema", order, v)
		}
		if v := l.Judge(call("s", 40), "legacy"); !v.Unknown {
			t.Errorf("%s: call after the removal: %+v, want unknown", order, v)
		}
		// A call at the re-list's very time sees it.
		if v := l.Judge(call("s", 30), "legacy"); !v.Unknown {
			t.Errorf("%s: call at the re-list's time: %+v, want unknown", order, v)
		}
	}
}

// TestListingsLogOrder: a listing later in the call's partition than the call is not the one
// the call saw, even when its timestamp is earlier; in another partition only time orders.
func TestListingsLogOrder(t *testing.T) {
	l := misuse.NewListings(misuse.ListingsConfig{})
	a := page("s", 10, tool("alpha", "q"), tool("legacy", "q"))
	a.Pos = misuse.Position{Partition: 3, Offset: 100}
	b := page("s", 15, tool("alpha", "q"))
	b.Pos = misuse.Position{Partition: 3, Offset: 300}
	l.Observe(a)
	l.Observe(b)
	c := call("s", 20)
	c.Pos = misuse.Position{Partition: 3, Offset: 200}
	if v := l.Judge(c, "legacy"); v.Unknown || v.Schema == nil {
		t.Errorf("call at offset 200: %+v, want the listing at offset 100", v)
	}
	c.Pos = misuse.Position{Partition: 3, Offset: 400}
	if v := l.Judge(c, "legacy"); !v.Unknown {
		t.Errorf("call at offset 400: %+v, want the listing at offset 300 (legacy unknown)", v)
	}
	c.Pos = misuse.Position{Partition: 4, Offset: 1}
	if v := l.Judge(c, "legacy"); !v.Unknown {
		t.Errorf("call in another partition: %+v, want the latest listing by time", v)
	}
}

// TestListingsSessionless: sessionless calls, and calls of a session that listed nothing, are
// judged against the server version's listing in effect at their time; before any, by the
// stored listing; with neither, by nothing.
func TestListingsSessionless(t *testing.T) {
	l := misuse.NewListings(misuse.ListingsConfig{})
	if !l.NeedsStored("srv", "1.0", at(0)) {
		t.Error("NeedsStored of an unknown version = false")
	}
	if v := l.Judge(call("", 5), "alpha"); v != (misuse.Verdict{}) {
		t.Errorf("nothing known: %+v, want ServedNone", v)
	}
	l.Observe(page("", 10, tool("alpha", "q"), tool("legacy", "q")))
	l.Observe(page("", 30, tool("alpha", "q")))
	if v := l.Judge(call("", 20), "legacy"); v.Unknown || v.Schema == nil || v.From != misuse.ServedVersion {
		t.Errorf("sessionless call between the listings: %+v, want the first listing's schema", v)
	}
	if v := l.Judge(call("", 40), "legacy"); !v.Unknown || v.From != misuse.ServedVersion {
		t.Errorf("sessionless call after the second listing: %+v, want unknown", v)
	}
	// A session that listed nothing falls back to the version's listings, by time too.
	if v := l.Judge(call("silent", 40), "legacy"); !v.Unknown || v.From != misuse.ServedVersion {
		t.Errorf("silent session after the second listing: %+v, want unknown from the version", v)
	}
	// Sessions' listings are the version's too.
	l.Observe(page("s", 50, tool("alpha", "q"), tool("fresh", "q")))
	if v := l.Judge(call("", 60), "fresh"); v.Unknown || v.Schema == nil {
		t.Errorf("sessionless call after a session's listing: %+v, want its schema", v)
	}
	// Before the version's first listing in the stream: the stored listing.
	if v := l.Judge(call("", 5), "alpha"); v.From != misuse.ServedNone {
		t.Errorf("before any listing, nothing stored: %+v", v)
	}
	l.PutStored("srv", "1.0", []misuse.ServedTool{tool("alpha", "q", "r")}, at(0))
	if l.NeedsStored("srv", "1.0", at(1000)) {
		t.Error("NeedsStored after a non-empty stored listing = true")
	}
	if v := l.Judge(call("", 5), "alpha"); v.From != misuse.ServedStored || v.Schema == nil {
		t.Errorf("before any listing: %+v, want the stored schema", v)
	}
	if v := l.Judge(call("", 5), "nope"); !v.Unknown || v.From != misuse.ServedStored {
		t.Errorf("before any listing, an unstored tool: %+v, want unknown from the stored listing", v)
	}
	// An empty stored listing is asked for again after the recheck period.
	l.PutStored("other", "2", nil, at(0))
	if l.NeedsStored("other", "2", at(30)) || !l.NeedsStored("other", "2", at(61)) {
		t.Error("NeedsStored of an empty stored listing: want false within a minute, true after")
	}
}

// TestListingsEviction: at the session cap the least recently used session goes (its later
// calls fall back to the version's listing), its listings are let go when no one else holds
// them, and a session keeps at most its cap of listings.
func TestListingsEviction(t *testing.T) {
	l := misuse.NewListings(misuse.ListingsConfig{MaxSessions: 2, MaxListingsPerSession: 2, MaxListingsPerVersion: 2})
	l.Observe(page("s1", 10, tool("only_s1", "q")))
	l.Observe(page("s2", 11, tool("only_s2", "q")))
	l.Judge(call("s1", 12), "only_s1") // s1 used more recently than s2
	l.Observe(page("s3", 13, tool("only_s3", "q")))
	st := l.Stats()
	if st.Sessions != 2 || st.SessionEvictions != 1 {
		t.Fatalf("stats %+v: want 2 sessions, 1 eviction", st)
	}
	if v := l.Judge(call("s1", 20), "only_s1"); v.From != misuse.ServedSession {
		t.Errorf("s1 (recently used) was evicted: %+v", v)
	}
	// s2 is gone: judged by the version's listing in effect (s3's), which lacks only_s2.
	if v := l.Judge(call("s2", 20), "only_s2"); v.From != misuse.ServedVersion || !v.Unknown {
		t.Errorf("evicted s2: %+v, want the version's listing", v)
	}
	// s1's listing is held by its session, s2's and s3's by the version (its 2 newest).
	if st := l.Stats(); st.Listings != 3 || st.Schemas != 1 {
		t.Errorf("stats %+v: want 3 listings of one schema text", st)
	}
	// A session keeps its 2 newest listings.
	for i := range 5 {
		l.Observe(page("s1", 30+i, tool(fmt.Sprint("t", i), "q")))
	}
	if v := l.Judge(call("s1", 32), "t2"); v.From == misuse.ServedSession {
		t.Errorf("a listing beyond the session's cap judged a call: %+v", v)
	}
	if v := l.Judge(call("s1", 34), "t4"); v.From != misuse.ServedSession || v.Schema == nil {
		t.Errorf("the session's newest listing: %+v", v)
	}
	// Held now: s1's two newest (by s1 and the version) and s3's (by s3); s2's is let go.
	if st := l.Stats(); st.Listings != 3 || st.ListingsDropped != 10 {
		t.Errorf("stats %+v: want 3 listings held, 10 dropped (1 + 4 by s1, 5 by the version)", st)
	}
}

// TestListingsWindow: a session keeps no listing older than the window before its newest,
// except the one in effect at the window's start.
func TestListingsWindow(t *testing.T) {
	l := misuse.NewListings(misuse.ListingsConfig{Window: time.Hour})
	l.Observe(page("s", 0, tool("v1", "q")))
	l.Observe(page("s", 60, tool("v2", "q")))
	l.Observe(page("s", 7200, tool("v3", "q")))
	// v2 was in effect at the window's start (7200 − 3600): kept; v1 is not.
	if v := l.Judge(call("s", 3700), "v2"); v.From != misuse.ServedSession || v.Schema == nil {
		t.Errorf("call inside the window: %+v, want v2's listing", v)
	}
	if v := l.Judge(call("s", 30), "v1"); v.From == misuse.ServedSession {
		t.Errorf("a listing outside the window judged a call: %+v", v)
	}
}

// TestListingsIncompleteNames: a listing decides unknown tools only when it knows every name:
// not when a page lacked $mcp_listed_tool_names, nor from a stored listing of 100 tools or more
// (the SDK keeps 100 entries of an array).
func TestListingsIncompleteNames(t *testing.T) {
	l := misuse.NewListings(misuse.ListingsConfig{})
	p := page("s", 10, tool("alpha", "q"))
	p.Names = nil
	l.Observe(p)
	if v := l.Judge(call("s", 11), "beta"); v.Unknown {
		t.Errorf("a listing without names decided an unknown tool: %+v", v)
	}
	if v := l.Judge(call("s", 11), "alpha"); v.Schema == nil {
		t.Errorf("a listing without names: alpha %+v, want its schema", v)
	}
	var many []misuse.ServedTool
	for i := range 100 {
		many = append(many, tool(fmt.Sprint("t", i), "q"))
	}
	l.PutStored("big", "1", many, at(0))
	if v := l.Judge(misuse.CallAt{Server: "big", Version: "1", At: at(5), Pos: misuse.NoPosition}, "t100"); v.Unknown || v.From != misuse.ServedNone {
		t.Errorf("a stored listing of 100 tools decided an unknown tool: %+v", v)
	}
	l.PutStored("small", "1", many[:99], at(0))
	if v := l.Judge(misuse.CallAt{Server: "small", Version: "1", At: at(5), Pos: misuse.NoPosition}, "t100"); !v.Unknown || v.From != misuse.ServedStored {
		t.Errorf("a stored listing of 99 tools: %+v, want t100 unknown", v)
	}
}

// TestListingsRelistsCollapse: re-lists that change nothing take no room, so a version keeps
// its earlier listings however many sessions are served the same one after them.
func TestListingsRelistsCollapse(t *testing.T) {
	l := misuse.NewListings(misuse.ListingsConfig{MaxListingsPerVersion: 2, MaxListingsPerSession: 2})
	l.Observe(page("first", 10, tool("alpha", "q"), tool("legacy", "q")))
	for i := range 20 {
		l.Observe(page(fmt.Sprint("s", i), 20+i, tool("alpha", "q")))
		l.Observe(page("first", 20+i, tool("alpha", "q")))
	}
	if v := l.Judge(call("", 15), "legacy"); v.Unknown || v.Schema == nil || v.From != misuse.ServedVersion {
		t.Errorf("sessionless call before the re-lists: %+v, want the first listing's schema", v)
	}
	if v := l.Judge(call("first", 15), "legacy"); v.Unknown || v.Schema == nil || v.From != misuse.ServedSession {
		t.Errorf("the first session's call before its re-lists: %+v, want its first listing's schema", v)
	}
	if v := l.Judge(call("", 50), "legacy"); !v.Unknown {
		t.Errorf("sessionless call after the re-lists: %+v, want unknown", v)
	}
	if st := l.Stats(); st.ListingsDropped != 0 {
		t.Errorf("stats %+v: re-lists that changed nothing dropped listings", st)
	}
}

// names is a first page of session's listing at second s naming tools without their schemas,
// as @traceloop/instrumentation-mcp's tools/list span is mapped.
func names(session string, s int, tools ...string) misuse.ListingPage {
	return misuse.ListingPage{Server: "srv", Version: "1.0", Session: session, At: at(s), Pos: misuse.NoPosition, Names: tools}
}

// TestListingsSchemaFromLaterLevel: a listing that names the tool without its schema decides
// that it is listed, and the schema comes from the version's listing or the stored one; a
// later level lacking the tool does not make it unknown, and a complete listing lacking the
// tool still decides unknown.
func TestListingsSchemaFromLaterLevel(t *testing.T) {
	l := misuse.NewListings(misuse.ListingsConfig{})
	l.Observe(names("span", 10, "search", "fetch"))
	// Names only, nothing else known: listed, no schema.
	if v := l.Judge(call("span", 11), "search"); v.Unknown || v.Schema != nil || v.From != misuse.ServedSession {
		t.Errorf("names only: %+v, want listed by the session, no schema", v)
	}
	l.PutStored("srv", "1.0", []misuse.ServedTool{tool("search", "q")}, at(0))
	v := l.Judge(call("span", 11), "search")
	if v.Unknown || v.Schema == nil || v.From != misuse.ServedStored {
		t.Fatalf("names only, schema stored: %+v, want the stored schema", v)
	}
	if got := ignored(t, v, `{"q":"x","limit":"5"}`); got.Source != misuse.SourceSchema || !reflect.DeepEqual(got.Keys, []string{"limit"}) {
		t.Errorf("names only, schema stored: %+v, want limit ignored (from the schema)", got)
	}
	// fetch is listed by the session though the (complete) stored listing lacks it.
	if v := l.Judge(call("span", 11), "fetch"); v.Unknown || v.Schema != nil || v.From != misuse.ServedSession {
		t.Errorf("listed by the session, not stored: %+v, want listed, no schema", v)
	}
	// A tool the session's complete listing lacks is unknown, whatever is stored.
	l.PutStored("srv", "1.0", []misuse.ServedTool{tool("search", "q"), tool("gone", "q")}, at(1))
	if v := l.Judge(call("span", 11), "gone"); !v.Unknown || v.From != misuse.ServedSession {
		t.Errorf("not in the session's complete listing: %+v, want unknown from the session", v)
	}
	// The version's listing in effect gives a schema before the stored one does.
	l.Observe(page("posthog", 20, tool("search", "q", "limit"), tool("fetch", "url")))
	v = l.Judge(call("span", 21), "search")
	if v.Schema == nil || v.From != misuse.ServedVersion {
		t.Fatalf("names only, another session listed the schema: %+v, want the version's schema", v)
	}
	if got := ignored(t, v, `{"q":"x","limit":"5"}`); got.Source != misuse.SourceSchema || len(got.Keys) != 0 {
		t.Errorf("the version's schema declares limit: %+v, want nothing ignored", got)
	}
	// An incomplete listing naming the tool decides it is listed: a later complete level
	// lacking it does not make it unknown.
	p := names("paged", 30, "extra")
	p.NextCursor = "more"
	l.Observe(p)
	if v := l.Judge(call("paged", 31), "extra"); v.Unknown || v.Schema != nil || v.From != misuse.ServedSession {
		t.Errorf("named by an incomplete listing only: %+v, want listed by the session, no schema", v)
	}
}

// TestListingsOtherSessionsDoNotMakeUnknown: a session whose own listing is incomplete (its
// first page only, a later one pending) and lacks a tool is not judged unknown by the version's
// complete listing, which is another session's (a per-user flag may list the tool to this
// session only); that listing may still give the tool's schema.
func TestListingsOtherSessionsDoNotMakeUnknown(t *testing.T) {
	l := misuse.NewListings(misuse.ListingsConfig{})
	first := page("flagged", 20, tool("alpha", "q"))
	first.NextCursor = "page-2"
	l.Observe(first)
	l.Observe(page("other", 25, tool("alpha", "q"))) // the version's listing in effect from 25 on
	if v := l.Judge(call("flagged", 26), "beta_radar"); v.Unknown {
		t.Errorf("beta_radar in the flagged session, its listing incomplete: %+v, want not unknown", v)
	}
	if v := l.Judge(call("anon", 26), "beta_radar"); !v.Unknown {
		t.Errorf("beta_radar in a session that listed nothing: %+v, want unknown by the version's complete listing", v)
	}
	rest := misuse.ListingPage{Server: "srv", Version: "1.0", Session: "flagged", At: at(27), Pos: misuse.NoPosition,
		Cursor: "page-2", HasCursor: true, Names: []string{"gamma"}, Tools: []misuse.ServedTool{tool("gamma", "z")}}
	l.Observe(rest)
	if v := l.Judge(call("flagged", 28), "beta_radar"); !v.Unknown {
		t.Errorf("beta_radar once the flagged session's listing is complete without it: %+v, want unknown", v)
	}
}

// TestListingsCompileConcurrently: many calls judged at once against schemas not compiled yet
// (each compiled without the state's lock held) all get their schema, the same for one text.
func TestListingsCompileConcurrently(t *testing.T) {
	l := misuse.NewListings(misuse.ListingsConfig{})
	var tools []misuse.ServedTool
	for i := range 20 {
		tools = append(tools, tool(fmt.Sprint("t", i), "q", fmt.Sprint("k", i)))
	}
	l.Observe(page("s", 10, tools...))
	var wg sync.WaitGroup
	got := make([][]*misuse.Schema, 8)
	for g := range got {
		wg.Go(func() {
			for i := range tools {
				got[g] = append(got[g], l.Judge(call("s", 11), tools[i].Name).Schema)
			}
		})
	}
	wg.Wait()
	for g := range got {
		for i, s := range got[g] {
			if s == nil {
				t.Fatalf("goroutine %d, tool %d: no schema", g, i)
			}
			if k := ignored(t, misuse.Verdict{Schema: s}, fmt.Sprintf(`{"q":"x","k%d":"y","extra":1}`, i)); len(k.Keys) != 1 || k.Keys[0] != "extra" {
				t.Fatalf("goroutine %d, tool %d: ignored %v, want [extra]", g, i, k.Keys)
			}
		}
	}
	if st := l.Stats(); st.Compiles != uint64(len(tools)) {
		t.Errorf("%d compilations for %d schemas, want one each", st.Compiles, len(tools))
	}
}
