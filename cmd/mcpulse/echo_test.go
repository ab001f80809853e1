package main

import (
	"strings"
	"testing"
)

// A caller's bad value is named in an error by a short escaped prefix and its length
// (safetext.Quote), never whole: a 100 KB argument costs a line.
func TestBadValuesAreEchoedShort(t *testing.T) {
	long := strings.Repeat("x", 100*1024) + "\u202e"
	for _, args := range [][]string{
		{long},
		{"consume", "--log-format", long},
		{"healthcheck", long},
		{"gen", "--end", long},
		{"schemacheck", long},
	} {
		err := runRoot(t, args...)
		if err == nil {
			t.Errorf("%.40q: no error", args)
			continue
		}
		if msg := err.Error(); len(msg) > 400 || !strings.Contains(msg, `"`+long[:64]+`"… (102403 bytes)`) || strings.Contains(msg, "\u202e") {
			t.Errorf("%.40q: %d-byte error %.200q, want the value quoted short", args, len(msg), msg)
		}
	}
}
