package compare

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// procGroup owns the peer processes (etcd, java) that a comparison starts.
//
// Every process is started in its own process group, so a Ctrl-C at the
// terminal reaches only the synod command, which then stops them itself, by
// PID, through stopAll. As a last resort, if the synod command dies without
// cleaning up (kill -9), each child receives SIGKILL from the kernel
// (PR_SET_PDEATHSIG). The kernel sends that signal when the *thread* that
// forked the child exits, so all children are forked from one goroutine locked
// to its OS thread for the group's lifetime: the thread outlives the children.
//
// The group signals only processes it started and has not yet reaped (their
// PIDs cannot have been reused), so it never touches an unrelated process.
type procGroup struct {
	reqs chan startReq
	done chan struct{} // closed when the starter goroutine has returned

	mu     sync.Mutex
	procs  []*proc
	closed bool
}

// proc is one started process.
type proc struct {
	name   string
	log    string // path of its combined stdout and stderr
	cmd    *exec.Cmd
	exited chan struct{} // closed once reaped
	err    error         // Wait's result, valid after exited is closed
}

type startReq struct {
	cmd   *exec.Cmd
	reply chan error
}

func newProcGroup() *procGroup {
	g := &procGroup{reqs: make(chan startReq), done: make(chan struct{})}
	go g.starter()
	return g
}

// starter forks every child from one locked OS thread (see procGroup).
func (g *procGroup) starter() {
	runtime.LockOSThread()
	defer close(g.done)
	for r := range g.reqs {
		r.reply <- r.cmd.Start()
	}
	// Returning with the thread still locked ends the thread, which SIGKILLs
	// any child still running; stopAll closes reqs only once all have exited.
}

// PID returns the process id.
func (p *proc) PID() int { return p.cmd.Process.Pid }

// running reports whether the process has not exited yet.
func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// exitError describes how the process ended, with the end of its log.
func (p *proc) exitError() error {
	return fmt.Errorf("%s (pid %d) exited: %v; end of %s:\n%s", p.name, p.PID(), p.err, p.log, tail(p.log, 15))
}

// start runs argv with its output appended to logPath. env, when non-nil,
// replaces the environment.
func (g *procGroup) start(name string, argv, env []string, logPath string) (*proc, error) {
	lf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer lf.Close() // the child keeps its own descriptor
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, errors.New("process group already stopped")
	}
	reply := make(chan error, 1)
	g.reqs <- startReq{cmd, reply}
	if err := <-reply; err != nil {
		g.mu.Unlock()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, log: logPath, cmd: cmd, exited: make(chan struct{})}
	g.procs = append(g.procs, p)
	g.mu.Unlock()
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// stopAll stops every process of the group that still runs: SIGTERM to each,
// up to grace for them to exit, then SIGKILL to the survivors. It then ends
// the starter goroutine; the group accepts no more processes. It returns the
// names of the processes that needed SIGKILL, and an error if one survived it.
func (g *procGroup) stopAll(grace time.Duration) (killed []string, err error) {
	g.mu.Lock()
	procs := g.procs
	first := !g.closed
	g.closed = true
	g.mu.Unlock()
	for _, p := range procs {
		if p.running() {
			p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.After(grace)
	var errs []error
	for _, p := range procs {
		select {
		case <-p.exited:
			continue
		case <-deadline:
		}
		// The deadline fired once; later survivors fall through at once.
		deadline = closedTimeChan
		p.cmd.Process.Kill()
		killed = append(killed, fmt.Sprintf("%s (pid %d)", p.name, p.PID()))
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
			errs = append(errs, fmt.Errorf("%s (pid %d) still runs 5s after SIGKILL", p.name, p.PID()))
		}
	}
	// Only now may the starter's thread end: its exit SIGKILLs the children.
	if first {
		close(g.reqs)
	}
	<-g.done
	return killed, errors.Join(errs...)
}

var closedTimeChan = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

// waitReady polls check every 100 ms until it returns nil. It fails at once
// when one of procs exits (quoting its log), when ctx ends, or after timeout
// (quoting check's last error).
func waitReady(ctx context.Context, what string, timeout time.Duration, procs []*proc, check func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		for _, p := range procs {
			if !p.running() {
				return fmt.Errorf("%s did not start: %w", what, p.exitError())
			}
		}
		cctx, cancel := context.WithDeadline(ctx, deadline)
		last = check(cctx)
		cancel()
		if last == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, ctx.Err())
		}
		if time.Now().After(deadline) {
			var logs []string
			for _, p := range procs {
				logs = append(logs, fmt.Sprintf("end of %s:\n%s", p.log, tail(p.log, 8)))
			}
			return fmt.Errorf("%s not ready after %v: %v\n%s", what, timeout, last, strings.Join(logs, "\n"))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read: %v)", err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	if len(lines) == 0 {
		return "(empty)"
	}
	return strings.Join(lines, "\n")
}

// freePorts finds n distinct free TCP ports on 127.0.0.1 by binding port 0,
// and releases them. Another program could take one before the peer binds it;
// the peer then fails to start and says so in its log.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
