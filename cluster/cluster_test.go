package cluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// synodBin is the real synod binary, built once by TestMain.
var synodBin string

func TestMain(m *testing.M) {
	if dir := os.Getenv("SYNOD_TEST_PARENT_DIR"); dir != "" {
		os.Exit(parentOfCluster(dir, os.Getenv("SYNOD_TEST_PARENT_BIN"), os.Getenv("SYNOD_TEST_PARENT_DIE") == "1"))
	}
	tmp, err := os.MkdirTemp("", "synod-cluster-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	synodBin, err = BuildSynod(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(tmp)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// up starts a cluster in a fresh directory and always stops it at the end.
func up(t *testing.T, opts UpOptions) *Cluster {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Binary == "" {
		opts.Binary = synodBin
	}
	c, err := Up(opts)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	t.Cleanup(func() {
		if _, err := os.Stat(c.Dir); errors.Is(err, os.ErrNotExist) {
			return // purged by the test
		}
		if _, err := Down(c.Dir, false); err != nil {
			t.Errorf("cleanup Down: %v", err)
		}
	})
	return c
}

// gone waits until no process has pid (it was reaped, not just a zombie).
func gone(pid int) bool {
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

func pidFromFile(t *testing.T, dir, id string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, id+".pid"))
	if err != nil {
		t.Fatalf("pid file of %s: %v", id, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file of %s: %v", id, err)
	}
	return pid
}

func statusOf(t *testing.T, dir string) map[string]NodeStatus {
	t.Helper()
	st, err := Status(dir)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	out := map[string]NodeStatus{}
	for _, s := range st {
		out[s.ID] = s
	}
	return out
}

func TestLifecycle(t *testing.T) {
	c := up(t, UpOptions{Nodes: 3, Protocol: "abd", Durability: "fsync"})
	if len(c.Nodes) != 3 || c.Config.Namespaces[0].Protocol != "abd" || c.Config.DataDir != filepath.Join(c.Dir, "data") {
		t.Fatalf("unexpected cluster: %+v %+v", c.Nodes, c.Config)
	}
	if !strings.HasPrefix(c.Config.Cluster, "local-") {
		t.Errorf("cluster name %q", c.Config.Cluster)
	}
	st := statusOf(t, c.Dir)
	for _, n := range c.Nodes {
		s := st[n.ID]
		if !s.Alive || !s.PingOK || s.PID != n.PID || s.PID != pidFromFile(t, c.Dir, n.ID) || s.Client != n.Client {
			t.Fatalf("status of %s = %+v, node %+v", n.ID, s, n)
		}
	}

	// A second Up on the same directory is refused and names the way out.
	if _, err := Up(UpOptions{Dir: c.Dir, Nodes: 3, Binary: synodBin}); err == nil || !strings.Contains(err.Error(), "synod cluster down --dir "+c.Dir) {
		t.Fatalf("second Up: %v", err)
	}

	// kill -9 n2: the process is really gone and the others are untouched.
	victim := c.Nodes[1]
	if err := c.Kill("n2"); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if !gone(victim.PID) {
		t.Fatalf("pid %d of n2 still exists after Kill", victim.PID)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "n2.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("n2.pid after Kill: %v", err)
	}
	st = statusOf(t, c.Dir)
	if s := st["n2"]; s.Alive || s.PingOK || s.PID != 0 {
		t.Fatalf("status of killed n2 = %+v", s)
	}
	if s := st["n1"]; !s.Alive || !s.PingOK {
		t.Fatalf("status of n1 after killing n2 = %+v", s)
	}
	if err := Ping(victim.Client, "", 300*time.Millisecond); err == nil {
		t.Fatal("killed n2 still answers PING")
	}
	if err := c.Kill("n2"); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Fatalf("Kill of a dead node: %v", err)
	}
	if err := c.Kill("n9"); err == nil || !strings.Contains(err.Error(), "n9") {
		t.Fatalf("Kill of an unknown node: %v", err)
	}

	// Restart refuses a running node and brings a killed one back.
	if err := c.Restart("n1"); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("Restart of a running node: %v", err)
	}
	if err := c.Restart("n2"); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if err := Ping(victim.Client, "", time.Second); err != nil {
		t.Fatalf("PING after restart: %v", err)
	}
	newPID := pidFromFile(t, c.Dir, "n2")
	if newPID == victim.PID {
		t.Fatalf("restarted n2 kept pid %d", newPID)
	}
	log, _ := os.ReadFile(filepath.Join(c.Dir, "n2.log"))
	if strings.Count(string(log), startMarker) != 2 {
		t.Errorf("n2.log should record two starts:\n%s", log)
	}

	// Down stops everything, removes pid files, keeps the data.
	pids := []int{c.Nodes[0].PID, newPID, c.Nodes[2].PID}
	stopped, err := c.Down(false)
	if err != nil || len(stopped) != 3 {
		t.Fatalf("Down: %v %v", stopped, err)
	}
	for _, pid := range pids {
		if !gone(pid) {
			t.Fatalf("pid %d survived Down", pid)
		}
	}
	for _, s := range statusOf(t, c.Dir) {
		if s.Alive || s.PingOK {
			t.Fatalf("after Down: %+v", s)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(c.Dir, "*.pid")); len(m) != 0 {
		t.Fatalf("pid files left: %v", m)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "data")); err != nil {
		t.Fatalf("data dir after Down: %v", err)
	}
	if stopped, err := c.Down(false); err != nil || len(stopped) != 0 {
		t.Fatalf("second Down: %v %v", stopped, err)
	}

	// Up on the stopped cluster resumes it (same name and ports) when the
	// shape matches, and refuses a different shape.
	if _, err := Up(UpOptions{Dir: c.Dir, Nodes: 5, Binary: synodBin}); err == nil || !strings.Contains(err.Error(), "--purge") {
		t.Fatalf("Up with another shape: %v", err)
	}
	c2, err := Up(UpOptions{Dir: c.Dir, Nodes: 3, Protocol: "abd", Binary: synodBin})
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if !c2.Resumed || c2.Config.Cluster != c.Config.Cluster || c2.Nodes[0].Client != c.Nodes[0].Client {
		t.Fatalf("resumed cluster differs: %+v vs %+v", c2.Config, c.Config)
	}
	if _, err := Down(c.Dir, true); err != nil {
		t.Fatalf("Down --purge: %v", err)
	}
	for _, n := range c2.Nodes {
		if !gone(n.PID) {
			t.Fatalf("pid %d survived Down --purge", n.PID)
		}
	}
	if _, err := os.Stat(c.Dir); !errors.Is(err, os.ErrNotExist) {
		left, _ := os.ReadDir(c.Dir)
		t.Fatalf("Down --purge left %s: %v %v", c.Dir, err, left)
	}
}

func TestMemoryClusterWithPassword(t *testing.T) {
	c := up(t, UpOptions{Nodes: 1, Durability: "memory", Password: "s3cret"})
	if c.Config.Durability != "memory" || c.Config.Password != "s3cret" {
		t.Fatalf("config %+v", c.Config)
	}
	if err := Ping(c.Nodes[0].Client, "s3cret", time.Second); err != nil {
		t.Fatalf("PING with AUTH: %v", err)
	}
	if err := Ping(c.Nodes[0].Client, "", time.Second); err == nil {
		t.Fatal("PING without AUTH succeeded on a password-protected node")
	}
	if st := statusOf(t, c.Dir); !st["n1"].PingOK {
		t.Fatalf("Status does not AUTH: %+v", st["n1"])
	}
}

// A node that cannot start: Up fails with the end of its log and leaves no
// process, pid file or cluster file behind.
func TestUpFailureQuotesLog(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(t.TempDir(), "synod-fake")
	script := "#!/bin/sh\necho \"fatal: fake node $5 refuses to start\" >&2\nexit 3\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := Up(UpOptions{Dir: dir, Nodes: 2, Binary: fake})
	if err == nil || !strings.Contains(err.Error(), "refuses to start") || !strings.Contains(err.Error(), "exited during startup") {
		t.Fatalf("Up with a failing binary: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("Up took %v to notice an exited node", time.Since(start))
	}
	for _, f := range []string{"n1.pid", "n2.pid", ConfigFile, DataDir} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "n1.log")); err != nil {
		t.Errorf("log should be kept for diagnosis: %v", err)
	}
}

func TestBasePortBusy(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if port+200+2 > 65535 {
		t.Skipf("ephemeral port %d too high for a base port", port)
	}
	dir := t.TempDir()
	_, err = Up(UpOptions{Dir: dir, Nodes: 2, BasePort: port, Binary: synodBin})
	if err == nil || !strings.Contains(err.Error(), l.Addr().String()) {
		t.Fatalf("Up on a busy base port: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ConfigFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster file left behind: %v", err)
	}
}

// Kill, Status, Restart and Down never signal a PID that is not the node
// named by the pid file, even when the pid file points at a live process.
func TestSignalsOnlyVerifiedPIDs(t *testing.T) {
	c := up(t, UpOptions{Nodes: 1, Durability: "memory"})
	if err := c.Kill("n1"); err != nil {
		t.Fatal(err)
	}
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { other.Wait(); close(exited) }()
	defer func() { other.Process.Kill(); <-exited }()
	plant := func() {
		if err := os.WriteFile(filepath.Join(c.Dir, "n1.pid"), []byte(strconv.Itoa(other.Process.Pid)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stillAlive := func(what string) {
		t.Helper()
		select {
		case <-exited:
			t.Fatalf("%s killed an unrelated process", what)
		case <-time.After(50 * time.Millisecond):
		}
	}

	plant()
	if s := statusOf(t, c.Dir)["n1"]; s.Alive || s.PID != 0 {
		t.Fatalf("Status trusts a foreign pid: %+v", s)
	}
	plant()
	if err := c.Kill("n1"); err == nil {
		t.Fatal("Kill of a foreign pid succeeded")
	}
	stillAlive("Kill")
	plant()
	if stopped, err := c.Down(false); err != nil || len(stopped) != 0 {
		t.Fatalf("Down with a foreign pid: %v %v", stopped, err)
	}
	stillAlive("Down")
	plant()
	if err := c.Restart("n1"); err != nil {
		t.Fatalf("Restart over a stale pid file: %v", err)
	}
	stillAlive("Restart")
	if err := Ping(c.Nodes[0].Client, "", time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestCmdlineMatches(t *testing.T) {
	cfg, id := "/d/cluster.yaml", "n2"
	for _, tc := range []struct {
		cmd  string
		want bool
	}{
		{"/usr/bin/synod\x00node\x00--config\x00/d/cluster.yaml\x00--id\x00n2\x00", true},
		{"/usr/bin/synod\x00node\x00--config=/d/cluster.yaml\x00--id=n2\x00", true},
		{"/usr/bin/synod\x00node\x00--config\x00/d/cluster.yaml\x00--id\x00n1\x00", false},
		{"/usr/bin/synod\x00node\x00--config\x00/e/cluster.yaml\x00--id\x00n2\x00", false},
		{"/usr/bin/synod\x00bench\x00--config\x00/d/cluster.yaml\x00--id\x00n2\x00", false},
		{"/usr/bin/other\x00node\x00--config\x00/d/cluster.yaml\x00--id\x00n2\x00", false},
		{"/opt/inventory\x00node\x00--config\x00/d/cluster.yaml\x00--id\x00n2\x00", true}, // the recorded binary
		{"/opt/inventory\x00bench\x00--config\x00/d/cluster.yaml\x00--id\x00n2\x00", false},
		{"", false},
	} {
		if got := cmdlineMatches([]byte(tc.cmd), cfg, id, "/opt/inventory"); got != tc.want {
			t.Errorf("cmdlineMatches(%q) = %v, want %v", tc.cmd, got, tc.want)
		}
	}
}

// TestFreePortsBelowEphemeral: ports for a new cluster come from below the
// kernel's ephemeral range, where no outgoing connection can take one
// while its node is down (a restart after kill -9 binds them again).
func TestFreePortsBelowEphemeral(t *testing.T) {
	lo, hi := fixedPortRange()
	if hi-lo < 64 {
		t.Skipf("no room below the ephemeral range (%d-%d)", lo, hi)
	}
	ports, err := freePorts(12)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p < lo || p >= hi {
			t.Fatalf("port %d outside %d-%d: %v", p, lo, hi-1, ports)
		}
		if seen[p] {
			t.Fatalf("port %d twice: %v", p, ports)
		}
		seen[p] = true
	}
}

// --procs reaches the nodes: Up writes procs into every node of the cluster
// file and each node process runs with that GOMAXPROCS (its start line says
// so); a resumed cluster keeps the file's procs unless asked for another.
// Without the node's runtime.GOMAXPROCS call the nodes log Go's default.
func TestProcs(t *testing.T) {
	c := up(t, UpOptions{Nodes: 2, Durability: "memory", Procs: 1})
	for _, n := range c.Config.Nodes {
		if n.Procs != 1 {
			t.Fatalf("cluster file node %s procs %d, want 1", n.ID, n.Procs)
		}
	}
	gomaxprocs := func(id string) string {
		t.Helper()
		// The line is logged once the node is ready, which Up's PING can
		// see first: wait for it (bounded).
		re := regexp.MustCompile(`GOMAXPROCS (\d+)`)
		deadline := time.Now().Add(20 * time.Second)
		for {
			b, _ := os.ReadFile(logPath(c.Dir, id))
			if m := re.FindAllSubmatch(b, -1); len(m) > 0 {
				return string(m[len(m)-1][1])
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's log names no GOMAXPROCS:\n%s", id, b)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, id := range []string{"n1", "n2"} {
		if g := gomaxprocs(id); g != "1" {
			t.Fatalf("%s runs GOMAXPROCS %s, want 1", id, g)
		}
	}
	if _, err := Down(c.Dir, false); err != nil {
		t.Fatal(err)
	}
	c2, err := Up(UpOptions{Dir: c.Dir, Nodes: 2, Durability: "memory", Binary: synodBin})
	if err != nil {
		t.Fatal(err)
	}
	if c2.Config.Nodes[1].Procs != 1 {
		t.Fatalf("resumed without --procs: procs %d, want the file's 1", c2.Config.Nodes[1].Procs)
	}
	if _, err := Down(c.Dir, false); err != nil {
		t.Fatal(err)
	}
	c3, err := Up(UpOptions{Dir: c.Dir, Nodes: 2, Durability: "memory", Binary: synodBin, Procs: 3})
	if err != nil {
		t.Fatal(err)
	}
	if c3.Config.Nodes[0].Procs != 3 || c3.Config.Nodes[1].Procs != 3 {
		t.Fatalf("resumed with Procs 3: %+v", c3.Config.Nodes)
	}
}

// A resumed cluster keeps its file's procs when Procs is 0 (unset, as
// `synod cluster up` without --procs passes), whatever the file says;
// ProcsGo (--procs go) writes 0, also over a file's count (before ProcsGo
// a resumed cluster could not be given Go's default back); ProcsAuto
// writes AutoProcs(nodes).
func TestProcsResumed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	auto := AutoProcs(2)
	upDown := func(procs int, want int) {
		t.Helper()
		c, err := Up(UpOptions{Dir: dir, Nodes: 2, Durability: "memory", Binary: synodBin, DieWithParent: true, Procs: procs})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Down(c.Dir, false); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadConfig(c.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range cfg.Nodes {
			if n.Procs != want {
				t.Fatalf("Up(Procs %d): %s gives %s procs %d, want %d", procs, ConfigFile, n.ID, n.Procs, want)
			}
		}
	}
	t.Cleanup(func() { Down(dir, true) })
	upDown(0, 0)
	upDown(ProcsAuto, auto)
	upDown(0, auto)
	upDown(ProcsGo, 0)
	upDown(0, 0)
	upDown(3, 3)
	upDown(ProcsGo, 0)
}

func TestParseProcs(t *testing.T) {
	for s, want := range map[string]int{"": 0, "go": ProcsGo, "0": ProcsGo, "auto": ProcsAuto, "1": 1, "4": 4} {
		if got, err := ParseProcs(s); err != nil || got != want {
			t.Errorf("ParseProcs(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"-1", "x", "1.5"} {
		if _, err := ParseProcs(s); err == nil {
			t.Errorf("ParseProcs(%q) accepted", s)
		}
	}
	cores := runtime.GOMAXPROCS(0)
	if got := AutoProcs(1); got != cores {
		t.Errorf("AutoProcs(1) = %d, want every core (%d)", got, cores)
	}
	if got, want := AutoProcs(3), (cores+2)/3; got != want || got < 1 {
		t.Errorf("AutoProcs(3) = %d, want ceil(%d/3) = %d", got, cores, want)
	}
	if got := AutoProcs(1000); got != 1 {
		t.Errorf("AutoProcs(1000) = %d, want 1", got)
	}
}
