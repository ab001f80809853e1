// Package shutdown bounds how long a command takes to exit once it is told to stop (SIGTERM or
// SIGINT): the work is cancelled through its context, each wait on a Close is bounded, and a
// process that still runs past Deadline exits anyway. Everything mcpulse stores tolerates a
// stop at any point (offsets are committed only after the stores hold a batch, DESIGN.md §5),
// so an exit that cuts a wait short loses nothing: the next owner of the partitions reads the
// uncommitted messages again.
package shutdown

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"
)

const (
	// Grace bounds every wait on a Close after the work stopped: leaving the consumer group,
	// flushing a Kafka writer or the PostHog queue, closing the store clients. A store that
	// does not answer (ClickHouse hung) is left behind after it.
	Grace = 5 * time.Second
	// Deadline bounds the time from the stop signal to the process's exit: past it Watch exits
	// with ExitForced, whatever still runs (CPU-bound work that does not watch its context).
	Deadline = 10 * time.Second
	// ExitForced is the exit status of a process Watch stopped.
	ExitForced = 2
)

// Within runs close on its own goroutine and waits for it at most grace. It returns close's
// error, or an error naming what when grace passed first (close keeps running, and whatever it
// would have released is released by the process's exit).
func Within(grace time.Duration, what string, close func() error) error {
	done := make(chan error, 1)
	go func() { done <- close() }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("%s did not finish within %s; left behind", what, grace)
	}
}

// allowed is the longest deadline a command asked for (Allow), in nanoseconds.
var allowed atomic.Int64

// Allow raises the bound Watch applies to at least d: a command whose operator chose a longer
// drain (the gateway's --shutdown-timeout) calls it with that drain plus Grace.
func Allow(d time.Duration) {
	for {
		cur := allowed.Load()
		if int64(d) <= cur || allowed.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

// Watch waits for stopped to be closed (the stop signal arrived), then calls release (which
// restores the signals' default action, so a second SIGTERM or Ctrl-C kills the process at
// once) and, if the process still runs deadline (or what Allow raised it to) later, writes a
// line to w and calls exit with ExitForced. It returns at once; its goroutine ends with the
// process. Tests pass their own exit.
func Watch(stopped <-chan struct{}, release func(), deadline time.Duration, w io.Writer, exit func(int)) {
	go func() {
		<-stopped
		release()
		d := max(deadline, time.Duration(allowed.Load()))
		time.Sleep(d)
		fmt.Fprintf(w, "mcpulse: still running %s after the stop signal; exiting\n", d)
		exit(ExitForced)
	}()
}

// Exit is os.Exit, the exit Watch is given outside tests.
func Exit(code int) { os.Exit(code) }
