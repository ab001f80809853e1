package server

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/dashboards"
)

// ChartLibrary is where Chart.js's UMD bundle sits inside an assets directory once
// `npm ci --prefix dashboards/web` has installed dashboards/web/package-lock.json.
const ChartLibrary = "node_modules/chart.js/dist/chart.umd.min.js"

// DefaultAssetsDir is the assets directory relative to a checkout's root (or to the directory
// holding the mcpulse binary).
const DefaultAssetsDir = "dashboards/web"

// InstallHint is the command that installs the chart library; errors about missing assets name it.
const InstallHint = "npm ci --prefix dashboards/web"

// Defaults of Config.
const (
	// DefaultListen is the dashboards' listen address.
	DefaultListen = ":8090"
	// DefaultQueryTimeout bounds one page's or one CSV's queries.
	DefaultQueryTimeout = 30 * time.Second
	// DefaultShutdownTimeout bounds how long shutdown waits for in-flight requests.
	DefaultShutdownTimeout = 10 * time.Second
)

// Config configures New.
type Config struct {
	// ClickHouse runs the panels' queries. Required.
	ClickHouse driver.Conn
	// Dashboards are the dashboards served, in index order. Default: dashboards.Load().
	Dashboards []dashboards.Dashboard
	// AssetsDir holds ChartLibrary (see FindAssets). Required: the server never falls back to
	// a CDN, because users run it behind firewalls.
	AssetsDir string
	// Listen is the address ListenAndServe listens on, host:port. Default: DefaultListen.
	Listen string
	// Token, when set, is an access token every page, CSV and /metrics request must present as
	// "Authorization: Bearer TOKEN" or as ?token=TOKEN (see the package doc). Default: "" (no
	// token).
	Token string
	// BasicUser and BasicPassword, when set, are HTTP basic-auth credentials that are accepted
	// too. Set both or neither. Default: "" (no basic auth).
	BasicUser, BasicPassword string
	// QueryTimeout bounds the queries of one request. Default: DefaultQueryTimeout.
	QueryTimeout time.Duration
	// ShutdownTimeout bounds how long Serve waits for in-flight requests once its context
	// ends. Default: DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Logger receives request failures and start/stop lines. Default: discard.
	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	if c.Dashboards == nil {
		ds, err := dashboards.Load()
		if err != nil {
			return err
		}
		c.Dashboards = ds
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.QueryTimeout == 0 {
		c.QueryTimeout = DefaultQueryTimeout
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Validate reports every problem with the configuration at once (after defaults are applied,
// as New does).
func (c Config) Validate() error {
	var errs []error
	if c.ClickHouse == nil {
		errs = append(errs, errors.New("dashserver: ClickHouse is required"))
	}
	if c.AssetsDir == "" {
		errs = append(errs, fmt.Errorf("dashserver: AssetsDir is required (the directory where %q installed the chart library)", InstallHint))
	} else if err := checkAssets(c.AssetsDir); err != nil {
		errs = append(errs, err)
	}
	if (c.BasicUser == "") != (c.BasicPassword == "") {
		errs = append(errs, errors.New("dashserver: basic auth needs both a user and a password"))
	}
	if strings.Contains(c.BasicUser, ":") {
		errs = append(errs, errors.New("dashserver: a basic-auth user name cannot contain ':' (RFC 7617)"))
	}
	if c.QueryTimeout < 0 || c.ShutdownTimeout < 0 {
		errs = append(errs, errors.New("dashserver: timeouts must not be negative"))
	}
	seen := map[string]bool{}
	for _, d := range c.Dashboards {
		if seen[d.Name] {
			errs = append(errs, fmt.Errorf("dashserver: two dashboards named %q", d.Name))
		}
		seen[d.Name] = true
	}
	return errors.Join(errs...)
}

// checkAssets reports a missing chart library with the command that installs it.
func checkAssets(dir string) error {
	path := filepath.Join(dir, ChartLibrary)
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("dashserver: chart library %s is missing (run `%s` in the repository, or pass --assets DIR): %w", path, InstallHint, err)
	}
	return nil
}

// FindAssets returns the assets directory: dir itself when it is not empty (checked), else the
// first of DefaultAssetsDir under the working directory or its parents, then beside the running
// executable or its parents, that holds ChartLibrary. The error names the install command.
func FindAssets(dir string) (string, error) {
	if dir != "" {
		if err := checkAssets(dir); err != nil {
			return "", err
		}
		return dir, nil
	}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		if resolved, err := filepath.EvalSymlinks(exe); err == nil {
			exe = resolved
		}
		starts = append(starts, filepath.Dir(exe))
	}
	for _, start := range starts {
		for d := start; ; d = filepath.Dir(d) {
			candidate := filepath.Join(d, DefaultAssetsDir)
			if checkAssets(candidate) == nil {
				return candidate, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", fmt.Errorf("dashserver: chart library %s not found in %s under %s or their parents; run `%s` in the repository or pass --assets DIR",
		ChartLibrary, DefaultAssetsDir, strings.Join(starts, " or "), InstallHint)
}
