package dashboards

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/mcpulse/mcpulse/internal/safetext"
)

// ColumnSpec is how one result column is shown wherever it appears (table headers, axis
// titles, legends, tooltips, alert messages): dashboards/columns.yaml holds one entry per
// column name, so a column reads the same on every panel.
type ColumnSpec struct {
	// Label is the human header, e.g. "Ignored-key rate".
	Label string `yaml:"label"`
	// Format is one of the Format* constants (default FormatText).
	Format string `yaml:"format"`
	// Null (YAML "missing") is the text shown for NULL, e.g. "not measured" for a rate without a measurable
	// call; default "" (a blank cell, never the word NULL).
	Null string `yaml:"missing"`
	// Unit names what a count counts, e.g. "calls", for tooltips ("16 of 70 calls"); optional.
	Unit string `yaml:"unit"`
}

// Display formats of ColumnSpec.Format.
const (
	FormatText    = "text"    // as it is
	FormatCount   = "count"   // a whole number with thousands separators: 12,345
	FormatNumber  = "number"  // up to 3 decimals: 1.875
	FormatPercent = "percent" // a ratio 0..1 shown as a percentage: 0.228571 -> 22.9%
	FormatMillis  = "ms"      // a duration in milliseconds: 840 ms, 1.24 s
	FormatChars   = "chars"   // a size in characters: 27,719 chars
	FormatTime    = "time"    // a UTC time: 2026-11-30 14:03:07
	FormatHour    = "hour"    // the start of a UTC hour: 2026-11-30 14:00
	FormatDate    = "date"    // a UTC date: 2026-11-30
	FormatBool    = "bool"    // 1/0 as yes/no
	FormatPoints  = "pp"      // a difference of two ratios in percentage points: 0.021 -> +2.1 pp
	FormatChange  = "change"  // a relative change: 0.35 -> +35%, -0.5 -> -50%
)

var formats = []string{FormatText, FormatCount, FormatNumber, FormatPercent, FormatMillis, FormatChars, FormatTime, FormatHour, FormatDate, FormatBool, FormatPoints, FormatChange}

// Columns maps result column names to how they are shown.
type Columns map[string]ColumnSpec

// LoadColumns reads the embedded dashboards/columns.yaml. Every entry needs a label and a
// known format; an unknown field is refused.
func LoadColumns() (Columns, error) {
	data, err := definitions.ReadFile(columnsFile)
	if err != nil {
		return nil, err
	}
	return parseColumns(data)
}

const columnsFile = "columns.yaml"

func parseColumns(data []byte) (Columns, error) {
	var cs Columns
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cs); err != nil {
		return nil, fmt.Errorf("dashboards/%s: %w", columnsFile, err)
	}
	var errs []error
	for name, c := range cs {
		if strings.TrimSpace(c.Label) == "" {
			errs = append(errs, fmt.Errorf("dashboards/%s: column %q has no label", columnsFile, name))
		}
		if c.Format == "" {
			c.Format = FormatText
			cs[name] = c
		}
		if !slices.Contains(formats, c.Format) {
			errs = append(errs, fmt.Errorf("dashboards/%s: column %q: unknown format %q (want one of %s)", columnsFile, name, c.Format, strings.Join(formats, ", ")))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cs, nil
}

// Spec returns the column's spec; a column without an entry is shown under its own name as
// text (the tests refuse such a column on every panel).
func (cs Columns) Spec(name string) ColumnSpec {
	if c, ok := cs[name]; ok {
		return c
	}
	return ColumnSpec{Label: name, Format: FormatText}
}

// Label is the column's human header.
func (cs Columns) Label(name string) string { return cs.Spec(name).Label }

// Text formats one cell of the named column for a person (see ColumnSpec); typ is the
// ClickHouse type of the result column (a Date column is shown as a date whatever the
// format). v is a Result cell: nil, string, float64 or time.Time. Text cells are
// caller-chosen strings (tool names, distinct ids, key paths): their control and bidi
// characters are shown as escapes (safetext.Escape), so "hx-rlo\u202egnp.exe" cannot pass
// for "hx-rloexe.png" in a table, a chart label, a tooltip or an alert.
func (cs Columns) Text(name string, v any, typ string) string {
	c := cs.Spec(name)
	return c.text(v, typ)
}

func (c ColumnSpec) text(v any, typ string) string {
	switch x := v.(type) {
	case nil:
		return c.Null
	case string:
		return safetext.Escape(x)
	case time.Time:
		if c.Format == FormatDate || isDateType(typ) {
			return x.UTC().Format(time.DateOnly)
		}
		if c.Format == FormatHour {
			return x.UTC().Format("2006-01-02 15:04")
		}
		return x.UTC().Format(time.DateTime)
	case float64:
		return FormatValue(c.Format, x)
	default:
		return fmt.Sprint(v)
	}
}

// FormatValue formats a number as format says (see the Format* constants); NaN and
// infinities are "".
func FormatValue(format string, f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return ""
	}
	switch format {
	case FormatCount:
		return groupThousands(strconv.FormatFloat(math.Round(f), 'f', 0, 64))
	case FormatChars:
		return groupThousands(strconv.FormatFloat(math.Round(f), 'f', 0, 64)) + " chars"
	case FormatPercent:
		return Percent(f)
	case FormatMillis:
		switch a := math.Abs(f); {
		case a >= 60000:
			return trimZeros(strconv.FormatFloat(f/60000, 'f', 1, 64)) + " min"
		case a >= 1000:
			return trimZeros(strconv.FormatFloat(f/1000, 'f', 2, 64)) + " s"
		case a >= 10 || a == 0:
			return strconv.FormatFloat(math.Round(f), 'f', 0, 64) + " ms"
		default:
			return trimZeros(strconv.FormatFloat(f, 'f', 1, 64)) + " ms"
		}
	case FormatPoints:
		abs := trimZeros(strconv.FormatFloat(math.Abs(f*100), 'f', 1, 64))
		if abs == "0" {
			return "±0 pp" // no "-0 pp" for a change that rounds away
		}
		return signed(f*100, abs+" pp")
	case FormatChange:
		return signed(f, strings.TrimPrefix(Percent(math.Abs(f)), "<"))
	case FormatBool:
		if f != 0 {
			return "yes"
		}
		return "no"
	case FormatTime:
		return time.UnixMilli(int64(f)).UTC().Format(time.DateTime)
	case FormatHour:
		return time.UnixMilli(int64(f)).UTC().Format("2006-01-02 15:04")
	case FormatDate:
		return time.UnixMilli(int64(f)).UTC().Format(time.DateOnly)
	default:
		if f == math.Trunc(f) && math.Abs(f) < 1e15 {
			return groupThousands(strconv.FormatFloat(f, 'f', 0, 64))
		}
		return trimZeros(strconv.FormatFloat(f, 'f', 3, 64))
	}
}

// Percent shows a ratio as a percentage with one decimal ("22.9%"), keeping small non-zero
// shares visible ("0.04%", "<0.01%") and never rounding a value below 1 up to "100%".
func Percent(ratio float64) string {
	p := ratio * 100
	switch a := math.Abs(p); {
	case p == 0:
		return "0%"
	case a < 0.01:
		if p < 0 {
			return ">-0.01%"
		}
		return "<0.01%"
	case a < 0.1:
		return trimZeros(strconv.FormatFloat(p, 'f', 2, 64)) + "%"
	case ratio < 1 && p >= 99.95:
		return "99.9%"
	default:
		return trimZeros(strconv.FormatFloat(p, 'f', 1, 64)) + "%"
	}
}

// signed puts v's sign before abs, the text of |v|: "+2.1 pp", "-50%", "±0 pp" for zero.
func signed(v float64, abs string) string {
	switch {
	case v > 0:
		return "+" + abs
	case v < 0:
		return "-" + abs
	}
	return "±" + abs
}

func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// groupThousands puts commas between groups of three digits of an integer's text.
func groupThousands(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// isDateType reports a ClickHouse Date (or Nullable(Date)), as opposed to DateTime.
func isDateType(typ string) bool {
	t := strings.TrimSuffix(strings.TrimPrefix(typ, "Nullable("), ")")
	return t == "Date" || t == "Date32"
}
