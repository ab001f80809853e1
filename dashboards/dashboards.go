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
}

// Chart types.
const (
	ChartLine       = "line"
	ChartBar        = "bar"
	ChartStackedBar = "stacked-bar"
	ChartPie        = "pie"
	ChartTable      = "table"
)

// Parameter names a panel's Params may hold; see Filters.Args for the bound values.
const (
	ParamFrom     = "from"     // DateTime (UTC): the first second of the range
	ParamTo       = "to"       // DateTime (UTC): the last whole second of the range
	ParamCampaign = "campaign" // String, "" = all
	ParamClient   = "client"   // String, "" = all
	ParamTool     = "tool"     // String, "" = all
	ParamLimit    = "limit"    // UInt64
)

var (
	chartTypes = []string{ChartLine, ChartBar, ChartStackedBar, ChartPie, ChartTable}
	paramNames = []string{ParamFrom, ParamTo, ParamCampaign, ParamClient, ParamTool, ParamLimit}
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
}

// Load returns every embedded definition, sorted by Name, validated. The error lists every
// problem found (errors.Join), each naming the file and the panel.
func Load() ([]Dashboard, error) {
	return load(definitions, queryTexts())
}

// queryTexts maps every query name in package sql to its text.
func queryTexts() map[string]string {
	out := map[string]string{}
	for _, name := range sql.Names() {
		out[name] = sql.Query(name)
	}
	return out
}

// load reads every *.yaml file of fsys; queries maps query names to their SQL.
func load(fsys fs.FS, queries map[string]string) ([]Dashboard, error) {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, err
	}
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
		for _, c := range append([]string{p.X, p.Series}, p.Y...) {
			if strings.ContainsAny(c, " \t\n\"'`") {
				problem("column %q is not a plain column name", c)
			}
		}
	default:
		problem("unknown chart type %q: want one of %s", p.Chart, strings.Join(chartTypes, ", "))
	}
	return out
}

// Columns are the columns the panel names (X, Series, then Y), without empty names.
func (p Panel) Columns() []string {
	var out []string
	for _, c := range append([]string{p.X, p.Series}, p.Y...) {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}
