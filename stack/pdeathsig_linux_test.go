//go:build linux

package stack

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

// TestChildrenDieWithTheParent runs a helper process that starts a stack, kills it with
// SIGKILL (no Close, no cleanup), and checks the kernel took its servers down too.
func TestChildrenDieWithTheParent(t *testing.T) {
	if os.Getenv("DEVSTACK_HELPER") != "" {
		t.Skip("helper process only runs TestHelperProcessHoldsAStack")
	}
	killHelperAndCheckItsChildren(t, "1", 2)
}

// The same for a stack with a ClickHouse cluster: redis, ZooKeeper and two clickhouse-servers.
func TestClusterChildrenDieWithTheParent(t *testing.T) {
	if os.Getenv("DEVSTACK_HELPER") != "" {
		t.Skip("helper process only runs TestHelperProcessHoldsAStack")
	}
	_, _, err := findZooKeeper()
	SkipOrFail(t, err)
	killHelperAndCheckItsChildren(t, "cluster", 4)
}

// killHelperAndCheckItsChildren runs the helper in mode (DEVSTACK_HELPER), reads the want
// pids of its servers, kills it and checks they die.
func killHelperAndCheckItsChildren(t *testing.T, mode string, want int) {
	// Become the orphans' reaper, so the killed helper's servers come back to this process
	// (rather than to init) and can be reaped here instead of lingering as zombies.
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		t.Fatalf("prctl(PR_SET_CHILD_SUBREAPER): %v", errno)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcessHoldsAStack$", "-test.v")
	cmd.Env = append(os.Environ(), "DEVSTACK_HELPER="+mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "PIDS "); ok {
			f := strings.Fields(rest)
			for _, p := range f[:len(f)-1] {
				pid, _ := strconv.Atoi(p)
				pids = append(pids, pid)
			}
			dir := f[len(f)-1]
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			break
		}
	}
	if len(pids) != want {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper did not report its server pids")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("server pid %d outlived its killed parent", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, 0, nil)
	}
}

// TestHelperProcessHoldsAStack is the helper for TestChildrenDieWithTheParent.
func TestHelperProcessHoldsAStack(t *testing.T) {
	mode := os.Getenv("DEVSTACK_HELPER")
	if mode == "" {
		t.Skip("only run as the helper process of TestChildrenDieWithTheParent")
	}
	cfg := Config{}
	if mode == "cluster" {
		cfg.Replicas = 2
	}
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The parent removes the data dir: this process dies without running Close.
	pids := []int{s.redis.pid()}
	if cc := s.ClickHouseCluster; cc != nil {
		pids = append(pids, cc.zk.c.pid())
		for _, c := range cc.servers {
			pids = append(pids, c.pid())
		}
	} else {
		pids = append(pids, s.ch.pid())
	}
	fmt.Print("PIDS")
	for _, p := range pids {
		fmt.Printf(" %d", p)
	}
	fmt.Printf(" %s\n", s.DataDir)
	time.Sleep(time.Minute)
	t.Error("helper was not killed")
}
