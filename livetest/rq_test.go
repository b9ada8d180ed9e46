package livetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/cluster"
)

// TestRQThroughKills (issue 34 item 5) runs RQ, a real job-queue library
// from PyPI (pinned by scripts/test: rq 2.12.0 with redis-py 8.1.0), against
// a 3-node Multi-Paxos cluster with fsync, through two kill -9s:
//
//  1. The client talks to the leader. Jobs are enqueued and a worker runs
//     them; while it runs, the non-leader the client is not connected to is
//     killed -9. More jobs are enqueued; a worker drains the queue. The
//     killed node is restarted.
//  2. More jobs are enqueued through the leader, and the leader is killed
//     -9. The client reconnects to another node, enqueues more and runs a
//     worker there.
//
// Every acknowledged enqueue must have run once and its result must read
// back (RQ keeps results in a stream: XADD, XREVRANGE), through a survivor
// and through the restarted leader. RQ's worker uses lists (LPOP, BLMOVE),
// hashes, sorted-set registries, MULTI/EXEC pipelines with WATCH, Lua
// scripts, pub/sub and CLIENT SETNAME/LIST. SYNOD_RQ_JOBS (default 8) sets
// the jobs per step; a longer run: SYNOD_RQ_JOBS=200 go test ./livetest -run
// TestRQThroughKills -v.
func TestRQThroughKills(t *testing.T) {
	py := rqPython(t)
	per := 8
	if v, err := strconv.Atoi(os.Getenv("SYNOD_RQ_JOBS")); err == nil && v > 0 {
		per = v
	}
	c := upCluster(t, cluster.UpOptions{Nodes: 3, Protocol: "paxos", Durability: "fsync"})
	addrs := c.ClientAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	want := map[string]int{} // job id -> argument
	next := 0
	enqueue := func(addr string) {
		t.Helper()
		out := rqRun(ctx, t, py, "enqueue", addr, strconv.Itoa(per), strconv.Itoa(next))
		next += per
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			id, x, ok := strings.Cut(line, " ")
			n, err := strconv.Atoi(x)
			if !ok || err != nil {
				t.Fatalf("rqdriver enqueue printed %q", line)
			}
			want[id] = n
		}
	}
	index := func(id string) int { return int(id[1] - '1') }

	// 1. The client at the leader; kill -9 the other non-leader mid-work.
	leader := leaderOf(t, addrs)
	at := addrs[index(leader)]
	victim := ""
	for i := range addrs {
		if id := fmt.Sprintf("n%d", i+1); id != leader {
			victim = id
			break
		}
	}
	enqueue(at)
	worker := rqStart(ctx, t, py, "work", at)
	time.Sleep(200 * time.Millisecond)
	if err := c.Kill(victim); err != nil {
		t.Fatalf("kill %s: %v", victim, err)
	}
	t.Logf("kill -9 %s (a non-leader; the client is at the leader %s) while a worker runs", victim, leader)
	enqueue(at)
	if err := worker.wait(); err != nil {
		t.Fatalf("worker during the kill of %s: %v", victim, err)
	}
	rqRun(ctx, t, py, "work", at)
	rqCheck(ctx, t, py, at, want, "after the kill of the non-leader")
	if err := restartRetrying(t, c, victim); err != nil {
		t.Fatalf("restart %s: %v", victim, err)
	}

	// 2. Enqueue at the leader, kill -9 it, reconnect to another node.
	leader = leaderOf(t, addrs)
	at = addrs[index(leader)]
	enqueue(at)
	if err := c.Kill(leader); err != nil {
		t.Fatalf("kill %s: %v", leader, err)
	}
	other := addrs[(index(leader)+1)%len(addrs)]
	t.Logf("kill -9 %s (the leader the client was at); the client reconnects to %s", leader, other)
	enqueue(other)
	rqRun(ctx, t, py, "work", other)
	rqCheck(ctx, t, py, other, want, "after the kill of the leader, at a survivor")
	if err := restartRetrying(t, c, leader); err != nil {
		t.Fatalf("restart %s: %v", leader, err)
	}
	rqCheck(ctx, t, py, at, want, "at the restarted leader")
	t.Logf("%d jobs enqueued, run and read back through two kill -9s", len(want))
}

// rqCheck asks the node at addr for every job of want: each must be
// finished with its argument's square as its result.
func rqCheck(ctx context.Context, t *testing.T, py, addr string, want map[string]int, when string) {
	t.Helper()
	args := []string{"check", addr}
	for id, x := range want {
		args = append(args, fmt.Sprintf("%s:%d", id, x))
	}
	out := rqRun(ctx, t, py, args...)
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("%s: rqdriver check printed %q", when, line)
		}
		x, ok := want[f[0]]
		if !ok {
			t.Fatalf("%s: rqdriver check named job %s, not enqueued", when, f[0])
		}
		if f[1] != "finished" || f[2] != strconv.Itoa(x*x) {
			t.Errorf("%s: job %s (square(%d)) is %s with result %s, want finished with %d", when, f[0], x, f[1], f[2], x*x)
		}
		seen++
	}
	if seen != len(want) {
		t.Fatalf("%s: %d of %d jobs reported", when, seen, len(want))
	}
}

type rqProc struct {
	cmd      *exec.Cmd
	out, err bytes.Buffer
}

func (p *rqProc) wait() error {
	if err := p.cmd.Wait(); err != nil {
		return fmt.Errorf("%v\n%s", err, tail(p.err.String(), 30))
	}
	return nil
}

func rqStart(ctx context.Context, t *testing.T, py string, args ...string) *rqProc {
	t.Helper()
	p := &rqProc{cmd: exec.CommandContext(ctx, py, append([]string{"testdata/rqdriver.py"}, args...)...)}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	return p
}

func rqRun(ctx context.Context, t *testing.T, py string, args ...string) string {
	t.Helper()
	p := rqStart(ctx, t, py, args...)
	if err := p.wait(); err != nil {
		t.Fatalf("rqdriver %s: %v", strings.Join(args[:min(len(args), 3)], " "), err)
	}
	if s := strings.TrimSpace(p.err.String()); s != "" {
		t.Logf("rqdriver %s: %s", args[0], tail(s, 10))
	}
	return p.out.String()
}

// rqPython is an interpreter that imports rq (scripts/test installs it into
// the compatibility suite's venv, SYNOD_COMPAT_PYTHON); the test skips
// without one, and fails where SYNOD_REQUIRE_COMPAT=1 (scripts/test could
// install it).
func rqPython(t *testing.T) string {
	t.Helper()
	py := os.Getenv("SYNOD_COMPAT_PYTHON")
	if py == "" {
		py = "python3"
	}
	if out, err := exec.Command(py, "-c", "import rq, redis").CombinedOutput(); err != nil {
		if os.Getenv("SYNOD_REQUIRE_COMPAT") == "1" {
			t.Fatalf("%s cannot import rq (scripts/test installs it): %s", py, strings.TrimSpace(string(out)))
		}
		t.Skipf("SKIPPED: %s cannot import rq (pip install rq==2.12.0): %s", py, strings.TrimSpace(string(out)))
	}
	return py
}
