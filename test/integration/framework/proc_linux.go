//go:build linux

package framework

import "syscall"

// Own process group (so Stop can kill the whole tree), and SIGKILL if the
// thread that started the child dies (see spawner).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
