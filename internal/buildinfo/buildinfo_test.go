package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestReadNamesTheToolchainAndALinkTimeVersion(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })

	Version = ""
	info := Read()
	if info.Version == "" || info.GoVersion != runtime.Version() || info.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Fatalf("Read() = %+v: want a version, %s and %s/%s", info, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}

	Version = "v9.8.7"
	info = Read()
	if info.Version != "v9.8.7" {
		t.Errorf("with a link-time version, Read().Version = %q, want v9.8.7", info.Version)
	}
	if s := info.String(); !strings.HasPrefix(s, "mcpulse v9.8.7") || !strings.Contains(s, runtime.Version()) {
		t.Errorf("String() = %q", s)
	}
}

func TestStringShortensTheRevisionAndSaysModified(t *testing.T) {
	i := Info{Version: "(devel)", Revision: "0123456789abcdef0123", Modified: true, Time: "2026-12-01T10:00:00Z", GoVersion: "go1.26.8", Platform: "linux/amd64"}
	want := "mcpulse (devel) commit 0123456789ab (modified) 2026-12-01T10:00:00Z go1.26.8 linux/amd64"
	if got := i.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
