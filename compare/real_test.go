package compare

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/bench"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/service"
)

// These tests run the real peers and exercise the etcd and ZooKeeper adapters
// against them. etcd and ZooKeeper are optional peers, not part of Synod: the
// tests skip when they are not installed.

func startReal(t *testing.T, s System) *Instance {
	t.Helper()
	if install := s.Missing(); install != "" {
		t.Skipf("%s not installed (%s)", s.Name, install)
	}
	g := newProcGroup()
	t.Cleanup(func() {
		// etcd members take seconds to shut down cleanly once their peers
		// go; the data is thrown away, so the grace is short.
		if _, err := g.stopAll(2 * time.Second); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	inst, err := s.Start(ctx, &Env{Dir: t.TempDir(), Procs: g, ReadyTimeout: 60 * time.Second, OpTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(inst.Addrs) != Members {
		t.Fatalf("%d addresses, want %d", len(inst.Addrs), Members)
	}
	return inst
}

// exerciseAdapter: a write through one member is read back through every
// other member (the reads are linearizable, or sync+get for ZooKeeper), a
// missing key reads nil, overwrites and deletes behave, and unsupported
// operations are error replies, not transport failures.
//
// stale is how long a read may lag a completed write: 0 for etcd, whose
// reads are linearizable. ZooKeeper's sync+get is the strongest read it
// has but not linearizable (bench/zk.go): sync is not a quorum operation
// (ZOOKEEPER-1675), and a follower that has just joined may serve requests
// before it has applied the commits it received (ZOOKEEPER-2807). Under
// load a read after a delete through another member returned the deleted
// value (ZooKeeper 3.8.0; once in 19 full-suite runs of a flake hunt), so
// such a read is retried for that long, and logged.
func exerciseAdapter(t *testing.T, inst *Instance, stale time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ts []bench.Target
	for i, a := range inst.Addrs {
		tg, err := inst.NewTarget(ctx, a, i)
		if err != nil {
			t.Fatal(err)
		}
		defer tg.Close()
		ts = append(ts, tg)
	}
	do := func(tg bench.Target, op service.Op) service.Result {
		t.Helper()
		r, err := tg.Do(ctx, op)
		if err != nil {
			t.Fatalf("%v: %v", op, err)
		}
		return r
	}
	// read reads key through tg until ok holds of the result (at once, or
	// within stale), and returns the last result.
	read := func(tg bench.Target, key string, ok func(service.Result) bool) service.Result {
		t.Helper()
		deadline := time.Now().Add(stale)
		for tries := 1; ; tries++ {
			r := do(tg, service.Op{Kind: "get", Key: key})
			if ok(r) || !time.Now().Before(deadline) {
				if tries > 1 {
					t.Logf("a stale read: %d reads of %s before %v", tries, key, r)
				}
				return r
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	isNil := func(r service.Result) bool { return r.Type == service.ResultNil }
	key := fmt.Sprintf("adapter-test-%d", time.Now().UnixNano())
	if r := do(ts[0], service.Op{Kind: "get", Key: key}); r.Type != service.ResultNil {
		t.Fatalf("missing key read %v, want nil", r)
	}
	for round, writer := range []int{0, 1, 2, 0} {
		val := fmt.Sprintf("value-%d-%s", round, key)
		if r := do(ts[writer], service.Op{Kind: "set", Key: key, Args: [][]byte{[]byte(val)}}); r.Type != service.ResultOK {
			t.Fatalf("set: %v", r)
		}
		isVal := func(r service.Result) bool { return r.Type == service.ResultBytes && string(r.Bytes) == val }
		for i, tg := range ts {
			if r := read(tg, key, isVal); !isVal(r) {
				t.Fatalf("round %d: member %d read %v after member %d wrote %q", round, i, r, writer, val)
			}
		}
	}
	if r := do(ts[1], service.Op{Kind: "del", Key: key}); r.Type != service.ResultInt || r.Int != 1 {
		t.Fatalf("del: %v", r)
	}
	if r := read(ts[2], key, isNil); !isNil(r) {
		t.Fatalf("read after del: %v", r)
	}
	if r := do(ts[0], service.Op{Kind: "del", Key: key}); r.Type != service.ResultInt || r.Int != 0 {
		t.Fatalf("del of a missing key: %v", r)
	}
	if r := do(ts[0], service.Op{Kind: "incr", Key: key, Args: [][]byte{[]byte("1")}}); !r.IsErr() {
		t.Fatalf("incr: %v, want an error reply", r)
	}
	// The driver runs on it: a short closed-loop mixed run with a recorded
	// outcome and no errors.
	cfg := bench.DefaultConfig()
	cfg.Addrs = inst.Addrs
	cfg.NewTarget = inst.NewTarget
	cfg.Clients = 6
	cfg.Keys = 20
	cfg.Ops = 300
	cfg.Preload = true
	rep, err := bench.Run(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.All.Count != 300 || rep.All.Errors != 0 || rep.Reads.Count == 0 || rep.Writes.Count == 0 {
		t.Fatalf("driver run: %+v errors %v", rep.All, rep.ErrorSamples)
	}
}

func TestRealEtcd(t *testing.T) {
	inst := startReal(t, EtcdSystem())
	exerciseAdapter(t, inst, 0)
}

func TestRealZooKeeper(t *testing.T) {
	inst := startReal(t, ZooKeeperSystem())
	exerciseAdapter(t, inst, 5*time.Second)
}

// EtcdSystemProcs gives every etcd member the GOMAXPROCS Synod's nodes get
// (--procs): each member process's environment carries it, once, whatever
// the parent's environment held, and the report's version line names it.
// Without it a comparison at --procs auto tunes Synod's side only.
func TestRealEtcdProcs(t *testing.T) {
	t.Setenv("GOMAXPROCS", "7") // the parent's value must not reach the members
	inst := startReal(t, EtcdSystemProcs(cluster.ProcsAuto))
	want := cluster.AutoProcs(Members)
	for _, pid := range inst.PIDs() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, kv := range strings.Split(string(b), "\x00") {
			if strings.HasPrefix(kv, "GOMAXPROCS=") {
				got = append(got, kv)
			}
		}
		if len(got) != 1 || got[0] != fmt.Sprintf("GOMAXPROCS=%d", want) {
			t.Fatalf("etcd member pid %d: environment has %q, want [GOMAXPROCS=%d]", pid, got, want)
		}
	}
	if !strings.HasSuffix(inst.Version, fmt.Sprintf(", GOMAXPROCS %d per member", want)) {
		t.Fatalf("version %q does not name the members' GOMAXPROCS %d", inst.Version, want)
	}
	exerciseAdapter(t, inst, 0)
}
