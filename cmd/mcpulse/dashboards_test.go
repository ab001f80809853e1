package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/dashboards/server"
	"github.com/mcpulse/mcpulse/internal/stores"
)

// runRoot runs the CLI with args and returns its error.
func runRoot(t *testing.T, args ...string) error {
	t.Helper()
	root := newRootCmd()
	root.SetArgs(args)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	return root.ExecuteContext(context.Background())
}

// `dashboards` refuses to start without ClickHouse, with a chart library missing (naming the
// npm command that installs it), and with malformed basic-auth credentials.
func TestDashboardsCommandRefusesAnIncompleteSetup(t *testing.T) {
	t.Setenv(stores.EnvClickHouseDSN, "")
	t.Setenv(dashboardsBasicAuthEnv, "")
	if err := runRoot(t, "dashboards"); err == nil || !strings.Contains(err.Error(), stores.EnvClickHouseDSN) {
		t.Errorf("without ClickHouse: %v, want an error naming %s", err, stores.EnvClickHouseDSN)
	}
	err := runRoot(t, "dashboards", "--clickhouse", "clickhouse://127.0.0.1:1/default", "--assets", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), server.InstallHint) {
		t.Errorf("empty --assets: %v, want an error naming %q", err, server.InstallHint)
	}
	// A directory that holds the libraries' files is enough for the flag checks below.
	assets := t.TempDir()
	for _, l := range server.Libraries {
		lib := filepath.Join(assets, l.Path)
		if err := os.MkdirAll(filepath.Dir(lib), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(lib, []byte("/* stand-in */"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// An address other machines can reach needs credentials; the message says so.
	t.Setenv(dashboardsTokenEnv, "")
	err = runRoot(t, "dashboards", "--clickhouse", "clickhouse://127.0.0.1:1/default", "--assets", assets, "--listen", ":8090")
	if err == nil || !strings.Contains(err.Error(), "--token") {
		t.Errorf("--listen :8090 without credentials: %v, want a refusal naming --token", err)
	}
	for _, bad := range []string{"nopassword", ":pw", "user:"} {
		err := runRoot(t, "dashboards", "--clickhouse", "clickhouse://127.0.0.1:1/default", "--assets", assets, "--basic-auth", bad)
		if err == nil || !strings.Contains(err.Error(), "USER:PASSWORD") {
			t.Errorf("--basic-auth %q: %v, want an error saying USER:PASSWORD", bad, err)
		}
	}
}

// The printed URL can be pasted into a browser: a wildcard listen address becomes 127.0.0.1.
func TestBrowseURLOfAListener(t *testing.T) {
	for addr, want := range map[string]string{
		"0.0.0.0:8090":   "http://127.0.0.1:8090/",
		"[::]:8090":      "http://127.0.0.1:8090/",
		"127.0.0.1:8090": "http://127.0.0.1:8090/",
		"[::1]:8090":     "http://[::1]:8090/",
	} {
		tcp, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := browseURL(tcp); got != want {
			t.Errorf("browseURL(%s) = %s, want %s", addr, got, want)
		}
	}
}
