package cluster

import (
	"errors"
	"fmt"
	"syscall"
)

// Pause sends SIGSTOP to node id, freezing the process without closing its
// sockets (a stalled node, not a crashed one). Like Kill it signals only the
// verified PID from the node's pid file, and fails if the node is not running.
func Pause(dir, id string) error { return signalNode(dir, id, syscall.SIGSTOP, "STOP") }

// Resume sends SIGCONT to node id, ending a Pause.
func Resume(dir, id string) error { return signalNode(dir, id, syscall.SIGCONT, "CONT") }

func signalNode(dir, id string, sig syscall.Signal, name string) error {
	dir, err := nodeOf(dir, id)
	if err != nil {
		return err
	}
	pid, err := nodePID(dir, id)
	if err != nil {
		return err
	}
	if pid == 0 {
		return fmt.Errorf("cluster: node %s is not running", id)
	}
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("cluster: kill -%s %d (%s): %w", name, pid, id, err)
	}
	return nil
}
