// Package rollup keeps mcpulse's hourly rollups as plain counts, written idempotently
// (migration 0015; docs/pipeline.md, "Rollups as cumulative totals").
//
// For each Kafka partition it reads (a Stream) and each rollup cell a batch touches, the
// consumer writes the cell's cumulative totals over that partition's stored events up to the
// batch's end offset (as_of). Such a total is a fact about the partition's log — the consumer's
// dedup decisions are a function of the log too (package dedup) — so a row is true whenever it
// was written, and replaying a range of offsets writes the same facts again. Rows of one
// (partition, cell) replace each other by version (ReplacingMergeTree); readers take the newest
// and sum over partitions. Storage grows with hours × dimensions × partitions, not with events.
//
// A batch is written in two steps, like the offset-range state of ClickHouse's Kafka Connect
// sink: first a marker per partition (table rollup_batches, migration 0035: the batch's end
// offset, the hours it touches, and for each cell it writes the totals it replaces, as of
// their offset), then the rows. At most one batch per partition is stored but not committed
// (the consumer commits before it stores the next), so when a member takes a partition over at
// committed offset C, a newest marker beyond C lists every cell that batch may have written
// beyond C, with the committed totals: the member resets those cells to them (a replay that
// derives a cell differently — the ignored keys a tool call's served schema yields depend on
// the schemas seen — must not leave the first attempt's count behind) and continues from
// there. The rows themselves carry no previous totals, so after merges a cell costs one row of
// its dimensions, measures and version; the markers keep one batch per partition and
// generation.
//
// A row's version is its epoch and the offset its totals are as of (version): every member
// takes a new epoch, above every epoch taken before (table rollup_epochs_taken), when a
// consumer-group generation starts, so its rows supersede every row written before the
// rebalance that gave it its partitions; within a generation a partition's cells are written
// in offset order. The version is the row's only record of that offset (its as_of column is
// left 0), which costs one column of changing numbers per row instead of two.
package rollup

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"
)

// DimType is the ClickHouse type of a rollup dimension column.
type DimType uint8

// Dimension column types.
const (
	DimHour   DimType = iota // DateTime('UTC'), on the hour
	DimString                // String
	DimUInt8                 // UInt8
)

// Dim is one dimension column of a rollup table.
type Dim struct {
	Name string
	Type DimType
}

// Table describes one rollup table of migration 0015: after the columns kafka_topic and
// kafka_partition come Dims (the first is the hour), then Measures (UInt64 each), then the
// optional Array(UInt64) measure, then as_of, before, before_as_of and version.
type Table struct {
	// Name is the table, qualified (mcpulse.tool_call_stats_hourly).
	Name string
	// Dims are the dimension columns; Dims[0] is the hour (DimHour).
	Dims []Dim
	// Measures are the UInt64 measure columns.
	Measures []string
	// Array names the Array(UInt64) measure column, or "" for none; ArrayLen is its fixed
	// length.
	Array    string
	ArrayLen int

	index int // position in the Store's tables
}

// width is the number of values of a cell: the measures, then the array's elements.
func (t *Table) width() int { return len(t.Measures) + t.ArrayLen }

// Key is a cell's dimension values, encoded (hour as Unix seconds, then each dimension).
// Build one with a KeyBuilder.
type Key string

// KeyBuilder encodes a cell's dimension values into a Key. The zero value is ready; Reset it
// before each key. Dimensions are added in the table's order.
type KeyBuilder struct{ buf []byte }

// Reset starts a key for the hour h (truncated to the hour, UTC).
func (k *KeyBuilder) Reset(h time.Time) *KeyBuilder {
	k.buf = binary.BigEndian.AppendUint64(k.buf[:0], uint64(h.UTC().Truncate(time.Hour).Unix()))
	return k
}

// String adds a String dimension.
func (k *KeyBuilder) String(s string) *KeyBuilder {
	k.buf = binary.AppendUvarint(k.buf, uint64(len(s)))
	k.buf = append(k.buf, s...)
	return k
}

// UInt8 adds a UInt8 dimension.
func (k *KeyBuilder) UInt8(v uint8) *KeyBuilder {
	k.buf = append(k.buf, v)
	return k
}

// bytes is the key so far, which the builder reuses: a cell set copies it when it adds the
// key.
func (k *KeyBuilder) bytes() []byte { return k.buf }

// hour is the hour a key starts with.
func (key Key) hour() time.Time {
	return time.Unix(int64(binary.BigEndian.Uint64([]byte(key[:8]))), 0).UTC()
}

// hourOf is the hour, in Unix seconds, that a key held as bytes starts with.
func hourOf(key []byte) int64 {
	return int64(binary.BigEndian.Uint64(key[:8]))
}

// decode returns the key's dimension values after the hour: strings for DimString, and the
// UInt8 values as uint8, in the table's order.
func (key Key) decode(t *Table) ([]any, error) {
	b := []byte(key[8:])
	out := make([]any, 0, len(t.Dims)-1)
	for _, d := range t.Dims[1:] {
		switch d.Type {
		case DimString:
			n, w := binary.Uvarint(b)
			if w <= 0 || uint64(len(b)-w) < n {
				return nil, fmt.Errorf("rollup: malformed key for %s", t.Name)
			}
			out = append(out, string(b[w:w+int(n)]))
			b = b[w+int(n):]
		case DimUInt8:
			if len(b) < 1 {
				return nil, fmt.Errorf("rollup: malformed key for %s", t.Name)
			}
			out = append(out, b[0])
			b = b[1:]
		default:
			return nil, fmt.Errorf("rollup: %s: only the first dimension may be the hour", t.Name)
		}
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("rollup: malformed key for %s", t.Name)
	}
	return out, nil
}

// keyFromValues encodes dimension values read back from ClickHouse.
func keyFromValues(t *Table, hour time.Time, vals []any) (Key, error) {
	var k KeyBuilder
	k.Reset(hour)
	for i, d := range t.Dims[1:] {
		switch d.Type {
		case DimString:
			s, ok := vals[i].(*string)
			if !ok {
				return "", fmt.Errorf("rollup: %s.%s read as %T", t.Name, d.Name, vals[i])
			}
			k.String(*s)
		case DimUInt8:
			v, ok := vals[i].(*uint8)
			if !ok {
				return "", fmt.Errorf("rollup: %s.%s read as %T", t.Name, d.Name, vals[i])
			}
			k.UInt8(*v)
		}
	}
	return Key(k.bytes()), nil
}

// dimNames are the dimension column names after the hour, comma-separated.
func (t *Table) dimNames() string {
	names := make([]string, 0, len(t.Dims)-1)
	for _, d := range t.Dims[1:] {
		names = append(names, d.Name)
	}
	return strings.Join(names, ", ")
}

// Row versions (version): bit 63 set, then epochBits of epoch, then asOfBits of offset.
// Rows written before migration 0035 have versions epoch<<32 | sequence, without bit 63, so
// every later row supersedes them.
const (
	versionFlag = 1 << 63
	asOfBits    = 40 // offsets below 2^40 (1.1e12 messages per partition)
	epochBits   = 23 // epochs below 2^23 (8.4 million generations)
	maxAsOf     = 1<<asOfBits - 1
	maxEpoch    = 1<<epochBits - 1
)

// version is the version of a row of epoch whose totals are as of offset asOf; asOf is in
// [0, maxAsOf] and epoch in [0, maxEpoch] (Begin and Prepare refuse others).
func version(epoch uint64, asOf int64) uint64 {
	return versionFlag | epoch<<asOfBits | uint64(asOf)
}
