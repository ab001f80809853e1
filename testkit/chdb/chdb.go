// Package chdb runs mcpulse's ClickHouse SQL on the current ClickHouse engine in tests.
// Production runs current ClickHouse while the embedded stack runs Debian's 18.16 (DESIGN.md
// §7); chDB's libchdb.so (npm package @chdb/lib-linux-x64-gnu, the library the npm package
// chdb loads, pinned by testdata/chdb/package-lock.json, installed by `make chdb`) is that
// current engine. Start
// serves it over ClickHouse's native TCP protocol (Server) from a child process
// (./chdbserver, which binds the library with github.com/chdb-io/chdb-go), so mcpulse's own
// code paths run against it unchanged through clickhouse-go, and the tests of this package
// run every migration, the consumer, every query in sql/queries and the ops queries on both
// engines and compare the results.
package chdb

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvLibrary names the environment variable holding libchdb.so's path (chdb-go reads it too).
const EnvLibrary = "CHDB_LIB_PATH"

// LibraryInModule is where `make chdb` (npm ci in testdata/chdb) puts libchdb.so, relative to
// the module root.
const LibraryInModule = "testdata/chdb/node_modules/@chdb/lib-linux-x64-gnu/libchdb.so"

// ErrNoLibrary is returned by LibraryPath when libchdb.so is not installed.
var ErrNoLibrary = errors.New("libchdb.so not found: run `make chdb` (npm ci in testdata/chdb) or set " + EnvLibrary)

// LibraryPath returns libchdb.so's path: $CHDB_LIB_PATH when set (it must exist), else the
// module's testdata/chdb install. It fails with ErrNoLibrary when neither holds a file.
func LibraryPath() (string, error) {
	if p := os.Getenv(EnvLibrary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvLibrary, p, err)
		}
		return p, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, LibraryInModule)
	if _, err := os.Stat(p); err != nil {
		return "", ErrNoLibrary
	}
	return p, nil
}

// moduleRoot is the directory of mcpulse's go.mod, found from the working directory (a test
// runs in its package's directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(data), "module github.com/mcpulse/mcpulse\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the mcpulse module (no go.mod above the working directory)")
		}
		dir = parent
	}
}

// Instance is a running chdbserver.
type Instance struct {
	// DSN reaches it with clickhouse-go (stores.OpenClickHouse).
	DSN string
	// Version is the engine's version(), e.g. "26.7.2.1".
	Version string

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *lockedBuffer
	done   chan error
}

// Config configures Start.
type Config struct {
	// Library is libchdb.so's path (LibraryPath).
	Library string
	// Dir holds the built server, the engine's databases and temporary files.
	Dir string
}

// Start builds ./chdbserver with the go command (cached by Go's build cache after the first
// time) and runs it on a free loopback port until Close.
func Start(ctx context.Context, cfg Config) (*Instance, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(cfg.Dir, "chdbserver")
	build := exec.CommandContext(ctx, goCommand(), "build", "-o", bin, "./testkit/chdb/chdbserver")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build chdbserver: %v\n%s", err, out)
	}
	inst := &Instance{stderr: &lockedBuffer{}, done: make(chan error, 1)}
	inst.cmd = exec.Command(bin, "--path", filepath.Join(cfg.Dir, "data"))
	inst.cmd.Env = append(os.Environ(), EnvLibrary+"="+cfg.Library, "TZ=UTC")
	inst.cmd.Stderr = inst.stderr
	if inst.stdin, err = inst.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := inst.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := inst.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start chdbserver: %w", err)
	}
	go func() { inst.done <- inst.cmd.Wait() }()
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case ready <- sc.Text():
			default:
			}
		}
	}()
	select {
	case line := <-ready:
		var addr string
		if _, err := fmt.Sscanf(line, "listening %s version %s", &addr, &inst.Version); err != nil {
			inst.Close()
			return nil, fmt.Errorf("chdbserver said %q: %w", line, err)
		}
		inst.DSN = "clickhouse://" + addr + "/default"
		return inst, nil
	case err := <-inst.done:
		return nil, fmt.Errorf("chdbserver exited before listening (%v): %s", err, inst.stderr.String())
	case <-ctx.Done():
		inst.Close()
		return nil, fmt.Errorf("chdbserver did not start: %w", ctx.Err())
	}
}

// goCommand is the go command that runs the tests (go test puts GOROOT/bin first on PATH).
func goCommand() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}

// Close stops the server (it exits when its standard input closes) and waits for it.
func (i *Instance) Close() error {
	i.stdin.Close()
	select {
	case <-i.done:
	case <-time.After(10 * time.Second):
		_ = i.cmd.Process.Kill()
		<-i.done
	}
	return nil
}

// Log is what the server wrote on stderr (refused statements, connection errors).
func (i *Instance) Log() string { return i.stderr.String() }

// ForTest starts an Instance for t in a temporary directory and closes it in t.Cleanup. It
// skips t, saying how to install it, only when libchdb.so is not installed and CI is unset;
// any other failure fails t. CI installs the library (.ci/run: make test runs make chdb), so
// there a missing library fails rather than reads as a pass.
func ForTest(t testing.TB) *Instance {
	t.Helper()
	lib, err := LibraryPath()
	if errors.Is(err, ErrNoLibrary) && os.Getenv("CI") == "" {
		t.Skipf("current ClickHouse engine not installed, so nothing runs on it: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	inst, err := Start(ctx, Config{Library: lib, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		inst.Close()
		if t.Failed() {
			t.Logf("chdbserver log:\n%s", inst.Log())
		}
	})
	return inst
}

// lockedBuffer collects a child's stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
