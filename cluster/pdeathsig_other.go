//go:build !linux

package cluster

import "syscall"

// nodeAttr: a session of its own. Outside Linux there is no parent-death
// signal, so DieWithParent has no effect.
func nodeAttr(dieWithParent bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true}
}
