package rollup

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"golang.org/x/sync/errgroup"

	"github.com/mcpulse/mcpulse/migrations"
	mcsql "github.com/mcpulse/mcpulse/sql"
)

// Stream is one Kafka partition whose events the rollups count.
type Stream struct {
	Topic     string
	Partition int32
}

func (s Stream) String() string { return fmt.Sprintf("%s/%d", s.Topic, s.Partition) }

// Batch accumulates what one consumer batch adds to the rollups: per stream, the offset the
// batch ends at and, per table and cell, the values its events add. Build it with NewBatch,
// Advance and Add; it is not safe for concurrent use.
type Batch struct {
	streams map[Stream]*streamBatch
	ntables int
}

type streamBatch struct {
	next  int64      // one past the batch's last offset of the stream
	cells []*cellSet // per table index: the values each cell adds
}

// cellSet is a set of cells of one table and a run of values per cell (the table's width),
// with nothing the garbage collector follows: the keys sit one after the other in one byte
// array, the values in one uint64 array, and the index maps a key's hash to its position.
// A cell costs its key's bytes, its values and an index entry, and adds no allocation of its
// own; a set of a hundred thousand cells is a few objects the collector need not scan.
type cellSet struct {
	width int
	index map[uint64]int32 // hash of a key (cellSeed) → its position
	// collided holds the keys whose hash the index already gives another key (positions as
	// in index). Two keys share a 64-bit hash with a chance of 2^-64, so a set needs billions
	// of keys before one is likely: almost always nil.
	collided map[string]int32
	keys     []byte   // every key, in position order
	ends     []uint32 // position i's key is keys[ends[i-1]:ends[i]] (ends[-1] = 0)
	vals     []uint64 // position i's values are vals[i*width : (i+1)*width]
}

// cellSeed seeds the hash of every cellSet's keys (random per process).
var cellSeed = maphash.MakeSeed()

func newCellSet(width int) *cellSet {
	return &cellSet{width: width, index: map[uint64]int32{}}
}

// at returns the values of position i, which the caller may change.
func (c *cellSet) at(i int32) []uint64 {
	lo := int(i) * c.width
	return c.vals[lo : lo+c.width : lo+c.width]
}

// keyAt returns the key of position i. It shares the set's byte array, which is only ever
// appended to: the bytes of a key never change.
func (c *cellSet) keyAt(i int32) []byte {
	lo := uint32(0)
	if i > 0 {
		lo = c.ends[i-1]
	}
	return c.keys[lo:c.ends[i]:c.ends[i]]
}

// find returns the position of key, if the set holds it, and the key's hash.
func (c *cellSet) find(key []byte) (i int32, ok bool, h uint64) {
	h = maphash.Bytes(cellSeed, key)
	i, ok = c.index[h]
	if ok && string(c.keyAt(i)) != string(key) {
		i, ok = c.collided[string(key)]
	}
	return i, ok, h
}

// findKey is find for a key held as a string (maphash.String and maphash.Bytes hash the same
// bytes alike).
func (c *cellSet) findKey(key Key) (i int32, ok bool, h uint64) {
	h = maphash.String(cellSeed, string(key))
	i, ok = c.index[h]
	if ok && string(c.keyAt(i)) != string(key) {
		i, ok = c.collided[string(key)]
	}
	return i, ok, h
}

// cell returns the position of key, adding the key with values 0 if it is new (added reports
// that). The key's bytes are copied only when it is new.
func (c *cellSet) cell(key []byte) (i int32, added bool) {
	i, ok, h := c.find(key)
	if ok {
		return i, false
	}
	return add(c, key, h), true
}

// add adds key, whose hash is h and which c does not hold, with values 0.
func add[K []byte | Key](c *cellSet, key K, h uint64) int32 {
	i := int32(len(c.ends))
	if _, taken := c.index[h]; taken {
		if c.collided == nil {
			c.collided = map[string]int32{}
		}
		c.collided[string(key)] = i
	} else {
		c.index[h] = i
	}
	c.keys = append(c.keys, key...)
	c.ends = append(c.ends, uint32(len(c.keys)))
	n := len(c.vals)
	c.vals = slices.Grow(c.vals, c.width)[:n+c.width]
	clear(c.vals[n:])
	return i
}

func (c *cellSet) len() int { return len(c.ends) }

// NewBatch returns an empty batch for the store's tables.
func (s *Store) NewBatch() *Batch {
	return &Batch{streams: map[Stream]*streamBatch{}, ntables: len(s.tables)}
}

func (b *Batch) stream(s Stream) *streamBatch {
	sb := b.streams[s]
	if sb == nil {
		sb = &streamBatch{cells: make([]*cellSet, b.ntables)}
		b.streams[s] = sb
	}
	return sb
}

// Advance records that the batch holds the stream's message at offset o (every message, with
// or without an event): the stream's rows are written as of the batch's last offset + 1.
func (b *Batch) Advance(s Stream, o int64) {
	sb := b.stream(s)
	sb.next = max(sb.next, o+1)
}

// Add adds vals (the table's measures, then its array's elements; missing trailing values are
// 0) to the cell key of table t in stream s.
func (b *Batch) Add(s Stream, t *Table, key *KeyBuilder, vals ...uint64) {
	sb := b.stream(s)
	m := sb.cells[t.index]
	if m == nil {
		m = newCellSet(t.width())
		sb.cells[t.index] = m
	}
	pos, _ := m.cell(key.bytes())
	acc := m.at(pos)
	for i, v := range vals {
		acc[i] += v
	}
}

// Merge adds what o holds to b (o is left as it was, and must not be used with b after): each
// stream's offsets are b's and o's together, and each cell's values their sum. Batches read
// one after the other from the same partitions, merged, are the batch of all their messages.
// Both must come from the same Store's NewBatch.
func (b *Batch) Merge(o *Batch) {
	for s, osb := range o.streams {
		sb := b.stream(s)
		sb.next = max(sb.next, osb.next)
		for i, om := range osb.cells {
			if om == nil {
				continue
			}
			m := sb.cells[i]
			if m == nil {
				sb.cells[i] = om
				continue
			}
			for oi := range int32(om.len()) {
				pos, _ := m.cell(om.keyAt(oi))
				acc := m.at(pos)
				for j, v := range om.at(oi) {
					acc[j] += v
				}
			}
		}
	}
}

// Len is the number of cells the batch touches, over streams and tables.
func (b *Batch) Len() int {
	n := 0
	for _, sb := range b.streams {
		for _, m := range sb.cells {
			if m != nil {
				n += m.len()
			}
		}
	}
	return n
}

// Store keeps the rollups' cumulative totals: a cache of the cells of recent hours per stream,
// loaded from ClickHouse on a miss, and the writer of each batch's rows. A Store serves one
// consumer; Begin, Prepare and Write.Insert are called one at a time (never concurrently), in
// that order per batch.
type Store struct {
	conn   driver.Conn
	tables []*Table
	log    *slog.Logger
	budget int // cells cached, at most (about)

	epoch     uint64
	committed map[Stream]int64 // the streams assigned in this generation, at their committed offsets
	groups    map[groupKey]*group
	cells     int          // cells cached
	published atomic.Int64 // cells, for CachedCells from other goroutines
	clock     uint64       // for LRU
	// markers guards batches and missing, which a batch's concurrent loads share.
	markers sync.Mutex
	// batches caches the cells of batches of older generations whose late rows a load found,
	// by stream and version (reset by Begin).
	batches map[batchID]batchCells
	// missing: when a load first found a late row whose batch marker it could not read, by
	// batch (reset by Begin).
	missing map[batchID]time.Time
	// batchesTarget is where rollup_batches' partitions are dropped, read once from
	// ClickHouse (nil until dropOldBatches first needs it).
	batchesTarget *migrations.Target
}

// MarkerWait is how long a member waits for the batch marker of a late row it can see (a
// replica may copy the row before the marker) before it continues from the row's totals.
var MarkerWait = 2 * time.Minute

// batchID names one batch's marker: its stream and its rows' version.
type batchID struct {
	stream  Stream
	version uint64
}

// batchCells is what a batch's marker records of one of its cells, by table name and key:
// the totals the batch replaced and the offset they are as of.
type batchCells map[string]map[Key]before

// before is a cell's totals before a batch wrote it, as of an offset.
type before struct {
	vals []uint64
	asOf int64
}

// groupKey names the cached cells of one stream, table and hour: the unit loaded and evicted.
type groupKey struct {
	stream Stream
	table  int
	hour   int64
}

type group struct {
	cells   *cellSet // each cell's newest totals
	asOf    []int64  // by the cells' positions: the offset those totals are as of
	lastUse uint64
}

func newGroup(width int, lastUse uint64) *group {
	return &group{cells: newCellSet(width), lastUse: lastUse}
}

// get returns key's totals (nil when the group has no such cell) and their offset.
func (g *group) get(key Key) (vals []uint64, asOf int64) {
	i, ok, _ := g.cells.findKey(key)
	if !ok {
		return nil, 0
	}
	return g.cells.at(i), g.asOf[i]
}

// set records key's totals vals (the table's width of them, copied) as of asOf, and reports
// whether the cell is new.
func (g *group) set(key Key, vals []uint64, asOf int64) (added bool) {
	i, ok, h := g.cells.findKey(key)
	if !ok {
		i = add(g.cells, key, h)
	}
	copy(g.cells.at(i), vals)
	if !ok {
		g.asOf = append(g.asOf, asOf)
	} else {
		g.asOf[i] = asOf
	}
	return !ok
}

// NewStore returns a Store for tables (each table may be in one Store only), caching about
// budget cells (at least one hour of one stream is always kept).
func NewStore(conn driver.Conn, tables []*Table, budget int, log *slog.Logger) *Store {
	for i, t := range tables {
		t.index = i
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Store{conn: conn, tables: tables, budget: budget, log: log, groups: map[groupKey]*group{}}
}

// Begin starts a consumer-group generation in which the member owns the streams of
// committed (each at its committed offset: the next offset the group reads; 0 when nothing
// was committed). It forgets the cache (other members may have written since), takes a new
// epoch, and resets every cell a batch stored but not committed left beyond a committed
// offset. Errors are ClickHouse's; Begin may be retried.
func (s *Store) Begin(ctx context.Context, committed map[Stream]int64) error {
	s.groups = map[groupKey]*group{}
	s.cells = 0
	s.published.Store(0)
	s.committed = make(map[Stream]int64, len(committed))
	for st, c := range committed {
		s.committed[st] = c
	}
	s.batches = map[batchID]batchCells{}
	s.missing = map[batchID]time.Time{}
	var newest uint64
	if err := s.conn.QueryRow(ctx, mcsql.Rollup("epoch_newest")).Scan(&newest); err != nil {
		return fmt.Errorf("rollups: newest epoch: %w", err)
	}
	epoch := newest + 1
	if epoch > maxEpoch {
		return fmt.Errorf("rollups: epoch %d is beyond the versions' %d bits of epoch", epoch, epochBits)
	}
	if err := s.conn.Exec(ctx, mcsql.Rollup("epoch_take"), epoch); err != nil {
		return fmt.Errorf("rollups: take epoch %d: %w", epoch, err)
	}
	s.epoch = epoch
	if err := s.recover(ctx); err != nil {
		return err
	}
	// Housekeeping: a failure (a user without the ALTER privilege, a busy table) leaves old
	// markers behind for a later Begin, and must not stop the generation's rollups.
	if err := s.dropOldBatches(ctx); err != nil {
		s.log.Warn("rollups: old batch markers not dropped", "err", err)
	}
	return nil
}

// batchBlockEpochs is how many epochs one block of rollup_batches holds (its PARTITION BY
// intDiv(epoch, 1024), migration 0035).
const batchBlockEpochs = 1024

// oldestKeptBlock is the oldest block of rollup_batches a member of epoch current keeps: the
// block before its own (dropOldBatches drops the older ones).
func oldestKeptBlock(current uint64) uint64 {
	return max(current/batchBlockEpochs, 1) - 1
}

// dropOldBatches drops the blocks of rollup_batches whose markers are from epochs more than
// one block (1,024 epochs) older than this generation's block. Every member takes an epoch at
// each generation, so since such a marker every partition's owner recovered it at Begin in
// generation after generation: no reset needs it, and no member of its generation still
// writes. (This holds while a group has fewer than 1,024 members, so that one generation
// cannot take a whole block of epochs while another member has yet to begin.) On the sharded
// layout the blocks are listed on one replica of every shard and dropped ON CLUSTER from the
// local table (migrations.MutationTarget).
func (s *Store) dropOldBatches(ctx context.Context) error {
	keep := oldestKeptBlock(s.epoch)
	if keep == 0 {
		return nil
	}
	if s.batchesTarget == nil {
		target, err := migrations.MutationTarget(ctx, s.conn, "rollup_batches")
		if err != nil {
			return fmt.Errorf("rollups: old batch markers: %w", err)
		}
		s.batchesTarget = &target
	}
	target := *s.batchesTarget
	rows, err := s.conn.Query(ctx, strings.ReplaceAll(mcsql.Rollup("batches_old_blocks"), "{parts}", target.System("parts")),
		target.Database, target.Table, keep)
	if err != nil {
		return fmt.Errorf("rollups: old batch markers: %w", err)
	}
	var blocks []string
	for rows.Next() {
		var b string
		if err := rows.Scan(&b); err != nil {
			rows.Close()
			return fmt.Errorf("rollups: old batch markers: %w", err)
		}
		blocks = append(blocks, b)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("rollups: old batch markers: %w", err)
	}
	for _, b := range blocks {
		n, err := strconv.ParseUint(b, 10, 64)
		if err != nil {
			return fmt.Errorf("rollups: rollup_batches block %q is not an epoch block", b)
		}
		if err := s.conn.Exec(ctx, strings.ReplaceAll(mcsql.Rollup("batches_drop_block"), "{table}", target.Name()), n); err != nil {
			return fmt.Errorf("rollups: drop rollup_batches block %d: %w", n, err)
		}
		s.log.Info("rollups: dropped the batch markers of old generations", "epochs_below", (n+1)*batchBlockEpochs)
	}
	return nil
}

// Epoch is the epoch taken by the last Begin.
func (s *Store) Epoch() uint64 { return s.epoch }

// recover finds the streams whose newest batch marker is beyond their committed offset and
// resets every cell that batch wrote to the totals it replaced (the committed ones). Streams
// with no marker in rollup_batches fall back to the markers written before migration 0035
// (rollup_writes_before_0035, so named by migration 0036), whose rows carry their before
// totals themselves.
func (s *Store) recover(ctx context.Context) error {
	if len(s.committed) == 0 {
		return nil
	}
	topics := map[string]bool{}
	for st := range s.committed {
		topics[st.Topic] = true
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	rows, err := s.conn.Query(ctx, mcsql.Rollup("batches_newest"), names)
	if err != nil {
		return fmt.Errorf("rollups: batch markers: %w", err)
	}
	marked := map[Stream]bool{}
	inFlight := map[Stream]uint64{}
	inFlightAsOf := map[Stream]int64{}
	for rows.Next() {
		var (
			st   Stream
			asOf int64
			v    uint64
		)
		if err := rows.Scan(&st.Topic, &st.Partition, &asOf, &v); err != nil {
			rows.Close()
			return fmt.Errorf("rollups: batch markers: %w", err)
		}
		marked[st] = true
		if c, ok := s.committed[st]; ok && asOf > c {
			inFlight[st], inFlightAsOf[st] = v, asOf
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("rollups: batch markers: %w", err)
	}
	for st, v := range inFlight {
		cells, err := s.batch(ctx, st, v)
		if err != nil {
			return err
		}
		if cells == nil {
			return fmt.Errorf("rollups: the marker of batch version %d of %s vanished while it was read", v, st)
		}
		c := s.committed[st]
		if countedPast(cells, c) {
			// Not one batch in flight beyond the committed offset but the group reading again
			// offsets whose events the rollups counted already (a new consumer group, or
			// offsets moved back): the totals as of c are not recorded anywhere, and every
			// cell's newest row counts the partition's events up to the marker's end offset.
			// Those rows stay; the generation adds only the events from that offset on.
			h := inFlightAsOf[st]
			s.committed[st] = h
			s.log.Info("rollups: the group reads offsets counted already; counting from the newest batch's end",
				"stream", st.String(), "committed", c, "counted_to", h)
			continue
		}
		for _, t := range s.tables {
			var resets []rowOut
			for key, b := range cells[t.Name] {
				resets = append(resets, rowOut{stream: st, key: key, vals: b.vals, asOf: b.asOf})
			}
			if len(resets) == 0 {
				continue
			}
			slices.SortFunc(resets, func(a, b rowOut) int { return strings.Compare(string(a.key), string(b.key)) })
			if err := s.insertRows(ctx, t, resets); err != nil {
				return err
			}
			s.log.Info("rollups: reset cells of a batch stored but not committed", "table", t.Name, "stream", st.String(),
				"committed", c, "cells", len(resets))
		}
	}
	return s.recoverLegacy(ctx, names, marked)
}

// countedPast reports whether a batch marker replaced totals counted beyond offset c: the
// batch did not start at c (a batch in flight after the committed offset c replaces totals as
// of c or earlier), so more than one batch beyond c was counted.
func countedPast(cells batchCells, c int64) bool {
	for _, byKey := range cells {
		for _, b := range byKey {
			if b.asOf > c {
				return true
			}
		}
	}
	return false
}

// CountedFrom is the offset of stream st from which the generation begun by the last Begin
// adds events to the rollups: the committed offset, or, when the group reads again offsets
// the rollups counted already (a new consumer group, or offsets moved back past more than
// the batch in flight), the end offset of the newest batch that counted them. Events below
// it are in the totals already and must not be added to a Batch again. It must be called
// after Begin, and not concurrently with it.
func (s *Store) CountedFrom(st Stream) int64 { return s.committed[st] }

// batch returns the cells batch version v of stream st wrote and the totals it replaced in
// each, from its marker (nil if there is none), caching them for the generation.
func (s *Store) batch(ctx context.Context, st Stream, v uint64) (batchCells, error) {
	id := batchID{st, v}
	s.markers.Lock()
	cells, ok := s.batches[id]
	s.markers.Unlock()
	if ok {
		return cells, nil
	}
	var (
		tables, keys []string
		befores      [][]uint64
		asOfs        []int64
	)
	err := s.conn.QueryRow(ctx, mcsql.Rollup("batch_cells"), st.Topic, st.Partition, v).Scan(&tables, &keys, &befores, &asOfs)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil // not cached: on a cluster it may yet arrive from the writer's replica
	}
	if err != nil {
		return nil, fmt.Errorf("rollups: batch marker %d of %s: %w", v, st, err)
	}
	if len(keys) != len(tables) || len(befores) != len(tables) || len(asOfs) != len(tables) {
		return nil, fmt.Errorf("rollups: batch marker %d of %s: %d tables, %d keys, %d befores, %d offsets",
			v, st, len(tables), len(keys), len(befores), len(asOfs))
	}
	width := map[string]int{}
	for _, t := range s.tables {
		width[t.Name] = t.width()
	}
	cells = batchCells{}
	for i, name := range tables {
		w, ok := width[name]
		if !ok {
			continue // a table this build does not write
		}
		m := cells[name]
		if m == nil {
			m = map[Key]before{}
			cells[name] = m
		}
		m[Key(keys[i])] = before{vals: fit(befores[i], w), asOf: asOfs[i]}
	}
	s.markers.Lock()
	s.batches[id] = cells
	s.markers.Unlock()
	return cells, nil
}

// recoverLegacy resets the cells of batches marked before migration 0035 (in rollup_writes,
// renamed rollup_writes_before_0035 by migration 0036 so that a consumer of that release fails
// instead of writing rows the current ones supersede) for the streams not in marked: each cell
// of the marked hours whose newest row is beyond the committed offset goes back to the before
// totals the row carries. Errors are ClickHouse's.
func (s *Store) recoverLegacy(ctx context.Context, names []string, marked map[Stream]bool) error {
	rows, err := s.conn.Query(ctx, mcsql.Rollup("writes"), names)
	if err != nil {
		return fmt.Errorf("rollups: write markers: %w", err)
	}
	inFlight := map[Stream][]time.Time{}
	for rows.Next() {
		var (
			st    Stream
			asOf  int64
			hours []time.Time
		)
		if err := rows.Scan(&st.Topic, &st.Partition, &asOf, &hours); err != nil {
			rows.Close()
			return fmt.Errorf("rollups: write markers: %w", err)
		}
		if c, ok := s.committed[st]; ok && asOf > c && !marked[st] {
			inFlight[st] = hours
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("rollups: write markers: %w", err)
	}
	for st, hours := range inFlight {
		c := s.committed[st]
		for _, t := range s.tables {
			var resets []rowOut
			err := s.query(ctx, t, "in_flight", st, hours, []any{c}, func(key Key, r loaded) error {
				resets = append(resets, rowOut{stream: st, key: key, vals: r.before, asOf: r.beforeAsOf})
				return nil
			})
			if err != nil {
				return err
			}
			if len(resets) > 0 {
				if err := s.insertRows(ctx, t, resets); err != nil {
					return err
				}
				s.log.Info("rollups: reset cells of a batch stored but not committed (marked before the batch markers carried their cells)",
					"table", t.Name, "stream", st.String(), "committed", c, "cells", len(resets))
			}
		}
	}
	return nil
}

// loaded is one cell's newest row as read back.
type loaded struct {
	vals       []uint64
	asOf       int64
	before     []uint64
	beforeAsOf int64
	version    uint64
	// legacyBefore: the row carries the totals it replaced in before and beforeAsOf (rows
	// written before migration 0035; later rows leave them empty, their marker holds them).
	legacyBefore bool
}

// query runs the named template for table t, stream st and hours, with extra parameters after
// the hours, and calls fn for each cell read.
func (s *Store) query(ctx context.Context, t *Table, name string, st Stream, hours []time.Time, extra []any, fn func(Key, loaded) error) error {
	if len(hours) == 0 {
		return nil
	}
	secs := make([]uint32, len(hours))
	lo, hi := hours[0], hours[0]
	for i, h := range hours {
		secs[i] = uint32(h.Unix())
		if h.Before(lo) {
			lo = h
		}
		if h.After(hi) {
			hi = h
		}
	}
	args := append([]any{st.Topic, st.Partition, lo.Unix(), hi.Unix(), secs}, extra...)
	rows, err := s.conn.Query(ctx, s.template(t, name), args...)
	if err != nil {
		return fmt.Errorf("rollups: read %s: %w", t.Name, err)
	}
	defer rows.Close()
	ndims := len(t.Dims) - 1
	dest := make([]any, 0, ndims+6)
	for rows.Next() {
		var (
			hour time.Time
			r    loaded
		)
		dest = append(dest[:0], &hour)
		dims := make([]any, ndims)
		for i, d := range t.Dims[1:] {
			switch d.Type {
			case DimString:
				dims[i] = new(string)
			case DimUInt8:
				dims[i] = new(uint8)
			}
		}
		dest = append(dest, dims...)
		dest = append(dest, &r.vals, &r.asOf, &r.before, &r.beforeAsOf, &r.version)
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("rollups: read %s: %w", t.Name, err)
		}
		key, err := keyFromValues(t, hour, dims)
		if err != nil {
			return err
		}
		r.legacyBefore = len(r.before) > 0 || r.beforeAsOf > 0
		if r.version&versionFlag != 0 {
			r.asOf = int64(r.version & maxAsOf)
		}
		r.vals, r.before = fit(r.vals, t.width()), fit(r.before, t.width())
		if err := fn(key, r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("rollups: read %s: %w", t.Name, err)
	}
	return nil
}

// fit pads or cuts values read back to the table's width (a row written before a measure was
// added holds fewer).
func fit(v []uint64, n int) []uint64 {
	if len(v) == n {
		return v
	}
	out := make([]uint64, n)
	copy(out, v)
	return out
}

func (s *Store) template(t *Table, name string) string {
	values := "[" + strings.Join(t.Measures, ", ") + "]"
	if t.Array != "" {
		values = "arrayConcat(" + values + ", " + t.Array + ")"
	}
	return strings.NewReplacer("{table}", t.Name, "{dims}", t.dimNames(), "{values}", values).Replace(mcsql.Rollup(name))
}

// Write is a batch's rollup rows, computed once by Prepare. Insert it until it succeeds: it
// writes the same rows every time.
type Write struct {
	store   *Store
	markers []marker
	rows    [][]rowOut // per table
}

// marker is a batch's marker of one stream (a row of rollup_batches): its end offset, the
// hours its rows fall in, and per cell written (table name, key) the totals replaced.
type marker struct {
	stream  Stream
	asOf    int64
	hours   []time.Time
	tables  []string
	keys    []string
	befores [][]uint64
	asOfs   []int64
}

// rowOut is one row to write.
type rowOut struct {
	stream     Stream
	key        Key
	vals       []uint64
	asOf       int64
	before     []uint64
	beforeAsOf int64
}

// Rows is the number of rollup rows the write holds.
func (w *Write) Rows() int {
	n := 0
	for _, r := range w.rows {
		n += len(r)
	}
	return n
}

// Prepare computes the rows of b: for every cell it touches, the cell's newest totals (from
// the cache, or loaded from ClickHouse) plus what b adds, as of b's end offset in the cell's
// stream. It then records those totals in the cache, so it must be called once per batch, in
// offset order; the returned Write is inserted (and retried) as it is. Errors are ClickHouse's
// (nothing is cached then; Prepare may be called again).
func (s *Store) Prepare(ctx context.Context, b *Batch) (*Write, error) {
	w := &Write{store: s, rows: make([][]rowOut, len(s.tables))}
	s.clock++
	// Load every group the batch needs and the cache lacks: one query per stream and table,
	// loadQueries at a time, cached once every one succeeded.
	var loads []*groupLoad
	for st, sb := range b.streams {
		if _, ok := s.committed[st]; !ok {
			return nil, fmt.Errorf("rollups: stream %s was not assigned in this generation", st)
		}
		if sb.next > maxAsOf {
			return nil, fmt.Errorf("rollups: offset %d of %s is beyond the versions' %d bits of offset", sb.next, st, asOfBits)
		}
		for ti, m := range sb.cells {
			if m == nil {
				continue
			}
			var missing []time.Time
			seen := map[int64]bool{}
			for i := range int32(m.len()) {
				h := hourOf(m.keyAt(i))
				if seen[h] {
					continue
				}
				seen[h] = true
				if g, ok := s.groups[groupKey{st, ti, h}]; ok {
					g.lastUse = s.clock
					continue
				}
				missing = append(missing, time.Unix(h, 0).UTC())
			}
			if len(missing) > 0 {
				loads = append(loads, &groupLoad{stream: st, table: s.tables[ti], hours: missing})
			}
		}
	}
	if err := s.loadAll(ctx, loads); err != nil {
		return nil, err
	}
	// Compute the new totals; the cache changes only after every load succeeded. Each
	// table's rows take their totals and the totals they replace from one array.
	arenas := make([][]uint64, len(s.tables))
	for ti, t := range s.tables {
		n := 0
		for _, sb := range b.streams {
			if m := sb.cells[ti]; m != nil {
				n += m.len()
			}
		}
		arenas[ti] = make([]uint64, 2*n*t.width())
		w.rows[ti] = make([]rowOut, 0, n)
	}
	for st, sb := range b.streams {
		var hours []time.Time
		seenHour := map[int64]bool{}
		for ti, m := range sb.cells {
			if m == nil {
				continue
			}
			width := s.tables[ti].width()
			order := make([]int32, m.len())
			for i := range order {
				order[i] = int32(i)
			}
			slices.SortFunc(order, func(a, b int32) int { return bytes.Compare(m.keyAt(a), m.keyAt(b)) }) // a deterministic row order
			for _, pos := range order {
				key := Key(m.keyAt(pos))
				h := key.hour().Unix()
				if !seenHour[h] {
					seenHour[h] = true
					hours = append(hours, key.hour())
				}
				a := arenas[ti]
				base, vals := a[:width:width], a[width:2*width:2*width]
				arenas[ti] = a[2*width:]
				cached, baseAsOf := s.groups[groupKey{st, ti, h}].get(key)
				copy(base, cached)
				for i, v := range m.at(pos) {
					vals[i] = base[i] + v
				}
				w.rows[ti] = append(w.rows[ti], rowOut{stream: st, key: key, vals: vals, asOf: sb.next, before: base, beforeAsOf: baseAsOf})
			}
		}
		if len(hours) > 0 {
			slices.SortFunc(hours, func(a, b time.Time) int { return a.Compare(b) })
			w.markers = append(w.markers, marker{stream: st, asOf: sb.next, hours: hours})
		}
	}
	// Each marker lists its stream's cells with the totals they replace.
	at := map[Stream]int{}
	for i, m := range w.markers {
		at[m.stream] = i
	}
	for ti, rows := range w.rows {
		name := s.tables[ti].Name
		for _, r := range rows {
			m := &w.markers[at[r.stream]]
			m.tables = append(m.tables, name)
			m.keys = append(m.keys, string(r.key))
			if r.beforeAsOf == 0 && !slices.ContainsFunc(r.before, func(v uint64) bool { return v != 0 }) {
				// A cell the batch writes first: its totals before are all 0, which an empty
				// array reads back as (fit), at a fraction of the marker's bytes.
				m.befores = append(m.befores, nil)
			} else {
				m.befores = append(m.befores, r.before)
			}
			m.asOfs = append(m.asOfs, r.beforeAsOf)
		}
	}
	for ti, rows := range w.rows {
		for _, r := range rows {
			if s.groups[groupKey{r.stream, ti, r.key.hour().Unix()}].set(r.key, r.vals, r.asOf) {
				s.cells++
			}
		}
	}
	s.evict()
	s.published.Store(int64(s.cells))
	return w, nil
}

// loadQueries is how many of a batch's load queries run at once. A batch that touches many
// uncached hours needs one query per stream and table; run one after another they kept its
// commit waiting for their round trips (a few hundred milliseconds per batch at 40,000
// events/s on 2 cores), while ClickHouse answers several at once. They take as many
// connections as the batch's rollup inserts do after them, and a load that meets a late row
// of an older generation one more while it reads the row's batch marker.
const loadQueries = 4

// groupLoad is one load query of a batch: the groups of one stream, table and hours, read
// into fresh (by hour, Unix seconds) before the cache takes them.
type groupLoad struct {
	stream Stream
	table  *Table
	hours  []time.Time
	fresh  map[int64]*group
}

// loadAll runs loads, loadQueries at a time, and caches their groups once all of them
// succeeded; on an error nothing is cached.
func (s *Store) loadAll(ctx context.Context, loads []*groupLoad) error {
	if len(loads) == 0 {
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(loadQueries)
	for _, l := range loads {
		g.Go(func() error { return s.load(gctx, l) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, l := range loads {
		for h, grp := range l.fresh {
			s.groups[groupKey{l.stream, l.table.index, h}] = grp
			s.cells += grp.cells.len()
		}
	}
	return nil
}

// load reads the cells of l's table, stream and hours into l.fresh; it may run beside the
// batch's other loads (they share only the marker caches, under s.markers). A cell whose newest
// row is beyond the stream's committed offset and older than this generation was written by a
// member that lost the partition after Begin reset the cells: the totals that row replaced,
// recorded in its batch's marker, are the committed ones.
func (s *Store) load(ctx context.Context, l *groupLoad) error {
	st, t := l.stream, l.table
	l.fresh = make(map[int64]*group, len(l.hours))
	for _, h := range l.hours {
		l.fresh[h.Unix()] = newGroup(t.width(), s.clock)
	}
	c := s.committed[st]
	return s.query(ctx, t, "cells", st, l.hours, nil, func(key Key, r loaded) error {
		vals, asOf := r.vals, r.asOf
		if asOf > c && r.version < version(s.epoch, 0) {
			b, err := s.lateRowBefore(ctx, st, t, key, r)
			if err != nil {
				return err
			}
			vals, asOf = b.vals, b.asOf
		}
		l.fresh[key.hour().Unix()].set(key, vals, asOf)
		return nil
	})
}

// lateRowBefore returns the totals the late row r of cell key (table t, stream st) replaced:
// from the row itself when it carries them (written before migration 0035), else from its
// batch's marker, which is stored before any row of the batch. On a cluster the row may reach
// this member's replica before the marker: while the marker's block cannot have been dropped it
// returns an error (Prepare is retried) for up to MarkerWait. Past that, or when the marker's
// block may have been dropped (over 1,024 generations later), it logs the loss and keeps the
// row's totals.
func (s *Store) lateRowBefore(ctx context.Context, st Stream, t *Table, key Key, r loaded) (before, error) {
	if r.legacyBefore {
		return before{vals: r.before, asOf: r.beforeAsOf}, nil
	}
	cells, err := s.batch(ctx, st, r.version)
	if err != nil {
		return before{}, err
	}
	if b, ok := cells[t.Name][key]; ok {
		return b, nil
	}
	if cells == nil && r.version&versionFlag != 0 {
		// The marker is stored before any row of its batch, but a ClickHouse replica copies
		// each table on its own: the row may have reached this member's replica before its
		// marker. Its totals count the uncommitted batch, so wait for the marker (Prepare
		// fails and is retried), unless its block may have been dropped or it stays missing.
		epoch := r.version &^ versionFlag >> asOfBits
		id := batchID{st, r.version}
		s.markers.Lock()
		first, seen := s.missing[id]
		if !seen {
			first = time.Now()
			s.missing[id] = first
		}
		s.markers.Unlock()
		if epoch/batchBlockEpochs >= oldestKeptBlock(s.epoch) && time.Since(first) < MarkerWait {
			return before{}, fmt.Errorf("rollups: %s: a late row of %s (version %d) is visible before its batch marker; retrying until the marker arrives",
				t.Name, st, r.version)
		}
	}
	s.log.Error("rollups: a late row of an older generation has no batch marker; continuing from its totals",
		"table", t.Name, "stream", st.String(), "as_of", r.asOf, "version", r.version)
	return before{vals: r.vals, asOf: r.asOf}, nil
}

// evict drops the least recently used groups until the cache holds at most budget cells,
// keeping the groups the current batch used.
func (s *Store) evict() {
	if s.cells <= s.budget {
		return
	}
	keys := make([]groupKey, 0, len(s.groups))
	for k, g := range s.groups {
		if g.lastUse < s.clock {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b groupKey) int {
		return int(s.groups[a].lastUse) - int(s.groups[b].lastUse)
	})
	for _, k := range keys {
		if s.cells <= s.budget {
			return
		}
		s.cells -= s.groups[k].cells.len()
		delete(s.groups, k)
	}
}

// CachedCells is the number of cells the cache held after the last Begin or Prepare; it may be
// called from any goroutine.
func (s *Store) CachedCells() int { return int(s.published.Load()) }

// Insert writes the batch's markers, then its rows: every table's at once, each on its own
// connection (the marker must be stored before any row it covers; the tables are
// independent). It writes the same rows however often it is called, so a failed Insert is
// retried as it is.
func (w *Write) Insert(ctx context.Context) error {
	if len(w.markers) == 0 {
		return nil
	}
	s := w.store
	if err := s.insertMarkers(ctx, w.markers); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	for ti, rows := range w.rows {
		if len(rows) > 0 {
			g.Go(func() error { return s.insertRows(gctx, s.tables[ti], rows) })
		}
	}
	return g.Wait()
}

// insertMarkers writes a batch's markers into rollup_batches, column by column; each has the
// version of its stream's rows.
func (s *Store) insertMarkers(ctx context.Context, markers []marker) error {
	n := len(markers)
	topics, parts := make([]string, n), make([]int32, n)
	epochs, asOfs, versions := make([]uint64, n), make([]int64, n), make([]uint64, n)
	hours := make([][]time.Time, n)
	tables, keys := make([][]string, n), make([][]string, n)
	befores, beforeAsOfs := make([][][]uint64, n), make([][]int64, n)
	for i, m := range markers {
		topics[i], parts[i] = m.stream.Topic, m.stream.Partition
		epochs[i], asOfs[i], versions[i] = s.epoch, m.asOf, version(s.epoch, m.asOf)
		hours[i], tables[i], keys[i], befores[i], beforeAsOfs[i] = m.hours, m.tables, m.keys, m.befores, m.asOfs
	}
	names := []string{"kafka_topic", "kafka_partition", "epoch", "as_of", "hours", "cell_tables", "cell_keys", "befores", "before_as_ofs", "version"}
	cols := []any{topics, parts, epochs, asOfs, hours, tables, keys, befores, beforeAsOfs, versions}
	return s.insertColumns(ctx, "mcpulse.rollup_batches", names, cols)
}

// insertColumns sends one INSERT into table of the given columns, each a slice of one value
// per row.
func (s *Store) insertColumns(ctx context.Context, table string, names []string, cols []any) error {
	batch, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+table+" ("+strings.Join(names, ", ")+")")
	if err != nil {
		return fmt.Errorf("rollups: insert into %s: %w", table, err)
	}
	for i, col := range cols {
		if err := appendColumn(batch.Column(i), col); err != nil {
			_ = batch.Abort()
			return fmt.Errorf("rollups: insert into %s: column %s: %w", table, names[i], err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("rollups: insert into %s: %w", table, err)
	}
	return nil
}

// appendColumn appends col, a slice of one value per row, to c. A column of arrays is appended
// a row at a time: clickhouse-go converts every element of a whole column of arrays by
// reflection (each boxed on its own), but a row that is a typed slice of a one-level array
// directly.
func appendColumn(c driver.BatchColumn, col any) error {
	switch v := col.(type) {
	case [][]string:
		return appendRows(c, v)
	case [][]uint64:
		return appendRows(c, v)
	case [][]int64:
		return appendRows(c, v)
	case [][]time.Time:
		return appendRows(c, v)
	case [][][]uint64:
		return appendRows(c, v)
	}
	return c.Append(col)
}

func appendRows[T any](c driver.BatchColumn, rows []T) error {
	for _, r := range rows {
		if err := c.AppendRow(r); err != nil {
			return err
		}
	}
	return nil
}

// insertRows writes rows into t, column by column. The rollup tables have no partition key, so
// one INSERT takes rows of any hours.
func (s *Store) insertRows(ctx context.Context, t *Table, rows []rowOut) error {
	if len(rows) == 0 {
		return nil
	}
	n := len(rows)
	topics, parts := make([]string, n), make([]int32, n)
	hours := make([]time.Time, n)
	dims := make([]any, len(t.Dims)-1)
	for i, d := range t.Dims[1:] {
		switch d.Type {
		case DimString:
			dims[i] = make([]string, n)
		case DimUInt8:
			dims[i] = make([]uint8, n)
		}
	}
	measures := make([][]uint64, len(t.Measures))
	for i := range measures {
		measures[i] = make([]uint64, n)
	}
	arrays := make([][]uint64, n)
	versions := make([]uint64, n)
	for r, row := range rows {
		topics[r], parts[r], hours[r] = row.stream.Topic, row.stream.Partition, row.key.hour()
		vals, err := row.key.decode(t)
		if err != nil {
			return err
		}
		for i, v := range vals {
			switch col := dims[i].(type) {
			case []string:
				col[r] = v.(string)
			case []uint8:
				col[r] = v.(uint8)
			}
		}
		for i := range t.Measures {
			measures[i][r] = row.vals[i]
		}
		arrays[r] = row.vals[len(t.Measures):]
		versions[r] = version(s.epoch, row.asOf)
	}
	cols := []any{topics, parts, hours}
	cols = append(cols, dims...)
	for _, m := range measures {
		cols = append(cols, m)
	}
	names := []string{"kafka_topic", "kafka_partition", t.Dims[0].Name}
	for _, d := range t.Dims[1:] {
		names = append(names, d.Name)
	}
	names = append(names, t.Measures...)
	if t.Array != "" {
		cols = append(cols, arrays)
		names = append(names, t.Array)
	}
	// as_of, before and before_as_of (migration 0015) keep their defaults: the version holds
	// the offset, the marker the totals replaced.
	cols = append(cols, versions)
	names = append(names, "version")
	return s.insertColumns(ctx, t.Name, names, cols)
}
