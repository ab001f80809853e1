package bench

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// CPU is the CPU time (user + system, seconds) each process spent during one phase: the
// evidence of which stage a run is bound by when the machine's cores are shared.
type CPU struct {
	// Consumer is the mcpulse consumer child (0 when it ran in process: see Bench).
	Consumer float64 `json:"consumer"`
	// ClickHouse is the clickhouse-server child.
	ClickHouse float64 `json:"clickhouse"`
	// ClickHouseMerges is the part of ClickHouse spent by its background merge pool (threads
	// named "BackgrProcPool" on 18.16, "MergeMutate" on current releases): merging parts the
	// inserts left. The rest of ClickHouse is queries: inserts, materialized views, polls.
	ClickHouseMerges float64 `json:"clickhouse_merges"`
	// Redis is the redis-server child.
	Redis float64 `json:"redis"`
	// Bench is this process: the in-process Kafka (kfake), the publisher or the bare reader,
	// and the consumer when it runs in process.
	Bench float64 `json:"bench"`
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times (100 on every Linux platform Go
// supports).
const clockTicks = 100

// cpuMeter reads the CPU times of this process and its clickhouse-server and redis-server
// children (found through /proc; 0 where unreadable, e.g. external services or not Linux).
type cpuMeter struct{ clickhouse, redis int }

func newCPUMeter() cpuMeter {
	m := cpuMeter{}
	self := os.Getpid()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		comm, ppid, _, ok := readStat(f)
		if !ok || ppid != self {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		switch {
		case strings.HasPrefix(comm, "clickhouse"):
			m.clickhouse = pid
		case strings.HasPrefix(comm, "redis"):
			m.redis = pid
		}
	}
	return m
}

// read returns the current CPU seconds (consumer left 0: a child's comes from its rusage).
func (m cpuMeter) read() CPU {
	var c CPU
	c.ClickHouse = pidCPU(m.clickhouse)
	c.ClickHouseMerges = threadsCPU(m.clickhouse, mergeThreadNames)
	c.Redis = pidCPU(m.redis)
	c.Bench = selfCPU()
	return c
}

func pidCPU(pid int) float64 {
	if pid == 0 {
		return 0
	}
	_, _, ticks, ok := readStat("/proc/" + strconv.Itoa(pid) + "/stat")
	if !ok {
		return 0
	}
	return float64(ticks) / clockTicks
}

// mergeThreadNames are the name prefixes of clickhouse-server's background merge threads.
var mergeThreadNames = []string{"BackgrProcPool", "MergeMutate"}

// threadsCPU is the CPU seconds of the threads of pid whose name starts with one of prefixes.
// The merge pool's threads live as long as the server, so the difference of two readings is
// what they spent in between.
func threadsCPU(pid int, prefixes []string) float64 {
	if pid == 0 {
		return 0
	}
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/[0-9]*/stat")
	var ticks int64
	for _, f := range tasks {
		comm, _, t, ok := readStat(f)
		if ok && slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(comm, p) }) {
			ticks += t
		}
	}
	return float64(ticks) / clockTicks
}

// readStat parses /proc/PID/stat: the command name, the parent pid and utime+stime in ticks.
func readStat(path string) (comm string, ppid int, ticks int64, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", 0, 0, false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, 0, false
	}
	comm = s[open+1 : end]
	f := strings.Fields(s[end+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return "", 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return comm, ppid, ut + st, true
}

func (c CPU) sub(o CPU) CPU {
	return CPU{Consumer: c.Consumer - o.Consumer, ClickHouse: c.ClickHouse - o.ClickHouse, ClickHouseMerges: c.ClickHouseMerges - o.ClickHouseMerges,
		Redis: c.Redis - o.Redis, Bench: c.Bench - o.Bench}
}

// Total is the sum over the processes (ClickHouseMerges is part of ClickHouse).
func (c CPU) Total() float64 { return c.Consumer + c.ClickHouse + c.Redis + c.Bench }
