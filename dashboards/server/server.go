// Package server serves the dashboards defined in dashboards/ as server-rendered
// pages: html/template for the markup, Chart.js (installed from npm into dashboards/web and
// served from disk, never from a CDN) for the charts, HTML tables for "table" panels, and a
// CSV download per panel.
//
// Routes:
//
//	GET /                                   the list of dashboards
//	GET /dashboards/{name}?from&to&campaign&client&tool&limit
//	                                        one dashboard; the filters live in the URL so a view
//	                                        can be shared as a link (a form on the page edits them)
//	GET /dashboards/{name}/csv/{panel}?...   one panel's result as CSV (same filters)
//	GET /assets/...                         the chart library and the page's own script and style
//	GET /metrics /healthz /readyz           internal/obs (readiness: ClickHouse answers)
//
// Caller-chosen strings (ignored key names, distinct ids, client, campaign and tool names) reach
// the page only through html/template's contextual escaping: as element text, as attribute
// values, or as JSON inside <script type="application/json"> that the page's script parses and
// hands to Chart.js, which draws it as canvas text; no data is ever inserted as markup. A
// Content-Security-Policy allowing only this origin's scripts backs that up.
//
// Access control (optional): an access token and/or basic-auth credentials; see auth.go for
// why it is cookie-free. /healthz and /readyz stay open for probes, /assets/ because it holds
// no data.
package server

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/mcpulse/mcpulse/dashboards"
	"github.com/mcpulse/mcpulse/internal/obs"
	"github.com/mcpulse/mcpulse/internal/safetext"
)

//go:embed templates/*.html static/*
var files embed.FS

// contentSecurityPolicy lets a page load only this origin's scripts, styles and images, submit
// forms only here, and never be framed: even a markup injection could run no script.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// panelConcurrency bounds the queries one page runs at a time.
const panelConcurrency = 4

// Server is the dashboards web server; it is an http.Handler. Create it with New.
type Server struct {
	cfg     Config
	byName  map[string]*dashboards.Dashboard
	tmpl    *template.Template
	auth    authorizer
	reg     *prometheus.Registry
	metrics *metrics
	handler http.Handler
}

// New validates cfg (after applying defaults; dashboards.Load when cfg.Dashboards is nil) and
// builds the server. The error lists every problem, including a missing chart library with the
// command that installs it.
func New(cfg Config) (*Server, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tmpl, err := template.New("").Funcs(template.FuncMap{
		"tableArgs": func(cols []tableHeader, rows [][]tableCell) tableView { return tableView{Columns: cols, Rows: rows} },
	}).ParseFS(files, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("BUG: dashserver templates: %w", err)
	}
	s := &Server{cfg: cfg, tmpl: tmpl, auth: newAuthorizer(cfg), byName: map[string]*dashboards.Dashboard{}}
	for i := range s.cfg.Dashboards {
		s.byName[s.cfg.Dashboards[i].Name] = &s.cfg.Dashboards[i]
	}
	s.reg = prometheus.NewRegistry()
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.metrics = newMetrics(s.reg)

	static, _ := fs.Sub(files, "static")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.index)
	mux.HandleFunc("GET /dashboards/{name}", s.dashboard)
	mux.HandleFunc("GET /dashboards/{name}/csv/{panel}", s.csv)
	mux.HandleFunc("GET /assets/vendor/{file}", s.library)
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	obs.Register(mux, s.reg, obs.ClickHouseCheck(cfg.ClickHouse))
	s.handler = s.instrument(mux)
	return s, nil
}

// Registry returns the Prometheus registry behind /metrics.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// ServeHTTP serves every route, checking access first (except /healthz and /readyz).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// ListenAndServe listens on Config.Listen and serves until ctx ends, then drains in-flight
// requests for up to Config.ShutdownTimeout.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("dashboards: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Serve is ListenAndServe on a listener of the caller's; it closes ln. It returns nil after a
// shutdown caused by ctx.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		WriteTimeout:      s.cfg.QueryTimeout + 30*time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.cfg.Logger.Info("dashboards: listening", "addr", ln.Addr().String(), "dashboards", len(s.cfg.Dashboards), "auth", s.auth.enabled())
	select {
	case err := <-errc:
		return fmt.Errorf("dashboards: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("dashboards: shutdown: %w", err)
	}
	return nil
}

// instrument adds the security headers, checks access and counts requests by route pattern.
func (s *Server) instrument(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		_, pattern := mux.Handler(r)
		defer func() {
			if pattern == "" {
				pattern = "unmatched"
			}
			s.metrics.requests.WithLabelValues(pattern, strconv.Itoa(rec.code)).Inc()
		}()
		if !openPath(r.URL.Path) {
			if ok, _ := s.auth.allowed(r); !ok {
				s.auth.challenge(rec)
				return
			}
		}
		mux.ServeHTTP(rec, r)
	})
}

// openPath reports the paths served without credentials: the probes, and the static assets
// (the chart library and the page's own script and style, the same for everyone and holding
// no data), which a page opened with ?token= loads without the token.
func openPath(path string) bool {
	return path == "/healthz" || path == "/readyz" || strings.HasPrefix(path, "/assets/")
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

// library serves one of the Libraries from the assets directory on disk.
func (s *Server) library(w http.ResponseWriter, r *http.Request) {
	for _, lib := range Libraries {
		if lib.Name == r.PathValue("file") {
			w.Header().Set("Cache-Control", "public, max-age=3600")
			http.ServeFile(w, r, filepath.Join(s.cfg.AssetsDir, lib.Path))
			return
		}
	}
	http.NotFound(w, r)
}

// pageData is what every template gets.
type pageData struct {
	Title      string
	Dashboards []navItem
	Current    string
	Dashboard  *dashboards.Dashboard
	Form       filterForm
	Token      string // the ?token= the page was opened with, carried on its links and form
	ResetURL   string
	Panels     []panelView
	Failed     int
	// Libraries are the vendor scripts the page loads, in order.
	Libraries []Library
	// DefaultMinCalls is the minimum calls used when the page sets none.
	DefaultMinCalls int
}

type navItem struct {
	Name, Title, Description, URL string
	Panels                        int
}

// panelView is one panel as the template draws it.
type panelView struct {
	ID, Title, Description string
	Chart                  string
	// Wide panels span the page: tables, and charts with one dataset per series value
	// (their legends are long).
	Wide    bool
	Filters []filterUse
	CSVURL  string
	Error   string
	Rows    int
	// Empty, when set, replaces the chart or table: why the panel has nothing to show.
	Empty string
	// Periods names the two periods a comparison panel compares.
	Periods string
	Table   *tableView // "table" panels
	Data    *chartData // the others
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	_, form, err := requestFilters(r)
	if err != nil {
		textError(w, http.StatusBadRequest, err.Error())
		return
	}
	p := s.basePage(r, form)
	p.Title = "mcpulse dashboards"
	s.render(w, http.StatusOK, "index.html", p)
}

func (s *Server) basePage(r *http.Request, form filterForm) pageData {
	var token string
	if _, fromQuery := s.auth.allowed(r); fromQuery {
		token = tokenInQuery(r)
	}
	q := filterQuery(form, token).Encode()
	p := pageData{Form: form, Token: token, Libraries: Libraries, DefaultMinCalls: dashboards.DefaultMinCalls}
	for _, d := range s.cfg.Dashboards {
		u := "/dashboards/" + url.PathEscape(d.Name)
		if q != "" {
			u += "?" + q
		}
		p.Dashboards = append(p.Dashboards, navItem{Name: d.Name, Title: d.Title, Description: d.Description, URL: u, Panels: len(d.Panels)})
	}
	return p
}

func (s *Server) dashboard(w http.ResponseWriter, r *http.Request) {
	d, ok := s.byName[r.PathValue("name")]
	if !ok {
		textError(w, http.StatusNotFound, "no dashboard named "+safetext.Quote(r.PathValue("name"))+"; the list is at /")
		return
	}
	filters, form, err := requestFilters(r)
	if err != nil {
		textError(w, http.StatusBadRequest, err.Error())
		return
	}
	p := s.basePage(r, form)
	p.Title, p.Current, p.Dashboard = d.Title, d.Name, d
	p.ResetURL = "/dashboards/" + url.PathEscape(d.Name)
	if p.Token != "" {
		p.ResetURL += "?" + url.Values{paramToken: {p.Token}}.Encode()
	}
	q := filterQuery(form, p.Token).Encode()

	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.QueryTimeout)
	defer cancel()
	results := make([]*dashboards.Result, len(d.Panels))
	errs := make([]error, len(d.Panels))
	sem := make(chan struct{}, panelConcurrency)
	var wg sync.WaitGroup
	for i, panel := range d.Panels {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i], errs[i] = s.run(ctx, d, panel, filters)
		})
	}
	wg.Wait()
	for i, panel := range d.Panels {
		pv := panelView{ID: panel.ID, Title: panel.Title, Description: panel.Description, Chart: panel.Chart, Filters: panelFilters(panel),
			Wide: !panel.Half && (panel.Chart == dashboards.ChartTable || panel.Series != "" || panel.Chart == dashboards.ChartFunnel)}
		pv.CSVURL = "/dashboards/" + url.PathEscape(d.Name) + "/csv/" + url.PathEscape(panel.ID)
		if slices.Contains(panel.Params, dashboards.ParamPrevFrom) {
			pf, pt, cf, ct := filters.Previous()
			const layout = "2006-01-02 15:04"
			pv.Periods = fmt.Sprintf("%s to %s (UTC), against %s to %s", cf.Format(layout), ct.Format(layout), pf.Format(layout), pt.Format(layout))
		}
		if q != "" {
			pv.CSVURL += "?" + q
		}
		if errs[i] != nil {
			pv.Error = "this panel's query failed: " + safetext.Escape(errs[i].Error())
			p.Failed++
			p.Panels = append(p.Panels, pv)
			continue
		}
		res := results[i]
		pv.Rows = len(res.Rows)
		if panel.Chart == dashboards.ChartTable {
			pv.Table = tableFor(panel, d.Columns, res)
		} else {
			cd := chartFor(panel, d.Columns, res, cmp.Or(filters.MinCalls, dashboards.DefaultMinCalls))
			cd.References = references(panel, d.Columns, s.cfg.AlertRules)
			for i := range cd.Multiples {
				cd.Multiples[i].Chart.References = cd.References
			}
			pv.Data = &cd
		}
		pv.Empty = emptyReason(panel, form, pv.Data, len(res.Rows))
		p.Panels = append(p.Panels, pv)
	}
	w.Header().Set("Cache-Control", "no-store")
	code := http.StatusOK
	if p.Failed > 0 && p.Failed == len(p.Panels) {
		code = http.StatusBadGateway // ClickHouse is likely down: say so to monitors, still draw the page
	}
	s.render(w, code, "dashboard.html", p)
}

// run runs one panel's query and records its duration or failure.
func (s *Server) run(ctx context.Context, d *dashboards.Dashboard, p dashboards.Panel, f dashboards.Filters) (*dashboards.Result, error) {
	start := time.Now()
	res, err := dashboards.Run(ctx, s.cfg.ClickHouse, p, f)
	if err != nil {
		s.metrics.queryErrors.WithLabelValues(d.Name, p.ID).Inc()
		s.cfg.Logger.Warn("dashboards: panel query failed", "dashboard", d.Name, "panel", p.ID, "err", err)
		return nil, err
	}
	s.metrics.querySeconds.WithLabelValues(d.Name, p.ID).Observe(time.Since(start).Seconds())
	return res, nil
}

// render executes a template into a buffer first, so a template error becomes a clean 500
// instead of half a page, then answers with code.
func (s *Server) render(w http.ResponseWriter, code int, name string, p pageData) {
	var b bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&b, name, p); err != nil {
		s.cfg.Logger.Error("dashboards: BUG: template failed", "template", name, "err", err)
		textError(w, http.StatusInternalServerError, "internal error: the page could not be drawn")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}

// textError answers with a plain-text message (never HTML, so a quoted value cannot become
// markup).
func textError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = fmt.Fprintln(w, msg)
}

// metrics are the server's own Prometheus metrics.
type metrics struct {
	requests     *prometheus.CounterVec
	querySeconds *prometheus.HistogramVec
	queryErrors  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpulse_dashboards_requests_total",
			Help: "HTTP requests to the dashboards server by route pattern and status code.",
		}, []string{"route", "code"}),
		querySeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpulse_dashboards_query_seconds",
			Help:    "Duration of successful panel queries in seconds.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}, []string{"dashboard", "panel"}),
		queryErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpulse_dashboards_query_errors_total",
			Help: "Panel queries that failed.",
		}, []string{"dashboard", "panel"}),
	}
	reg.MustRegister(m.requests, m.querySeconds, m.queryErrors)
	return m
}
