package misuse

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/sync/singleflight"
)

// The listing state: which tools, with which input schemas, an MCP session had been served
// when it made a call. A server may serve each session its own tools (a per-user flag), page
// its tools/list (MCP's nextCursor) and change its tools at runtime (notifications/tools/
// list_changed, then a new tools/list), so a call is judged against what its own session was
// listed last before it, not against one listing per server version.
//
// How a call is judged (Listings.Judge): whether the tool is listed is taken from the first of
// these that has the call's tool or a complete listing, and the tool's schema from the first
// that has one for it:
//
//  1. the session's listing in effect at the call: the latest of the session's listings at or
//     before the call's event time, among those not after the call in its Kafka partition;
//  2. the server version's listing in effect at the call, by the same rule over every listing
//     any session (or sessionless traffic) of that server name and version was served: how a
//     sessionless call (no $session_id: stateless servers, MCP 2026-07-28) and a call of a
//     session that listed nothing are judged;
//  3. the server version's stored listing (PutStored: what the consumer read from
//     served_tool_schemas for a version it has not seen in the stream, or whose listing named
//     a called tool without its schema).
//
// A tool is unknown only when the listing that decides is complete: its first page and its
// last page (no nextCursor) were seen, and every page carried $mcp_listed_tool_names. For a
// session that listed, only its own listing decides: the version's are other sessions', whose
// tool sets may differ, and give only the tool's schema. A listing
// that names the tool without its schema decides that the tool is listed, and the later levels
// are still asked for the schema: @traceloop/instrumentation-mcp's tools/list span names the
// tools without schemas, and the stored listing (the same server's PostHog events, a
// semantic-convention tools/list span, or the scheduled schema check's own fetch) has them. A
// later level that lacks the tool does not make it unknown then.
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
	// or a session that listed nothing, or whose listing lacked the tool and was incomplete,
	// or named it without its schema).
	ServedVersion ServedFrom = "version"
	// ServedStored: the server version's stored listing (PutStored).
	ServedStored ServedFrom = "stored"
)

// Verdict is what Judge found for one call.
type Verdict struct {
	// Schema is the tool's compiled input schema, nil when no listing of the call's levels
	// has a schema for it (then Derive reports ReasonNoSchema).
	Schema *Schema
	// Unknown says the tool is not in the complete listing that judged the call.
	Unknown bool
	// From is the listing the schema came from; without a schema, the listing that decided
	// whether the tool is listed (ServedNone: none did).
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
	// MaxCompiledSchemas is how many compiled schemas are kept (default 4,096), least
	// recently used evicted first: a schema is held as its text and compiled when a call
	// needs it, so per-session variants no call uses cost only their text.
	MaxCompiledSchemas int
	// MaxVerdicts is how many schema verdicts are kept (default DefaultMaxVerdicts), least
	// recently used evicted first, and how many may wait to be stored (PendingVerdicts).
	MaxVerdicts int
	// Window is how far before its newest listing a session or version keeps listings, in
	// event time (default 24 hours); the listing in effect at the window's start is kept.
	Window time.Duration
	// StoredRecheck is how long a server version whose stored listing was empty is not asked
	// for again (NeedsStored; default one minute).
	StoredRecheck time.Duration
	// Schemas bounds the schemas compiled and the tools per listing (zero fields: defaults).
	Schemas SchemaLimits
	// Logger receives one warning per schema hash found over a limit (and per listing cut at
	// MaxToolsPerListing); nil: none.
	Logger *slog.Logger
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
	DefaultMaxCompiledSchemas    = 4096
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
	Listings, Schemas  int // distinct listings and schema texts held
	Compiled           int // compiled schemas held
	// Compiles counts schema compilations (a schema is compiled again after it left the
	// compiled cache).
	Compiles uint64
	// OverLimit counts, by limit, the schemas found over a SchemaLimits bound (each once
	// while it is held) and, for LimitTools, the listings cut at MaxToolsPerListing.
	OverLimit map[Limit]uint64
	// SessionEvictions and VersionEvictions count the sessions and versions evicted at their
	// caps; ListingsDropped the listings a session or version let go at its own bounds.
	SessionEvictions, VersionEvictions, ListingsDropped uint64
	// Checks counts schema texts checked against the SchemaLimits (each once while its
	// verdict is held); VerdictsReused the schema texts a held verdict spared the check
	// (a stored one read back, or one this process decided before the text was let go);
	// VerdictsUnstored the verdicts let go before they were stored (more than MaxVerdicts
	// pending).
	Checks, VerdictsReused, VerdictsUnstored uint64
}

// Listings is the listing state of one consumer: the listings its sessions and server versions
// were served, by event time. Create it with NewListings; it is safe for concurrent use.
type Listings struct {
	mu       sync.Mutex
	cfg      ListingsConfig
	sessions *simplelru.LRU[sessionKey, *timeline]
	versions *simplelru.LRU[versionKey, *version]
	listings map[[sha256.Size]byte]*listing // interned by content hash
	schemas  map[[sha256.Size]byte]*schemaRef
	// compiledLRU holds the compiled schemas most recently used, by text hash.
	compiledLRU *simplelru.LRU[[sha256.Size]byte, *Schema]
	// compiling shares one check and compilation among the callers that need the same schema
	// text at once (by its hash); it runs without mu.
	compiling singleflight.Group
	// For Bytes: the timeline entries held, the tools of the listings held, the bytes of the
	// schema texts held and of the compiled schemas' texts.
	entries, listedTools, textBytes, compiledTextBytes int
	stats                                              ListingStats
	// overLogged holds the hashes (of schemas and cut listings) whose over-limit warning was
	// logged, so each is logged once (bounded: MaxCompiledSchemas of them).
	overLogged *simplelru.LRU[[sha256.Size]byte, struct{}]
	// verdicts are the schema verdicts held, by text hash (verdicts.go); pending those not
	// stored yet, in pendingOrder.
	verdicts     *simplelru.LRU[[sha256.Size]byte, SchemaVerdict]
	pending      map[[sha256.Size]byte]SchemaVerdict
	pendingOrder [][sha256.Size]byte
	// fresh are the hashes of the schema texts taken in since UnjudgedSchemas was last asked.
	fresh [][sha256.Size]byte
}

type versionKey struct{ server, version string }

type sessionKey struct {
	versionKey
	session string
}

// version is what is kept of one server version.
type version struct {
	timeline
	stored  *listing  // PutStored's; nil when none was read
	checked time.Time // when the stored listing was read (zero: never)
}

// timeline is a session's or a version's listings, by (event time, position).
type timeline struct{ entries []entry }

// entry is one listing in effect from at (UnixNano) on.
type entry struct {
	at      int64
	pos     Position
	listing *listing
	next    string // the nextCursor of the page that made it ("" after a last page)
}

// listing is one listing as served: its tools with their schemas, by name. It is immutable
// (but for refs) and shared by every session and version served the same listing.
type listing struct {
	hash [sha256.Size]byte
	refs int
	// tools are sorted by name; a tool named in $mcp_listed_tool_names whose schema the
	// result did not carry (the SDK keeps 100 tools) has a nil schema.
	tools      []listedTool
	namesKnown bool // every page carried $mcp_listed_tool_names
	headless   bool // its first page was not seen
	complete   bool // first and last page seen, names known
}

type listedTool struct {
	name   string
	schema *schemaRef
}

// schemaRef is one input schema text, held once however many listings serve it; it is
// compiled on first use (Listings.compiled).
type schemaRef struct {
	sum  [sha256.Size]byte
	text []byte // a copy of the text as served
	refs int
	// checked says the text was checked against the SchemaLimits; over is then the
	// not-measurable Schema it derives when it passed one (nil: within them), decided once.
	checked bool
	over    *Schema
}

// lookup returns tool's entry in the listing.
func (lst *listing) lookup(tool string) (listedTool, bool) {
	i, ok := slices.BinarySearchFunc(lst.tools, tool, func(t listedTool, name string) int { return cmp.Compare(t.name, name) })
	if !ok {
		return listedTool{}, false
	}
	return lst.tools[i], true
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
	def(&cfg.MaxCompiledSchemas, DefaultMaxCompiledSchemas)
	def(&cfg.MaxVerdicts, DefaultMaxVerdicts)
	if cfg.Window <= 0 {
		cfg.Window = DefaultListingWindow
	}
	if cfg.StoredRecheck <= 0 {
		cfg.StoredRecheck = DefaultStoredRecheck
	}
	cfg.Schemas = cfg.Schemas.withDefaults()
	l := &Listings{cfg: cfg, listings: map[[sha256.Size]byte]*listing{}, schemas: map[[sha256.Size]byte]*schemaRef{}}
	l.stats.OverLimit = map[Limit]uint64{}
	l.verdicts, l.pending = newVerdicts(cfg.MaxVerdicts), map[[sha256.Size]byte]SchemaVerdict{}
	l.overLogged, _ = simplelru.NewLRU[[sha256.Size]byte, struct{}](cfg.MaxCompiledSchemas, nil)
	// The eviction callbacks run under l.mu (inside Add).
	l.sessions, _ = simplelru.NewLRU(cfg.MaxSessions, func(_ sessionKey, t *timeline) {
		l.stats.SessionEvictions++
		l.releaseAll(t)
	})
	l.compiledLRU, _ = simplelru.NewLRU(cfg.MaxCompiledSchemas, func(_ [sha256.Size]byte, s *Schema) { l.compiledTextBytes -= s.textBytes })
	l.versions, _ = simplelru.NewLRU(cfg.MaxVersions, func(_ versionKey, v *version) {
		l.stats.VersionEvictions++
		l.releaseAll(&v.timeline)
		l.release(v.stored)
	})
	return l
}

// Observe adds one tools/list page to the state: to its session's listings (continuing the
// listing whose nextCursor it was asked with, else starting one) and to its server version's.
// A page without a server name is kept under the empty name (the MCP analytics SDK's
// custom-dispatcher API sends none; its calls are judged against it). Observing the same page
// again changes nothing.
func (l *Listings) Observe(p ListingPage) {
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
func continued(t *timeline, p ListingPage) (base *listing, headless bool) {
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
	text   []byte     // the schema text, when it is not held yet
	ref    *schemaRef // when it is
	schema bool       // it has a schema (a name listed without one has not)
}

// build returns the listing base followed by page p (base nil: p starts one), interned, with
// one reference taken for the caller.
func (l *Listings) build(base *listing, headless bool, p ListingPage) *listing {
	n := len(p.Tools) + len(p.Names)
	if base != nil {
		n += len(base.tools)
	}
	tools := make([]builtTool, 0, n)
	namesKnown := p.Names != nil
	if base != nil {
		headless = base.headless
		namesKnown = namesKnown && base.namesKnown
		for _, t := range base.tools {
			b := builtTool{name: t.name, ref: t.schema, schema: t.schema != nil}
			if t.schema != nil {
				b.sum = t.schema.sum
			}
			tools = append(tools, b)
		}
	}
	for _, name := range p.Names {
		tools = append(tools, builtTool{name: name})
	}
	for _, t := range p.Tools {
		tools = append(tools, builtTool{name: t.Name, sum: sha256.Sum256(t.InputSchema), text: t.InputSchema, schema: true})
	}
	// By name; of one name, the last with a schema (a later page's over an earlier one's).
	slices.SortStableFunc(tools, func(a, b builtTool) int { return cmp.Compare(a.name, b.name) })
	out := tools[:0]
	for i := 0; i < len(tools); {
		j, pick := i, tools[i]
		for ; j < len(tools) && tools[j].name == tools[i].name; j++ {
			if tools[j].schema {
				pick = tools[j]
			}
		}
		out = append(out, pick)
		i = j
	}
	tools = out
	complete := !headless && p.NextCursor == "" && namesKnown
	cut := len(tools) > l.cfg.Schemas.MaxToolsPerListing
	if cut {
		tools, complete = tools[:l.cfg.Schemas.MaxToolsPerListing], false
	}

	h := sha256.New()
	h.Write([]byte{flag(headless), flag(complete), flag(namesKnown)})
	for _, t := range tools {
		h.Write([]byte(t.name))
		h.Write([]byte{0, flag(t.schema)})
		h.Write(t.sum[:])
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	if cut {
		l.overLimit(sum, OverLimit{Limit: LimitTools, Max: l.cfg.Schemas.MaxToolsPerListing, Seen: len(out)},
			"tool listing over limit: its first tools by name are kept, and it never decides that a tool is unknown",
			"server", p.Server, "server_version", p.Version)
	}
	if lst := l.listings[sum]; lst != nil {
		lst.refs++
		return lst
	}
	lst := &listing{hash: sum, refs: 1, tools: make([]listedTool, len(tools)), namesKnown: namesKnown, headless: headless, complete: complete}
	for i, t := range tools {
		lst.tools[i].name = t.name
		if !t.schema {
			continue
		}
		r := t.ref
		if r == nil {
			if r = l.schemas[t.sum]; r == nil {
				r = &schemaRef{sum: t.sum, text: bytes.Clone(t.text)}
				l.schemas[t.sum] = r
				l.newSchema(t.sum)
				l.textBytes += len(r.text)
			}
		}
		r.refs++
		lst.tools[i].schema = r
	}
	l.listings[sum] = lst
	l.listedTools += len(lst.tools)
	return lst
}

func flag(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// compiled returns the compiled schema of r, compiling it on first use (and again after it
// left the bounded cache of compiled schemas). The limit check and the compilation
// (CompileSchemaContext: linear in the schema's size, within SchemaLimits.MaxCompileTime) run
// without l.mu held, so other partitions' calls, pages and the memory budget's reads do not
// wait for them; callers that need the same schema at once share one compilation
// (singleflight, under the first caller's ctx). A schema over a limit, the time budget
// included, keeps that verdict on r and is never compiled again. When ctx is done the error
// wraps ctx.Err() and nothing is recorded. It is called without l.mu.
func (l *Listings) compiled(ctx context.Context, r *schemaRef) (*Schema, error) {
	l.mu.Lock()
	if r.checked {
		if r.over != nil {
			l.mu.Unlock()
			return r.over, nil
		}
		if s, ok := l.compiledLRU.Get(r.sum); ok {
			l.mu.Unlock()
			return s, nil
		}
	}
	if !r.checked {
		// A verdict held (stored, or decided before the text was let go) spares the check: one
		// over a limit is never compiled.
		if v, ok := l.storedVerdict(r.sum); ok {
			r.checked = true
			if v.Kind == VerdictOverLimit {
				r.over = &Schema{failed: ReasonSchemaOverLimit}
				l.mu.Unlock()
				return r.over, nil
			}
			if s, ok := l.compiledLRU.Get(r.sum); ok {
				l.mu.Unlock()
				return s, nil
			}
		}
	}
	checked := r.checked
	l.mu.Unlock()

	type outcome struct {
		schema *Schema
		over   *OverLimit
	}
	v, err, _ := l.compiling.Do(string(r.sum[:]), func() (any, error) {
		// The limits are checked again for a text a verdict spared (a linear scan): the
		// compile is bounded by them whatever the verdict said.
		s, err := CompileSchemaContext(ctx, r.text, l.cfg.Schemas) // r.text never changes
		if s == nil {
			return nil, err // ctx done: no verdict
		}
		var o *OverLimit
		if errors.As(err, &o) {
			return outcome{schema: s, over: o}, nil
		}
		s.textBytes = len(r.text)
		s.sum, s.hashed = r.sum, true
		return outcome{schema: s}, nil // a failure derives not_measurable
	})
	if err != nil {
		return nil, err
	}
	out := v.(outcome)

	l.mu.Lock()
	defer l.mu.Unlock()
	if !checked && !r.checked {
		l.stats.Checks++
		verdict := SchemaVerdict{Sum: r.sum, Kind: VerdictMeasured, At: time.Now().UTC()}
		switch {
		case out.over != nil:
			verdict.Kind, verdict.Over = VerdictOverLimit, *out.over
		case out.schema.failed != "":
			verdict.Kind = VerdictUnsupported
		}
		l.decided(verdict)
	}
	r.checked = true
	if out.over != nil {
		if r.over == nil {
			r.over = out.schema
			l.overLimit(r.sum, *out.over, "input schema over limit: never compiled, its calls are not measured (schema_over_limit)")
		}
		return r.over, nil
	}
	// Kept compiled while the text is still held (a page may have let it go meanwhile).
	if l.schemas[r.sum] == r && !l.compiledLRU.Contains(r.sum) {
		l.compiledTextBytes += out.schema.textBytes
		l.compiledLRU.Add(r.sum, out.schema)
		l.stats.Compiles++
	}
	return out.schema, nil
}

// overLimit counts o and logs it with msg and args, once per hash sum while the hash stays
// among the MaxCompiledSchemas most recently logged.
func (l *Listings) overLimit(sum [sha256.Size]byte, o OverLimit, msg string, args ...any) {
	if l.overLogged.Contains(sum) {
		return
	}
	l.overLogged.Add(sum, struct{}{})
	l.stats.OverLimit[o.Limit]++
	if l.cfg.Logger != nil {
		l.cfg.Logger.Warn(msg, append(args, "sha256", hex.EncodeToString(sum[:]), "limit", string(o.Limit), "max", o.Max, "seen", o.Seen)...)
	}
}

// release drops one reference to lst, letting it (and schemas no other listing holds) go at
// the last.
func (l *Listings) release(lst *listing) {
	if lst == nil {
		return
	}
	if lst.refs--; lst.refs > 0 {
		return
	}
	delete(l.listings, lst.hash)
	l.listedTools -= len(lst.tools)
	for _, t := range lst.tools {
		if r := t.schema; r != nil {
			if r.refs--; r.refs == 0 {
				delete(l.schemas, r.sum)
				l.textBytes -= len(r.text)
				l.compiledLRU.Remove(r.sum)
			}
		}
	}
}

func (l *Listings) releaseAll(t *timeline) {
	for _, e := range t.entries {
		l.release(e.listing)
	}
	l.entries -= len(t.entries)
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

// insert adds e to t (taking a reference to its listing) in (time, position) order, then trims
// t to limit entries and the window. Nothing is added when the entry before e in time holds
// the same listing with the same next cursor (a re-list that changed nothing: every session of
// a server re-lists the same tools, and a version's timeline would otherwise fill with copies
// and lose its older listings); an entry after e holding the same is removed, e taking effect
// earlier. (Only a call between the two in time but before the kept one in its partition's log
// could tell the difference.)
func (l *Listings) insert(t *timeline, e entry, limit int) {
	i, found := slices.BinarySearchFunc(t.entries, e, compareEntries)
	if found && t.entries[i].listing == e.listing {
		return
	}
	if i > 0 && t.entries[i-1].listing == e.listing && t.entries[i-1].next == e.next {
		return
	}
	e.listing.refs++
	t.entries = slices.Insert(t.entries, i, e)
	l.entries++
	if i+1 < len(t.entries) && t.entries[i+1].listing == e.listing && t.entries[i+1].next == e.next {
		l.release(t.entries[i+1].listing)
		t.entries = slices.Delete(t.entries, i+1, i+2)
		l.entries--
	}
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
		l.entries--
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
func (t *timeline) inEffect(at int64, pos Position) *listing {
	for i := len(t.entries) - 1; i >= 0; i-- {
		e := &t.entries[i]
		if e.at <= at && !e.pos.after(pos) {
			return e.listing
		}
	}
	return nil
}

// Judge returns the schema of tool for call c and whether the tool is unknown, from the
// listings in effect at the call (see the order above: the first listing that has the tool or
// is complete decides unknown; the first that has the tool's schema gives it). A call without
// a server name is judged against the listings without one (the caller decides which calls
// those may judge).
func (l *Listings) Judge(c CallAt, tool string) Verdict {
	v, _ := l.JudgeContext(context.Background(), c, tool) // never done: no error
	return v
}

// JudgeContext is Judge with the schema's compilation (on its first use) under ctx: when ctx
// is done before the schema is compiled, the error wraps ctx.Err() and the verdict is not
// to be used (nothing was recorded; a later call compiles the schema).
func (l *Listings) JudgeContext(ctx context.Context, c CallAt, tool string) (Verdict, error) {
	v, schema := l.judge(c, tool)
	if schema != nil {
		s, err := l.compiled(ctx, schema)
		if err != nil {
			return Verdict{}, err
		}
		v.Schema = s
	}
	return v, nil
}

// judge is Judge under l.mu, without compiling: it returns the verdict and, when a listing has
// the tool's schema, that schema's text to compile.
func (l *Listings) judge(c CallAt, tool string) (Verdict, *schemaRef) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at := c.At.UnixNano()
	vk := versionKey{c.Server, c.Version}
	var levels [3]*listing
	if c.Session != "" {
		if t, ok := l.sessions.Get(sessionKey{vk, c.Session}); ok {
			levels[0] = t.inEffect(at, c.Pos)
		}
	}
	if v, ok := l.versions.Get(vk); ok {
		levels[1] = v.inEffect(at, c.Pos)
		levels[2] = v.stored
	}
	listedBy := ServedNone // the first listing that named the tool without a schema
	for i, lst := range levels {
		if lst == nil {
			continue
		}
		from := []ServedFrom{ServedSession, ServedVersion, ServedStored}[i]
		t, listed := lst.lookup(tool)
		switch {
		case t.schema != nil:
			return Verdict{From: from}, t.schema
		case listedBy != ServedNone:
			// Listed already: only a schema is looked for.
		case listed:
			listedBy = from
		case lst.complete && (i == 0 || levels[0] == nil):
			// A session that listed is judged unknown by its own listing only: the version's
			// listings are other sessions', whose tool sets may differ (they may still give
			// the tool's schema).
			return Verdict{Unknown: true, From: from}, nil
		}
	}
	return Verdict{From: listedBy}, nil
}

// NeedsStored reports whether the server version's stored listing should be read (PutStored):
// it never was, or it was empty and read more than StoredRecheck before now.
func (l *Listings) NeedsStored(server, ver string, now time.Time) bool {
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

// Memory estimates of Bytes, per item, from heap profiles of BenchmarkListings100kSessions
// (Go 1.26, amd64): a session (its LRU element, map slot, key and timeline), a timeline
// entry, a listing (its struct, map slot and slice header), a listed tool, a schema text's
// bookkeeping, and a compiled schema per byte of its text.
const (
	bytesPerSession        = 400
	bytesPerEntry          = 48
	bytesPerListing        = 200
	bytesPerListedTool     = 24
	bytesPerSchema         = 150
	compiledBytesPerByteIn = 3
	bytesPerVerdict        = 290 // a held verdict: its LRU element and map slot (measured: 288)
	bytesPerPending        = 320 // a verdict waiting to be stored: its map slot and order (measured: 321)
)

// Bytes estimates the heap the state holds, in bytes (see the per-item figures above): what
// the consumer's memory budget counts, with the dedup windows, before sizing its batches.
func (l *Listings) Bytes() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sessions.Len()*bytesPerSession + l.entries*bytesPerEntry + len(l.listings)*bytesPerListing +
		l.listedTools*bytesPerListedTool + len(l.schemas)*bytesPerSchema + l.textBytes + l.compiledTextBytes*compiledBytesPerByteIn +
		l.verdicts.Len()*bytesPerVerdict + len(l.pending)*bytesPerPending + len(l.fresh)*sha256.Size
}

// Stats returns the state's sizes and evictions so far.
func (l *Listings) Stats() ListingStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.OverLimit = maps.Clone(l.stats.OverLimit)
	s.Sessions, s.Versions = l.sessions.Len(), l.versions.Len()
	s.Listings, s.Schemas, s.Compiled = len(l.listings), len(l.schemas), l.compiledLRU.Len()
	return s
}
