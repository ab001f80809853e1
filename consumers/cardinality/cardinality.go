// Package cardinality bounds the distinct values of the tool-call dimensions the rollups are
// keyed by: per Kafka partition, MCP server name and hour of the call's timestamp (a window), at
// most Limits.Tools tool names, Limits.Clients client names and Limits.KeyPaths counted
// ignored-key paths are admitted; a value past its cap is folded into a named overflow bucket
// (OtherTools, OtherClients, OtherKeys) in the raw row itself, and the value it replaced is kept
// in the row's folded_* column (migration 0040). So the rollups, the seal and every query over
// the raw rows see the bucket, and the count of distinct values folded stays queryable
// (cardinality_overflow_hourly).
//
// Folding is deterministic in a partition's log order: a value is admitted when its window holds
// it already or holds fewer values than the cap, so a replay of the same offsets folds the same
// values the same way. A window is per partition because a partition's calls are read in one
// order by one member; the caps of one server and hour are therefore per partition (a topic of
// P partitions admits at most P × cap values of a server in an hour). A window the Folder does
// not hold (a new generation, an evicted window) is rebuilt from what ClickHouse holds: the
// values of the window's rows stored unfolded before the batch's first offset of its partition
// (sql/rollup/caps_admitted_many.sql, the windows a batch lacks at once). Windows are evicted
// only once every offset they folded is committed, so a rebuilt window decides as the one
// evicted would have.
package cardinality

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/safetext"
	mcsql "github.com/mcpulse/mcpulse/sql"
)

// The overflow buckets a folded value is stored as.
const (
	OtherTools   = "(other tools)"
	OtherClients = "(other clients)"
	OtherKeys    = "(other keys)"
)

// Dimension names a capped dimension: the `dimension` label of
// mcpulse_cardinality_overflow_total and the dimension column of cardinality_overflow_hourly.
type Dimension string

// The capped dimensions.
const (
	Tool    Dimension = "tool"
	Client  Dimension = "client"
	KeyPath Dimension = "key_path"
)

// Dimensions lists the capped dimensions.
var Dimensions = []Dimension{Tool, Client, KeyPath}

// Defaults of Limits. Real servers are far below them: the demo's servers list 6 tools and its
// traffic names 4 clients; the largest MCP servers list about a hundred tools.
const (
	DefaultTools    = 1_000
	DefaultClients  = 100
	DefaultKeyPaths = 1_000
	// DefaultBudget is Limits.Budget's default, in bytes: about 170 windows at every cap
	// with 40-byte values, thousands of ordinary ones.
	DefaultBudget = 32 << 20
	// DefaultWarnEvery is Limits.WarnEvery's default.
	DefaultWarnEvery = time.Minute
)

// Limits configures a Folder. Zero fields take the defaults.
type Limits struct {
	// Tools, Clients and KeyPaths are the distinct values admitted per window (partition,
	// server name, hour), in values.
	Tools, Clients, KeyPaths int
	// Budget bounds the bytes of the windows held (the estimate Bytes reports); past it, the
	// least recently used windows whose offsets are all committed are let go (rebuilt from
	// ClickHouse when touched again). Windows of hours more than KeepHours before the newest
	// hour folded are let go too, once committed.
	Budget int64
	// WarnEvery is how often, at most, a server's folding of one dimension is logged.
	WarnEvery time.Duration
}

// keepHours is how many hours before the newest hour folded a window is kept while it fits the
// budget: late calls of the hour before the newest are common, older ones rare.
const keepHours = 2

func (l *Limits) setDefaults() {
	l.Tools = cmpOr(l.Tools, DefaultTools)
	l.Clients = cmpOr(l.Clients, DefaultClients)
	l.KeyPaths = cmpOr(l.KeyPaths, DefaultKeyPaths)
	l.Budget = cmpOr(l.Budget, DefaultBudget)
	l.WarnEvery = cmpOr(l.WarnEvery, DefaultWarnEvery)
}

func cmpOr[T int | int64 | time.Duration](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}

// Byte estimates of the state: per value held (its bytes plus a map entry and string header),
// per window (three maps, the key).
const (
	valueOverhead  = 64
	windowOverhead = 512
)

type windowKey struct {
	topic     string
	partition int32
	server    string
	hour      int64 // Unix seconds of the hour's start
}

type window struct {
	sets    [3]map[string]struct{} // by dimension index: tools, clients, key paths
	last    int64                  // the highest offset folded in it
	lastUse uint64
	bytes   int64
}

// Folder folds a batch's tool-call rows (Fold); not safe for concurrent use.
type Folder struct {
	limits    Limits
	conn      driver.Conn
	log       *slog.Logger
	onFold    func(Dimension, int)
	windows   map[windowKey]*window
	committed map[stream]int64 // next offset to read, as committed
	bytes     atomic.Int64
	tick      uint64
	// lastKey and lastWin are the window folded last, nil when let go.
	lastKey windowKey
	lastWin *window
	newest  int64
	warned  map[warnKey]time.Time
	now     func() time.Time
}

type warnKey struct {
	server string
	dim    Dimension
}

// New returns a Folder reading windows back from conn (a migrated ClickHouse), logging to log
// and calling onFold(dimension, values folded) for each batch's folds (nil for none).
func New(conn driver.Conn, limits Limits, log *slog.Logger, onFold func(Dimension, int)) *Folder {
	limits.setDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Folder{limits: limits, conn: conn, log: log, onFold: onFold, windows: map[windowKey]*window{},
		committed: map[stream]int64{}, warned: map[warnKey]time.Time{}, now: time.Now}
}

// SetConn replaces the ClickHouse connection windows are read back from (an instrumented
// one); call it before the first Fold.
func (f *Folder) SetConn(conn driver.Conn) { f.conn = conn }

// Limits returns the limits in effect, defaults applied.
func (f *Folder) Limits() Limits { return f.limits }

// Bytes is the estimated heap of the windows held, in bytes (0 for a nil Folder); safe to
// call concurrently with the other methods.
func (f *Folder) Bytes() int64 {
	if f == nil {
		return 0
	}
	return f.bytes.Load()
}

// Windows is how many windows are held.
func (f *Folder) Windows() int { return len(f.windows) }

// Reset lets every window go: the partitions may have moved (a new generation), so what this
// member folded may not be what the partition's log holds next.
func (f *Folder) Reset() {
	clear(f.windows)
	clear(f.committed)
	f.lastWin = nil
	f.bytes.Store(0)
}

type stream struct {
	topic     string
	partition int32
}

// Committed records that the offsets of topic's partition before next are committed, so its
// windows folded only below it may be let go.
func (f *Folder) Committed(topic string, partition int32, next int64) {
	k := stream{topic, partition}
	if next > f.committed[k] {
		f.committed[k] = next
	}
}

// Fold folds rows in place, in their order (each partition's in log order), past the caps: a
// tool name, client name or counted ignored-key path its window does not admit is replaced by
// its overflow bucket and kept in the row's folded_* field. A window not held is read back
// from ClickHouse first; its errors are returned, with the rows partly folded: a retry folds
// them again to the same result (what was admitted stays admitted, what was folded stays folded,
// and a folded row folds nothing more). Rows already folded (a retried batch) are left as they
// are.
//
// topics[i] is the topic rows[i] was read from. The tool_calls table has no topic column: one
// topic feeds it, so a window is read back by partition.
func (f *Folder) Fold(ctx context.Context, rows []ingest.ToolCallRow, topics func(i int) string) error {
	if err := f.loadMissing(ctx, rows, topics); err != nil {
		return err
	}
	var folded [3]int
	for i := range rows {
		r := &rows[i]
		w, err := f.window(ctx, topics(i), r)
		if err != nil {
			return err
		}
		w.last = max(w.last, r.KafkaOffset)
		if r.FoldedToolName == "" && !f.admit(w, 0, r.ToolName, f.limits.Tools) {
			r.FoldedToolName, r.ToolName = r.ToolName, OtherTools
			folded[0]++
			f.warn(r.ServerName, Tool, w)
		}
		if r.FoldedClientName == "" && !f.admit(w, 1, r.ClientName, f.limits.Clients) {
			r.FoldedClientName, r.ClientName = r.ClientName, OtherClients
			folded[1]++
			f.warn(r.ServerName, Client, w)
		}
		if len(r.FoldedKeyPaths) == 0 {
			if n := f.foldKeys(w, r); n > 0 {
				folded[2] += n
				f.warn(r.ServerName, KeyPath, w)
			}
		}
	}
	if f.onFold != nil {
		for d, n := range folded {
			if n > 0 {
				f.onFold(Dimensions[d], n)
			}
		}
	}
	f.evict()
	return nil
}

// foldKeys folds r's counted ignored-key paths its window does not admit: they are replaced by
// one OtherKeys (a call lists a path once) and kept in r.FoldedKeyPaths. It returns how many
// were folded.
func (f *Folder) foldKeys(w *window, r *ingest.ToolCallRow) int {
	var kept []string
	var folded []string
	for j, k := range r.CountedIgnoredKeys {
		if f.admit(w, 2, k, f.limits.KeyPaths) {
			if kept != nil {
				kept = append(kept, k)
			}
			continue
		}
		if kept == nil {
			kept = append(make([]string, 0, j+1), r.CountedIgnoredKeys[:j]...)
		}
		folded = append(folded, k)
	}
	if len(folded) == 0 {
		return 0
	}
	r.CountedIgnoredKeys, r.FoldedKeyPaths = append(kept, OtherKeys), folded
	return len(folded)
}

// admit reports whether window w admits value v of dimension d (index into window.sets) under
// cap, adding it when there is room.
func (f *Folder) admit(w *window, d int, v string, cap int) bool {
	set := w.sets[d]
	if _, ok := set[v]; ok {
		return true
	}
	if len(set) >= cap {
		return false
	}
	set[strings.Clone(v)] = struct{}{} // not the event's buffer, which holds its other strings
	n := int64(len(v) + valueOverhead)
	w.bytes += n
	f.bytes.Add(n)
	return true
}

// hourOf is the Unix second starting t's UTC hour.
func hourOf(t time.Time) int64 {
	u := t.Unix()
	h := u - u%3600
	if u%3600 < 0 {
		h -= 3600
	}
	return h
}

// loadMissing reads back from ClickHouse, in one query, the windows of rows not held, each as
// of the first offset of its partition among them: a window's rows stored between that offset
// and the first row of the window come from the same log, so they change no decision (a value
// admitted later was admitted or had room at its first call; a window full at a value's call
// stays full without it).
func (f *Folder) loadMissing(ctx context.Context, rows []ingest.ToolCallRow, topics func(i int) string) error {
	missing := map[windowKey]bool{}
	first := map[int32]int64{}
	var prev windowKey
	minHour, maxHour := int64(0), int64(0)
	for i := range rows {
		r := &rows[i]
		k := windowKey{topics(i), r.KafkaPartition, r.ServerName, hourOf(r.Timestamp)}
		if i > 0 && k == prev {
			continue
		}
		prev = k
		if _, ok := f.windows[k]; ok || missing[k] {
			continue
		}
		missing[k] = true
		if o, ok := first[k.partition]; !ok || r.KafkaOffset < o {
			first[k.partition] = r.KafkaOffset
		}
		if len(missing) == 1 || k.hour < minHour {
			minHour = k.hour
		}
		maxHour = max(maxHour, k.hour)
	}
	if len(missing) == 0 {
		return nil
	}
	partitions := make([]int32, 0, len(first))
	offsets := make([]int64, 0, len(first))
	for p, o := range first {
		partitions, offsets = append(partitions, p), append(offsets, o)
	}
	names := make([]string, 0, len(missing))
	byName := make(map[string]windowKey, len(missing))
	for k := range missing {
		name := fmt.Sprintf("%d/%d/%s", k.partition, k.hour, k.server)
		names = append(names, name)
		byName[name] = k
	}
	// Every missing window is held from here on, empty unless ClickHouse holds rows of it.
	loaded := make(map[string]*window, len(missing))
	for name, k := range byName {
		w := &window{last: -1, bytes: windowOverhead + int64(len(k.server))}
		for d := range w.sets {
			w.sets[d] = map[string]struct{}{}
		}
		loaded[name] = w
	}
	res, err := f.conn.Query(ctx, mcsql.Rollup("caps_admitted_many"), OtherKeys, minHour, maxHour+3600,
		partitions, names, offsets, partitions)
	if err != nil {
		return fmt.Errorf("read the admitted values of %d windows: %w", len(missing), err)
	}
	defer res.Close()
	for res.Next() {
		var partition int32
		var server string
		var hour uint32
		var tools, clients, keys []string
		if err := res.Scan(&partition, &server, &hour, &tools, &clients, &keys); err != nil {
			return fmt.Errorf("read the admitted values of %d windows: %w", len(missing), err)
		}
		w := loaded[fmt.Sprintf("%d/%d/%s", partition, hour, server)]
		if w == nil {
			continue // a window of another topic's partition of the same number: not asked
		}
		for d, vals := range [3][]string{tools, clients, keys} {
			for _, v := range vals {
				w.sets[d][v] = struct{}{}
				w.bytes += int64(len(v) + valueOverhead)
			}
		}
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("read the admitted values of %d windows: %w", len(missing), err)
	}
	for name, w := range loaded {
		k := byName[name]
		f.windows[k] = w
		f.bytes.Add(w.bytes)
		f.newest = max(f.newest, k.hour)
	}
	return nil
}

// window returns the window of row r, read back from ClickHouse when not held (loadMissing
// reads those of a batch at once).
func (f *Folder) window(ctx context.Context, topic string, r *ingest.ToolCallRow) (*window, error) {
	hour := hourOf(r.Timestamp)
	k := windowKey{topic, r.KafkaPartition, r.ServerName, hour}
	f.tick++
	if f.lastWin != nil && f.lastKey == k { // consecutive calls of one window: no map lookup
		f.lastWin.lastUse = f.tick
		return f.lastWin, nil
	}
	if w, ok := f.windows[k]; ok {
		w.lastUse = f.tick
		f.lastKey, f.lastWin = k, w
		return w, nil
	}
	w := &window{lastUse: f.tick, last: -1, bytes: windowOverhead + int64(len(k.server))}
	for d := range w.sets {
		w.sets[d] = map[string]struct{}{}
	}
	var tools, clients, keys []string
	err := f.conn.QueryRow(ctx, mcsql.Rollup("caps_admitted"), OtherKeys, r.KafkaPartition, r.ServerName,
		hour, hour+3600, r.KafkaOffset).Scan(&tools, &clients, &keys)
	if err != nil {
		return nil, fmt.Errorf("read the admitted values of server %q, hour %s, partition %d: %w",
			r.ServerName, time.Unix(hour, 0).UTC().Format(time.RFC3339), r.KafkaPartition, err)
	}
	for d, vals := range [3][]string{tools, clients, keys} {
		for _, v := range vals {
			w.sets[d][v] = struct{}{}
			w.bytes += int64(len(v) + valueOverhead)
		}
	}
	f.windows[k] = w
	f.lastKey, f.lastWin = k, w
	f.bytes.Add(w.bytes)
	f.newest = max(f.newest, hour)
	return w, nil
}

// evict lets go the committed windows of hours more than keepHours before the newest, then the
// least recently used committed ones while the state is over its budget.
func (f *Folder) evict() {
	committed := func(k windowKey, w *window) bool {
		next, ok := f.committed[stream{k.topic, k.partition}]
		return ok && w.last < next
	}
	for k, w := range f.windows {
		if k.hour < f.newest-keepHours*3600 && committed(k, w) {
			f.drop(k, w)
		}
	}
	for f.bytes.Load() > f.limits.Budget {
		var oldest windowKey
		var ow *window
		for k, w := range f.windows {
			if committed(k, w) && (ow == nil || w.lastUse < ow.lastUse) {
				oldest, ow = k, w
			}
		}
		if ow == nil {
			return // every window holds offsets not committed yet: over budget until they are
		}
		f.drop(oldest, ow)
	}
}

func (f *Folder) drop(k windowKey, w *window) {
	if w == f.lastWin {
		f.lastWin = nil
	}
	delete(f.windows, k)
	f.bytes.Add(-w.bytes)
}

// maxLoggedName is how many bytes of a server name a warning shows.
const maxLoggedName = 200

// warn logs, at most once per Limits.WarnEvery per server and dimension, that a server's
// values of a dimension are folded.
func (f *Folder) warn(server string, d Dimension, w *window) {
	now := f.now()
	k := warnKey{server, d}
	if last, ok := f.warned[k]; ok && now.Sub(last) < f.limits.WarnEvery {
		return
	}
	if len(f.warned) >= 10_000 {
		clear(f.warned)
	}
	f.warned[k] = now
	i := map[Dimension]int{Tool: 0, Client: 1, KeyPath: 2}[d]
	if len(server) > maxLoggedName {
		server = server[:maxLoggedName] + "…"
	}
	f.log.Warn("values folded by a cardinality cap", "server", safetext.Escape(server), "dimension", string(d),
		"cap", [3]int{f.limits.Tools, f.limits.Clients, f.limits.KeyPaths}[i],
		"bucket", [3]string{OtherTools, OtherClients, OtherKeys}[i], "admitted", len(w.sets[i]))
}
