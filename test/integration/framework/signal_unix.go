//go:build unix

package framework

import (
	"os"
	"syscall"
)

// signalGroup signals the process group led by p (children were started with
// Setpgid, so their pgid is their pid), falling back to p alone.
func signalGroup(p *os.Process, sig syscall.Signal) {
	if err := syscall.Kill(-p.Pid, sig); err != nil {
		_ = p.Signal(sig)
	}
}
