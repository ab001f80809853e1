package chwrite_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpulse/mcpulse/consumers/chwrite"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// every is a row with a field of every supported type.
type every struct {
	S    string      `ch:"s"`
	B    bool        `ch:"b"`
	U8   uint8       `ch:"u8"`
	U16  uint16      `ch:"u16"`
	U32  uint32      `ch:"u32"`
	U64  uint64      `ch:"u64"`
	I8   int8        `ch:"i8"`
	I16  int16       `ch:"i16"`
	I32  int32       `ch:"i32"`
	I64  int64       `ch:"i64"`
	F32  float32     `ch:"f32"`
	F64  float64     `ch:"f64"`
	T    time.Time   `ch:"t"`
	ID   uuid.UUID   `ch:"id"`
	SS   []string    `ch:"ss"`
	UU   []uint64    `ch:"uu"`
	TT   []time.Time `ch:"tt"`
	PS   *string     `ch:"ps"`
	PU8  *uint8      `ch:"pu8"`
	PU32 *uint32     `ch:"pu32"`
	PU64 *uint64     `ch:"pu64"`
	PI32 *int32      `ch:"pi32"`
	PI64 *int64      `ch:"pi64"`
	PF64 *float64    `ch:"pf64"`
	PT   *time.Time  `ch:"pt"`
	Skip string      // no tag: not a column
}

const everyDDL = `CREATE TABLE %s (s String, b UInt8, u8 UInt8, u16 UInt16, u32 UInt32, u64 UInt64,
i8 Int8, i16 Int16, i32 Int32, i64 Int64, f32 Float32, f64 Float64, t DateTime('UTC'), id UUID,
ss Array(String), uu Array(UInt64), tt Array(DateTime('UTC')), ps Nullable(String), pu8 Nullable(UInt8), pu32 Nullable(UInt32),
pu64 Nullable(UInt64), pi32 Nullable(Int32), pi64 Nullable(Int64), pf64 Nullable(Float64),
pt Nullable(DateTime('UTC'))) ENGINE = MergeTree ORDER BY i64`

func row(i int) every {
	r := every{
		S: fmt.Sprintf("row-%d-\t'\"\\ü", i), B: i%2 == 0, U8: uint8(i), U16: uint16(i), U32: uint32(i), U64: uint64(i) << 20,
		I8: int8(i), I16: int16(-i), I32: int32(-i), I64: int64(i), F32: float32(i) / 4, F64: float64(i) / 8,
		T:  time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second),
		ID: uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint(i))), SS: []string{}, UU: []uint64{uint64(i), 7}, TT: []time.Time{},
	}
	if i%3 == 0 {
		s, u8, u32, u64, i32, i64, f := fmt.Sprint(i), uint8(i), uint32(i), uint64(i), int32(i), int64(i), float64(i)+0.5
		at := r.T.Add(time.Hour)
		r.PS, r.PU8, r.PU32, r.PU64, r.PI32, r.PI64, r.PF64, r.PT = &s, &u8, &u32, &u64, &i32, &i64, &f, &at
		r.SS = []string{"a", fmt.Sprint(i)}
		r.TT = []time.Time{r.T, r.T.Add(time.Minute)}
	}
	return r
}

// TestInsertStreamsEveryTypeExactly inserts rows of every supported type in several blocks, in
// two inserts, and reads them back: every value arrives in its column, in its row.
func TestInsertStreamsEveryTypeExactly(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	ch := env.ClickHouse
	if err := ch.Exec(ctx, fmt.Sprintf(everyDDL, "default.chwrite_every")); err != nil {
		t.Fatal(err)
	}
	tbl, err := chwrite.NewTable[every]("default.chwrite_every")
	if err != nil {
		t.Fatal(err)
	}
	tbl.BlockRows = 1500 // two chunks of a column's values per full block
	const n = 4321       // 2,500 rows in two blocks, then 1,821 in two; each insert's last one short
	rows := make([]every, n)
	for i := range rows {
		rows[i] = row(i)
	}
	// Two inserts of several blocks each: the second reuses the first's scratch slices.
	for _, part := range [][]every{rows[:2500], rows[2500:]} {
		if err := tbl.Insert(ctx, ch, part); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ch.Query(ctx, `SELECT s, b, u8, u16, u32, u64, i8, i16, i32, i64, f32, f64, t, id, ss, uu, tt,
ps, pu8, pu32, pu64, pi32, pi64, pf64, pt FROM default.chwrite_every ORDER BY i64`)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	i := 0
	for got.Next() {
		var r every
		var b uint8
		if err := got.Scan(&r.S, &b, &r.U8, &r.U16, &r.U32, &r.U64, &r.I8, &r.I16, &r.I32, &r.I64, &r.F32, &r.F64, &r.T, &r.ID,
			&r.SS, &r.UU, &r.TT, &r.PS, &r.PU8, &r.PU32, &r.PU64, &r.PI32, &r.PI64, &r.PF64, &r.PT); err != nil {
			t.Fatal(err)
		}
		r.B = b == 1
		if want, have := fmt.Sprintf("%+v", deref(row(i))), fmt.Sprintf("%+v", deref(r)); want != have {
			t.Fatalf("row %d:\n got %s\nwant %s", i, have, want)
		}
		i++
	}
	if err := got.Err(); err != nil {
		t.Fatal(err)
	}
	if i != n {
		t.Fatalf("read %d rows, inserted %d", i, n)
	}
}

// deref makes the pointer fields comparable by value in %+v.
func deref(r every) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v %v %v %v %v %v %v %v %v %v %v %v %v %v %v %v", r.S, r.B, r.U8, r.U16, r.U32, r.U64, r.I8, r.I16, r.I32, r.I64, r.F32, r.F64, r.T.UTC(), r.ID, r.SS, r.UU)
	for _, t := range r.TT {
		fmt.Fprintf(&b, " tt=%v", t.UTC())
	}
	for _, p := range []any{r.PS, r.PU8, r.PU32, r.PU64, r.PI32, r.PI64, r.PF64} {
		fmt.Fprintf(&b, " %v", ptr(p))
	}
	if r.PT != nil {
		fmt.Fprintf(&b, " %v", r.PT.UTC())
	} else {
		b.WriteString(" nil")
	}
	return b.String()
}

func ptr(p any) string {
	switch v := p.(type) {
	case *string:
		if v != nil {
			return *v
		}
	case *uint8:
		if v != nil {
			return fmt.Sprint(*v)
		}
	case *uint32:
		if v != nil {
			return fmt.Sprint(*v)
		}
	case *uint64:
		if v != nil {
			return fmt.Sprint(*v)
		}
	case *int32:
		if v != nil {
			return fmt.Sprint(*v)
		}
	case *int64:
		if v != nil {
			return fmt.Sprint(*v)
		}
	case *float64:
		if v != nil {
			return fmt.Sprint(*v)
		}
	}
	return "nil"
}

// TestInsertFailureLeavesTheConnectionUsable sends a column the table's type refuses: the
// insert fails naming the table and column, and the next insert on the same pool works.
func TestInsertFailureLeavesTheConnectionUsable(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	ch := env.ClickHouse
	if err := ch.Exec(ctx, "CREATE TABLE default.chwrite_bad (a UInt64, b String) ENGINE = MergeTree ORDER BY a"); err != nil {
		t.Fatal(err)
	}
	type wrong struct {
		A time.Time `ch:"a"`
		B string    `ch:"b"`
	}
	type right struct {
		A uint64 `ch:"a"`
		B string `ch:"b"`
	}
	bad, err := chwrite.NewTable[wrong]("default.chwrite_bad")
	if err != nil {
		t.Fatal(err)
	}
	err = bad.Insert(ctx, ch, []wrong{{A: time.Now(), B: "x"}})
	if err == nil || !strings.Contains(err.Error(), "chwrite_bad") || !strings.Contains(err.Error(), "column a") {
		t.Fatalf("inserting a time into UInt64: %v, want an error naming the table and column", err)
	}
	good, err := chwrite.NewTable[right]("default.chwrite_bad")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // more than one pooled connection's worth
		if err := good.Insert(ctx, ch, []right{{1, "x"}, {2, "y"}}); err != nil {
			t.Fatal(err)
		}
	}
	var n uint64
	if err := ch.QueryRow(ctx, "SELECT count() FROM default.chwrite_bad").Scan(&n); err != nil || n != 6 {
		t.Fatalf("count = %d (%v), want 6", n, err)
	}
}

func TestNewTableRefusesWhatItCannotMap(t *testing.T) {
	type unsupported struct {
		M map[string]string `ch:"m"`
	}
	if _, err := chwrite.NewTable[unsupported]("t"); err == nil || !strings.Contains(err.Error(), "unsupported type") {
		t.Errorf("map field: %v", err)
	}
	type untagged struct{ A string }
	if _, err := chwrite.NewTable[untagged]("t"); err == nil {
		t.Error("a struct without ch tags was accepted")
	}
	if _, err := chwrite.NewTable[int]("t"); err == nil {
		t.Error("a non-struct was accepted")
	}
	tbl, err := chwrite.NewTable[every]("db.t")
	if err != nil {
		t.Fatal(err)
	}
	if cols := tbl.Columns(); len(cols) != 25 || cols[0] != "s" || cols[24] != "pt" {
		t.Errorf("Columns() = %v", cols)
	}
}

// An open INSERT takes rows over several writes and stores them as one part when sent; an
// aborted one takes no more.
func TestOpenInsertStoresItsWritesAsOnePart(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	ch := env.ClickHouse
	if err := ch.Exec(ctx, fmt.Sprintf(everyDDL, "default.chwrite_open")); err != nil {
		t.Fatal(err)
	}
	tbl, err := chwrite.NewTable[every]("default.chwrite_open")
	if err != nil {
		t.Fatal(err)
	}
	tbl.BlockRows = 700
	rows := make([]every, 3000)
	for i := range rows {
		rows[i] = row(i)
	}
	count := func(q string) uint64 {
		t.Helper()
		var n uint64
		if err := ch.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// An aborted insert: the server may still store the blocks it received (18.16 does, once
	// it sees the connection go), so only its end is checked, on another table.
	if err := ch.Exec(ctx, fmt.Sprintf(everyDDL, "default.chwrite_aborted")); err != nil {
		t.Fatal(err)
	}
	other, err := chwrite.NewTable[every]("default.chwrite_aborted")
	if err != nil {
		t.Fatal(err)
	}
	aborted, err := other.Open(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	if err := aborted.Write(rows[:1000]); err != nil {
		t.Fatal(err)
	}
	aborted.Abort()
	if err := aborted.Write(rows[:1]); err == nil {
		t.Error("a write after Abort succeeded")
	}
	if err := aborted.Send(); err == nil {
		t.Error("a Send after Abort succeeded")
	}

	in, err := tbl.Open(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range [][]every{rows[:1000], rows[1000:1001], rows[1001:]} { // blocks of 700, the last of 200
		if err := in.Write(part); err != nil {
			t.Fatal(err)
		}
	}
	if in.Rows() != len(rows) {
		t.Errorf("Rows() = %d, want %d", in.Rows(), len(rows))
	}
	if err := in.Send(); err != nil {
		t.Fatal(err)
	}
	if err := in.Send(); err == nil {
		t.Error("a second Send succeeded")
	}
	if n := count("SELECT count() FROM default.chwrite_open"); n != uint64(len(rows)) {
		t.Fatalf("stored %d rows, want %d", n, len(rows))
	}
	if n := count("SELECT uniqExact(i64) FROM default.chwrite_open"); n != uint64(len(rows)) {
		t.Fatalf("stored %d distinct rows, want %d", n, len(rows))
	}
	if n := count("SELECT count() FROM system.parts WHERE database = 'default' AND table = 'chwrite_open' AND level = 0"); n != 1 {
		t.Errorf("the insert wrote %d parts, want 1 (its blocks squashed)", n)
	}
}
