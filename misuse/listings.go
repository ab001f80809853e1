package misuse

import (
	"cmp"
	"crypto/sha256"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// The listing state: which tools, with which input schemas, an MCP session had been served
// when it made a call. A server may serve each session its own tools (a per-user flag), page
// its tools/list (MCP's nextCursor) and change its tools at runtime (notifications/tools/
// list_changed, then a new tools/list), so a call is judged against what its own session was
// listed last before it, not against one listing per server version.
//
// How a call is judged (Listings.Judge): the tool's schema, and whether the tool is listed, are
// taken from the first of these that has the call's tool or a complete listing:
//
//  1. the session's listing in effect at the call: the latest of the session's listings at or
//     before the call's event time, among those not after the call in its Kafka partition;
//  2. the server version's listing in effect at the call, by the same rule over every listing
//     any session (or sessionless traffic) of that server name and version was served: how a
//     sessionless call (no $session_id: stateless servers, MCP 2026-07-28) and a call of a
//     session that listed nothing are judged;
//  3. the server version's stored listing (PutStored: what the consumer read from
//     served_tool_schemas for a version it has not seen in the stream).
//
// A tool is unknown only when the listing that decides is complete: its first page and its
// last page (no nextCursor) were seen, and every page carried $mcp_listed_tool_names.
//
// Pages: a tools/list request without a cursor starts a listing; one with a cursor continues
// the listing of the same session (of the same server version when sessionless) whose last
// page returned that cursor as nextCursor, adding its tools (a tool listed again takes the
// later page's schema). A continuation page whose listing is not known (its first page fell
// out of the window, or was never seen) starts a listing without its first page, which is
// never complete. Each page makes a new listing in effect from the page's event time.
//
// Bounds (ListingsConfig): at most MaxSessions sessions, least recently used evicted first; at
// most MaxListingsPerSession listings per session and MaxListingsPerVersion per server version,
// and none older than Window before the newest (the listing in effect at the window's start is
// kept); at most MaxVersions server versions. Listings are stored once by content hash and
// schemas compiled once by the hash of their text, however many sessions share them, and let
// go when nothing refers to them.

// Position is where an event is in the log: its Kafka partition and offset. A Position whose
// Offset is negative (NoPosition) is unknown: events with one are ordered by event time only.
type Position struct {
	Partition int32
	Offset    int64
}

// NoPosition is the Position of an event whose place in the log is unknown.
var NoPosition = Position{Offset: -1}

// after reports whether p is later than q in the same partition's log (false when either is
// unknown or they are in different partitions: only a partition's offsets are ordered).
func (p Position) after(q Position) bool {
	return p.Offset >= 0 && q.Offset >= 0 && p.Partition == q.Partition && p.Offset > q.Offset
}

// ServedTool is one tool of a tools/list page: its name and its inputSchema JSON text as
// captured (nil when absent).
type ServedTool struct {
	Name        string
	InputSchema []byte
}

// ListingPage is one tools/list result (one $mcp_tools_list event) as the listing state needs
// it.
type ListingPage struct {
	// Server and Version are $mcp_server_name and $mcp_server_version; Session is $session_id
	// ("" for sessionless traffic).
	Server, Version, Session string
	// At is the event's timestamp and Pos its place in the log.
	At  time.Time
	Pos Position
	// HasCursor says the request carried a cursor (Cursor, possibly ""): a later page.
	Cursor    string
	HasCursor bool
	// NextCursor is the result's nextCursor: "" on a listing's last page.
	NextCursor string
	// Names is $mcp_listed_tool_names (nil when the event had none).
	Names []string
	// Tools are the tools of the result with their schemas (the SDK keeps at most 100).
	Tools []ServedTool
}

// CallAt is what Judge needs of a tool call: its server, session, event time and place in the
// log (fields as in ListingPage).
type CallAt struct {
	Server, Version, Session string
	At                       time.Time
	Pos                      Position
}

// ServedFrom says which listing judged a call.
type ServedFrom string

const (
	// ServedNone: no listing of the call's session or server version was known.
	ServedNone ServedFrom = ""
	// ServedSession: the listing the call's own session was served last before the call.
	ServedSession ServedFrom = "session"
	// ServedVersion: the server version's listing in effect at the call (a sessionless call,
	// or a session that listed nothing, or whose listing lacked the tool and was incomplete).
	ServedVersion ServedFrom = "version"
	// ServedStored: the server version's stored listing (PutStored).
	ServedStored ServedFrom = "stored"
)

// Verdict is what Judge found for one call.
type Verdict struct {
	// Schema is the tool's compiled input schema, nil when the listing that judged the call
	// has no schema for it (then Derive reports ReasonNoSchema).
	Schema *Schema
	// Unknown says the tool is not in the complete listing that judged the call.
	Unknown bool
	// From is which listing judged the call.
	From ServedFrom
}

// ListingsConfig bounds a Listings; a zero field takes its default.
type ListingsConfig struct {
	// MaxSessions is how many sessions are kept (default DefaultMaxSessions); beyond it the
	// least recently used session (listed or judged) is evicted, and its later calls fall
	// back to the server version's listings.
	MaxSessions int
	// MaxListingsPerSession is how many listings one session keeps (default 8): its newest.
	MaxListingsPerSession int
	// MaxVersions is how many server versions are kept (default 1,024), least recently used
	// evicted first; MaxListingsPerVersion how many listings each keeps (default 256).
	MaxVersions           int
	MaxListingsPerVersion int
	// Window is how far before its newest listing a session or version keeps listings, in
	// event time (default 24 hours); the listing in effect at the window's start is kept.
	Window time.Duration
	// StoredRecheck is how long a server version whose stored listing was empty is not asked
	// for again (NeedsStored; default one minute).
	StoredRecheck time.Duration
}

// Defaults of ListingsConfig.
const (
	// DefaultMaxSessions bounds the sessions kept. Measured (BenchmarkListings100kSessions):
	// 100,000 sessions with their listings take about docs/scaling.md's figure, well under the
	// consumer's 300 MiB budget.
	DefaultMaxSessions           = 200_000
	DefaultMaxListingsPerSession = 8
	DefaultMaxVersions           = 1024
	DefaultMaxListingsPerVersion = 256
	DefaultListingWindow         = 24 * time.Hour
	DefaultStoredRecheck         = time.Minute
)

// storedBreadthLimit is how many entries the MCP analytics SDK keeps of an array it captures
// (@posthog/mcp src/extensions/truncation.ts, MAX_BREADTH): a stored listing read back with
// that many tools or more may have been cut, so it does not decide unknown tools.
const storedBreadthLimit = 100

// ListingStats are a Listings' sizes and evictions, for metrics.
type ListingStats struct {
	Sessions, Versions int // kept now
	Listings, Schemas  int // distinct listings and compiled schemas held
	// SessionEvictions and VersionEvictions count the sessions and versions evicted at their
	// caps; ListingsDropped the listings a session or version let go at its own bounds.
	SessionEvictions, VersionEvictions, ListingsDropped uint64
}

// Listings is the listing state of one consumer: the listings its sessions and server versions
// were served, by event time. Create it with NewListings; it is safe for concurrent use.
type Listings struct {
	mu       sync.Mutex
	cfg      ListingsConfig
	sessions *simplelru.LRU[sessionKey, *timeline]
	versions *simplelru.LRU[versionKey, *version]
	listings map[[sha256.Size]byte]*Listing // interned by content hash
	schemas  map[[sha256.Size]byte]*schemaRef
	stats    ListingStats
}

type versionKey struct{ server, version string }

type sessionKey struct {
	versionKey
	session string
}

// version is what is kept of one server version.
type version struct {
	timeline
	stored  *Listing  // PutStored's; nil when none was read
	checked time.Time // when the stored listing was read (zero: never)
}

// timeline is a session's or a version's listings, by (event time, position).
type timeline struct{ entries []entry }

// entry is one listing in effect from at (UnixNano) on.
type entry struct {
	at      int64
	pos     Position
	listing *Listing
	next    string // the nextCursor of the page that made it ("" after a last page)
}

// Listing is one listing as served: its tools' compiled schemas and the names listed. It is
// immutable and shared by every session served the same listing.
type Listing struct {
	hash  [sha256.Size]byte
	refs  int
	tools map[string]*schemaRef
	// names holds every tool name listed; nil when a page carried no $mcp_listed_tool_names.
	names    map[string]struct{}
	headless bool // its first page was not seen
	complete bool // first and last page seen, names known
}

type schemaRef struct {
	sum    [sha256.Size]byte
	schema *Schema
	refs   int
}

// NewListings returns an empty listing state bounded by cfg.
func NewListings(cfg ListingsConfig) *Listings {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.MaxSessions, DefaultMaxSessions)
	def(&cfg.MaxListingsPerSession, DefaultMaxListingsPerSession)
	def(&cfg.MaxVersions, DefaultMaxVersions)
	def(&cfg.MaxListingsPerVersion, DefaultMaxListingsPerVersion)
	if cfg.Window <= 0 {
		cfg.Window = DefaultListingWindow
	}
	if cfg.StoredRecheck <= 0 {
		cfg.StoredRecheck = DefaultStoredRecheck
	}
	l := &Listings{cfg: cfg, listings: map[[sha256.Size]byte]*Listing{}, schemas: map[[sha256.Size]byte]*schemaRef{}}
	// The eviction callbacks run under l.mu (inside Add).
	l.sessions, _ = simplelru.NewLRU(cfg.MaxSessions, func(_ sessionKey, t *timeline) {
		l.stats.SessionEvictions++
		l.releaseAll(t)
	})
	l.versions, _ = simplelru.NewLRU(cfg.MaxVersions, func(_ versionKey, v *version) {
		l.stats.VersionEvictions++
		l.releaseAll(&v.timeline)
		l.release(v.stored)
	})
	return l
}

// Schema returns the compiled input schema the listing holds for tool, nil when none.
func (l *Listing) Schema(tool string) *Schema {
	if l == nil {
		return nil
	}
	if r := l.tools[tool]; r != nil {
		return r.schema
	}
	return nil
}

// Complete reports whether the listing is known whole: its first and last page were seen and
// every page named its tools.
func (l *Listing) Complete() bool { return l != nil && l.complete }

// Lists reports whether the listing names tool (among its names, else its tools).
func (l *Listing) Lists(tool string) bool {
	if l == nil {
		return false
	}
	if l.names != nil {
		_, ok := l.names[tool]
		return ok
	}
	_, ok := l.tools[tool]
	return ok
}

// Observe adds one tools/list page to the state: to its session's listings (continuing the
// listing whose nextCursor it was asked with, else starting one) and to its server version's.
// A page without a server name is ignored (nothing could be judged against it). Observing
// the same page again changes nothing.
func (l *Listings) Observe(p ListingPage) {
	if p.Server == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	vk := versionKey{p.Server, p.Version}
	v := l.version(vk)
	at := p.At.UnixNano()
	if p.Session == "" {
		base, headless := continued(&v.timeline, p)
		lst := l.build(base, headless, p)
		l.insert(&v.timeline, entry{at: at, pos: p.Pos, listing: lst, next: p.NextCursor}, l.cfg.MaxListingsPerVersion)
		l.release(lst) // the timeline holds its own reference
		return
	}
	sk := sessionKey{vk, p.Session}
	t, ok := l.sessions.Get(sk)
	if !ok {
		t = &timeline{}
		l.sessions.Add(sk, t)
	}
	base, headless := continued(t, p)
	lst := l.build(base, headless, p)
	e := entry{at: at, pos: p.Pos, listing: lst, next: p.NextCursor}
	l.insert(t, e, l.cfg.MaxListingsPerSession)
	l.insert(&v.timeline, e, l.cfg.MaxListingsPerVersion)
	l.release(lst)
}

// continued returns the listing a page continues: nil for a first page; for a later page the
// listing of t whose last page returned its cursor, the latest such one at or before the page,
// or nil and headless when there is none.
func continued(t *timeline, p ListingPage) (base *Listing, headless bool) {
	if !p.HasCursor {
		return nil, false
	}
	at := p.At.UnixNano()
	for i := len(t.entries) - 1; i >= 0; i-- {
		e := &t.entries[i]
		if e.at <= at && !e.pos.after(p.Pos) && e.next != "" && e.next == p.Cursor {
			return e.listing, false
		}
	}
	return nil, true
}

// builtTool is one tool of a listing being built.
type builtTool struct {
	name   string
	sum    [sha256.Size]byte
	schema []byte     // the text, when the schema is not compiled yet
	ref    *schemaRef // when it is
}

// build returns the listing base followed by page p (base nil: p starts one), interned, with
// one reference taken for the caller.
func (l *Listings) build(base *Listing, headless bool, p ListingPage) *Listing {
	tools := make([]builtTool, 0, len(p.Tools)+lenTools(base))
	if base != nil {
		headless = base.headless
		for name, r := range base.tools {
			tools = append(tools, builtTool{name: name, sum: r.sum, ref: r})
		}
	}
	for _, t := range p.Tools {
		tools = append(tools, builtTool{name: t.Name, sum: sha256.Sum256(t.InputSchema), schema: t.InputSchema})
	}
	// By name, a later page's tool after an earlier page's (stable), keeping the last of each.
	slices.SortStableFunc(tools, func(a, b builtTool) int { return cmp.Compare(a.name, b.name) })
	tools = compactLast(tools)

	var names []string
	namesKnown := p.Names != nil && (base == nil || base.names != nil)
	if namesKnown {
		if base != nil {
			for n := range base.names {
				names = append(names, n)
			}
		}
		names = append(names, p.Names...)
		slices.Sort(names)
		names = slices.Compact(names)
	}
	complete := !headless && p.NextCursor == "" && namesKnown

	h := sha256.New()
	flags := []byte{0, 0, 0}
	if headless {
		flags[0] = 1
	}
	if complete {
		flags[1] = 1
	}
	if namesKnown {
		flags[2] = 1
	}
	h.Write(flags)
	for _, t := range tools {
		h.Write([]byte(t.name))
		h.Write([]byte{0})
		h.Write(t.sum[:])
	}
	h.Write([]byte{1})
	for _, n := range names {
		h.Write([]byte(n))
		h.Write([]byte{0})
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	if lst := l.listings[sum]; lst != nil {
		lst.refs++
		return lst
	}
	lst := &Listing{hash: sum, refs: 1, tools: make(map[string]*schemaRef, len(tools)), headless: headless, complete: complete}
	for _, t := range tools {
		r := t.ref
		if r == nil {
			r = l.schemas[t.sum]
			if r == nil {
				s, _ := CompileSchema(t.schema) // never nil; a failure derives not_measurable
				r = &schemaRef{sum: t.sum, schema: s}
				l.schemas[t.sum] = r
			}
		}
		r.refs++
		lst.tools[t.name] = r
	}
	if namesKnown {
		lst.names = make(map[string]struct{}, len(names))
		for _, n := range names {
			lst.names[n] = struct{}{}
		}
	}
	l.listings[sum] = lst
	return lst
}

func lenTools(l *Listing) int {
	if l == nil {
		return 0
	}
	return len(l.tools)
}

// compactLast keeps the last of each run of tools of one name.
func compactLast(tools []builtTool) []builtTool {
	out := tools[:0]
	for i := range tools {
		if i+1 < len(tools) && tools[i+1].name == tools[i].name {
			continue
		}
		out = append(out, tools[i])
	}
	return out
}

// release drops one reference to lst, letting it (and schemas no other listing holds) go at
// the last.
func (l *Listings) release(lst *Listing) {
	if lst == nil {
		return
	}
	if lst.refs--; lst.refs > 0 {
		return
	}
	delete(l.listings, lst.hash)
	for _, r := range lst.tools {
		if r.refs--; r.refs == 0 {
			delete(l.schemas, r.sum)
		}
	}
}

func (l *Listings) releaseAll(t *timeline) {
	for _, e := range t.entries {
		l.release(e.listing)
	}
	t.entries = nil
}

// version returns the state of server version k, creating it.
func (l *Listings) version(k versionKey) *version {
	v, ok := l.versions.Get(k)
	if !ok {
		v = &version{}
		l.versions.Add(k, v)
	}
	return v
}

// insert adds e to t (taking a reference to its listing) in (time, position) order, unless an
// entry of the same time, position and listing is there already, then trims t to max entries
// and the window.
func (l *Listings) insert(t *timeline, e entry, limit int) {
	i, found := slices.BinarySearchFunc(t.entries, e, compareEntries)
	if found && t.entries[i].listing == e.listing {
		return
	}
	e.listing.refs++
	t.entries = slices.Insert(t.entries, i, e)
	// The window: drop an entry when the one after it took effect at or before the window's
	// start (it is no longer in effect anywhere in the window).
	start := t.entries[len(t.entries)-1].at - int64(l.cfg.Window)
	drop := 0
	for drop+1 < len(t.entries) && t.entries[drop+1].at <= start {
		drop++
	}
	drop = max(drop, len(t.entries)-limit)
	for _, old := range t.entries[:drop] {
		l.release(old.listing)
		l.stats.ListingsDropped++
	}
	if drop > 0 {
		t.entries = slices.Delete(t.entries, 0, drop)
	}
}

func compareEntries(a, b entry) int {
	if c := cmp.Compare(a.at, b.at); c != 0 {
		return c
	}
	if c := cmp.Compare(a.pos.Partition, b.pos.Partition); c != 0 {
		return c
	}
	return cmp.Compare(a.pos.Offset, b.pos.Offset)
}

// inEffect returns the listing of t in effect for a call at (at, pos): the latest entry at or
// before at that is not after pos in its partition's log; nil when there is none.
func (t *timeline) inEffect(at int64, pos Position) *Listing {
	for i := len(t.entries) - 1; i >= 0; i-- {
		e := &t.entries[i]
		if e.at <= at && !e.pos.after(pos) {
			return e.listing
		}
	}
	return nil
}

// Judge returns the schema of tool for call c and whether the tool is unknown, from the
// listing in effect at the call (see the order above). A call without a server name is judged
// by nothing (ServedNone).
func (l *Listings) Judge(c CallAt, tool string) Verdict {
	if c.Server == "" {
		return Verdict{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	at := c.At.UnixNano()
	vk := versionKey{c.Server, c.Version}
	var levels [3]*Listing
	if c.Session != "" {
		if t, ok := l.sessions.Get(sessionKey{vk, c.Session}); ok {
			levels[0] = t.inEffect(at, c.Pos)
		}
	}
	if v, ok := l.versions.Get(vk); ok {
		levels[1] = v.inEffect(at, c.Pos)
		levels[2] = v.stored
	}
	for i, lst := range levels {
		if lst == nil {
			continue
		}
		from := []ServedFrom{ServedSession, ServedVersion, ServedStored}[i]
		if s := lst.Schema(tool); s != nil {
			return Verdict{Schema: s, From: from}
		}
		if lst.complete {
			return Verdict{Unknown: !lst.Lists(tool), From: from}
		}
	}
	return Verdict{}
}

// NeedsStored reports whether the server version's stored listing should be read (PutStored):
// it never was, or it was empty and read more than StoredRecheck before now.
func (l *Listings) NeedsStored(server, ver string, now time.Time) bool {
	if server == "" {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.versions.Peek(versionKey{server, ver})
	if !ok || v.checked.IsZero() {
		return true
	}
	return v.stored == nil && now.Sub(v.checked) > l.cfg.StoredRecheck
}

// PutStored sets the server version's stored listing: the tools a store holds for it (one
// schema per tool), read at now. It is complete when it holds at least one tool and fewer than
// the SDK's 100 (more may have been cut); an empty one is asked for again after StoredRecheck.
func (l *Listings) PutStored(server, ver string, tools []ServedTool, now time.Time) {
	if server == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.version(versionKey{server, ver})
	l.release(v.stored)
	v.stored, v.checked = nil, now
	if len(tools) == 0 {
		return
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	p := ListingPage{Names: names, Tools: tools}
	if len(tools) >= storedBreadthLimit {
		p.Names = nil // maybe cut: not complete
	}
	v.stored = l.build(nil, false, p)
}

// Stats returns the state's sizes and evictions so far.
func (l *Listings) Stats() ListingStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.Sessions, s.Versions = l.sessions.Len(), l.versions.Len()
	s.Listings, s.Schemas = len(l.listings), len(l.schemas)
	return s
}
