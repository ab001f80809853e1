// Package chwrite inserts Go structs into ClickHouse column by column, in large streamed
// batches.
//
// A Table[T] maps the fields of struct T, by their `ch` tags, to the columns of one table,
// once. Insert then sends a slice of T as one INSERT with an explicit column list (ClickHouse
// 18.16 refuses a batch without one), in blocks of BlockRows rows: each block is built column
// by column (each column's values copied out of the rows a chunk at a time into pooled
// scratch and handed to clickhouse-go's batch column API) and sent with Flush before the next
// block is built, so a large insert holds one block in memory, not the whole batch encoded. Measured
// against clickhouse-go's row Append (reflection per value), the column path costs about a
// third of the CPU per row.
//
// A clickhouse-go batch cannot be sent again after a failed Send (DESIGN.md §5), and a
// column append that fails leaves the block's columns misaligned; so a failed Insert aborts
// its batch and returns the error, and the caller retries Insert with the same rows, which it
// keeps until the insert succeeded.
package chwrite

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
)

// ErrAppend wraps the error of a column the client library could not append a block's values
// to: the values do not fit the column's type (an Enum value it does not list, a number out of
// range), so the same rows would be refused on every retry.
var ErrAppend = errors.New("values do not fit the column")

// DefaultBlockRows is Table.BlockRows's default: rows per block sent.
const DefaultBlockRows = 16384

// Table inserts values of struct type T into one ClickHouse table. Create it with NewTable.
type Table[T any] struct {
	name    string
	query   string
	columns []column
	// fixed and varSizes are Bytes's bound of a row: fixed for every row, plus varSizes'.
	fixed    int
	varSizes []func(row unsafe.Pointer) int
	// BlockRows is how many rows each block sent holds. Default: DefaultBlockRows.
	BlockRows int
}

// column is one field of T: its column name and how to append a range of rows' values.
type column struct {
	name   string
	append func(col driver.BatchColumn, base unsafe.Pointer, stride uintptr, n int) error
}

// size is Bytes's bound of n rows laid out stride bytes apart from base.
func (t *Table[T]) size(base unsafe.Pointer, stride uintptr, n int) int64 {
	total := int64(t.fixed) * int64(n)
	for _, v := range t.varSizes {
		for i := range n {
			total += int64(v(unsafe.Add(base, uintptr(i)*stride)))
		}
	}
	return total
}

// columnSize returns the Bytes bound of a field of type ft: fixed for every row, or, for a
// field of variable size, a function of the row (at the field's offset off).
func columnSize(ft reflect.Type, off uintptr) (fixed int, variable func(unsafe.Pointer) int) {
	switch ft {
	case reflect.TypeFor[string]():
		return 0, func(r unsafe.Pointer) int { return len(*(*string)(unsafe.Add(r, off))) + 9 }
	case reflect.TypeFor[*string]():
		return 0, func(r unsafe.Pointer) int {
			if p := *(**string)(unsafe.Add(r, off)); p != nil {
				return len(*p) + 10
			}
			return 10
		}
	case reflect.TypeFor[[]string]():
		return 0, func(r unsafe.Pointer) int {
			n := 8
			for _, s := range *(*[]string)(unsafe.Add(r, off)) {
				n += len(s) + 9
			}
			return n
		}
	case reflect.TypeFor[[]uint64]():
		return 0, func(r unsafe.Pointer) int { return 8 + 8*len(*(*[]uint64)(unsafe.Add(r, off))) }
	case reflect.TypeFor[[]time.Time]():
		return 0, func(r unsafe.Pointer) int { return 8 + 8*len(*(*[]time.Time)(unsafe.Add(r, off))) }
	}
	if ft.Kind() == reflect.Pointer {
		return 1 + int(ft.Elem().Size()), nil
	}
	return int(ft.Size()), nil
}

// NewTable maps T's exported fields with a `ch:"column"` tag to the columns of table (a
// qualified name, e.g. "mcpulse.tool_calls"); fields without the tag are left out. Every
// tagged field must have one of the supported types: string, bool (as UInt8), uint8..uint64,
// int8..int64, float32, float64, time.Time, uuid.UUID, []string, []uint64, []time.Time, or a pointer to
// one of the scalar types (a Nullable column). The column types of the table must accept
// them (clickhouse-go's conversions); a mismatch fails the first Insert.
func NewTable[T any](table string) (*Table[T], error) {
	rt := reflect.TypeFor[T]()
	if rt.Kind() != reflect.Struct {
		return nil, fmt.Errorf("chwrite: %s is not a struct", rt)
	}
	t := &Table[T]{name: table, BlockRows: DefaultBlockRows}
	var names []string
	for i := range rt.NumField() {
		f := rt.Field(i)
		name := f.Tag.Get("ch")
		if name == "" || name == "-" {
			continue
		}
		if !f.IsExported() {
			return nil, fmt.Errorf("chwrite: %s.%s: unexported field with a ch tag", rt, f.Name)
		}
		mk, ok := appenders[f.Type]
		if !ok {
			return nil, fmt.Errorf("chwrite: %s.%s: unsupported type %s", rt, f.Name, f.Type)
		}
		t.columns = append(t.columns, column{name: name, append: mk(f.Offset)})
		fixed, variable := columnSize(f.Type, f.Offset)
		t.fixed += fixed
		if variable != nil {
			t.varSizes = append(t.varSizes, variable)
		}
		names = append(names, name)
	}
	if len(t.columns) == 0 {
		return nil, fmt.Errorf("chwrite: %s has no field with a ch tag", rt)
	}
	t.query = "INSERT INTO " + table + " (" + strings.Join(names, ", ") + ")"
	return t, nil
}

// Name is the table's name.
func (t *Table[T]) Name() string { return t.name }

// Columns are the table's column names, in the order of T's fields.
func (t *Table[T]) Columns() []string {
	out := make([]string, len(t.columns))
	for i, c := range t.columns {
		out[i] = c.name
	}
	return out
}

// Insert sends rows as one INSERT, streamed in blocks of BlockRows rows. It does nothing for
// no rows. On error the batch is aborted; the rows may be partly stored (ClickHouse writes
// the blocks it received), so the caller retries with the same rows into tables whose writes
// are idempotent. Errors name the table.
func (t *Table[T]) Insert(ctx context.Context, conn driver.Conn, rows []T) error {
	if len(rows) == 0 {
		return nil
	}
	in, err := t.Open(ctx, conn)
	if err != nil {
		return err
	}
	if err := in.Write(rows); err != nil {
		return err
	}
	return in.Send()
}

// Open starts one INSERT into the table that stays open while Write sends rows into it, a
// block at a time, until Send ends it. ClickHouse squashes the blocks of one INSERT into as
// few parts as it can (one per partition up to min_insert_block_size_rows, 1,048,576 rows by
// default), so rows written over several calls make the parts one Insert of them all would,
// without the caller holding them all. The INSERT holds one connection of conn's pool until
// Send or Abort. Errors name the table.
func (t *Table[T]) Open(ctx context.Context, conn driver.Conn) (*OpenInsert[T], error) {
	batch, err := conn.PrepareBatch(ctx, t.query)
	if err != nil {
		return nil, fmt.Errorf("insert into %s: %w", t.name, err)
	}
	return &OpenInsert[T]{t: t, batch: batch}, nil
}

// OpenInsert is an INSERT in progress (Table.Open). Its methods are not safe for concurrent
// use. After an error of Write or Send the INSERT is aborted and the OpenInsert is done; the
// rows it sent may be partly stored.
type OpenInsert[T any] struct {
	t       *Table[T]
	batch   driver.Batch
	rows    int
	pending int // rows of the block being built, not flushed yet
	bytes   int64
	done    bool
}

// Write sends rows in blocks of BlockRows rows, each built column by column and flushed to
// the server once full. A block is cut only at BlockRows rows, never where a Write ends: the
// rows of one INSERT make the same blocks however they are split over Writes (an INSERT with
// an insert_deduplication_token is dropped as a duplicate only when its blocks number as
// before). When Write returns, the INSERT holds fewer than BlockRows of the rows written, in
// the client library's column buffers (copied: rows can be reused); Flush or Send sends them.
func (in *OpenInsert[T]) Write(rows []T) error {
	if in.done {
		return fmt.Errorf("insert into %s: write after the insert ended", in.t.name)
	}
	block := in.t.BlockRows
	if block <= 0 {
		block = DefaultBlockRows
	}
	stride := unsafe.Sizeof(*new(T))
	for lo := 0; lo < len(rows); {
		n := min(block-in.pending, len(rows)-lo)
		base := unsafe.Pointer(&rows[lo])
		for i, c := range in.t.columns {
			if err := c.append(in.batch.Column(i), base, stride, n); err != nil {
				in.Abort()
				return fmt.Errorf("insert into %s: column %s: %w: %w", in.t.name, c.name, ErrAppend, err)
			}
		}
		in.bytes += in.t.size(base, stride, n)
		in.rows += n
		in.pending += n
		lo += n
		if in.pending == block {
			if err := in.Flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// Flush sends the rows of the block being built (fewer than BlockRows) as a block of their
// own: once it returns nil the server has received every row written. It does nothing when
// there are none. After an error the INSERT is aborted.
func (in *OpenInsert[T]) Flush() error {
	if in.done {
		return fmt.Errorf("insert into %s: flush after the insert ended", in.t.name)
	}
	if in.pending == 0 {
		return nil
	}
	if err := in.batch.Flush(); err != nil {
		in.Abort()
		return fmt.Errorf("insert into %s: %w", in.t.name, err)
	}
	in.pending = 0
	return nil
}

// Rows is how many rows Write has taken.
func (in *OpenInsert[T]) Rows() int { return in.rows }

// Bytes bounds from above the bytes ClickHouse counts of the rows written while it squashes
// an INSERT's blocks (min_insert_block_size_bytes): per row, each fixed-width column's Go
// size (at least its ClickHouse width), a String's bytes plus 9 (its offset and terminator),
// an Array's 8 plus its elements', a Nullable's 1 more.
func (in *OpenInsert[T]) Bytes() int64 { return in.bytes }

// Send ends the INSERT: once it returns nil, ClickHouse holds every row written.
func (in *OpenInsert[T]) Send() error {
	if in.done {
		return fmt.Errorf("insert into %s: send after the insert ended", in.t.name)
	}
	in.done = true
	if err := in.batch.Send(); err != nil {
		return fmt.Errorf("insert into %s: %w", in.t.name, err)
	}
	return nil
}

// Abort ends the INSERT without completing it, releasing its connection; the blocks sent
// may be partly stored. It does nothing after the INSERT ended.
func (in *OpenInsert[T]) Abort() {
	if !in.done {
		in.done = true
		_ = in.batch.Abort()
	}
}

// appenders build, for a field type and the field's offset in T, the function that copies
// the field of n rows into a typed slice and appends it to a batch column.
var appenders = map[reflect.Type]func(off uintptr) func(driver.BatchColumn, unsafe.Pointer, uintptr, int) error{}

func register[F any]() {
	appenders[reflect.TypeFor[F]()] = fieldAppender[F]
}

func registerSlice[E any]() {
	appenders[reflect.TypeFor[[]E]()] = sliceAppender[E]
}

func init() {
	register[string]()
	register[uint8]()
	register[uint16]()
	register[uint32]()
	register[uint64]()
	register[int8]()
	register[int16]()
	register[int32]()
	register[int64]()
	register[float32]()
	register[float64]()
	register[time.Time]()
	register[uuid.UUID]()
	registerSlice[string]()
	registerSlice[uint64]()
	registerSlice[time.Time]()
	register[*string]()
	register[*uint8]()
	register[*uint32]()
	register[*uint64]()
	register[*int32]()
	register[*int64]()
	register[*float64]()
	register[*time.Time]()
	appenders[reflect.TypeFor[bool]()] = boolAppender
}

// appendChunk is how many values of a column are copied out of the rows and handed to the
// client library at once: a block's column is appended in chunks, through one small scratch
// slice, rather than through a typed slice of the whole block allocated for each column.
const appendChunk = 1024

// fieldAppender reads the F at offset off of each of n rows laid out stride bytes apart from
// base. The rows are a live Go slice the caller holds, so the pointers stay valid. The values
// go to the column appendChunk at a time through pooled scratch (the client library copies
// them into its own column), cleared after use so that it holds no pointer into rows sent.
func fieldAppender[F any](off uintptr) func(driver.BatchColumn, unsafe.Pointer, uintptr, int) error {
	var scratch sync.Pool // of *[appendChunk]F
	return func(col driver.BatchColumn, base unsafe.Pointer, stride uintptr, n int) error {
		buf, _ := scratch.Get().(*[appendChunk]F)
		if buf == nil {
			buf = new([appendChunk]F)
		}
		defer scratch.Put(buf)
		for lo := 0; lo < n; lo += appendChunk {
			vals := buf[:min(appendChunk, n-lo)]
			for i := range vals {
				vals[i] = *(*F)(unsafe.Add(base, uintptr(lo+i)*stride+off))
			}
			err := col.Append(vals)
			clear(vals)
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// sliceAppender appends the []E at offset off of each row to an Array column one row at a
// time: the client library appends a typed row directly, where a slice of rows would be
// walked by reflection.
func sliceAppender[E any](off uintptr) func(driver.BatchColumn, unsafe.Pointer, uintptr, int) error {
	return func(col driver.BatchColumn, base unsafe.Pointer, stride uintptr, n int) error {
		for i := range n {
			if err := col.AppendRow(*(*[]E)(unsafe.Add(base, uintptr(i)*stride+off))); err != nil {
				return err
			}
		}
		return nil
	}
}

func boolAppender(off uintptr) func(driver.BatchColumn, unsafe.Pointer, uintptr, int) error {
	var scratch sync.Pool // of *[appendChunk]uint8
	return func(col driver.BatchColumn, base unsafe.Pointer, stride uintptr, n int) error {
		buf, _ := scratch.Get().(*[appendChunk]uint8)
		if buf == nil {
			buf = new([appendChunk]uint8)
		}
		defer scratch.Put(buf)
		for lo := 0; lo < n; lo += appendChunk {
			vals := buf[:min(appendChunk, n-lo)]
			for i := range vals {
				vals[i] = 0
				if *(*bool)(unsafe.Add(base, uintptr(lo+i)*stride+off)) {
					vals[i] = 1
				}
			}
			if err := col.Append(vals); err != nil {
				return err
			}
		}
		return nil
	}
}
