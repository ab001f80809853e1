// Package hostile holds the hostile-input suite: scaled-down versions of the probes an
// attacker or a broken MCP server would send (a 900 KB argument key, names of kilobytes, a
// tools list whose schema declares 20,000 keys, a 100 KB query value, 10,001 query
// parameters), run against the real services (testkit/testenv). Each test asserts the bound
// the pipeline applies and that the events around the hostile one are stored and queryable.
// The package holds only tests.
package hostile
