package chwrite_test

import (
	"context"
	"slices"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/consumers/chwrite"
)

// blockConn is a connection whose batches record the rows of each block sent.
type blockConn struct {
	driver.Conn
	blocks []int // rows per block, Send's last
}

func (c *blockConn) PrepareBatch(context.Context, string, ...driver.PrepareBatchOption) (driver.Batch, error) {
	return &blockBatch{conn: c}, nil
}

type blockBatch struct {
	driver.Batch
	conn *blockConn
	rows int // of the block being built (column 0's values)
}

type countColumn struct{ b *blockBatch }

func (c countColumn) Append(v any) error {
	c.b.rows += len(v.([]string))
	return nil
}

func (c countColumn) AppendRow(any) error { return nil }

func (b *blockBatch) Column(i int) driver.BatchColumn {
	if i == 0 {
		return countColumn{b}
	}
	return discardColumn{}
}

type discardColumn struct{}

func (discardColumn) Append(any) error    { return nil }
func (discardColumn) AppendRow(any) error { return nil }

func (b *blockBatch) Flush() error {
	if b.rows > 0 {
		b.conn.blocks = append(b.conn.blocks, b.rows)
		b.rows = 0
	}
	return nil
}

func (b *blockBatch) Send() error  { return b.Flush() }
func (b *blockBatch) Abort() error { return nil }

type named struct {
	Name string   `ch:"name"`
	Tags []string `ch:"tags"`
	N    *uint32  `ch:"n"`
}

// An INSERT's rows make blocks of BlockRows rows whatever Writes they arrive in: the same
// rows written in other pieces make the same number of blocks, cut at the same rows. Bytes
// bounds what ClickHouse counts of them.
func TestAnInsertsBlocksAreCutAtBlockRowsOnly(t *testing.T) {
	tbl, err := chwrite.NewTable[named]("db.named")
	if err != nil {
		t.Fatal(err)
	}
	tbl.BlockRows = 100
	rows := make([]named, 350)
	for i := range rows {
		rows[i] = named{Name: "abc", Tags: []string{"x", "yz"}}
	}
	for _, pieces := range [][]int{{350}, {1, 99, 100, 150}, {30, 30, 30, 30, 30, 200}, {349, 1}} {
		conn := &blockConn{}
		in, err := tbl.Open(context.Background(), conn)
		if err != nil {
			t.Fatal(err)
		}
		lo := 0
		for _, n := range pieces {
			if err := in.Write(rows[lo : lo+n]); err != nil {
				t.Fatal(err)
			}
			lo += n
		}
		if err := in.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := in.Send(); err != nil {
			t.Fatal(err)
		}
		if want := []int{100, 100, 100, 50}; !slices.Equal(conn.blocks, want) {
			t.Errorf("written in pieces %v: blocks %v, want %v", pieces, conn.blocks, want)
		}
		// name: 3+9; tags: 8 + (1+9) + (2+9); n: Nullable(UInt32), 1+4.
		if want := int64(350 * (12 + 29 + 5)); in.Bytes() != want {
			t.Errorf("written in pieces %v: Bytes() = %d, want %d", pieces, in.Bytes(), want)
		}
	}
}
