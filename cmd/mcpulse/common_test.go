package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// JSON output keeps its value but shows invisible format characters as escapes.
func TestJSONOutputEscapesInvisibleCharacters(t *testing.T) {
	in := map[string]string{"distinct_id": "rtl\u202egnp.exe", "c1": "a\u0085b", "plain": "café 😀", "tag": "x\U000E0041y"}
	var out bytes.Buffer
	if err := newJSONEncoder(&out).Encode(in); err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsRune(out.Bytes(), '\u202e') || bytes.ContainsRune(out.Bytes(), '\u0085') || bytes.ContainsRune(out.Bytes(), '\U000E0041') {
		t.Errorf("output %q holds raw invisible characters", out.String())
	}
	if !bytes.Contains(out.Bytes(), []byte(`\u202e`)) || !bytes.Contains(out.Bytes(), []byte("café 😀")) {
		t.Errorf("output %q: want \\u202e escaped and ordinary text kept", out.String())
	}
	var back map[string]string
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || back["distinct_id"] != in["distinct_id"] || back["c1"] != in["c1"] || back["tag"] != in["tag"] {
		t.Errorf("output %q does not decode to the same value: %v %v", out.String(), back, err)
	}
}

func TestNewLoggerRefusesAnUnknownFormat(t *testing.T) {
	for _, format := range []string{"", "text", "json"} {
		if _, err := newLogger(format); err != nil {
			t.Errorf("newLogger(%q): %v", format, err)
		}
	}
	if _, err := newLogger("jsn"); err == nil || !strings.Contains(err.Error(), `"jsn"`) {
		t.Errorf(`newLogger("jsn") = %v, want an error naming the value`, err)
	}
}

// --allow-eviction belongs to exactly the commands that write Redis: a command that only reads
// it warns about an evicting Redis instead, and the others never open Redis.
func TestAllowEvictionOnlyOnCommandsThatWriteRedis(t *testing.T) {
	want := map[string]bool{
		"mcpulse consume": true, "mcpulse scheduler": true,
		"mcpulse suppression reset": true, "mcpulse suppression reconcile": true,
	}
	got := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Flags().Lookup("allow-eviction") != nil {
			got[c.CommandPath()] = true
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
	for path := range want {
		if !got[path] {
			t.Errorf("%s has no --allow-eviction flag", path)
		}
	}
	for path := range got {
		if !want[path] {
			t.Errorf("%s has --allow-eviction but does not write Redis", path)
		}
	}
}
