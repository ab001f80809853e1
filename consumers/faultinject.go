//go:build faultinject

package consumers

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// The fault-injection build (go build -tags faultinject; testkit/faults uses it): with
// MCPULSE_FAULT_EXIT_AFTER_INSERTS=N in its environment the consumer process exits with status
// FaultExitStatus right after its N-th successful ClickHouse batch insert, without flushing,
// logging or committing anything: a crash between two inserts of one batch, which leaves the
// batch stored in part and never committed. With MCPULSE_FAULT_EXIT_AFTER_FLUSHES=N it exits
// right after the N-th block it sent into an INSERT still open: a crash while a streamed
// batch's INSERTs are open. Production builds leave this file out.

// FaultExitStatus is the exit status of a process the fault hook stopped.
const FaultExitStatus = 86

func init() {
	sends, flushes := countdown("MCPULSE_FAULT_EXIT_AFTER_INSERTS"), countdown("MCPULSE_FAULT_EXIT_AFTER_FLUSHES")
	if sends == nil && flushes == nil {
		return
	}
	wrapClickHouse = func(conn driver.Conn) driver.Conn { return &exitAfter{Conn: conn, sends: sends, flushes: flushes} }
}

// countdown is the count the environment variable name sets, or nil for none.
func countdown(name string) *atomic.Int64 {
	n, err := strconv.Atoi(os.Getenv(name))
	if err != nil || n <= 0 {
		return nil
	}
	left := new(atomic.Int64)
	left.Store(int64(n))
	return left
}

type exitAfter struct {
	driver.Conn
	sends, flushes *atomic.Int64 // nil: not counted
}

func (c *exitAfter) PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	b, err := c.Conn.PrepareBatch(ctx, query, opts...)
	if err != nil {
		return nil, err
	}
	return &exitAfterBatch{Batch: b, conn: c}, nil
}

type exitAfterBatch struct {
	driver.Batch
	conn *exitAfter
}

func (b *exitAfterBatch) Send() error {
	err := b.Batch.Send()
	if err == nil && b.conn.sends != nil && b.conn.sends.Add(-1) == 0 {
		os.Exit(FaultExitStatus)
	}
	return err
}

func (b *exitAfterBatch) Flush() error {
	rows := b.Batch.Rows()
	err := b.Batch.Flush()
	if err == nil && rows > 0 && b.conn.flushes != nil && b.conn.flushes.Add(-1) == 0 {
		os.Exit(FaultExitStatus)
	}
	return err
}
