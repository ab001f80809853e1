package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/dashboards"
	"github.com/mcpulse/mcpulse/dashboards/alerts"
)

// Library is one browser library the pages load: installed from npm (pinned by
// dashboards/web/package-lock.json) into the assets directory and served from disk at
// /assets/vendor/<Name>, never from a CDN.
type Library struct {
	// Name is the file name under /assets/vendor/.
	Name string
	// Path is where `npm ci --prefix dashboards/web` puts the file, relative to the assets
	// directory.
	Path string
}

// Libraries are loaded by every dashboard page, in this order: Chart.js, then Luxon and
// Chart.js's Luxon adapter (the time axis, drawn in UTC), the annotation plugin (reference
// lines) and the funnel chart type.
var Libraries = []Library{
	{"chart.umd.min.js", ChartLibrary},
	{"luxon.min.js", "node_modules/luxon/build/global/luxon.min.js"},
	{"chartjs-adapter-luxon.umd.min.js", "node_modules/chartjs-adapter-luxon/dist/chartjs-adapter-luxon.umd.min.js"},
	{"chartjs-plugin-annotation.min.js", "node_modules/chartjs-plugin-annotation/dist/chartjs-plugin-annotation.min.js"},
	{"chartjs-chart-funnel.umd.min.js", "node_modules/chartjs-chart-funnel/build/index.umd.min.js"},
}

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
	// DefaultListen is the dashboards' listen address: loopback only, because the pages show
	// distinct ids, which can be email addresses. Config.Validate refuses an address that
	// other machines can reach unless a token or basic-auth credentials are set.
	DefaultListen = "127.0.0.1:8090"
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
	// AssetsDir holds the Libraries (see FindAssets). Required: the server never falls back to
	// a CDN, because users run it behind firewalls.
	AssetsDir string
	// Listen is the address ListenAndServe listens on, host:port. Default: DefaultListen. An
	// address other machines can reach (an empty host, 0.0.0.0, ::, a public IP or a name that
	// resolves to one) needs Token or BasicUser (see ExposedWithoutAuth).
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
	// AlertRules are drawn on the charts they watch: a rule with a fixed threshold on a column
	// a chart draws as its y is a dashed reference line at that threshold. Default: the
	// built-in rules (alerts.DefaultRules).
	AlertRules []alerts.Rule
}

func (c *Config) setDefaults() error {
	if c.Dashboards == nil {
		ds, err := dashboards.Load()
		if err != nil {
			return err
		}
		c.Dashboards = ds
	}
	if c.AlertRules == nil {
		// The built-in rules name panels of the built-in dashboards, whichever are served.
		all, err := dashboards.Load()
		if err != nil {
			return err
		}
		rules, err := alerts.DefaultRules(all)
		if err != nil {
			return err
		}
		c.AlertRules = rules
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
	if err := ExposedWithoutAuth(c.Listen, c.Token != "" || c.BasicUser != ""); err != nil {
		errs = append(errs, err)
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

// ExposedWithoutAuth returns an error when listen (host:port) accepts connections from other
// machines and auth is false: the dashboards show distinct ids, which can be email addresses,
// so they are served without credentials on loopback only. A host is loopback when it is
// "localhost", a loopback IP (127.0.0.0/8, ::1), or a name every address of which is loopback;
// an empty host, 0.0.0.0 and :: mean every interface. A name that cannot be resolved is
// refused too (the error says why).
func ExposedWithoutAuth(listen string, auth bool) error {
	if auth {
		return nil
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("dashserver: listen address %q: %w", listen, err)
	}
	loopback, why := isLoopback(host)
	if loopback {
		return nil
	}
	return fmt.Errorf("dashserver: refusing to serve on %q without credentials: %s, and the dashboards show distinct ids, "+
		"which can be email addresses; listen on 127.0.0.1 (the default, %s) or set --token / --basic-auth "+
		"(or $MCPULSE_DASHBOARDS_TOKEN / $MCPULSE_DASHBOARDS_BASIC_AUTH)", listen, why, DefaultListen)
}

// isLoopback reports whether host names only loopback addresses, and otherwise why not.
func isLoopback(host string) (bool, string) {
	switch h := strings.TrimSuffix(strings.ToLower(host), "."); {
	case h == "":
		return false, "an empty host listens on every interface"
	case h == "localhost":
		return true, ""
	default:
		if ip := net.ParseIP(strings.Trim(h, "[]")); ip != nil {
			switch {
			case ip.IsLoopback():
				return true, ""
			case ip.IsUnspecified():
				return false, ip.String() + " listens on every interface"
			}
			return false, ip.String() + " is not a loopback address"
		}
		ips, err := net.LookupIP(h)
		if err != nil {
			return false, "host " + strconv.Quote(host) + " could not be resolved (" + err.Error() + ")"
		}
		for _, ip := range ips {
			if !ip.IsLoopback() {
				return false, "host " + strconv.Quote(host) + " resolves to " + ip.String() + ", which is not a loopback address"
			}
		}
		return len(ips) > 0, "host " + strconv.Quote(host) + " resolves to no address"
	}
}

// checkAssets reports a missing chart library with the command that installs it.
func checkAssets(dir string) error {
	for _, lib := range Libraries {
		path := filepath.Join(dir, lib.Path)
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("dashserver: chart library %s is missing (run `%s` in the repository, or pass --assets DIR): %w", path, InstallHint, err)
		}
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
