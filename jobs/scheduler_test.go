package jobs

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A job that panics is logged and the scheduler keeps running it; a job still running when it
// is due again is skipped, never overlapped.
func TestJobsSurvivePanicsAndNeverOverlap(t *testing.T) {
	var logs syncBuffer
	c := newCron(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})), time.UTC)
	var panics, running, maxRunning, slowRuns atomic.Int32
	if _, err := c.AddFunc("@every 1s", func() {
		panics.Add(1)
		panic("BUG: a job broke")
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddFunc("@every 1s", func() {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := maxRunning.Load()
			if n <= m || maxRunning.CompareAndSwap(m, n) {
				break
			}
		}
		slowRuns.Add(1)
		time.Sleep(2500 * time.Millisecond) // longer than the schedule
	}); err != nil {
		t.Fatal(err)
	}
	c.Start()
	deadline := time.Now().Add(20 * time.Second)
	for (panics.Load() < 2 || !strings.Contains(logs.String(), "skipped a run")) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	<-c.Stop().Done()
	if panics.Load() < 2 {
		t.Errorf("the panicking job ran %d times, want it to keep running after a panic", panics.Load())
	}
	if !strings.Contains(logs.String(), "panic") {
		t.Errorf("the panic was not logged: %s", logs.String())
	}
	if !strings.Contains(logs.String(), "skipped a run") {
		t.Errorf("no skipped run was logged: %s", logs.String())
	}
	if maxRunning.Load() != 1 {
		t.Errorf("%d runs of the slow job overlapped, want 1 at a time", maxRunning.Load())
	}
}

func TestSchedulerConfigListsEveryProblem(t *testing.T) {
	cfg := SchedulerConfig{ReconcileSchedule: "every now and then", ContactAuditSchedule: "@hourly", AlertSchedule: "@every minute"}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"no Redis client", "no ClickHouse connection", `reconcile schedule "every now and then"`, `alerts schedule "@every minute"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
