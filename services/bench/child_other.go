//go:build !linux

package bench

import "syscall"

// childAttr puts a child in its own process group; only Linux can also tie
// its life to the harness's.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
