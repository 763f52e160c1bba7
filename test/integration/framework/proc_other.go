//go:build !unix

package framework

import (
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

func signalGroup(p *os.Process, _ syscall.Signal) { _ = p.Kill() }
