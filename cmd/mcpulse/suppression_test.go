package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/suppression"
)

// show and reset refuse a distinct id or instance URL the pipeline refuses before contacting
// any store (the Redis address here has nothing listening, so reaching it would fail with
// another error), and the command fails, so mcpulse exits non-zero.
func TestSuppressionCommandsRefuseInvalidUTF8BeforeTouchingStores(t *testing.T) {
	nowhere := "redis://127.0.0.1:1"
	for _, args := range [][]string{
		{"suppression", "show", "--distinct-id", "a\xffb", "--redis", nowhere},
		{"suppression", "show", "--distinct-id", "a\xed\xa0\x80b", "--redis", nowhere},
		{"suppression", "show", "--distinct-id", "ok", "--instance-url", "https://x\xff", "--redis", nowhere},
		{"suppression", "reset", "--distinct-id", "a\xffb", "--reason", "r", "--actor", "a", "--redis", nowhere, "--dry-run"},
		{"suppression", "reset", "--distinct-id", "a\xed\xbf\xbf", "--reason", "r", "--actor", "a", "--redis", nowhere, "--dry-run"},
	} {
		root := newRootCmd()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs(args)
		err := root.ExecuteContext(context.Background())
		if !errors.Is(err, suppression.ErrBadIdentity) || !strings.Contains(err.Error(), "invalid UTF-8") {
			t.Errorf("%q: %v, want the invalid UTF-8 refusal", args, err)
		}
		if out.Len() != 0 {
			t.Errorf("%q printed %q", args, out.String())
		}
	}
}

// reset refuses a blank --reason or --actor before contacting any store, and says what to do:
// an --actor given empty is not a missing OS user.
func TestSuppressionResetNamesABlankReasonOrActor(t *testing.T) {
	nowhere := "redis://127.0.0.1:1"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--reason", "", "--actor", "a"}, "--reason is required"},
		{[]string{"--reason", "   ", "--actor", "a"}, "--reason is required"},
		{[]string{"--reason", "r", "--actor", ""}, "--actor is empty"},
		{[]string{"--reason", "r", "--actor", " \t"}, "--actor is empty"},
	} {
		root := newRootCmd()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs(append([]string{"suppression", "reset", "--distinct-id", "user-42", "--redis", nowhere, "--dry-run"}, c.args...))
		err := root.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error containing %q", c.args, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "OS user could not be found") {
			t.Errorf("%q: %v blames the OS user for a flag given empty", c.args, err)
		}
	}
}

// More than the batch limit of identities on standard input is refused naming "standard
// input", not "-".
func TestSuppressionResetFromStdinNamesStandardInput(t *testing.T) {
	var ids strings.Builder
	for i := 0; i <= suppression.ResetBatchLimit; i++ {
		fmt.Fprintf(&ids, "id-%d\n", i)
	}
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(ids.String()))
	root.SetArgs([]string{"suppression", "reset", "--from-file", "-", "--reason", "r", "--actor", "a", "--redis", "redis://127.0.0.1:1", "--dry-run"})
	err := root.ExecuteContext(context.Background())
	if err == nil || !strings.HasPrefix(err.Error(), "standard input names") {
		t.Errorf("err = %v, want it to start with %q", err, "standard input names")
	}
}
