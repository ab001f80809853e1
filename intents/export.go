package intents

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/sql"
)

// MaxGoals bounds a goals file's rows, so a wrong file fails with a clear error instead of
// exhausting memory.
const MaxGoals = 1_000_000

// ReadGoals reads task goals recorded independently of the intents: CSV with a header row
// naming the columns conversation_id and goal (others ignored; order free), one goal per
// conversation (a later row replaces an earlier one). Errors: no such columns, malformed CSV,
// more than MaxGoals rows.
func ReadGoals(r io.Reader) (map[string]string, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("goals: header: %w", err)
	}
	conv, goal := -1, -1
	for i, h := range header {
		switch strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))) {
		case "conversation_id":
			conv = i
		case "goal":
			goal = i
		}
	}
	if conv < 0 || goal < 0 {
		return nil, errors.New("goals: the header must name the columns conversation_id and goal")
	}
	out := map[string]string{}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("goals: %w", err)
		}
		if len(out) >= MaxGoals {
			return nil, fmt.Errorf("goals: more than %d rows", MaxGoals)
		}
		if conv >= len(rec) || goal >= len(rec) {
			return nil, fmt.Errorf("goals: line %d has %d fields", line, len(rec))
		}
		if id := strings.TrimSpace(rec[conv]); id != "" {
			out[id] = rec[goal]
		}
	}
}

// GoalFigures are one version's figures for the goal review: the calls whose conversation has
// a recorded goal, those of them with an intent, and the intents that state uncertainty
// (Hedged), to read against the goals for invented goals and fitting uncertainty.
type GoalFigures struct {
	CallsWithGoal   uint64 `json:"calls_with_goal"`
	IntentsWithGoal uint64 `json:"intents_with_goal"`
	HedgedIntents   uint64 `json:"hedged_intents"`
}

// hedges are the words by which an intent states uncertainty.
var hedges = regexp.MustCompile(`(?i)\b(?:maybe|might|perhaps|possibly|probably|likely|unclear|unsure|not sure|uncertain|seems?|appears?|assum(?:e|ing)|guess|i think|if i understand)\b`)

// Hedged reports whether an intent states uncertainty ("probably", "not sure", "seems", ...).
func Hedged(intent string) bool { return hedges.MatchString(intent) }

// ExportHeader is the header row Export writes.
var ExportHeader = []string{"timestamp", "distinct_id", "client_name", "conversation_id", "tool_name",
	"version_index", "version_label", "has_intent", "words", "intent_details", "intent_masked", "hedged", "goal"}

// Export reads every tool call at from..until with its attributed version
// (sql/queries/intents_export.sql), writes them as CSV to w (nil: none; ExportHeader's
// columns, intent_details ';'-separated, text cells a spreadsheet would take for a formula
// prefixed with a quote) with the goal of its conversation, and returns the goal figures per
// version index (only when goals is not nil). The intent is written masked only. An error is
// the query's or w's.
func Export(ctx context.Context, conn driver.Conn, from, until time.Time, goals map[string]string, w io.Writer) (map[int]GoalFigures, error) {
	rows, err := conn.Query(ctx, sql.Query("intents_export"), from.UTC(), until.UTC())
	if err != nil {
		return nil, fmt.Errorf("intents export: %w", err)
	}
	defer rows.Close()
	var cw *csv.Writer
	if w != nil {
		cw = csv.NewWriter(w)
		if err := cw.Write(ExportHeader); err != nil {
			return nil, err
		}
	}
	figs := map[int]GoalFigures{}
	rec := make([]string, len(ExportHeader))
	for rows.Next() {
		var (
			at                                  time.Time
			distinctID, client, conv, tool, lbl string
			index                               uint32
			hasIntent                           uint8
			words                               uint64
			kinds                               []string
			masked                              string
		)
		if err := rows.Scan(&at, &distinctID, &client, &conv, &tool, &index, &lbl, &hasIntent, &words, &kinds, &masked); err != nil {
			return nil, fmt.Errorf("intents export: %w", err)
		}
		if index == 0 {
			lbl = SDKDefault
		}
		hedged := hasIntent == 1 && Hedged(masked)
		goal, withGoal := goals[conv]
		withGoal = withGoal && conv != ""
		if goals != nil {
			f := figs[int(index)]
			if withGoal {
				f.CallsWithGoal++
				if hasIntent == 1 {
					f.IntentsWithGoal++
				}
			}
			if hedged {
				f.HedgedIntents++
			}
			figs[int(index)] = f
		}
		if cw == nil {
			continue
		}
		rec[0] = at.UTC().Format(time.RFC3339)
		rec[1], rec[2], rec[3], rec[4] = guardFormula(distinctID), guardFormula(client), guardFormula(conv), guardFormula(tool)
		rec[5], rec[6] = strconv.FormatUint(uint64(index), 10), guardFormula(lbl)
		rec[7], rec[8] = strconv.FormatBool(hasIntent == 1), strconv.FormatUint(words, 10)
		rec[9], rec[10], rec[11] = strings.Join(kinds, ";"), guardFormula(masked), strconv.FormatBool(hedged)
		rec[12] = guardFormula(goal)
		if err := cw.Write(rec); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("intents export: %w", err)
	}
	if cw != nil {
		cw.Flush()
		if err := cw.Error(); err != nil {
			return nil, err
		}
	}
	return figs, nil
}

// JoinGoals sets each version's Goals from figs (Export's answer), zero figures for a version
// without.
func (r *Report) JoinGoals(figs map[int]GoalFigures) {
	for i := range r.Versions {
		f := figs[r.Versions[i].Index]
		r.Versions[i].Goals = &f
	}
}

// guardFormula prefixes a text cell a spreadsheet would read as a formula with a single quote
// (OWASP "CSV Injection"), as the dashboards' CSV export does.
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
