// Package alerts evaluates mcpulse's alert rules and notifies receivers once when an alert
// starts firing and once when it resolves, however many scheduler replicas evaluate them.
//
// A rule is one YAML file next to the dashboards (dashboards/alerts/*.yaml, embedded; more can
// be loaded from a directory): it names a query in sql/queries or a dashboard panel, the column
// compared, a threshold or a change against the previous period of the same length, a minimum
// volume, the columns that name one alert instance, and its receivers. Receivers are
// configured apart from the rules (their URLs are secrets): a generic webhook that gets the
// Alertmanager webhook JSON (version 4), or a Slack incoming webhook.
//
// State lives in ClickHouse (migration 0029): every instance is a chain of transitions whose
// ids are deterministic, and every delivery to a receiver is claimed in Redis and recorded in
// ClickHouse; see Evaluator for why two replicas never send twice.
package alerts

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/mcpulse/mcpulse/dashboards"
	"github.com/mcpulse/mcpulse/sql"
)

//go:embed *.yaml
var defaultRules embed.FS

// Rule is one alert rule.
type Rule struct {
	// Name is the file name without .yaml, e.g. "dead-letter-rate": the alertname label.
	Name        string
	Title       string
	Description string
	// Severity is "critical", "warning" or "info" (a label of every alert).
	Severity string
	// Query names sql/queries/<Query>.sql; Params are its "?" parameters (dashboards.Param*),
	// bound for the evaluated window. Set when the rule names a query.
	Query  string
	Params []string
	// Panel is "dashboard/panel-id" when the rule reads a dashboard panel's query (with the
	// panel's parameters) instead of a query of its own.
	Panel string
	// Value is the column compared; Volume optionally the column a row's volume is read from,
	// and MinVolume the least volume a row needs to fire (below it the instance is treated as
	// not firing, so a handful of calls cannot raise an alert).
	Value     string
	Volume    string
	MinVolume float64
	// Labels are the columns whose values name one alert instance (e.g. tool_name); none makes
	// the rule one instance.
	Labels []string
	// Window is the range each evaluation reads: [now - Window, now).
	Window time.Duration
	// Threshold fires when Value is above (or below) a fixed value; Change fires when Value
	// moved against a baseline. Exactly one is set.
	Threshold *Threshold
	Change    *Change
	// Receivers name the receivers notified (ReceiversConfig).
	Receivers []string
	// Details are further columns shown in the notification (e.g. the top dead-letter class).
	Details []string
}

// Threshold compares the value with a fixed number: it fires when value > Above (or value <
// Below). Exactly one of the two is set.
type Threshold struct {
	Above *float64 `yaml:"above"`
	Below *float64 `yaml:"below"`
}

// Change compares the value with a baseline: the same query over the previous period of the
// same length ([now - 2·Window, now - Window), matched by the label columns), or a column of
// the row itself (e.g. the rate of the previous server version). It fires when value -
// baseline > Above, or with Relative when (value - baseline) / baseline > Above.
type Change struct {
	// Baseline is "previous_period" or a column name.
	Baseline string  `yaml:"baseline"`
	Above    float64 `yaml:"above"`
	Relative bool    `yaml:"relative"`
	// MinBaselineVolume is the least volume the baseline needs (previous_period: its row's
	// Volume; a column baseline: the column named here). 0: no minimum.
	MinBaselineVolume float64 `yaml:"min_baseline_volume"`
	// BaselineVolume is the column holding the baseline's volume for a column baseline.
	BaselineVolume string `yaml:"baseline_volume"`
}

// BaselinePreviousPeriod is Change.Baseline for the previous period of the same length.
const BaselinePreviousPeriod = "previous_period"

// Severities of Rule.Severity.
var severities = []string{"critical", "warning", "info"}

type ruleYAML struct {
	Title       string     `yaml:"title"`
	Description string     `yaml:"description"`
	Severity    string     `yaml:"severity"`
	Query       string     `yaml:"query"`
	Params      []string   `yaml:"params"`
	Panel       string     `yaml:"panel"`
	Value       string     `yaml:"value"`
	Volume      string     `yaml:"volume"`
	MinVolume   float64    `yaml:"min_volume"`
	Labels      []string   `yaml:"labels"`
	Window      string     `yaml:"window"`
	Threshold   *Threshold `yaml:"threshold"`
	Change      *Change    `yaml:"change"`
	Receivers   []string   `yaml:"receivers"`
	Details     []string   `yaml:"details"`
}

var nameRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// DefaultRules returns the rules shipped in dashboards/alerts, validated against the
// dashboards and queries.
func DefaultRules(ds []dashboards.Dashboard) ([]Rule, error) {
	return loadRules(defaultRules, "dashboards/alerts", ds)
}

// LoadRulesDir returns the rules of dir/*.yaml (a deployment's own rules), validated.
func LoadRulesDir(dir string, ds []dashboards.Dashboard) ([]Rule, error) {
	return loadRules(os.DirFS(dir), filepath.ToSlash(dir), ds)
}

func loadRules(fsys fs.FS, dir string, ds []dashboards.Dashboard) ([]Rule, error) {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	var (
		out  []Rule
		errs []error
	)
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r, problems := parseRule(path.Join(dir, name), data, ds)
		errs = append(errs, problems...)
		if len(problems) == 0 {
			out = append(out, r)
		}
	}
	if len(names) == 0 {
		errs = append(errs, fmt.Errorf("%s: no alert rule (*.yaml)", dir))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// parseRule decodes and validates one rule; file is its path for messages.
func parseRule(file string, data []byte, ds []dashboards.Dashboard) (Rule, []error) {
	var problems []error
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Errorf("%s: %s", file, fmt.Sprintf(format, args...)))
	}
	r := Rule{Name: strings.TrimSuffix(path.Base(file), ".yaml")}
	if !nameRE.MatchString(r.Name) {
		bad("file name %q: want lowercase letters, digits and '-' (it is the alertname)", r.Name)
	}
	var y ruleYAML
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&y); err != nil {
		bad("%v", err)
		return r, problems
	}
	r.Title, r.Description, r.Severity = y.Title, y.Description, y.Severity
	r.Query, r.Params, r.Panel = y.Query, y.Params, y.Panel
	r.Value, r.Volume, r.MinVolume, r.Labels = y.Value, y.Volume, y.MinVolume, y.Labels
	r.Threshold, r.Change, r.Receivers, r.Details = y.Threshold, y.Change, y.Receivers, y.Details
	if strings.TrimSpace(r.Title) == "" {
		bad("title is missing")
	}
	if r.Severity == "" {
		r.Severity = "warning"
	}
	if !slices.Contains(severities, r.Severity) {
		bad("severity %q: want one of %s", r.Severity, strings.Join(severities, ", "))
	}
	window, err := time.ParseDuration(y.Window)
	switch {
	case y.Window == "":
		bad("window is missing (e.g. 1h: each evaluation reads the last hour)")
	case err != nil || window < time.Minute:
		bad("window %q: want a duration of at least 1m, e.g. 1h", y.Window)
	default:
		r.Window = window
	}
	columns := r.validateSource(ds, bad)
	if r.Value == "" {
		bad("value is missing (the column compared)")
	}
	if r.MinVolume < 0 {
		bad("min_volume %v: want 0 or more", r.MinVolume)
	}
	if r.MinVolume > 0 && r.Volume == "" {
		bad("min_volume needs volume (the column the volume is read from)")
	}
	switch {
	case (r.Threshold == nil) == (r.Change == nil):
		bad("set exactly one of threshold (a fixed value) and change (against a baseline)")
	case r.Threshold != nil && (r.Threshold.Above == nil) == (r.Threshold.Below == nil):
		bad("threshold: set exactly one of above and below")
	case r.Change != nil && r.Change.Baseline == "":
		bad("change: baseline is missing (%s or a column)", BaselinePreviousPeriod)
	case r.Change != nil && r.Change.Baseline != BaselinePreviousPeriod && r.Change.MinBaselineVolume > 0 && r.Change.BaselineVolume == "":
		bad("change: min_baseline_volume with a column baseline needs baseline_volume")
	}
	if len(r.Receivers) == 0 {
		bad("receivers is missing (the receivers notified, by name)")
	}
	// Every column the rule names must be one the query returns, as far as it can be told
	// without running it: the names must at least be plain and labelled.
	named := append([]string{r.Value, r.Volume}, r.Labels...)
	named = append(named, r.Details...)
	if r.Change != nil && r.Change.Baseline != BaselinePreviousPeriod {
		named = append(named, r.Change.Baseline, r.Change.BaselineVolume)
	}
	for _, c := range named {
		if c == "" {
			continue
		}
		if strings.ContainsAny(c, " \t\n\"'`") {
			bad("column %q is not a plain column name", c)
		} else if columns != nil {
			if _, ok := columns[c]; !ok {
				bad("column %q has no entry in dashboards/columns.yaml (its label and format)", c)
			}
		}
	}
	return r, problems
}

// validateSource checks Query/Params or Panel and returns the column catalogue.
func (r *Rule) validateSource(ds []dashboards.Dashboard, bad func(string, ...any)) dashboards.Columns {
	var columns dashboards.Columns
	if len(ds) > 0 {
		columns = ds[0].Columns
	}
	switch {
	case (r.Query == "") == (r.Panel == ""):
		bad("set exactly one of query (sql/queries/<name>.sql) and panel (dashboard/panel-id)")
	case r.Panel != "":
		if len(r.Params) > 0 {
			bad("params come from the panel; a panel rule lists none")
		}
		if _, ok := FindPanel(ds, r.Panel); !ok {
			bad("panel %q: no such dashboard panel (want dashboard/panel-id)", r.Panel)
		}
	default:
		if !slices.Contains(sql.Names(), r.Query) {
			bad("query %q: no sql/queries/%s.sql", r.Query, r.Query)
			break
		}
		p := dashboards.Panel{ID: r.Name, Params: r.Params}
		if err := dashboards.CheckParams(p, sql.Query(r.Query)); err != nil {
			bad("query %q: %v", r.Query, err)
		}
	}
	return columns
}

// FindPanel returns the panel "dashboard/panel-id" of ds.
func FindPanel(ds []dashboards.Dashboard, ref string) (dashboards.Panel, bool) {
	dash, id, ok := strings.Cut(ref, "/")
	if !ok {
		return dashboards.Panel{}, false
	}
	for _, d := range ds {
		if d.Name != dash {
			continue
		}
		for _, p := range d.Panels {
			if p.ID == id {
				return p, true
			}
		}
	}
	return dashboards.Panel{}, false
}

// source is the query a rule runs and the panel whose Params bind it.
func (r Rule) source(ds []dashboards.Dashboard) dashboards.Panel {
	if r.Panel != "" {
		p, _ := FindPanel(ds, r.Panel)
		return p
	}
	return dashboards.Panel{ID: r.Name, Query: r.Query, Params: r.Params}
}

// ThresholdText says what the rule fires on, e.g. "above 1%", or "up more than 5 pp on the
// previous period" (a column baseline is named by its label in cols), the values formatted as
// the rule's value column is.
func (r Rule) ThresholdText(cols dashboards.Columns) string {
	format := cols.Spec(r.Value).Format
	switch {
	case r.Threshold != nil && r.Threshold.Above != nil:
		return "above " + dashboards.FormatValue(format, *r.Threshold.Above)
	case r.Threshold != nil && r.Threshold.Below != nil:
		return "below " + dashboards.FormatValue(format, *r.Threshold.Below)
	case r.Change != nil:
		by := dashboards.FormatValue(format, r.Change.Above)
		if r.Change.Relative {
			by = dashboards.Percent(r.Change.Above)
		} else if format == dashboards.FormatPercent {
			by = dashboards.FormatValue(dashboards.FormatPoints, r.Change.Above)
		}
		against := "the previous period"
		if r.Change.Baseline != BaselinePreviousPeriod {
			against = strings.ToLower(cols.Label(r.Change.Baseline))
		}
		return "up more than " + strings.TrimPrefix(by, "+") + " on " + against
	}
	return ""
}
