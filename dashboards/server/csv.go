package server

import (
	"bytes"
	"context"
	"encoding/csv"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/mcpulse/mcpulse/dashboards"
	"github.com/mcpulse/mcpulse/internal/safetext"
)

// csv answers one panel's result as CSV (RFC 4180, quoted by encoding/csv), with the page's
// filters.
func (s *Server) csv(w http.ResponseWriter, r *http.Request) {
	d, ok := s.byName[r.PathValue("name")]
	if !ok {
		textError(w, http.StatusNotFound, "no dashboard named "+safetext.Quote(r.PathValue("name"))+"; the list is at /")
		return
	}
	var panel *dashboards.Panel
	for i := range d.Panels {
		if d.Panels[i].ID == r.PathValue("panel") {
			panel = &d.Panels[i]
		}
	}
	if panel == nil {
		textError(w, http.StatusNotFound, "dashboard "+strconv.Quote(d.Name)+" has no panel "+safetext.Quote(r.PathValue("panel")))
		return
	}
	filters, _, err := requestFilters(r)
	if err != nil {
		textError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.QueryTimeout)
	defer cancel()
	res, err := s.run(ctx, d, *panel, filters)
	if err != nil {
		textError(w, http.StatusBadGateway, "the panel's query failed: "+err.Error())
		return
	}
	var b bytes.Buffer
	if err := writeCSV(&b, res); err != nil {
		textError(w, http.StatusInternalServerError, "writing CSV: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8; header=present")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": d.Name + "-" + panel.ID + ".csv"}))
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b.Bytes())
}

// writeCSV writes res as CSV: a header row of column names, then one record per row. NULL is
// an empty field, times are UTC ("2006-01-02 15:04:05", or "2006-01-02" for Date columns),
// numbers are written in full precision. Text cells (and column names) are guarded against
// spreadsheet formula injection (OWASP "CSV Injection"): one starting with '=', '+', '-', '@',
// a tab or a carriage return gets a leading single quote, so a spreadsheet shows it as text
// instead of evaluating it. Numbers are not guarded: a negative number is data, not a formula.
// Otherwise text is written exactly as stored, control and bidi characters included (the
// pages show those escaped): the CSV is the data for analysis, and a value copied from it
// must find the same rows in ClickHouse.
func writeCSV(w io.Writer, res *dashboards.Result) error {
	cw := csv.NewWriter(w)
	header := make([]string, len(res.Columns))
	for i, c := range res.Columns {
		header[i] = guardFormula(c.Name)
	}
	if err := cw.Write(header); err != nil {
		return err
	}
	record := make([]string, len(res.Columns))
	for _, row := range res.Rows {
		for i := range record {
			var v any
			if i < len(row) {
				v = row[i]
			}
			switch x := v.(type) {
			case nil:
				record[i] = ""
			case string:
				record[i] = guardFormula(x)
			case float64:
				record[i] = strconv.FormatFloat(x, 'f', -1, 64)
			case time.Time:
				record[i] = cellText(x, res.Columns[i].Type)
			default:
				record[i] = guardFormula(cellText(x, res.Columns[i].Type))
			}
		}
		if err := cw.Write(record); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// guardFormula prefixes a text cell a spreadsheet would read as a formula with a single quote.
func guardFormula(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + s
	}
	return s
}
