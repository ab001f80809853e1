// Package gen generates deterministic test corpora for mcpulse: a JSONL file of PostHog-style
// events (tool calls over real MCP tool schemas, interview recruitment flows, plus duplicate and
// malformed lines at stated rates) and the outcome the pipeline must produce from it
// (demo/outcome), computed independently of the consumer with plain maps.
//
// The same Config always gives byte-identical output: randomness comes from one math/rand/v2
// PCG seeded from Config.Seed, and nothing reads the clock or iterates a map unsorted.
package gen

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/mcpulse/mcpulse/demo/outcome"
)

// DefaultInstanceURL is the PostHog instance assumed for events without `instance_url` when
// Config.InstanceURL is empty (the consumer's default `--instance-url`).
const DefaultInstanceURL = "https://us.posthog.com"

// Window is how far back from Config.End the events reach by default (Config.Span): every
// event timestamp t satisfies End-Span <= t < End.
const Window = 48 * time.Hour

// Rates of the generated corpus. Each is a probability per event (or per line) unless stated;
// the line rates (DuplicateRate, MalformedRate) are applied as exact counts, rounded.
const (
	// ToolCallShare is the share of valid events that are $mcp_tool_call events; the rest are
	// recruitment events (invitations, booking-link opens, responses).
	ToolCallShare = 0.80
	// ReportShare is the share of valid events that are the SDK's reports and requests
	// (Config.Reports), taken from the tool calls' share.
	ReportShare = 0.06
	// ToolErrorRate is the share of tool calls with $mcp_is_error true (exec calls to an
	// unrecognized tool fail more often, 70%, so the overall rate is slightly higher).
	ToolErrorRate = 0.05
	// ExecShare is the share of tool calls made through PostHog's `exec` tool
	// ($mcp_tool_name "exec" with $mcp_exec_verb call, info or search).
	ExecShare = 0.15
	// MisplacedKeyRate is the share of successful tool calls whose arguments carry agent
	// mistakes: a misnamed key (camelCase/snake_case variant), a key at the wrong nesting level,
	// an extra key inside an array item, an invented key. Each such call reports at least one
	// ignored key that counts.
	MisplacedKeyRate = 0.12
	// ClientInjectedKeyRate is the share of successful tool calls whose arguments carry a key the
	// MCP client injected (`_meta` object or `toolCallId`); reported as ignored, never counted.
	ClientInjectedKeyRate = 0.03
	// DiagnosticsRate is the share of tool calls carrying the interview_recruitment_* diagnostics
	// (reason, capability flags, completed calls, session age).
	DiagnosticsRate = 0.92
	// UnknownReasonRate is the share of diagnosed tool calls whose reason is a gate mcpulse does
	// not know yet (e.g. `new_gate_xyz`): kept and counted, never rejected.
	UnknownReasonRate = 0.005
	// NullCapabilityRate is the share of diagnosed tool calls whose url/form capability flag is
	// null ("no capability metadata"), per flag (mostly both at once).
	NullCapabilityRate = 0.25
	// InstanceURLRate is the share of recruitment events carrying `instance_url`; without it
	// the consumer assumes the default instance.
	InstanceURLRate = 0.70
	// LateResponseRate is the share of invitation responses given more than 10 minutes after
	// the invitation (so the invitation still counts as unanswered).
	LateResponseRate = 0.12
	// DuplicateRate is the share of lines that repeat an earlier valid line byte for byte.
	DuplicateRate = 0.01
	// MalformedRate is the share of lines that break the event contract and must be
	// dead-lettered (bad JSON, missing uuid, bad timestamp, wrong property type, response
	// `maybe`, distinct_id of 201 characters, 21 ignored keys, unknown event name, ...).
	MalformedRate = 0.005
)

// Config says what to generate. The same Config gives byte-identical output.
type Config struct {
	// Events is how many lines to write, duplicates and malformed lines included.
	Events int
	// Seed seeds the random generator.
	Seed int64
	// Span is how far back from End the events reach. Default: Window (48 hours).
	Span time.Duration
	// Shape is how tool calls are written. Default: ShapeDemo.
	Shape Shape
	// ListEvery, for ShapeSDK, lists a server's tools before the first call of one in
	// ListEvery (user, server) pairs. Default: 1, every pair, so each call's served schema is
	// on its partition before it and what the pipeline derives is exact. A benchmark may
	// list less often: the SDK's listings (13 to 100 KB each) would otherwise outweigh the
	// calls, and a call then finds its server's schemas only once some listing was consumed.
	ListEvery int
	// Reports, when set, spends ReportShare of the valid events on the MCP analytics SDK's
	// reports and requests besides tool calls (missing capabilities, feedback, resources,
	// prompts, identifies) in the tool calls' sessions, instead of on tool calls.
	Reports bool
	// End bounds the corpus: events span the Span before it. The zero value means the
	// current time truncated to the hour (which makes the output depend on the clock).
	End time.Time
	// InstanceURL is the default PostHog instance URL the expected identity hashes assume for
	// events without `instance_url`; empty means DefaultInstanceURL.
	InstanceURL string
	// Progress, when set, receives progress lines for large corpora. It does not change the
	// output.
	Progress io.Writer
	// ContactViolations, when positive, adds that many invitations breaking each further
	// contact-policy rule, and as many breaking none, with their warm-up tool calls (demo shape
	// only; contact.go); the outcome's ContactPolicy says what the audit must find, and
	// WriteFiles writes the excluded distinct ids to path+ContactExclusionSuffix. Zero leaves the
	// corpus as it was without it.
	ContactViolations int
}

// Generate writes the JSONL corpus described by cfg to w and returns the expected outcome
// (Corpus filled, rows normalized).
func Generate(cfg Config, w io.Writer) (*outcome.Outcome, error) {
	if cfg.Events < 0 {
		return nil, fmt.Errorf("events must be >= 0, got %d", cfg.Events)
	}
	if cfg.Span < 0 || (cfg.Span > 0 && cfg.Span < time.Hour) {
		return nil, fmt.Errorf("span must be at least an hour, got %s", cfg.Span)
	}
	if cfg.ListEvery < 0 {
		return nil, fmt.Errorf("list-every must not be negative, got %d", cfg.ListEvery)
	}
	if err := cfg.Shape.validate(); err != nil {
		return nil, err
	}
	if cfg.ContactViolations < 0 || (cfg.ContactViolations > 0 && cfg.Shape == ShapeSDK) {
		return nil, fmt.Errorf("contact violations must be >= 0, and need the demo shape; got %d with shape %q", cfg.ContactViolations, cfg.Shape)
	}
	if cfg.Shape == "" {
		cfg.Shape = ShapeDemo
	}
	if cfg.End.IsZero() {
		cfg.End = time.Now().UTC().Truncate(time.Hour)
	}
	cfg.End = cfg.End.UTC()
	if cfg.InstanceURL == "" {
		cfg.InstanceURL = DefaultInstanceURL
	}
	g, err := newGenerator(cfg)
	if err != nil {
		return nil, err
	}
	g.progress("generating %d events", cfg.Events)
	c, err := g.build()
	if err != nil {
		return nil, err
	}
	g.progress("writing %d lines", c.lines)
	if err := g.write(c, w); err != nil {
		return nil, err
	}
	g.progress("computing the expected outcome")
	o := expectedOutcome(cfg, c.valid, c.lines, len(c.dups), len(c.malformed))
	o.ContactPolicy = g.contact
	o.Normalize()
	return o, nil
}

// WriteFiles generates the corpus into the file at path and the expected outcome into
// path+".expected.json" (demo/outcome's format), and returns the outcome.
func WriteFiles(cfg Config, path string) (*outcome.Outcome, error) {
	if path == "" || path == "-" {
		return nil, errors.New("output must be a file path")
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	o, err := Generate(cfg, bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if cp := o.ContactPolicy; cp != nil {
		cp.ExclusionMembers = filepath.Base(path + ContactExclusionSuffix)
		var b strings.Builder
		b.WriteString("# distinct ids of the recruitment exclusion cohort (mcpulse gen --contact-violations)\n")
		for _, id := range cp.Members {
			b.WriteString(id + "\n")
		}
		if err := os.WriteFile(path+ContactExclusionSuffix, []byte(b.String()), 0o644); err != nil {
			return nil, err
		}
	}
	if err := outcome.Write(path+".expected.json", o); err != nil {
		return nil, err
	}
	return o, nil
}

// generator holds the state of one generation run.
type generator struct {
	cfg        Config
	rng        *rand.Rand
	start, end time.Time
	cat        *catalog
	users      []*user
	uuids      map[[16]byte]struct{}
	seq        int
	contact    *outcome.ContactPolicy // the contact-policy cases' expected audit, when generated
}

func newGenerator(cfg Config) (*generator, error) {
	cat, err := loadTools()
	if err != nil {
		return nil, fmt.Errorf("tool schemas: %w", err)
	}
	if cfg.Span == 0 {
		cfg.Span = Window
	}
	seed := uint64(cfg.Seed)
	g := &generator{
		cfg:   cfg,
		rng:   rand.New(rand.NewPCG(seed, seed^0x6d63_7075_6c73_6521)), // "mcpulse!"
		start: cfg.End.Add(-cfg.Span),
		end:   cfg.End,
		cat:   cat,
		uuids: make(map[[16]byte]struct{}, cfg.Events+cfg.Events/4),
	}
	return g, nil
}

func (g *generator) progress(format string, args ...any) {
	if g.cfg.Progress != nil && g.cfg.Events >= 100_000 {
		fmt.Fprintf(g.cfg.Progress, "gen: "+format+"\n", args...)
	}
}

// corpus is the built, not yet written, corpus.
type corpus struct {
	valid     []*event // distinct valid events, in file order (by time)
	dups      []extraLine
	malformed []extraLine
	lines     int
}

// extraLine is a duplicate or malformed line inserted before valid line pos (pos == len(valid)
// means at the end).
type extraLine struct {
	pos   int
	src   int    // duplicates: index of the repeated valid line
	line  []byte // malformed lines
	order int
}

func roundCount(n int, rate float64) int { return int(math.Round(float64(n) * rate)) }

// build generates every event and decides where duplicates and malformed lines go.
func (g *generator) build() (*corpus, error) {
	n := g.cfg.Events
	dups, bad := roundCount(n, DuplicateRate), roundCount(n, MalformedRate)
	valid := n - dups - bad
	if valid <= 0 {
		dups, valid = 0, n-bad
	}
	g.users = g.makeUsers(max(30, n/25))

	recruitBudget := int(math.Round(float64(valid) * (1 - ToolCallShare)))
	events := g.recruitment(recruitBudget)
	reports := 0
	if g.cfg.Reports {
		reports = roundCount(valid, ReportShare)
	}
	events = append(events, g.toolCalls(valid-len(events)-reports)...)
	byTime := func() {
		sort.SliceStable(events, func(i, j int) bool {
			if !events[i].ts.Equal(events[j].ts) {
				return events[i].ts.Before(events[j].ts)
			}
			return events[i].seq < events[j].seq
		})
	}
	byTime()
	if g.cfg.Shape != ShapeSDK {
		g.demoErrorPass(events)
	}
	if g.cfg.Shape == ShapeSDK {
		extras, err := g.sdkPass(events)
		if err != nil {
			return nil, err
		}
		events = append(events, extras...)
		byTime()
	}
	if reports > 0 {
		extra, err := g.reportsPass(events, reports)
		if err != nil {
			return nil, err
		}
		events = append(events, extra...)
		byTime()
	}
	if g.cfg.ContactViolations > 0 {
		events = append(events, g.contactCases(g.cfg.ContactViolations)...)
		byTime()
	}

	c := &corpus{valid: events, lines: len(events) + dups + bad}
	order := 0
	for range dups {
		src := g.rng.IntN(len(events))
		pos := src + 1 + g.rng.IntN(min(400, len(events)-src))
		c.dups = append(c.dups, extraLine{pos: pos, src: src, order: order})
		order++
	}
	for i := range bad {
		c.malformed = append(c.malformed, extraLine{pos: g.rng.IntN(len(events) + 1), line: g.malformedLine(i), order: order})
		order++
	}
	return c, nil
}

// write emits the corpus: valid lines in time order with the extra lines spliced in.
func (g *generator) write(c *corpus, w io.Writer) error {
	extras := append(append([]extraLine(nil), c.dups...), c.malformed...)
	sort.Slice(extras, func(i, j int) bool {
		if extras[i].pos != extras[j].pos {
			return extras[i].pos < extras[j].pos
		}
		return extras[i].order < extras[j].order
	})
	needed := map[int][]byte{}
	for _, d := range c.dups {
		needed[d.src] = nil
	}
	var buf []byte
	var props []kv
	x, written := 0, 0
	flushExtras := func(pos int) error {
		for ; x < len(extras) && extras[x].pos == pos; x++ {
			line := extras[x].line
			if line == nil {
				line = needed[extras[x].src]
			}
			if _, err := w.Write(line); err != nil {
				return err
			}
			written++
		}
		return nil
	}
	for i, e := range c.valid {
		if err := flushExtras(i); err != nil {
			return err
		}
		props = e.appendProperties(props[:0])
		buf = appendEvent(buf[:0], e.uuid, e.name, e.distinctID, e.tsText, props)
		buf = append(buf, '\n')
		if _, ok := needed[i]; ok {
			needed[i] = append([]byte(nil), buf...)
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
		written++
		if written%50_000 == 0 {
			g.progress("%d/%d lines", written, c.lines)
		}
	}
	return flushExtras(len(c.valid))
}

// timeIn returns a random time in [from, to), whole seconds unless ms, with a mild daily
// cycle (fewer events at night, UTC).
func (g *generator) timeIn(from, to time.Time, ms bool) time.Time {
	span := to.Sub(from)
	if span <= 0 {
		return from
	}
	for attempt := 0; ; attempt++ {
		t := from.Add(time.Duration(g.rng.Int64N(int64(span))))
		h := float64(t.Hour()) + float64(t.Minute())/60
		weight := 0.55 + 0.45*math.Sin((h-8)/24*2*math.Pi)
		if attempt < 8 && g.rng.Float64() > weight {
			continue
		}
		if ms {
			return t.Truncate(time.Millisecond)
		}
		return t.Truncate(time.Second)
	}
}

// newUUID returns a v7-shaped UUID: t's Unix milliseconds, version 7, RFC 4122 variant, the
// other 74 bits from the RNG; never one already handed out.
func (g *generator) newUUID(t time.Time) string {
	for {
		var b [16]byte
		ms := uint64(t.UnixMilli())
		for i := 0; i < 6; i++ {
			b[i] = byte(ms >> (40 - 8*i))
		}
		r1, r2 := g.rng.Uint64(), g.rng.Uint64()
		b[6] = 0x70 | byte(r1&0x0f)
		b[7] = byte(r1 >> 8)
		b[8] = 0x80 | byte(r2&0x3f)
		for i := 9; i < 16; i++ {
			b[i] = byte(r2 >> (8 * (i - 8)))
		}
		if _, dup := g.uuids[b]; dup {
			continue
		}
		g.uuids[b] = struct{}{}
		return formatUUID(b)
	}
}

func formatUUID(b [16]byte) string {
	const hexDigits = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, x := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hexDigits[x>>4], hexDigits[x&0xf])
	}
	return string(out)
}

// pick returns an index drawn from the (unnormalized) weights.
func (g *generator) pick(weights []float64) int {
	total := 0.0
	for _, w := range weights {
		total += w
	}
	r := g.rng.Float64() * total
	for i, w := range weights {
		if r < w {
			return i
		}
		r -= w
	}
	return len(weights) - 1
}

func (g *generator) chance(p float64) bool { return g.rng.Float64() < p }

func (g *generator) nextSeq() int { g.seq++; return g.seq }
