package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/dashboards/server"
	"github.com/mcpulse/mcpulse/internal/stores"
)

// Environment variables holding the dashboards' credentials (preferred over the flags, whose
// values other users of the machine can read in the process list).
const (
	dashboardsTokenEnv     = "MCPULSE_DASHBOARDS_TOKEN"
	dashboardsBasicAuthEnv = "MCPULSE_DASHBOARDS_BASIC_AUTH"
)

// dashboardsFlags are the flags `dashboards` and `demo --serve` share.
type dashboardsFlags struct {
	assets, token, basicAuth string
}

func (d *dashboardsFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&d.assets, "assets", "", "directory where \""+server.InstallHint+"\" installed the chart library (default: "+server.DefaultAssetsDir+
		" under the working directory, the executable's directory, or a parent of either)")
	f.StringVar(&d.token, "token", "", "require this access token (Authorization: Bearer TOKEN or ?token=TOKEN); default $"+dashboardsTokenEnv+
		" (prefer the variable: flag values show in the process list)")
	f.StringVar(&d.basicAuth, "basic-auth", "", "accept HTTP basic auth with these credentials, USER:PASSWORD; default $"+dashboardsBasicAuthEnv+
		" (prefer the variable)")
}

// apply fills cfg's assets and credentials from the flags and their environment variables.
func (d *dashboardsFlags) apply(cfg *server.Config) error {
	assets, err := server.FindAssets(d.assets)
	if err != nil {
		return err
	}
	cfg.AssetsDir = assets
	cfg.Token = d.token
	if cfg.Token == "" {
		cfg.Token = os.Getenv(dashboardsTokenEnv)
	}
	basic := d.basicAuth
	if basic == "" {
		basic = os.Getenv(dashboardsBasicAuthEnv)
	}
	if basic != "" {
		user, pass, ok := strings.Cut(basic, ":")
		if !ok || user == "" || pass == "" {
			return errors.New("--basic-auth (or $" + dashboardsBasicAuthEnv + ") must be USER:PASSWORD, both non-empty")
		}
		cfg.BasicUser, cfg.BasicPassword = user, pass
	}
	return nil
}

func newDashboardsCmd() *cobra.Command {
	var (
		cfg    server.Config
		flags  dashboardsFlags
		dsn    string
		logFmt string
	)
	cmd := &cobra.Command{
		Use:   "dashboards [--listen ADDR] [--assets DIR] [--token T | --basic-auth USER:PASSWORD]",
		Short: "Serve the dashboards defined in dashboards/ over HTTP",
		Long: `dashboards serves every dashboard defined in dashboards/*.yaml as a web page: charts
(Chart.js, served from the local --assets directory, never from a CDN) and tables, each
panel running its named query from sql/queries/ against ClickHouse.

  GET /                                 the list of dashboards
  GET /dashboards/NAME?from=&to=&campaign=&client=&tool=&limit=
                                        one dashboard; the filters live in the URL, so a view
                                        can be shared as a link (a form on the page edits them).
                                        from/to: 2026-01-31, 2026-01-31T13:00 (UTC) or RFC 3339;
                                        each panel says which filters apply to it
  GET /dashboards/NAME/csv/PANEL?...    one panel's figures as CSV
  GET /metrics /healthz /readyz         Prometheus metrics, liveness, ClickHouse readiness

Access: the pages show distinct ids, which can be email addresses, so the default --listen is
` + server.DefaultListen + ` (this machine only), and an address other machines can reach (":8090",
0.0.0.0, ::, a LAN or public IP, or a name resolving to one) is refused unless --token or
--basic-auth (or their environment variables) is set.

Bad filters are answered 400 saying what is wrong. With --token (or $` + dashboardsTokenEnv + `) every
request but /healthz, /readyz and /assets/ must carry "Authorization: Bearer TOKEN" or ?token=TOKEN; with
--basic-auth (or $` + dashboardsBasicAuthEnv + `) HTTP basic auth is accepted too. No cookies are used.

The chart library is installed from npm with:
  ` + server.InstallHint + `
(make web does it; make demo and the Dockerfile too).`,
		Example: `  mcpulse dashboards                    # http://127.0.0.1:8090/, this machine only
  MCPULSE_DASHBOARDS_TOKEN=s3cret mcpulse dashboards --listen :8090 --assets /opt/mcpulse/web
  # then open http://HOST:8090/?token=s3cret`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dsn == "" {
				return fmt.Errorf("no ClickHouse: set %s or pass --clickhouse", stores.EnvClickHouseDSN)
			}
			if err := flags.apply(&cfg); err != nil {
				return err
			}
			// Before connecting, so a refused address fails at once.
			if err := server.ExposedWithoutAuth(cfg.Listen, cfg.Token != "" || cfg.BasicUser != ""); err != nil {
				return err
			}
			logger, err := newLogger(logFmt)
			if err != nil {
				return err
			}
			cfg.Logger = logger
			ch, err := stores.OpenClickHouse(cmd.Context(), dsn)
			if err != nil {
				return err
			}
			defer ch.Close()
			cfg.ClickHouse = ch
			return serveDashboards(cmd.Context(), cfg, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Listen, "listen", server.DefaultListen, "address to listen on, host:port; a non-loopback address needs --token or --basic-auth")
	f.StringVar(&dsn, "clickhouse", os.Getenv(stores.EnvClickHouseDSN), "ClickHouse DSN, native protocol (default $"+stores.EnvClickHouseDSN+")")
	f.DurationVar(&cfg.QueryTimeout, "query-timeout", server.DefaultQueryTimeout, "how long one page's or CSV's queries may take")
	f.StringVar(&logFmt, "log-format", "text", "log format: text or json")
	flags.register(cmd)
	return cmd
}

// serveDashboards listens on cfg.Listen, prints the URL to open, and serves until ctx ends.
func serveDashboards(ctx context.Context, cfg server.Config, out io.Writer) error {
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("dashboards: %w", err)
	}
	fmt.Fprintf(out, "dashboards: serving on %s (Ctrl-C stops)\n", browseURL(ln.Addr()))
	return srv.Serve(ctx, ln)
}

// browseURL is the http:// URL of a listener's address, with a wildcard host shown as
// 127.0.0.1 so the line can be pasted into a browser.
func browseURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String() + "/"
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}
