package nemesis

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/durability/sqlstore"
)

// node is one synod node process running inside its namespace.
type node struct {
	i       int
	id      string
	cfgPath string
	dataDir string // a tmpfs of its own, of DiskSize bytes
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	paused  bool
}

// writeConfigs writes one cluster file per node: the same cluster, except
// that node i's file names, as the peer address of every other node j, the
// relay of link i->j. Node i listens at its own real address.
func writeConfigs(dir string, h *Net, nodes int, protocol string, params map[string]string) ([]string, error) {
	var paths []string
	for i := 1; i <= nodes; i++ {
		cfg := &config.Cluster{
			Cluster:    fmt.Sprintf("chaos-%d", h.pid),
			Durability: config.Fsync,
			DataDir:    filepath.Join(dir, "data"),
			// A deliberately broken variant (automaton.RegisterBroken) runs
			// only to show that this harness catches it on real processes.
			AllowBroken: automaton.IsBroken(protocol),
			// One database file for every node (a protocol with database
			// objects, pbdurable): the nodes share this machine's disk.
			Namespaces: []config.Namespace{{Name: "default", Protocol: protocol, Service: "kv",
				Params: sqlstore.SharedParams(protocol, "default", params, dir, nodes)}},
		}
		// A protocol whose namespace calls others (adam, the Eve/Adam thesis's nested
		// calls) gets each callee as a paxos namespace on the same nodes:
		// every fault hits the callee too, and a write is acknowledged
		// only after its nested call was (the history judges both).
		for _, callee := range automaton.Callees(protocol, params) {
			cfg.Namespaces = append(cfg.Namespaces, config.Namespace{Name: callee, Protocol: "paxos", Service: "kv"})
		}
		for j := 1; j <= nodes; j++ {
			peer := h.PeerAddr(j)
			if j != i {
				peer = h.RelayAddr(i, j)
			}
			cfg.Nodes = append(cfg.Nodes, config.Node{ID: fmt.Sprintf("n%d", j), Peer: peer, Client: h.ClientAddr(j)})
		}
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("nemesis: cluster file: %w", err)
		}
		b, err := cfg.Marshal()
		if err != nil {
			return nil, err
		}
		p := filepath.Join(dir, fmt.Sprintf("cluster-n%d.yaml", i))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// mountData mounts a tmpfs of size bytes on dir (a full disk is then a
// full tmpfs, nothing else on the machine fills up).
func mountData(dir string, size int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10)); err != nil {
		return fmt.Errorf("nemesis: mount tmpfs on %s: %w", dir, err)
	}
	return nil
}

// start runs `synod node` inside namespace ns; the process is the node
// itself (ip netns exec execs it), so its pid is what pause and kill signal.
func (n *node) start(bin, ns string) error {
	lf, err := os.OpenFile(n.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer lf.Close()
	fmt.Fprintf(lf, "=== nemesis: starting %s at %s\n", n.id, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command("ip", "netns", "exec", ns, bin, "node", "--config", n.cfgPath, "--id", n.id)
	cmd.Stdout, cmd.Stderr = lf, lf
	// The node dies with the harness even if the harness is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("nemesis: starting %s: %w", n.id, err)
	}
	n.cmd, n.exited, n.paused = cmd, make(chan struct{}), false
	go func(done chan struct{}) { cmd.Wait(); close(done) }(n.exited)
	return nil
}

// storageFailed reports whether the node's log, since its last start,
// says its storage failed (node/storagefault.go: it then refuses every
// request until restarted).
func (n *node) storageFailed() bool {
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		return false
	}
	if i := bytes.LastIndex(b, []byte("=== nemesis: starting")); i >= 0 {
		b = b[i:]
	}
	return bytes.Contains(b, []byte("storage failed"))
}

func (n *node) running() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// waitReady waits for the node's PONG, failing fast if it exits.
func (n *node) waitReady(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if !n.running() {
			return fmt.Errorf("nemesis: %s exited during startup; see %s", n.id, n.logPath)
		}
		err := ping(addr, 300*time.Millisecond)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nemesis: %s did not answer PING on %s within %v: %v; see %s", n.id, addr, timeout, err, n.logPath)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (n *node) signal(s syscall.Signal) error {
	if !n.running() {
		return errors.New("not running")
	}
	return n.cmd.Process.Signal(s)
}

// kill sends SIGKILL (continuing a paused process first is not needed:
// SIGKILL ends a stopped process) and waits until it is reaped.
func (n *node) kill() {
	if !n.running() {
		return
	}
	n.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-n.exited:
	case <-time.After(5 * time.Second):
	}
}

// fillDisk writes a file until the node's tmpfs is full; the returned
// function removes it.
func fillDisk(dir string) (func(), error) {
	p := filepath.Join(dir, "nemesis-fill")
	f, err := os.Create(p)
	if err != nil {
		return func() {}, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return func() { os.Remove(p) }, nil
			}
			os.Remove(p)
			return func() {}, err
		}
	}
}

// ping sends a RESP PING and expects +PONG.
func ping(addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// leader returns the number of the node a running node names as the
// namespace's leader (SYNOD LEADER), or 0 when none names one in time.
func (r *runner) leader() int {
	for _, n := range r.nodes {
		if !n.running() || n.paused {
			continue
		}
		id, err := askLeader(r.net.ClientAddr(n.i), 300*time.Millisecond)
		if err != nil || id == "" {
			continue
		}
		for _, m := range r.nodes {
			if m.id == id {
				return m.i
			}
		}
	}
	return 0
}

// askLeader sends SYNOD LEADER and returns the leader's id ("" for none).
func askLeader(addr string, timeout time.Duration) (string, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("*2\r\n$5\r\nSYNOD\r\n$6\r\nLEADER\r\n")); err != nil {
		return "", err
	}
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(line, "*2") {
		return "", nil // nil (no leader known) or an error
	}
	if _, err := br.ReadString('\n'); err != nil { // $<len>
		return "", err
	}
	id, err := br.ReadString('\n')
	return strings.TrimSpace(id), err
}
