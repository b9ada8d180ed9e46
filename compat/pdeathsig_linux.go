package compat

import "syscall"

// childAttr makes a child process (redis-server) a process group of its
// own that the kernel kills when the test process dies, so a test killed
// by its timeout leaves no redis-server behind. (The python driver reads
// its standard input and exits at its end.)
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
