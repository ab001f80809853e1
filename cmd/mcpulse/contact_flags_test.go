package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The contact-policy options are checked before anything starts, on the audit, the scheduler
// and gen alike.
func TestContactPolicyFlagsAreCheckedFirst(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"suppression", "audit", "--exclusion-members", "x.txt", "--exclusion-cohort", "641799"}, "give one"},
		{[]string{"scheduler", "--exclusion-cohort", "641799"}, "--exclusion-cohort needs --exclusion-cohort-project"},
		{[]string{"suppression", "audit", "--non-product-tools", "docs\u202e"}, `holds hidden characters`},
		{[]string{"suppression", "audit", "--exclusion-members", "/nonexistent/excluded.txt"}, "exclusion members"},
		{[]string{"gen", "--events", "10", "--contact-violations", "-1", "--out", "/nonexistent/x.jsonl"}, "--contact-violations must not be negative"},
		{[]string{"gen", "--events", "10", "--contact-violations", "2", "--shape", "sdk", "--out", "/nonexistent/x.jsonl"}, "needs --shape demo"},
	} {
		root := newRootCmd()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs(c.args)
		err := root.ExecuteContext(ctx)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
		if strings.ContainsRune(err.Error(), '\u202e') {
			t.Errorf("%v: error shows a bidi control: %q", c.args, err)
		}
	}
}
