package chwrite_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/mcpulse/mcpulse/consumers/chwrite"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// cpuTime is the CPU time this process has used (user and system, every thread: the garbage
// collector's work included, the ClickHouse server's not), in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkInsert measures Insert per row (ns/op, cpu-ns/op and allocations are per row) of
// rows of every supported type, 20,000 rows per insert in blocks of DefaultBlockRows, into
// a MergeTree table of a real ClickHouse server. cpu-ns/op is this process's CPU: encoding
// and sending, not the server's work.
func BenchmarkInsert(b *testing.B) {
	env := testenv.New(b, testenv.Options{})
	ctx := context.Background()
	ch := env.ClickHouse
	if err := ch.Exec(ctx, fmt.Sprintf(everyDDL, "default.chwrite_bench")); err != nil {
		b.Fatal(err)
	}
	tbl, err := chwrite.NewTable[every]("default.chwrite_bench")
	if err != nil {
		b.Fatal(err)
	}
	rows := make([]every, 20000)
	for i := range rows {
		rows[i] = row(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime()
	for n := 0; n < b.N; n += len(rows) {
		if err := tbl.Insert(ctx, ch, rows[:min(len(rows), b.N-n)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}
