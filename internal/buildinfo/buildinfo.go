// Package buildinfo says which build of mcpulse is running: the version stamped at link time
// (or the module version go install recorded), the VCS revision and time Go embeds in a build
// from a checkout, and the Go toolchain.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is the release version, set at link time with
// -ldflags "-X github.com/mcpulse/mcpulse/internal/buildinfo.Version=v1.2.3". Empty in a plain
// build: Read then uses the module version Go recorded ("(devel)" for a build from a checkout).
var Version string

// Info describes the running binary. Fields Go did not record are empty.
type Info struct {
	Version   string `json:"version"`            // release or module version, "(devel)" from a checkout
	Revision  string `json:"revision,omitempty"` // VCS commit the binary was built from
	Time      string `json:"time,omitempty"`     // that commit's time, RFC 3339
	Modified  bool   `json:"modified"`           // the checkout had uncommitted changes
	GoVersion string `json:"go_version"`         // toolchain, e.g. "go1.26.8"
	Platform  string `json:"platform"`           // GOOS/GOARCH
}

// Read returns the running binary's Info.
func Read() Info {
	info := Info{Version: Version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if info.Version == "" {
			info.Version = "unknown"
		}
		return info
	}
	if info.Version == "" {
		info.Version = bi.Main.Version
	}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.time":
			info.Time = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String renders the Info on one line: "mcpulse (devel) commit 0123abcd (modified) 2026-12-01T10:00:00Z go1.26.8 linux/amd64".
func (i Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mcpulse %s", i.Version)
	if i.Revision != "" {
		rev := i.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		fmt.Fprintf(&b, " commit %s", rev)
		if i.Modified {
			b.WriteString(" (modified)")
		}
	}
	if i.Time != "" {
		fmt.Fprintf(&b, " %s", i.Time)
	}
	fmt.Fprintf(&b, " %s %s", i.GoVersion, i.Platform)
	return b.String()
}
