package compare

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synod-dev/synod/cluster"
)

// helperEnv selects a helper mode when the test binary is re-executed.
const helperEnv = "SYNOD_COMPARE_HELPER"

// TestMain lets the test binary act as the fake peer processes:
//
//	sleep        sleep until signalled (SIGTERM ends it)
//	ignore-term  ignore SIGTERM, sleep (only SIGKILL ends it)
//	fail         write "boom" and exit with status 3
//	parent       start a "sleep" child through a procGroup, print its PID,
//	             then sleep (the test kills this parent with SIGKILL)
func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "sleep":
		time.Sleep(time.Minute)
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ignoring SIGTERM")
		time.Sleep(time.Minute)
	case "fail":
		fmt.Println("boom")
		os.Exit(3)
	case "parent":
		g := newProcGroup()
		p, err := g.start("child", []string{os.Args[0]}, append(os.Environ(), helperEnv+"=sleep"), filepath.Join(os.Getenv("LOGDIR"), "child.log"))
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(p.PID())
		time.Sleep(time.Minute)
	}
	os.Exit(0)
}

func startHelper(t *testing.T, g *procGroup, mode string) *proc {
	t.Helper()
	env := append(os.Environ(), helperEnv+"="+mode)
	p, err := g.start(mode, []string{os.Args[0]}, env, filepath.Join(t.TempDir(), mode+".log"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// alive reports whether pid is a live, non-zombie process.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

func TestStopAllTermThenKill(t *testing.T) {
	g := newProcGroup()
	polite := startHelper(t, g, "sleep")
	stubborn := startHelper(t, g, "ignore-term")
	// Let the stubborn helper install its handler before it is signalled.
	waitLog(t, stubborn.log, "ignoring SIGTERM")
	start := time.Now()
	killed, err := g.stopAll(300 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(killed) != 1 || !strings.Contains(killed[0], "ignore-term") || !strings.Contains(killed[0], strconv.Itoa(stubborn.PID())) {
		t.Fatalf("SIGKILLed %v, want only the SIGTERM-ignoring helper (pid %d, ended with %v; log: %s)", killed, stubborn.PID(), stubborn.err, tail(stubborn.log, 5))
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
		t.Fatalf("stopAll took %v with a 300ms grace", d)
	}
	for _, p := range []*proc{polite, stubborn} {
		if p.running() || alive(p.PID()) {
			t.Fatalf("%s (pid %d) still runs after stopAll", p.name, p.PID())
		}
	}
	var ee *exec.ExitError
	if !errors.As(polite.err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Fatalf("polite helper ended with %v, want SIGTERM", polite.err)
	}
	if _, err := g.start("late", []string{os.Args[0]}, nil, filepath.Join(t.TempDir(), "late.log")); err == nil {
		t.Fatal("a stopped group started another process")
	}
	// A second stopAll is harmless.
	if killed, err := g.stopAll(time.Millisecond); err != nil || len(killed) != 0 {
		t.Fatalf("second stopAll: %v %v", killed, err)
	}
}

func waitLog(t *testing.T, path, want string) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if b, _ := os.ReadFile(path); strings.Contains(string(b), want) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never contained %q", path, want)
}

// If the process that owns the group dies by SIGKILL, its children die too.
func TestChildrenDieWithParent(t *testing.T) {
	dir := t.TempDir()
	parent := exec.Command(os.Args[0])
	parent.Env = append(os.Environ(), helperEnv+"=parent", "LOGDIR="+dir)
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	defer parent.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("parent said %q", line)
	}
	if !alive(child) {
		t.Fatalf("child %d not running", child)
	}
	parent.Process.Kill()
	parent.Wait()
	for i := 0; i < 500 && alive(child); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if alive(child) {
		syscall.Kill(child, syscall.SIGKILL) // do not leave it behind
		t.Fatalf("child %d outlived its SIGKILLed parent", child)
	}
}

func TestWaitReady(t *testing.T) {
	g := newProcGroup()
	defer g.stopAll(time.Second)
	sleeper := startHelper(t, g, "sleep")

	calls := 0
	err := waitReady(context.Background(), "fake", 5*time.Second, []*proc{sleeper}, func(context.Context) error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("waitReady: %v after %d checks, want success on the 3rd", err, calls)
	}

	err = waitReady(context.Background(), "fake", 300*time.Millisecond, []*proc{sleeper}, func(context.Context) error {
		return errors.New("port closed")
	})
	if err == nil || !strings.Contains(err.Error(), "not ready after 300ms") || !strings.Contains(err.Error(), "port closed") {
		t.Fatalf("timeout: %v", err)
	}

	failing := startHelper(t, g, "fail")
	start := time.Now()
	err = waitReady(context.Background(), "fake", time.Minute, []*proc{sleeper, failing}, func(context.Context) error {
		return errors.New("not yet")
	})
	if err == nil || !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("exited process: %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("waitReady did not notice the exit promptly")
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = waitReady(ctx, "fake", time.Minute, []*proc{sleeper}, func(context.Context) error { return errors.New("no") })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestFreePorts(t *testing.T) {
	ps, err := freePorts(9)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ps {
		if p <= 0 || p > 65535 || seen[p] {
			t.Fatalf("bad or repeated port %d in %v", p, ps)
		}
		seen[p] = true
	}
}

// etcdEnv drops ETCD_* (etcd refuses flags and variables together) and any
// inherited GOMAXPROCS, and adds GOMAXPROCS=n only when n is set; and
// MembersProcs resolves auto to each member's share of the cores.
func TestEtcdEnv(t *testing.T) {
	in := []string{"PATH=/bin", "ETCD_NAME=x", "GOMAXPROCS=7", "HOME=/root"}
	if got, want := strings.Join(etcdEnv(in, 0), " "), "PATH=/bin HOME=/root"; got != want {
		t.Errorf("etcdEnv(procs 0) = %q, want %q", got, want)
	}
	if got, want := strings.Join(etcdEnv(in, 1), " "), "PATH=/bin HOME=/root GOMAXPROCS=1"; got != want {
		t.Errorf("etcdEnv(procs 1) = %q, want %q", got, want)
	}
	if got, want := MembersProcs(cluster.ProcsAuto), cluster.AutoProcs(Members); got != want || got < 1 {
		t.Errorf("MembersProcs(auto) = %d, want %d", got, want)
	}
	if MembersProcs(0) != 0 || MembersProcs(2) != 2 {
		t.Errorf("MembersProcs(0), (2) = %d, %d; want 0, 2", MembersProcs(0), MembersProcs(2))
	}
	if procsLabel(0, "member") != "" || procsLabel(1, "member") != ", GOMAXPROCS 1 per member" {
		t.Errorf("procsLabel: %q %q", procsLabel(0, "member"), procsLabel(1, "member"))
	}
}
