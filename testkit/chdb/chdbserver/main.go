// Command chdbserver serves the current ClickHouse engine (chDB's libchdb.so) over
// ClickHouse's native TCP protocol on a loopback port, for tests (package testkit/chdb starts
// it). It loads the library named by CHDB_LIB_PATH when it starts; chdb-go panics when the
// library is missing, which is why this is a program of its own and not part of a test
// binary: `go build ./...` and `go vet ./...` need no library, and tests skip cleanly without
// one.
//
// It prints "listening <address> version <version>" on stdout once it accepts connections,
// and exits when its standard input closes (the test that started it ended).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"

	chdbpurego "github.com/chdb-io/chdb-go/chdb-purego"

	"github.com/mcpulse/mcpulse/testkit/chdb"
)

// engine runs statements in one chDB session.
type engine struct{ conn chdbpurego.ChdbConn }

func (e *engine) Query(query, format string) ([]byte, error) {
	res, err := e.conn.Query(query, format)
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, nil
	}
	defer res.Free()
	return bytes.Clone(res.Buf()), nil
}

func main() {
	dataDir := flag.String("path", "", "directory for the engine's databases (required)")
	listen := flag.String("listen", "127.0.0.1:0", "loopback address to listen on")
	flag.Parse()
	if err := run(*dataDir, *listen); err != nil {
		fmt.Fprintln(os.Stderr, "chdbserver:", err)
		os.Exit(1)
	}
}

func run(dataDir, listen string) error {
	if dataDir == "" {
		return fmt.Errorf("--path is required")
	}
	conn, err := chdbpurego.NewConnectionFromConnString(dataDir)
	if err != nil {
		return fmt.Errorf("open chDB session in %s: %w", dataDir, err)
	}
	defer conn.Close()
	e := &engine{conn: conn}
	out, err := e.Query("SELECT version(), timezone()", "TabSeparated")
	if err != nil {
		return err
	}
	f := strings.Split(strings.TrimSpace(string(out)), "\t")
	if len(f) != 2 {
		return fmt.Errorf("version(), timezone() gave %q", out)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(dataDir, "inserts-")
	if err != nil {
		return err
	}
	srv := &chdb.Server{
		Engine:  e,
		Info:    chdb.ServerInfo{Version: f[0], Timezone: f[1]},
		TempDir: tmp,
		Log:     slog.New(slog.NewTextHandler(os.Stderr, nil)),
	}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		ln.Close()
	}()
	fmt.Printf("listening %s version %s\n", ln.Addr(), f[0])
	_ = srv.Serve(ln)
	return nil
}
