//go:build !linux

package compat

import "syscall"

// childAttr: without Linux's parent-death signal, a test killed by its
// timeout may leave redis-server running; stop it by the PID it logged.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
