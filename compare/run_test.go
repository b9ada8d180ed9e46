package compare

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synod-dev/synod/bench"
	"github.com/synod-dev/synod/service"
)

// fakeStore is an in-process key-value "cluster" behind fake targets.
type fakeStore struct {
	mu      sync.Mutex
	data    map[string][]byte
	ops     map[string]int
	delay   time.Duration
	stopped atomic.Bool
	// others, when set, lists the other systems' processes; each get that
	// finds one of them not stopped counts in running.
	others  func() []int
	running atomic.Int64
}

type fakeTarget struct{ s *fakeStore }

func (t fakeTarget) Do(ctx context.Context, op service.Op) (service.Result, error) {
	time.Sleep(t.s.delay)
	if op.Kind == "get" && t.s.others != nil {
		for _, pid := range t.s.others() {
			if st, err := procState(pid); err == nil && st != 'T' && st != 't' {
				t.s.running.Add(1)
			}
		}
	}
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.s.ops[op.Kind]++
	switch op.Kind {
	case "set":
		t.s.data[op.Key] = append([]byte(nil), op.Args[0]...)
		return service.OK(), nil
	case "get":
		if v, ok := t.s.data[op.Key]; ok {
			return service.Bytes(v), nil
		}
		return service.Nil(), nil
	}
	return service.Errorf("unsupported"), nil
}

func (fakeTarget) Close() error { return nil }

// fakeSystem starts one helper process (so that stopping is observable) and
// serves from a fakeStore. procs receives the helper.
func fakeSystem(t *testing.T, name string, delay time.Duration, procs *[]*proc) (System, *fakeStore) {
	s := &fakeStore{data: map[string][]byte{}, ops: map[string]int{}, delay: delay}
	return System{
		Name:    name,
		Missing: func() string { return "" },
		Start: func(ctx context.Context, env *Env) (*Instance, error) {
			p, err := env.Procs.start(name+" helper", []string{os.Args[0]}, append(os.Environ(), helperEnv+"=sleep"), filepath.Join(env.Dir, "helper.log"))
			if err != nil {
				return nil, err
			}
			*procs = append(*procs, p)
			pause, resume, pids := procControls([]*proc{p})
			return &Instance{
				Pause:      pause,
				Resume:     resume,
				PIDs:       pids,
				Addrs:      []string{"a1", "a2", "a3"},
				NewTarget:  func(context.Context, string, int) (bench.Target, error) { return fakeTarget{s}, nil },
				Durability: "fake",
				Version:    name + " fake",
				Stop:       func() error { s.stopped.Store(true); return nil },
			}, nil
		},
	}, s
}

func testOptions() Options {
	o := DefaultOptions()
	o.Protocol = "abd"
	o.Clients = []int{1, 3}
	o.Duration = 150 * time.Millisecond
	o.Warmup = 0
	o.Keys = 50
	o.StopGrace = 2 * time.Second
	o.IdleWindow = 50 * time.Millisecond
	return o
}

func checkStopped(t *testing.T, procs []*proc) {
	t.Helper()
	for _, p := range procs {
		if p.running() || alive(p.PID()) {
			t.Errorf("%s (pid %d) still runs after Run returned", p.name, p.PID())
		}
	}
}

func TestRunWithFakes(t *testing.T) {
	var procs []*proc
	synod, ss := fakeSystem(t, "synod", 100*time.Microsecond, &procs)
	etcd, es := fakeSystem(t, "etcd", 400*time.Microsecond, &procs)
	start := etcd.Start
	etcd.Start = func(ctx context.Context, env *Env) (*Instance, error) {
		inst, err := start(ctx, env)
		if inst != nil {
			inst.Shareable, inst.Via = true, "v3" // fakeTarget is safe for concurrent use
		}
		return inst, err
	}
	zk := System{Name: "zookeeper", Missing: func() string { return ZooKeeperInstall },
		Start: func(context.Context, *Env) (*Instance, error) { t.Fatal("started a missing system"); return nil, nil }}
	var out, progress bytes.Buffer
	res, err := Run(context.Background(), testOptions(), []System{synod, etcd, zk}, &out, &progress)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, progress.String())
	}
	if !strings.Contains(out.String(), "zookeeper is not installed") || !strings.Contains(out.String(), "    "+ZooKeeperInstall+"\n") {
		t.Errorf("no install command for the missing peer:\n%s", out.String())
	}
	if len(res.Skipped) != 1 || res.Skipped[0].Name != "zookeeper" || len(res.Systems) != 2 {
		t.Errorf("systems %+v, skipped %+v", res.Systems, res.Skipped)
	}
	// Synod: one configuration; etcd: per-client, and at 3 clients also 1
	// shared connection (16 shared would be per-client again).
	if len(res.Cells) != 2*2+2*3 || len(res.Best) != 2*2*2 {
		t.Fatalf("%d cells, %d best; want 10 (synod 2 ops x 2 counts, etcd 2 ops x 3 configurations) and 8", len(res.Cells), len(res.Best))
	}
	var shared int
	for _, c := range res.Cells {
		if c.Config == "v3 conns=1" && c.Clients == 3 && c.Conns == 1 {
			shared++
		}
	}
	if shared != 2 {
		t.Errorf("%d cells of etcd's 3 clients on 1 shared connection, want 2", shared)
	}
	for _, c := range res.Cells {
		if c.Failed != "" || c.Count == 0 || c.Errors != 0 || c.Throughput <= 0 || c.P99Ms < c.P50Ms {
			t.Errorf("cell %+v", c)
		}
	}
	if len(res.Ratios) != 4 {
		t.Fatalf("%d ratios, want 4 (Synod cells x 1 peer)", len(res.Ratios))
	}
	for _, r := range res.Ratios {
		if r.Peer != "etcd" || r.Throughput == nil || r.P50 == nil || r.P99 == nil {
			t.Errorf("ratio %+v", r)
		}
	}
	for name, s := range map[string]*fakeStore{"synod": ss, "etcd": es} {
		if len(s.data) != 50 {
			t.Errorf("%s holds %d keys, want the 50 preloaded", name, len(s.data))
		}
		for k, v := range s.data {
			if len(k) != 16 || len(v) != 100 {
				t.Errorf("%s: key %q (%d bytes) value of %d bytes, want 16 and 100", name, k, len(k), len(v))
				break
			}
		}
		if s.ops["get"] == 0 || s.ops["set"] <= 50 {
			t.Errorf("%s saw ops %v", name, s.ops)
		}
		if !s.stopped.Load() {
			t.Errorf("%s: Stop not called", name)
		}
	}
	checkStopped(t, procs)
	if _, err := os.Stat(res.Config.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary directory %s left behind: %v", res.Config.Dir, err)
	}
}

func TestRunStartFailureStopsEverything(t *testing.T) {
	var procs []*proc
	synod, ss := fakeSystem(t, "synod", 0, &procs)
	broken := System{Name: "etcd", Missing: func() string { return "" },
		Start: func(ctx context.Context, env *Env) (*Instance, error) {
			p, err := env.Procs.start("etcd helper", []string{os.Args[0]}, append(os.Environ(), helperEnv+"=ignore-term"), filepath.Join(env.Dir, "h.log"))
			if err != nil {
				return nil, err
			}
			procs = append(procs, p)
			return nil, errors.New("member e2 exited")
		}}
	o := testOptions()
	o.StopGrace = 200 * time.Millisecond
	var progress bytes.Buffer
	res, err := Run(context.Background(), o, []System{synod, broken}, &bytes.Buffer{}, &progress)
	if err == nil || !strings.Contains(err.Error(), "starting etcd: member e2 exited") {
		t.Fatalf("Run: %v", err)
	}
	if len(procs) != 2 {
		t.Fatalf("%d helpers started, want 2", len(procs))
	}
	checkStopped(t, procs)
	if !ss.stopped.Load() {
		t.Error("the system started before the failure was not stopped")
	}
	if _, err := os.Stat(res.Config.Dir); err != nil {
		t.Errorf("directory with the logs not kept after a failure: %v", err)
	} else {
		os.RemoveAll(res.Config.Dir)
	}
	if !strings.Contains(progress.String(), "data and logs kept in "+res.Config.Dir) {
		t.Errorf("progress does not say where the logs are:\n%s", progress.String())
	}
}

// cancelAfter is a progress writer that cancels once n cells are reported.
type cancelAfter struct {
	n      int
	cancel func()
	at     time.Time
}

func (w *cancelAfter) Write(b []byte) (int, error) {
	if bytes.HasPrefix(b, []byte("[")) {
		if w.n--; w.n == 0 {
			w.at = time.Now()
			w.cancel()
		}
	}
	return len(b), nil
}

// Ctrl-C after two cells: Run returns soon, with those cells, and stops
// everything it started.
func TestRunInterrupted(t *testing.T) {
	var procs []*proc
	synod, _ := fakeSystem(t, "synod", 0, &procs)
	etcd, _ := fakeSystem(t, "etcd", 0, &procs)
	o := testOptions()
	o.Clients = []int{1, 2, 3, 4, 5}
	o.Duration = 500 * time.Millisecond // 20 cells: 10 s if not interrupted
	o.Dir = filepath.Join(t.TempDir(), "given")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	progress := &cancelAfter{n: 2, cancel: cancel}
	res, err := Run(ctx, o, []System{synod, etcd}, &bytes.Buffer{}, progress)
	if err == nil || !res.Interrupted {
		t.Fatalf("Run after the context ended: err %v, interrupted %v", err, res.Interrupted)
	}
	if d := time.Since(progress.at); d > 5*time.Second {
		t.Fatalf("Run took %v after the context ended", d)
	}
	if n := len(res.Cells); n < 2 || n >= 20 {
		t.Fatalf("%d cells measured, want the 2 before the interruption and not all 20", n)
	}
	checkStopped(t, procs)
	if _, err := os.Stat(o.Dir); err != nil {
		t.Errorf("given directory removed: %v", err)
	}
}

func TestRunRefusesNonEmptyDirAndBadOptions(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x"), nil, 0o644)
	o := testOptions()
	o.Dir = dir
	if _, err := Run(context.Background(), o, nil, &bytes.Buffer{}, nil); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("non-empty dir: %v", err)
	}
	for name, mut := range map[string]func(*Options){
		"protocol": func(o *Options) { o.Protocol = "" },
		"duration": func(o *Options) { o.Duration = 0 },
		"warm-up":  func(o *Options) { o.Warmup = -time.Second },
		"clients":  func(o *Options) { o.Clients = nil },
		"value":    func(o *Options) { o.ValueSize = 3 },
		"key size": func(o *Options) { o.KeySize = 4 },
		"op":       func(o *Options) { o.Ops = []string{"incr"} },
	} {
		o := testOptions()
		mut(&o)
		if err := o.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The warm-up runs the cell's workload against the system before the
// measured run, and its operations are not counted.
func TestWarmupIsNotMeasured(t *testing.T) {
	var procs []*proc
	synod, ss := fakeSystem(t, "synod", time.Millisecond, &procs)
	o := testOptions()
	o.Clients, o.Ops = []int{1}, []string{OpPut}
	o.Duration, o.Warmup = 100*time.Millisecond, 100*time.Millisecond
	var out bytes.Buffer
	res, err := Run(context.Background(), o, []System{synod}, &out, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cells) != 1 {
		t.Fatalf("cells %+v", res.Cells)
	}
	measured := res.Cells[0].Count
	unmeasured := int64(ss.ops["set"]) - int64(o.Keys) - measured
	// (How many the warm-up does depends on the machine's load; that it
	// did some and they are not counted does not.)
	if measured == 0 || unmeasured < 1 {
		t.Fatalf("%d sets measured, %d more beside the preload (want the warm-up's, at least 1)", measured, unmeasured)
	}
	var rep bytes.Buffer
	res.Print(&rep)
	if !strings.Contains(rep.String(), "after 0.1s unmeasured") {
		t.Errorf("the report does not state the warm-up:\n%s", rep.String())
	}
	checkStopped(t, procs)
}

// With Isolate, a system's cells run while the other system's processes
// are stopped; without it (the broken arrangement before session 42) they
// run beside them. Each system's CPU while idle is reported either way.
func TestRunIsolates(t *testing.T) {
	for _, isolate := range []bool{true, false} {
		var procs []*proc
		synod, ss := fakeSystem(t, "synod", 100*time.Microsecond, &procs)
		redis, rs := fakeSystem(t, "redis", 100*time.Microsecond, &procs)
		pidsOf := func(name string) func() []int {
			return func() []int {
				var out []int
				for _, p := range procs {
					if p.name == name+" helper" && p.running() {
						out = append(out, p.PID())
					}
				}
				return out
			}
		}
		ss.others, rs.others = pidsOf("redis"), pidsOf("synod")
		o := testOptions()
		o.Isolate = isolate
		res, err := Run(context.Background(), o, []System{synod, redis}, &bytes.Buffer{}, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		if ss.ops["get"] == 0 || rs.ops["get"] == 0 {
			t.Fatalf("isolate %v: gets %d and %d", isolate, ss.ops["get"], rs.ops["get"])
		}
		got := ss.running.Load() + rs.running.Load()
		if isolate && got != 0 {
			t.Errorf("isolated: %d gets found the other system running", got)
		}
		if !isolate && got == 0 {
			t.Errorf("not isolated: no get found the other system running")
		}
		for _, s := range res.Systems {
			// 2 client counts x 2 ops: one turn each.
			if s.IdleCPU == nil || len(s.AfterTurnCPU) != 4 {
				t.Errorf("isolate %v: %s idle CPU %v after turns %v", isolate, s.Name, s.IdleCPU, s.AfterTurnCPU)
			}
		}
		var rep bytes.Buffer
		res.Print(&rep)
		if want := "isolation: " + res.Config.Isolation; !strings.Contains(rep.String(), want) || !strings.Contains(rep.String(), "idle after the preload") {
			t.Errorf("the report does not state isolation and idle CPU:\n%s", rep.String())
		}
		checkStopped(t, procs)
	}
}

func TestParseStatCPU(t *testing.T) {
	// Field 2 may hold spaces and parentheses; utime 1234, stime 56.
	line := "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 56 0 0 20 0 9 0 100 0 0"
	got, err := parseStatCPU(line)
	if err != nil || got != 1290 {
		t.Fatalf("parseStatCPU = %d, %v; want 1290", got, err)
	}
	if _, err := parseStatCPU("4242 (x) S 1 2"); err == nil {
		t.Error("short line accepted")
	}
	// This process has used some CPU by now.
	if cpuTicks([]int{os.Getpid()}) <= 0 {
		t.Error("no CPU time read for this process")
	}
}
