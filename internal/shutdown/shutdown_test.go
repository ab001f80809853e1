package shutdown

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestWithinReturnsTheErrorOrGivesUpAfterGrace(t *testing.T) {
	want := errors.New("closed badly")
	if err := Within(time.Second, "x", func() error { return want }); err != want {
		t.Errorf("Within = %v, want close's error", err)
	}
	hang := make(chan struct{})
	defer close(hang)
	began := time.Now()
	err := Within(50*time.Millisecond, "the ClickHouse client", func() error { <-hang; return nil })
	if err == nil || !strings.Contains(err.Error(), "the ClickHouse client did not finish within 50ms") {
		t.Errorf("Within of a hung close = %v", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("Within waited %s", took)
	}
}

func TestWatchExitsOnlyAfterTheSignalAndTheDeadline(t *testing.T) {
	stopped := make(chan struct{})
	var mu sync.Mutex
	var out bytes.Buffer
	released, exited := make(chan struct{}), make(chan int, 1)
	Watch(stopped, func() { close(released) }, 20*time.Millisecond, &syncWriter{mu: &mu, w: &out}, func(code int) { exited <- code })
	select {
	case <-exited:
		t.Fatal("exited before the signal")
	case <-time.After(100 * time.Millisecond):
	}
	close(stopped)
	<-released
	if code := <-exited; code != ExitForced {
		t.Errorf("exit code %d, want %d", code, ExitForced)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(out.String(), "still running 20ms after the stop signal") {
		t.Errorf("no line says why: %q", out.String())
	}
}

type syncWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
