package cluster

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// startMarker begins the line written to a node's log before each start.
const startMarker = "=== synod cluster: starting "

func pidPath(dir, id string) string { return filepath.Join(dir, id+".pid") }
func logPath(dir, id string) string { return filepath.Join(dir, id+".log") }

// proc is a node process started by this process.
type proc struct {
	id     string
	log    string
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has been reaped
}

// startNode starts node id of the cluster in dir and records its PID. A
// goroutine reaps the child when it exits, so that a killed node does not stay
// a zombie while the starting process (a test, say) lives on.
func startNode(dir, bin, id string) (*proc, error) {
	lp := logPath(dir, id)
	lf, err := os.OpenFile(lp, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	defer lf.Close()
	fmt.Fprintf(lf, "%s%s at %s\n", startMarker, id, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(bin, "node", "--config", filepath.Join(dir, ConfigFile), "--id", id)
	cmd.Dir = dir
	cmd.Stdout = lf
	cmd.Stderr = lf
	_, err = os.Stat(filepath.Join(dir, DieWithParentFile))
	cmd.SysProcAttr = nodeAttr(err == nil)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cluster: starting %s: %w", id, err)
	}
	p := &proc{id: id, log: lp, cmd: cmd, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	if err := writeFileAtomic(pidPath(dir, id), []byte(strconv.Itoa(cmd.Process.Pid)+"\n")); err != nil {
		p.stop()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return p, nil
}

// waitReady waits until the node answers PING on addr, fails fast if it exits.
func (p *proc) waitReady(addr, password string, tc *tls.Config, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		select {
		case <-p.exited:
			return fmt.Errorf("cluster: node %s exited during startup (%v); end of %s:\n%s",
				p.id, p.cmd.ProcessState, p.log, logTail(p.log, 20))
		default:
		}
		if last = PingTLS(addr, password, tc, 500*time.Millisecond); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster: node %s did not answer PING on %s within %v (last error: %v); end of %s:\n%s",
				p.id, addr, timeout, last, p.log, logTail(p.log, 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop kills a process this process started and waits for it to be reaped.
func (p *proc) stop() {
	p.cmd.Process.Kill()
	select {
	case <-p.exited:
	case <-time.After(killWait):
	}
}

// readPID reads a pid file; ok is false when there is none.
func readPID(dir, id string) (pid int, ok bool, err error) {
	b, err := os.ReadFile(pidPath(dir, id))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("cluster: %w", err)
	}
	pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, false, fmt.Errorf("cluster: %s: bad pid %q", pidPath(dir, id), strings.TrimSpace(string(b)))
	}
	return pid, true, nil
}

// isNode reports whether pid is a live process running `synod node --config
// DIR/cluster.yaml --id id`. A zombie has an empty /proc/PID/cmdline and so
// does not count. Errors other than "no such process" are returned.
func isNode(pid int, dir, id string) (bool, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		if _, serr := os.Stat("/proc/self/cmdline"); serr != nil {
			return false, fmt.Errorf("cluster: cannot verify pid %d: /proc is not available: %w", pid, serr)
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cluster: cannot verify pid %d: %w", pid, err)
	}
	bin, _ := recordedBinary(dir)
	return cmdlineMatches(b, filepath.Join(dir, ConfigFile), id, bin), nil
}

// cmdlineMatches checks a NUL-separated command line: a synod binary, or
// the cluster's recorded one (a user's binary built with synod.Main has
// its own name), running node with the cluster's file and id.
func cmdlineMatches(cmdline []byte, cfgPath, id, bin string) bool {
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if !bytes.Contains(cmdline, []byte("synod")) && (bin == "" || args[0] != bin) {
		return false
	}
	hasPair := func(flag, val string) bool {
		for i, a := range args {
			if a == flag+"="+val || (a == flag && i+1 < len(args) && args[i+1] == val) {
				return true
			}
		}
		return false
	}
	hasNode := false
	for _, a := range args[1:] {
		if a == "node" {
			hasNode = true
		}
	}
	return len(args) > 1 && hasNode && hasPair("--config", cfgPath) && hasPair("--id", id)
}

// nodePID returns the verified PID of a running node, or 0. A stale pid file
// (no such process, a zombie, or a PID reused by another program) is removed.
func nodePID(dir, id string) (int, error) {
	pid, ok, err := readPID(dir, id)
	if err != nil || !ok {
		return 0, err
	}
	alive, err := isNode(pid, dir, id)
	if err != nil {
		return 0, err
	}
	if !alive {
		os.Remove(pidPath(dir, id))
		return 0, nil
	}
	return pid, nil
}

// runningNodes lists "nK (pid P)" for every verified running node in dir,
// found through its pid files.
func runningNodes(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.pid"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []string
	for _, f := range files {
		id := strings.TrimSuffix(filepath.Base(f), ".pid")
		pid, err := nodePID(dir, id)
		if err != nil {
			return nil, err
		}
		if pid != 0 {
			out = append(out, fmt.Sprintf("%s pid %d", id, pid))
		}
	}
	return out, nil
}

// waitGone waits until pid no longer runs node id of dir.
func waitGone(pid int, dir, id string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if alive, err := isNode(pid, dir, id); err == nil && !alive {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// NodeStatus is what Status reports about one node.
type NodeStatus struct {
	ID      string
	Client  string
	Peer    string
	PID     int  // 0 when not running
	Alive   bool // the PID runs this node (kill -0 and /proc check)
	PingOK  bool // the client port answered PING
	PingErr string
}

// Status reports every node of the cluster in dir.
func Status(dir string) ([]NodeStatus, error) {
	dir, err := existingDir(dir)
	if err != nil {
		return nil, err
	}
	cfg, err := loadConfig(dir)
	if err != nil {
		return nil, err
	}
	tc, tlsErr := ClientTLS(cfg)
	out := make([]NodeStatus, len(cfg.Nodes))
	done := make(chan struct{}, len(cfg.Nodes))
	for i, n := range cfg.Nodes {
		out[i] = NodeStatus{ID: n.ID, Client: n.Client, Peer: n.Peer}
		pid, err := nodePID(dir, n.ID)
		if err != nil {
			return nil, err
		}
		if pid != 0 && syscall.Kill(pid, 0) == nil {
			out[i].PID, out[i].Alive = pid, true
		}
		go func() {
			if tlsErr != nil {
				out[i].PingErr = tlsErr.Error()
			} else if err := PingTLS(n.Client, cfg.Password, tc, time.Second); err != nil {
				out[i].PingErr = err.Error()
			} else {
				out[i].PingOK = true
			}
			done <- struct{}{}
		}()
	}
	for range cfg.Nodes {
		<-done
	}
	return out, nil
}

// nodeOf checks that id is a member of the cluster in dir.
func nodeOf(dir, id string) (string, error) {
	dir, err := existingDir(dir)
	if err != nil {
		return "", err
	}
	cfg, err := loadConfig(dir)
	if err != nil {
		return "", err
	}
	if _, err := cfg.Node(id); err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	return dir, nil
}

// Kill sends SIGKILL (a real kill -9) to node id, waits until the process is
// gone and removes its pid file. It fails if the node is not running.
func Kill(dir, id string) error {
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
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("cluster: kill -9 %d (%s): %w", pid, id, err)
	}
	if !waitGone(pid, dir, id, killWait) {
		return fmt.Errorf("cluster: node %s (pid %d) still runs %v after SIGKILL", id, pid, killWait)
	}
	os.Remove(pidPath(dir, id))
	return nil
}

// Restart starts node id again, with the binary recorded by Up, and waits for
// it to answer PING. It fails if the node is still running.
func Restart(dir, id string) error {
	dir, err := nodeOf(dir, id)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(dir)
	if err != nil {
		return err
	}
	n, _ := cfg.Node(id)
	pid, err := nodePID(dir, id)
	if err != nil {
		return err
	}
	if pid != 0 {
		return fmt.Errorf("cluster: node %s is still running (pid %d); kill it first with `synod cluster kill %s --dir %s`", id, pid, id, dir)
	}
	bin, err := recordedBinary(dir)
	if err != nil {
		return err
	}
	p, err := startNode(dir, bin, id)
	if err != nil {
		return err
	}
	tc, err := ClientTLS(cfg)
	if err != nil {
		p.stop()
		os.Remove(pidPath(dir, id))
		return err
	}
	if err := p.waitReady(n.Client, cfg.Password, tc, ReadyTimeout); err != nil {
		p.stop()
		os.Remove(pidPath(dir, id))
		return err
	}
	return nil
}

func recordedBinary(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, BinaryFile))
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("cluster: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("cluster: cannot find the synod binary: %w", err)
	}
	return exe, nil
}

// Down stops every running node of the cluster in dir: SIGTERM, up to
// StopTimeout for a clean exit, then SIGKILL. It removes the pid files and
// returns the ids of the nodes it stopped. Data and logs are kept unless purge
// is set; purge removes everything the package wrote in dir (and dir itself if
// it is then empty).
func Down(dir string, purge bool) ([]string, error) {
	dir, err := existingDir(dir)
	if err != nil {
		return nil, err
	}
	cfg, err := loadConfig(dir)
	if err != nil {
		return nil, err
	}
	type victim struct {
		id  string
		pid int
	}
	var vs []victim
	for _, n := range cfg.Nodes {
		pid, err := nodePID(dir, n.ID)
		if err != nil {
			return nil, err
		}
		if pid == 0 {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return nil, fmt.Errorf("cluster: kill -TERM %d (%s): %w", pid, n.ID, err)
		}
		vs = append(vs, victim{n.ID, pid})
	}
	deadline := time.Now().Add(StopTimeout)
	var stopped []string
	var errs []error
	for _, v := range vs {
		if !waitGone(v.pid, dir, v.id, time.Until(deadline)) {
			// Re-verify right before the SIGKILL: never signal a reused PID.
			if alive, err := isNode(v.pid, dir, v.id); err == nil && alive {
				syscall.Kill(v.pid, syscall.SIGKILL)
			}
			if !waitGone(v.pid, dir, v.id, killWait) {
				errs = append(errs, fmt.Errorf("cluster: node %s (pid %d) survived SIGKILL", v.id, v.pid))
				continue
			}
		}
		os.Remove(pidPath(dir, v.id))
		stopped = append(stopped, v.id)
	}
	if err := errors.Join(errs...); err != nil {
		return stopped, err
	}
	if purge {
		var rm []string
		for _, n := range cfg.Nodes {
			rm = append(rm, pidPath(dir, n.ID), logPath(dir, n.ID))
		}
		rm = append(rm, filepath.Join(dir, BinaryFile), filepath.Join(dir, ConfigFile))
		for _, f := range rm {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		// Only DIR/data, which Up created; a data_dir edited to point
		// elsewhere is left alone.
		if err := os.RemoveAll(filepath.Join(dir, DataDir)); err != nil {
			errs = append(errs, err)
		}
		os.Remove(dir) // only succeeds when empty
	}
	return stopped, errors.Join(errs...)
}
