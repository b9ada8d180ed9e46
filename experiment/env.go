package experiment

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/synod-dev/synod/automaton"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/synod-dev/synod/cluster"
)

// Env is what a cell runs in: the run's options, its output directory, and a
// ledger of everything started, stopped by PID when the run ends (normally, on
// error or on Ctrl-C).
type Env struct {
	Options
	// Out is the run's output directory (results.json, plots, logs/).
	Out string
	// Binary is the synod executable clusters run ("" : this executable).
	Binary string
	// Work is a scratch directory for cluster directories, removed at the end.
	Work string
	// Rep is the current run of the cell, 0..Reps-1 (a simulated cell adds it
	// to its seed so that its runs differ).
	Rep int

	log io.Writer // progress and log lines (stderr)

	mu       sync.Mutex
	cell     string    // "cell 3/12 protocol=abd N=3"
	cellT0   time.Time // when the current cell began
	clusters map[string]*cluster.Cluster
	shared   map[string]*cluster.Cluster // by Cluster key
	paused   map[string]pausedNode
	procs    map[int]*exec.Cmd
}

type pausedNode struct{ dir, id string }

func newEnv(o Options, out, binary, work string, log io.Writer) *Env {
	if log == nil {
		log = io.Discard
	}
	return &Env{
		Options: o, Out: out, Binary: binary, Work: work, log: log,
		clusters: map[string]*cluster.Cluster{},
		shared:   map[string]*cluster.Cluster{},
		paused:   map[string]pausedNode{},
		procs:    map[int]*exec.Cmd{},
	}
}

// Logf prints one line, prefixed with the current cell.
func (e *Env) Logf(format string, args ...any) {
	e.mu.Lock()
	prefix := e.prefixLocked()
	e.mu.Unlock()
	fmt.Fprintf(e.log, "%s %s\n", prefix, fmt.Sprintf(format, args...))
}

func (e *Env) prefixLocked() string {
	if e.cell == "" {
		return "[experiment]"
	}
	return fmt.Sprintf("[%s | %4.0fs]", e.cell, time.Since(e.cellT0).Seconds())
}

// Progress returns a writer for a driver's once-a-second progress lines (such
// as bench.Run's): each line is printed with the cell number, its parameters
// and the time since the cell began.
func (e *Env) Progress() io.Writer { return &prefixWriter{e: e} }

type prefixWriter struct {
	e   *Env
	buf []byte
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(w.buf[:i]), "\r")
		w.buf = w.buf[i+1:]
		if strings.TrimSpace(line) != "" {
			w.e.Logf("%s", line)
		}
	}
	return len(p), nil
}

// Up starts a cluster in Work/name (a previous cluster left there is purged
// first) and records it for cleanup. Binary defaults to e.Binary.
func (e *Env) Up(name string, opts cluster.UpOptions) (*cluster.Cluster, error) {
	if opts.Dir == "" {
		opts.Dir = filepath.Join(e.Work, name)
	}
	if opts.Binary == "" {
		opts.Binary = e.Binary
	}
	if _, err := os.Stat(filepath.Join(opts.Dir, cluster.ConfigFile)); err == nil {
		if _, err := cluster.Down(opts.Dir, true); err != nil {
			return nil, fmt.Errorf("clearing %s: %w", opts.Dir, err)
		}
	}
	e.Logf("starting %d-node %s cluster (durability %s) in %s", opts.Nodes, orDefault(opts.Protocol, automaton.DefaultProtocol), orDefault(opts.Durability, "fsync"), opts.Dir)
	opts.DieWithParent = true // an experiment killed midway leaves no nodes
	c, err := cluster.Up(opts)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.clusters[c.Dir] = c
	e.mu.Unlock()
	return c, nil
}

// Cluster returns the running cluster started under key by an earlier cell,
// or stops every cluster started through Cluster and starts a new one. Cells
// that share a key (e.g. the same protocol and N, different read ratios) thus
// share one cluster when they run one after the other.
func (e *Env) Cluster(key string, opts cluster.UpOptions) (*cluster.Cluster, error) {
	e.mu.Lock()
	c, ok := e.shared[key]
	var old []*cluster.Cluster
	if !ok {
		for k, o := range e.shared {
			old = append(old, o)
			delete(e.shared, k)
		}
	}
	e.mu.Unlock()
	if ok {
		return c, nil
	}
	for _, o := range old {
		if err := e.Down(o); err != nil {
			return nil, err
		}
	}
	c, err := e.Up(sanitize(key), opts)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.shared[key] = c
	e.mu.Unlock()
	return c, nil
}

// Down resumes any node of c that Pause stopped, stops every node (SIGTERM,
// then SIGKILL, by verified PID) and deletes the cluster's directory. When the
// current cell failed, the node logs are copied to Out/logs first.
func (e *Env) Down(c *cluster.Cluster) error {
	e.mu.Lock()
	for k, p := range e.paused {
		if p.dir == c.Dir {
			cluster.Resume(p.dir, p.id)
			delete(e.paused, k)
		}
	}
	delete(e.clusters, c.Dir)
	for k, s := range e.shared {
		if s == c {
			delete(e.shared, k)
		}
	}
	e.mu.Unlock()
	_, err := cluster.Down(c.Dir, true)
	if err != nil {
		return fmt.Errorf("stopping cluster %s: %w", c.Dir, err)
	}
	return nil
}

// keepLogs copies the node logs of every running cluster to Out/logs/<cell>.
func (e *Env) keepLogs(cellKey string) {
	e.mu.Lock()
	var dirs []string
	for d := range e.clusters {
		dirs = append(dirs, d)
	}
	e.mu.Unlock()
	for _, d := range dirs {
		logs, _ := filepath.Glob(filepath.Join(d, "*.log"))
		dst := filepath.Join(e.Out, "logs", sanitize(cellKey), filepath.Base(d))
		for _, l := range logs {
			b, err := os.ReadFile(l)
			if err != nil {
				continue
			}
			if os.MkdirAll(dst, 0o755) == nil {
				os.WriteFile(filepath.Join(dst, filepath.Base(l)), b, 0o644)
			}
		}
	}
}

// Kill kill -9s node id of c.
func (e *Env) Kill(c *cluster.Cluster, id string) error { return cluster.Kill(c.Dir, id) }

// Restart starts node id of c again and waits until it answers PING.
func (e *Env) Restart(c *cluster.Cluster, id string) error { return cluster.Restart(c.Dir, id) }

// Pause SIGSTOPs node id of c; cleanup SIGCONTs it if the cell does not.
func (e *Env) Pause(c *cluster.Cluster, id string) error {
	if err := cluster.Pause(c.Dir, id); err != nil {
		return err
	}
	e.mu.Lock()
	e.paused[c.Dir+"/"+id] = pausedNode{c.Dir, id}
	e.mu.Unlock()
	return nil
}

// Resume SIGCONTs node id of c.
func (e *Env) Resume(c *cluster.Cluster, id string) error {
	e.mu.Lock()
	delete(e.paused, c.Dir+"/"+id)
	e.mu.Unlock()
	return cluster.Resume(c.Dir, id)
}

// Start starts a helper process (a peer such as redis-server) and records its
// PID; cleanup kills it (SIGTERM, then SIGKILL after 3 s) and reaps it. Stop
// stops it earlier.
func (e *Env) Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		// Own process group: the terminal's Ctrl-C reaches us, not the peer,
		// so that it is stopped in order by cleanup.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	e.mu.Lock()
	e.procs[cmd.Process.Pid] = cmd
	e.mu.Unlock()
	e.Logf("started %s (pid %d)", filepath.Base(cmd.Path), cmd.Process.Pid)
	return nil
}

// Stop stops a process started with Start, by its PID, and reaps it.
func (e *Env) Stop(cmd *exec.Cmd) error {
	e.mu.Lock()
	_, ok := e.procs[cmd.Process.Pid]
	delete(e.procs, cmd.Process.Pid)
	e.mu.Unlock()
	if !ok {
		return fmt.Errorf("process %d was not started by this experiment or is already stopped", cmd.Process.Pid)
	}
	stopProc(cmd)
	return nil
}

func stopProc(cmd *exec.Cmd) {
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// cleanup stops everything still recorded and removes Work.
func (e *Env) cleanup() error {
	e.mu.Lock()
	var cs []*cluster.Cluster
	for _, c := range e.clusters {
		cs = append(cs, c)
	}
	var ps []*exec.Cmd
	for pid, p := range e.procs {
		ps = append(ps, p)
		delete(e.procs, pid)
	}
	e.mu.Unlock()
	var errs []error
	for _, c := range cs {
		if err := e.Down(c); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range ps {
		stopProc(p)
	}
	if e.Work != "" {
		os.RemoveAll(e.Work)
	}
	return errors.Join(errs...)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// sanitize turns a cell key into a file name.
func sanitize(s string) string {
	r := strings.NewReplacer("=", "", ",", "_", "/", "_", " ", "_", ":", "_")
	return r.Replace(s)
}
