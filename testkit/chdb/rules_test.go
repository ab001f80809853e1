package chdb_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// sqlRules are the differences between ClickHouse 18.16 and current releases that
// TestCurrentEngineAgreesWith1816 found (DESIGN.md §4), checked in the SQL text itself so
// they show without the current engine installed, and whatever data a test holds.
var sqlRules = []struct {
	re   *regexp.Regexp
	rule string
}{
	{regexp.MustCompile(`(?i)\bANY\s+INNER\s+JOIN\b`),
		"ANY INNER JOIN keeps every left row on 18.16 but one row per key on both sides on current releases: write ALL INNER JOIN with a right side that has one row per key"},
	{regexp.MustCompile(`(?i)\)\s*(?:GLOBAL\s+)?(?:(?:ANY|ALL|ASOF|SEMI|ANTI)\s+)?(?:(?:LEFT|RIGHT|INNER|FULL|CROSS)\s+)?(?:OUTER\s+)?JOIN\b`),
		"a subquery joined without an alias (current releases refuse it: joined_subquery_requires_alias): write (SELECT ...) AS name before JOIN"},
	{regexp.MustCompile(`(?i)\)\s*(?:USING|ON)\b`),
		"a subquery joined without an alias (current releases refuse it: joined_subquery_requires_alias): write (SELECT ...) AS name before USING/ON"},
}

// partitionBy finds a table's partition key expression.
var partitionBy = regexp.MustCompile(`(?i)\bPARTITION\s+BY\s+(\S+)`)

// oneValuePerInsert are the partition keys other than a UTC month whose table's writers put
// one value of the key in every INSERT, so no insert spans more than one partition.
var oneValuePerInsert = map[string]string{
	"intDiv(epoch,": "rollup_batches: every INSERT is one batch's markers, of one epoch",
}

// byMonthAndKafkaPartition matches the partition key of the raw tables (migrations 0044 and
// 0045), from its start: the consumer cuts each INSERT into runs of at most
// migrations.MaxPartitionsPerInsert (month, Kafka partition) pairs (consumers byParts), and
// migrate up lifts the limit for the migration's copy where the server has one.
var byMonthAndKafkaPartition = regexp.MustCompile(`^\(toYYYYMM\(\w+\),\s*kafka_partition\)`)

// Every SQL file of the module keeps the rules, comments aside; every partition key is a UTC
// month, a UTC month and the Kafka partition, or one of oneValuePerInsert.
func TestSQLKeepsCurrentClickHouseRules(t *testing.T) {
	root := filepath.Join("..", "..")
	var files []string
	for _, dir := range []string{"migrations/sql", "sql/queries", "sql/campaigns"} {
		matches, err := filepath.Glob(filepath.Join(root, dir, "*.sql"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, matches...)
	}
	if len(files) == 0 {
		t.Fatal("no SQL file found under migrations/sql and sql/queries")
	}
	comment := regexp.MustCompile(`--[^\n]*`)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := comment.ReplaceAllString(string(data), "")
		for _, m := range partitionBy.FindAllStringSubmatchIndex(text, -1) {
			key := text[m[2]:m[3]]
			byMonth := strings.HasPrefix(key, "toYYYYMM(") || byMonthAndKafkaPartition.MatchString(text[m[2]:])
			if _, ok := oneValuePerInsert[key]; !ok && !byMonth {
				line := strings.Count(text[:m[0]], "\n") + 1
				t.Errorf("%s:%d: partition key %s: the writers keep each INSERT within migrations.MaxPartitionsPerInsert UTC months (current releases refuse more partitions per insert), so another key needs its writers changed first", strings.TrimPrefix(f, root+"/"), line, text[m[2]:m[3]])
			}
		}
		for _, r := range sqlRules {
			if loc := r.re.FindStringIndex(text); loc != nil {
				line := strings.Count(text[:loc[0]], "\n") + 1
				t.Errorf("%s:%d: %s", strings.TrimPrefix(f, root+"/"), line, r.rule)
			}
		}
	}
}
