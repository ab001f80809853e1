// Package dashboards holds mcpulse's dashboard definitions: one declarative YAML file per
// dashboard in this directory (embedded), each panel naming a query in sql/queries/ that
// analysts can run as it is in clickhouse-client, Grafana or Metabase. Load reads and
// validates them; Run runs one panel's query with the page's filters bound as clickhouse-go
// "?" arguments (never string-built); Bench times every panel against its raw-table
// equivalent. README.md in this directory says how a definition is written.
package dashboards

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/mcpulse/mcpulse/sql"
)

//go:embed *.yaml
var definitions embed.FS

// Dashboard is one YAML file in dashboards/ (e.g. dashboards/tool-diagnostics.yaml).
type Dashboard struct {
	// Name is the file name without .yaml: the URL slug, e.g. "tool-diagnostics".
	Name        string
	Title       string
	Description string
	Panels      []Panel
	// Columns says how result columns are shown (dashboards/columns.yaml, shared by every
	// dashboard).
	Columns Columns
}

// Panel is one chart or table of a dashboard.
type Panel struct {
	// ID is a slug unique within its dashboard, e.g. "ignored-key-rate-over-time".
	ID          string
	Title       string
	Description string
	// Query is the name of sql/queries/<Query>.sql (package sql: sql.Query(name)).
	Query string
	// RawQuery optionally names the same figures computed from the raw tables (same
	// parameters, same columns), for the benchmark's ratio and for the tests.
	RawQuery string
	// Chart is one of the Chart* constants.
	Chart string
	// X is the column on the x axis (line, bar, stacked-bar) or the label column (pie); ""
	// for a table.
	X string
	// Y are the value columns drawn, one dataset each, unless Series is set: then exactly
	// one. Empty for a table (every column is shown).
	Y []string
	// Series optionally names the column whose distinct values become one dataset each.
	Series string
	// Params are the query's positional "?" parameters in order, each one of the Param*
	// constants; a name may repeat (e.g. "tool", "tool" for "(? = '' OR tool_name = ?)").
	Params []string
	// Rate, when set, says Y[0] is Rate.Numerator ÷ Rate.Denominator (both result columns): the
	// chart's tooltips show both counts, points whose denominator is below the page's minimum
	// calls are not drawn, and a folded "other" series is recomputed from the counts.
	Rate *Rate
	// Top, when above 0, keeps the Top series (or funnels, or table groups) that rank first by
	// the sum of TopBy, folding the rest into one "other" series (charts with Series) or
	// leaving them to the CSV (funnels, groups). Charts with Series default to DefaultTop.
	Top int
	// TopBy is the column whose sum per series ranks them (default: Rate.Denominator, else
	// Y[0]).
	TopBy string
	// Thresholds are columns drawn as dashed, stepped reference lines beside Y[0], one per
	// series value in the series' colour (e.g. a ratchet's max_oversized); a series of a chart
	// with thresholds is never folded into "other".
	Thresholds []string
	// Bucket is the time grain of a time x axis ("hour" or "day"): points further apart than
	// one bucket are not joined, so a gap in the data shows as a gap. "" for other axes
	// (a time axis of irregular times, e.g. schema-check runs, joins every point).
	Bucket string
	// Layout "multiples" draws a chart with Series as small multiples: one small chart per
	// kept series (and "other"), with its thresholds, all on the same y scale. "" draws one
	// chart.
	Layout string
	// Group, for a table, shows its rows in collapsible groups by one column (see Group).
	Group *Group
	// Limit is the panel's own default for the "limit" parameter when the page sets none
	// (0: DefaultLimit).
	Limit int
	// Half makes a table take half the page's width (ranked lists side by side); charts
	// with series and tables span it otherwise.
	Half bool
	// Empty says why the panel can be empty (e.g. "no schema check has reached a server in
	// this range"); the page shows it in place of an empty chart or table.
	Empty string
}

// Rate names the counts behind a rate column.
type Rate struct {
	Numerator   string `yaml:"numerator"`
	Denominator string `yaml:"denominator"`
	// Share says the denominator is the whole every series is a share of (e.g. all calls of
	// the hour): an "other" series keeps that denominator instead of summing it.
	Share bool `yaml:"share"`
}

// Group shows a table's rows in one collapsible section per value of By (rows arrive sorted
// by it), the first Open sections expanded.
type Group struct {
	By   string `yaml:"by"`
	Open int    `yaml:"open"`
}

// Chart types.
const (
	ChartLine       = "line"
	ChartBar        = "bar"
	ChartStackedBar = "stacked-bar"
	ChartPie        = "pie"
	ChartTable      = "table"
	// ChartFunnel draws one funnel per X value (small multiples, the Top first), its steps the
	// Y columns in order, each labelled with its count and its conversion from the previous
	// step and from the first.
	ChartFunnel = "funnel"
)

// LayoutMultiples is Panel.Layout for small multiples.
const LayoutMultiples = "multiples"

// Series limits: a chart never draws more series than its palette has distinct colours.
const (
	// MaxSeries is the most series a chart draws, "other" included.
	MaxSeries = 10
	// DefaultTop is how many series a chart with Series keeps before folding the rest into
	// "other" when the panel sets no Top.
	DefaultTop = 8
)

// Parameter names a panel's Params may hold; see Filters.Args for the bound values.
const (
	ParamFrom     = "from"     // DateTime (UTC): the first second of the range
	ParamTo       = "to"       // DateTime (UTC): the last whole second of the range
	ParamCampaign = "campaign" // String, "" = all
	ParamClient   = "client"   // String, "" = all
	ParamTool     = "tool"     // String, "" = all
	ParamLimit    = "limit"    // UInt64
	// ParamMinCalls is the page's minimum calls (UInt64): rows whose calls are below it are not
	// ranked (a rate over 3 calls says little).
	ParamMinCalls = "min_calls"
	// ParamPeriodFrom and ParamPeriodTo are the range a comparison panel compares (DateTime
	// UTC, like from and to): the page's range, or the DefaultPeriod before its end when it
	// sets no start (Filters.Previous).
	ParamPeriodFrom = "period_from"
	ParamPeriodTo   = "period_to"
	// ParamPrevFrom and ParamPrevTo are the previous period of the same length (DateTime UTC):
	// [period_from - (period_to - period_from), period_from).
	ParamPrevFrom = "prev_from"
	ParamPrevTo   = "prev_to"
)

var (
	chartTypes = []string{ChartLine, ChartBar, ChartStackedBar, ChartPie, ChartTable, ChartFunnel}
	paramNames = []string{ParamFrom, ParamTo, ParamCampaign, ParamClient, ParamTool, ParamLimit, ParamMinCalls, ParamPeriodFrom, ParamPeriodTo, ParamPrevFrom, ParamPrevTo}
	buckets    = []string{"hour", "day"}
	slugRE     = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
)

// definitionYAML is a definition as written in YAML.
type definitionYAML struct {
	Title       string      `yaml:"title"`
	Description string      `yaml:"description"`
	Panels      []panelYAML `yaml:"panels"`
}

type panelYAML struct {
	ID          string   `yaml:"id"`
	Title       string   `yaml:"title"`
	Description string   `yaml:"description"`
	Query       string   `yaml:"query"`
	RawQuery    string   `yaml:"raw_query"`
	Chart       string   `yaml:"chart"`
	X           string   `yaml:"x"`
	Y           []string `yaml:"y"`
	Series      string   `yaml:"series"`
	Params      []string `yaml:"params"`
	Rate        *Rate    `yaml:"rate"`
	Top         int      `yaml:"top"`
	TopBy       string   `yaml:"top_by"`
	Thresholds  []string `yaml:"thresholds"`
	Bucket      string   `yaml:"bucket"`
	Layout      string   `yaml:"layout"`
	Group       *Group   `yaml:"group"`
	Limit       int      `yaml:"limit"`
	Half        bool     `yaml:"half"`
	Empty       string   `yaml:"empty"`
}

// Load returns every embedded definition, sorted by Name, validated. The error lists every
// problem found (errors.Join), each naming the file and the panel.
func Load() ([]Dashboard, error) {
	cols, err := LoadColumns()
	if err != nil {
		return nil, err
	}
	return load(definitions, queryTexts(), cols)
}

// queryTexts maps every query name in package sql to its text.
func queryTexts() map[string]string {
	out := map[string]string{}
	for _, name := range sql.Names() {
		out[name] = sql.Query(name)
	}
	return out
}

// load reads every *.yaml file of fsys but columns.yaml; queries maps query names to their
// SQL; every column a panel names must have an entry in cols.
func load(fsys fs.FS, queries map[string]string, cols Columns) ([]Dashboard, error) {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, err
	}
	names = slices.DeleteFunc(names, func(n string) bool { return n == columnsFile })
	slices.Sort(names)
	var (
		out  []Dashboard
		errs []error
	)
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d, problems := parse(path.Join("dashboards", name), data, queries)
		d.Columns = cols
		for _, p := range d.Panels {
			for _, c := range p.Columns() {
				if _, ok := cols[c]; !ok {
					problems = append(problems, fmt.Errorf("dashboards/%s: panel %q: column %q has no entry in dashboards/%s (its label and format)", name, p.ID, c, columnsFile))
				}
			}
		}
		errs = append(errs, problems...)
		if len(problems) == 0 {
			out = append(out, d)
		}
	}
	if len(names) == 0 {
		errs = append(errs, errors.New("dashboards: no definition (*.yaml)"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// parse decodes and validates one definition; file is its path for messages.
func parse(file string, data []byte, queries map[string]string) (Dashboard, []error) {
	var problems []error
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Errorf("%s: %s", file, fmt.Sprintf(format, args...)))
	}
	d := Dashboard{Name: strings.TrimSuffix(path.Base(file), ".yaml")}
	if !slugRE.MatchString(d.Name) {
		bad("file name %q: want lowercase letters, digits and '-' (it is the URL slug)", d.Name)
	}
	var f definitionYAML
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		bad("%v", err)
		return d, problems
	}
	d.Title, d.Description = f.Title, f.Description
	if strings.TrimSpace(f.Title) == "" {
		bad("title is missing")
	}
	if len(f.Panels) == 0 {
		bad("no panels")
	}
	seen := map[string]bool{}
	for i, py := range f.Panels {
		p := Panel(py)
		if p.Series != "" && p.Top == 0 && p.Chart != ChartTable {
			p.Top = DefaultTop
		}
		label := fmt.Sprintf("panel #%d", i+1)
		if p.ID != "" {
			label = fmt.Sprintf("panel %q", p.ID)
		}
		for _, msg := range p.validate(queries) {
			bad("%s: %s", label, msg)
		}
		if p.ID != "" {
			if seen[p.ID] {
				bad("%s: the id is used by another panel of this dashboard", label)
			}
			seen[p.ID] = true
		}
		d.Panels = append(d.Panels, p)
	}
	return d, problems
}

// validate lists the panel's problems; queries maps query names to their SQL.
func (p Panel) validate(queries map[string]string) []string {
	var out []string
	problem := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if !slugRE.MatchString(p.ID) {
		problem("id %q: want lowercase letters, digits and '-'", p.ID)
	}
	if strings.TrimSpace(p.Title) == "" {
		problem("title is missing")
	}
	for _, name := range p.Params {
		if !slices.Contains(paramNames, name) {
			problem("unknown param %q: want one of %s", name, strings.Join(paramNames, ", "))
		}
	}
	for _, q := range []struct{ field, name string }{{"query", p.Query}, {"raw_query", p.RawQuery}} {
		if q.name == "" {
			if q.field == "query" {
				problem("query is missing")
			}
			continue
		}
		text, ok := queries[q.name]
		if !ok {
			problem("unknown %s %q: no sql/queries/%s.sql", q.field, q.name, q.name)
			continue
		}
		n, err := countPlaceholders(text)
		switch {
		case err != nil:
			problem("%s %q: %v", q.field, q.name, err)
		case n != len(p.Params):
			problem("%s %q has %d \"?\" placeholders but params lists %d", q.field, q.name, n, len(p.Params))
		}
	}
	switch p.Chart {
	case ChartTable:
		if p.X != "" || len(p.Y) > 0 || p.Series != "" {
			problem("a table names no x, y or series (it shows every column)")
		}
	case ChartLine, ChartBar, ChartStackedBar, ChartPie:
		if p.X == "" {
			problem("chart %q needs x", p.Chart)
		}
		switch {
		case len(p.Y) == 0:
			problem("chart %q needs at least one y column", p.Chart)
		case p.Chart == ChartPie && len(p.Y) != 1:
			problem("a pie draws exactly one y column, not %d", len(p.Y))
		case p.Series != "" && len(p.Y) != 1:
			problem("with series %q the chart draws exactly one y column, not %d", p.Series, len(p.Y))
		}
		if p.Chart == ChartPie && p.Series != "" {
			problem("a pie has no series")
		}
	case ChartFunnel:
		if p.X == "" || len(p.Y) < 2 {
			problem("a funnel needs x (one funnel per value) and at least two y columns (its steps)")
		}
		if p.Series != "" || p.Rate != nil || len(p.Thresholds) > 0 {
			problem("a funnel has no series, rate or thresholds")
		}
	default:
		problem("unknown chart type %q: want one of %s", p.Chart, strings.Join(chartTypes, ", "))
	}
	for _, c := range p.Columns() {
		if strings.ContainsAny(c, " \t\n\"'`") {
			problem("column %q is not a plain column name", c)
		}
	}
	if p.Rate != nil {
		if p.Rate.Numerator == "" || p.Rate.Denominator == "" {
			problem("rate needs numerator and denominator columns")
		}
		if p.Chart == ChartTable || p.Chart == ChartPie || len(p.Y) != 1 {
			problem("rate applies to a line or bar chart of exactly one y column")
		}
	}
	switch {
	case p.Top < 0:
		problem("top %d: want 0 or more", p.Top)
	case p.Top > MaxSeries-1 && p.Chart != ChartTable:
		problem("top %d: a chart draws at most %d series, \"other\" included, so top is at most %d", p.Top, MaxSeries, MaxSeries-1)
	}
	if p.Top > 0 && p.Series == "" && p.Chart != ChartFunnel && p.Group == nil {
		problem("top applies to a chart with series, a funnel or a grouped table")
	}
	if len(p.Thresholds) > 0 && (p.Series == "" || p.Chart != ChartLine) {
		problem("thresholds apply to a line chart with series")
	}
	if p.Bucket != "" && !slices.Contains(buckets, p.Bucket) {
		problem("bucket %q: want one of %s", p.Bucket, strings.Join(buckets, ", "))
	}
	if p.Layout != "" && (p.Layout != LayoutMultiples || p.Series == "" || p.Chart == ChartPie || p.Chart == ChartTable) {
		problem("layout %q: only %q, for a line or bar chart with series", p.Layout, LayoutMultiples)
	}
	if p.Group != nil && (p.Chart != ChartTable || p.Group.By == "") {
		problem("group applies to a table and names a column (by)")
	}
	if p.Limit < 0 || p.Limit > MaxLimit {
		problem("limit %d: want 1 to %d", p.Limit, MaxLimit)
	}
	if p.Limit > 0 && !slices.Contains(p.Params, ParamLimit) {
		problem("limit is set but the query takes no limit parameter")
	}
	return out
}

// Columns are the columns the panel names (X, Series, Y, the rate's counts, TopBy,
// Thresholds, the group column), without empty names or repeats.
func (p Panel) Columns() []string {
	all := append([]string{p.X, p.Series}, p.Y...)
	if p.Rate != nil {
		all = append(all, p.Rate.Numerator, p.Rate.Denominator)
	}
	all = append(all, p.TopBy)
	all = append(all, p.Thresholds...)
	if p.Group != nil {
		all = append(all, p.Group.By)
	}
	var out []string
	for _, c := range all {
		if c != "" && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// RankColumn is the column whose sum ranks a chart's series (TopBy, else the rate's
// denominator, else Y[0]).
func (p Panel) RankColumn() string {
	switch {
	case p.TopBy != "":
		return p.TopBy
	case p.Rate != nil:
		return p.Rate.Denominator
	case len(p.Y) > 0:
		return p.Y[0]
	}
	return ""
}

// CheckParams reports whether p's Params can bind query: every name is a Param* constant and
// there are as many as the query's "?" placeholders (counted as clickhouse-go's binder counts
// them). Alert rules that name a query of their own use it.
func CheckParams(p Panel, query string) error {
	var errs []error
	for _, name := range p.Params {
		if !slices.Contains(paramNames, name) {
			errs = append(errs, fmt.Errorf("unknown param %q: want one of %s", name, strings.Join(paramNames, ", ")))
		}
	}
	n, err := countPlaceholders(query)
	switch {
	case err != nil:
		errs = append(errs, err)
	case n != len(p.Params):
		errs = append(errs, fmt.Errorf("%d \"?\" placeholders but params lists %d", n, len(p.Params)))
	}
	return errors.Join(errs...)
}
