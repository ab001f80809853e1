package main

import (
	"errors"
	"fmt"
)

// exitCodeError makes a command end with a chosen exit status after it has printed its own
// report (for example demo's mismatches: status 1).
type exitCodeError struct {
	code int
	msg  string
}

func (e exitCodeError) Error() string { return fmt.Sprintf("%s (exit status %d)", e.msg, e.code) }

func asExitCode(err error, target *exitCodeError) bool { return errors.As(err, target) }
