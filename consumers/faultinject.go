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
// batch stored in part and never committed. Production builds leave this file out.

// FaultExitStatus is the exit status of a process the fault hook stopped.
const FaultExitStatus = 86

func init() {
	n, err := strconv.Atoi(os.Getenv("MCPULSE_FAULT_EXIT_AFTER_INSERTS"))
	if err != nil || n <= 0 {
		return
	}
	left := new(atomic.Int64)
	left.Store(int64(n))
	wrapClickHouse = func(conn driver.Conn) driver.Conn { return &exitAfterInserts{Conn: conn, left: left} }
}

type exitAfterInserts struct {
	driver.Conn
	left *atomic.Int64
}

func (c *exitAfterInserts) PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	b, err := c.Conn.PrepareBatch(ctx, query, opts...)
	if err != nil {
		return nil, err
	}
	return &exitAfterSend{Batch: b, left: c.left}, nil
}

type exitAfterSend struct {
	driver.Batch
	left *atomic.Int64
}

func (b *exitAfterSend) Send() error {
	err := b.Batch.Send()
	if err == nil && b.left.Add(-1) == 0 {
		os.Exit(FaultExitStatus)
	}
	return err
}
