package bench

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// The Kafka-engine peer stores the columns mcpulse stores: its table is created AS
// mcpulse.tool_calls (same columns, types and engine, whatever the migrations make them), and
// its materialized view fills each column from the message the way mcpulse's consumer does,
// as far as a SELECT can. This file says how, column by column; a column of tool_calls that is
// in neither peerColumns nor peerDerived is a column the comparison forgot (the tests fail).

// peerColumns maps a tool_calls column to the SQL that computes it from the Kafka table. In the
// SQL, {KEY} stands for the property KEY of the event's `properties` object, read by the
// JSONEachRow format as the ClickHouse type peerProperties gives it; uuid, event, distinct_id
// and timestamp are the envelope's own fields (Strings). Each value is CAST to the column's
// type. The rules restate ingest's (DESIGN.md §2, §4): they are what a user of the Kafka engine
// would write for the same table.
var peerColumns = map[string]string{
	"uuid":             "toUUID(uuid)",
	"timestamp":        "parseDateTimeBestEffort(timestamp)",
	"distinct_id":      "distinct_id",
	"tool_name":        "if({$mcp_exec_verb} = 'call' AND {$mcp_exec_target_tool} NOT IN ('', 'unrecognized'), {$mcp_exec_target_tool}, {$mcp_tool_name})",
	"raw_tool_name":    "{$mcp_tool_name}",
	"exec_verb":        "{$mcp_exec_verb}",
	"exec_target_tool": "{$mcp_exec_target_tool}",
	"client_name":      "{$mcp_client_name}",
	"client_version":   "{$mcp_client_version}",
	"mode":             "{$mcp_mode}",
	"conversation_id":  "{$mcp_conversation_id}",
	"session_id":       "{$session_id}",
	"source":           "if({source} != '', {source}, {$mcp_source})",
	"is_error":         "{$mcp_is_error}",
	"error_type":       "{$mcp_error_type}",
	"duration_ms":      "{$mcp_duration_ms}",
	// $mcp_ignored_keys as reported (mcpulse's own contract); for the SDK's calls, which report
	// none, mcpulse derives the keys (misuse) and the peer stores none.
	"ignored_keys": "{$mcp_ignored_keys}",
	// mcpulse leaves the keys MCP clients inject (DESIGN.md §2) out of the counted ones; the
	// peer stores the same array twice, which costs it the same bytes.
	"counted_ignored_keys": "{$mcp_ignored_keys}",
	"ignored_keys_total":   "ifNull({$mcp_ignored_keys_total}, length({$mcp_ignored_keys}))",
	"recruitment_reason":   "{interview_recruitment_reason}",
	"url_supported":        "{interview_recruitment_url_supported}",
	"form_supported":       "{interview_recruitment_form_supported}",
	"campaign_id":          "{interview_recruitment_campaign_id}",
	"completed_calls":      "{interview_recruitment_completed_calls}",
	"session_age_seconds":  "{interview_recruitment_session_age_seconds}",
	"inserted_at":          "now()",
	// Columns the SDK's properties fill (CONTRACTS.md: raw tool_calls columns).
	"server_name":      "{$mcp_server_name}",
	"server_version":   "{$mcp_server_version}",
	"protocol_version": "{$mcp_protocol_version}",
	"intent":           "{$mcp_intent}",
	"intent_source":    "{$mcp_intent_source}",
	"error_message":    "{$mcp_error_message}",
}

// peerDerived are the tool_calls columns mcpulse derives with more than a SELECT can do (from
// the Kafka message's position, from state, or by re-encoding): the peer leaves them at their
// default, and the result lists them.
var peerDerived = []string{
	"properties",          // the properties no column holds, as JSON text: 18.16's JSONEachRow cannot read an object into a String
	"kafka_partition",     // the Kafka position: 18.16's Kafka engine has no _partition/_offset columns
	"kafka_offset",        //
	"ignored_keys_source", // derived from the response or the served schema (misuse package)
	"ignored_keys_reason",
	"error_class",
	"unknown_tool",
	"folded_tool_name", // what a cardinality cap folded: state of the consumer's (the peer folds nothing)
	"folded_client_name",
	"folded_key_paths",
	"intent_details", // identifying details found in the intent by package intents/details (Go patterns, with rejections no SELECT restates)
	"intent_masked",  // the intent with those details masked
}

// peerProperties is the ClickHouse type the JSONEachRow format reads each property into (a
// property the event lacks reads as the type's default; Nullable types read JSON null and
// absence as NULL). 18.16's JSONEachRow reads true/false and "true"/"false" into UInt8.
var peerProperties = map[string]string{
	"$mcp_tool_name":                            "String",
	"$mcp_exec_verb":                            "String",
	"$mcp_exec_target_tool":                     "String",
	"$mcp_client_name":                          "String",
	"$mcp_client_version":                       "String",
	"$mcp_mode":                                 "String",
	"$mcp_conversation_id":                      "String",
	"$session_id":                               "String",
	"source":                                    "String",
	"$mcp_source":                               "String",
	"$mcp_is_error":                             "UInt8",
	"$mcp_error_type":                           "String",
	"$mcp_duration_ms":                          "Nullable(Float64)",
	"$mcp_ignored_keys":                         "Array(String)",
	"$mcp_ignored_keys_total":                   "Nullable(UInt32)",
	"interview_recruitment_reason":              "String",
	"interview_recruitment_url_supported":       "Nullable(UInt8)",
	"interview_recruitment_form_supported":      "Nullable(UInt8)",
	"interview_recruitment_campaign_id":         "String",
	"interview_recruitment_completed_calls":     "Nullable(Int64)",
	"interview_recruitment_session_age_seconds": "Nullable(Float64)",
	"$mcp_server_name":                          "String",
	"$mcp_server_version":                       "String",
	"$mcp_protocol_version":                     "String",
	"$mcp_intent":                               "String",
	"$mcp_intent_source":                        "String",
	"$mcp_error_message":                        "String",
}

// tableColumn is one column of a table as DESCRIBE TABLE lists it.
type tableColumn struct {
	Name, Type  string
	DefaultKind string // "", "DEFAULT", "MATERIALIZED" or "ALIAS"
}

// peerPlan is the Kafka-engine peer's schema for a given tool_calls column set.
type peerPlan struct {
	// input lists the Kafka table's columns (name and type), envelope fields first.
	input [][2]string
	// selects are the view's "CAST(expr AS type) AS column" items, in tool_calls order.
	selects []string
	// defaults are the tool_calls columns the peer leaves at their default (peerDerived).
	defaults []string
	// unmapped are tool_calls columns in neither peerColumns nor peerDerived.
	unmapped []string
}

// defaultOf is an expression of type typ holding the type's default value.
func defaultOf(typ string) string {
	switch {
	case strings.HasPrefix(typ, "Nullable("):
		return "CAST(NULL AS " + typ + ")"
	case strings.HasPrefix(typ, "Array("):
		return "CAST([] AS " + typ + ")"
	}
	return "assumeNotNull(CAST(NULL AS Nullable(" + typ + ")))"
}

var propertyRef = regexp.MustCompile(`\{([^{}]+)\}`)

// identifier matches a key that ClickHouse 18.16 splits off a dotted column name: its
// JSONEachRow reader treats "properties" as a nested object only when some column
// "properties.KEY" has such a KEY ("properties.$mcp_tool_name" alone is not split).
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// planPeer builds the peer's Kafka table and view from tool_calls' columns.
func planPeer(columns []tableColumn) (*peerPlan, error) {
	p := &peerPlan{input: [][2]string{{"uuid", "String"}, {"event", "String"}, {"distinct_id", "String"}, {"timestamp", "String"}}}
	used := map[string]bool{}
	for _, c := range columns {
		if c.DefaultKind == "MATERIALIZED" || c.DefaultKind == "ALIAS" {
			continue // computed by the table itself
		}
		expr, ok := peerColumns[c.Name]
		if !ok {
			if slices.Contains(peerDerived, c.Name) {
				p.defaults = append(p.defaults, c.Name)
			} else {
				p.unmapped = append(p.unmapped, c.Name)
			}
			// Selected explicitly: 18.16 refuses to default a column named like the Kafka
			// table's nested "properties" ("Expected column properties").
			p.selects = append(p.selects, fmt.Sprintf("%s AS `%s`", defaultOf(c.Type), c.Name))
			continue
		}
		var missing []string
		expr = propertyRef.ReplaceAllStringFunc(expr, func(ref string) string {
			key := ref[1 : len(ref)-1]
			if _, ok := peerProperties[key]; !ok {
				missing = append(missing, key)
			}
			used[key] = true
			return "`properties." + key + "`"
		})
		if len(missing) > 0 {
			return nil, fmt.Errorf("BUG: peer column %s reads properties %s that peerProperties gives no type", c.Name, strings.Join(missing, ", "))
		}
		p.selects = append(p.selects, fmt.Sprintf("CAST(%s AS %s) AS `%s`", expr, c.Type, c.Name))
	}
	keys := make([]string, 0, len(used))
	hasIdentifier := false
	for k := range used {
		keys = append(keys, k)
		hasIdentifier = hasIdentifier || identifier.MatchString(k)
	}
	if !hasIdentifier {
		keys = append(keys, "source") // read, not stored: see identifier
	}
	slices.Sort(keys)
	for _, k := range keys {
		p.input = append(p.input, [2]string{"properties." + k, peerProperties[k]})
	}
	return p, nil
}
