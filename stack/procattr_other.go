//go:build !linux

package stack

import "syscall"

// childSysProcAttr has no parent-death signal outside Linux: children of a killed parent
// must be stopped by hand there.
func childSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
