package bench

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// rssPoll is how often the consumer child's VmHWM is read.
const rssPoll = 100 * time.Millisecond

// watchPeakRSS reads the kernel's high-water mark of the process's resident set (VmHWM in
// /proc/PID/status, bytes) every rssPoll until the process is gone or ctx ends, and keeps the
// largest value seen. VmHWM never decreases, so the last read before exit is the peak (the
// consumer idles for seconds before it exits). getrusage's ru_maxrss of a child is not used:
// Go starts children with vfork, and Linux then counts the parent's resident set in the child's
// ru_maxrss. 0 where /proc is missing.
func watchPeakRSS(ctx context.Context, pid int) *atomic.Int64 {
	var peak atomic.Int64
	path := "/proc/" + strconv.Itoa(pid) + "/status"
	read := func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		if v := statusKiB(b, "VmHWM:"); v*1024 > peak.Load() {
			peak.Store(v * 1024)
		}
		return true
	}
	read()
	go func() {
		t := time.NewTicker(rssPoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if !read() {
					return
				}
			}
		}
	}()
	return &peak
}

// statusKiB returns a "Name:   123 kB" field of /proc/PID/status in KiB (0 when absent).
func statusKiB(status []byte, name string) int64 {
	i := bytes.Index(status, []byte(name))
	if i < 0 {
		return 0
	}
	line := status[i+len(name):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	f := bytes.Fields(line)
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseInt(string(f[0]), 10, 64)
	return v
}
