package bench

import "syscall"

// childAttr puts a child in its own process group and has the kernel kill
// it when the harness dies (even by SIGKILL). Pdeathsig fires when the
// thread that started the child exits; the harness never locks goroutines
// to threads, so the Go runtime keeps that thread for the process's life.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
