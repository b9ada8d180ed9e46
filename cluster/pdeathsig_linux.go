package cluster

import "syscall"

// nodeAttr is the node process's attributes: a session of its own (a
// terminal's signals do not reach it), and, for a cluster started with
// UpOptions.DieWithParent, a SIGKILL from the kernel when the process that
// started it dies, so a test binary killed by its timeout leaves no nodes
// behind.
func nodeAttr(dieWithParent bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setsid: true}
	if dieWithParent {
		a.Pdeathsig = syscall.SIGKILL
	}
	return a
}
