package dashboards

import "fmt"

// CountPlaceholders is how many positional "?" parameters clickhouse-go binds in query
// (countPlaceholders says which "?" count); tests use it to bind every query in sql/queries.
func CountPlaceholders(query string) (int, error) { return countPlaceholders(query) }

// countPlaceholders counts the positional "?" parameters of a ClickHouse query the way
// clickhouse-go's binder finds them: a "?" inside a string literal ('...'), a quoted
// identifier ("..." or `...`) or a comment (-- or # to the end of the line, nested /* */) is
// text, not a parameter. A backslash-escaped "\?" is refused: the binder would turn it into a
// literal "?", which analysts running the file elsewhere would not get.
func countPlaceholders(query string) (int, error) {
	var (
		n       int
		quote   byte // the open quote, 0 outside one
		line    bool // inside a -- or # comment
		comment int  // depth of /* */ comments
	)
	for i := 0; i < len(query); i++ {
		c := query[i]
		next := byte(0)
		if i+1 < len(query) {
			next = query[i+1]
		}
		switch {
		case line:
			if c == '\n' {
				line = false
			}
		case comment > 0:
			if c == '/' && next == '*' {
				comment++
				i++
			} else if c == '*' && next == '/' {
				comment--
				i++
			}
		case quote != 0:
			switch {
			case c == '\\':
				i++ // the escaped character is part of the literal
			case c == quote && next == quote:
				i++ // a doubled quote is one quote character
			case c == quote:
				quote = 0
			}
		case c == '\'' || c == '"' || c == '`':
			quote = c
		case c == '-' && next == '-', c == '#':
			line = true
		case c == '/' && next == '*':
			comment++
			i++
		case c == '\\' && next == '?':
			return 0, fmt.Errorf("an escaped \\? at byte %d: write the literal '?' as a string instead", i)
		case c == '?':
			n++
		}
	}
	switch {
	case quote != 0:
		return 0, fmt.Errorf("unterminated %c quote", quote)
	case comment > 0:
		return 0, fmt.Errorf("unterminated /* comment")
	}
	return n, nil
}
