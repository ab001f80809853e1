package stack

import "syscall"

// childSysProcAttr makes the kernel SIGKILL a child when the thread that started it exits.
// Go never retires an OS thread that is not locked by LockOSThread, so in practice that is
// when the parent process dies, however it dies.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
