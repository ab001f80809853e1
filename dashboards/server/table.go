package server

import (
	"fmt"
	"strings"

	"github.com/mcpulse/mcpulse/dashboards"
)

// tableView is a "table" panel as the template draws it: human headers, formatted cells, and
// with Panel.Group one collapsible section per group.
type tableView struct {
	Columns []tableHeader
	Rows    [][]tableCell // without Group
	Groups  []tableGroup  // with Group
	// Note says what is not shown (groups beyond the panel's Top).
	Note string
}

type tableHeader struct {
	Label string
	// Name is the query's column name (the CSV header), shown as the header's title.
	Name  string
	Class string
}

type tableCell struct {
	Text string
	// Class is "num" (right-aligned), "time" (kept on one line), "missing" (a NULL shown as
	// its column's null text, e.g. "not measured") or "".
	Class string
}

// tableGroup is the rows sharing one value of the group column.
type tableGroup struct {
	Title string
	Rows  [][]tableCell
	Open  bool
}

// numericFormats are right-aligned in tables.
var numericFormats = map[string]bool{
	dashboards.FormatCount: true, dashboards.FormatNumber: true, dashboards.FormatPercent: true,
	dashboards.FormatMillis: true, dashboards.FormatChars: true, dashboards.FormatPoints: true,
	dashboards.FormatChange: true,
}

// tableFor formats res for p: each header is its column's label, each cell formatted by its
// column's format (NULL as the column's null text, by default blank). With p.Group, rows
// are split into one section per group value (in the query's order, the group column left
// out of the rows), the first Group.Open expanded, at most p.Top sections (0: all).
func tableFor(p dashboards.Panel, cols dashboards.Columns, res *dashboards.Result) *tableView {
	t := &tableView{}
	groupCol := -1
	for i, c := range res.Columns {
		if p.Group != nil && c.Name == p.Group.By {
			groupCol = i
			continue
		}
		h := tableHeader{Label: cols.Label(c.Name), Name: c.Name}
		if numericFormats[cols.Spec(c.Name).Format] {
			h.Class = "num"
		}
		t.Columns = append(t.Columns, h)
	}
	groupIndex := map[string]int{}
	for _, row := range res.Rows {
		var cells []tableCell
		for i, v := range row {
			if i == groupCol || i >= len(res.Columns) {
				continue
			}
			c := res.Columns[i]
			spec := cols.Spec(c.Name)
			cell := tableCell{Text: cols.Text(c.Name, v, c.Type)}
			switch {
			case v == nil:
				if cell.Text != "" {
					cell.Class = "missing"
				}
			case numericFormats[spec.Format]:
				cell.Class = "num"
			case spec.Format == dashboards.FormatTime || spec.Format == dashboards.FormatDate || isTimeType(c.Type):
				cell.Class = "time"
			}
			cells = append(cells, cell)
		}
		if groupCol < 0 {
			t.Rows = append(t.Rows, cells)
			continue
		}
		title := cols.Text(p.Group.By, row[groupCol], res.Columns[groupCol].Type)
		gi, ok := groupIndex[title]
		if !ok {
			gi = len(t.Groups)
			groupIndex[title] = gi
			t.Groups = append(t.Groups, tableGroup{Title: title, Open: gi < p.Group.Open})
		}
		t.Groups[gi].Rows = append(t.Groups[gi].Rows, cells)
	}
	if p.Top > 0 && len(t.Groups) > p.Top {
		t.Note = fmt.Sprintf("The first %d of %d %s; the CSV holds every one.", p.Top, len(t.Groups), plural(len(t.Groups), strings.ToLower(cols.Label(p.Group.By))))
		t.Groups = t.Groups[:p.Top]
	}
	return t
}
