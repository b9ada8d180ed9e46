package esds

import (
	"bytes"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/sim"
)

// pace makes small states take the paced rewrite of "s" (rewrite.go):
// every collection of a state with a snapshot takes the delta path
// (deltaMin 1), "s" is rewritten once the kept records would take twice
// the snapshot, at most 32 of 64 operations examined are collected a tick,
// and the snapshot is encoded about 8 bytes a tick, so that a rewrite
// spans several ticks, collections that keep records happen meanwhile,
// and a crash can come at any of them.
func pace(t testing.TB) {
	oldMin, oldFactor, oldPer, oldScan, oldChunk := deltaMin, deltaFactor, gcPerTick, gcScanPerTick, snapChunk
	deltaMin, deltaFactor, gcPerTick, gcScanPerTick, snapChunk = 1, 2, 32, 64, 8
	t.Cleanup(func() {
		deltaMin, deltaFactor, gcPerTick, gcScanPerTick, snapChunk = oldMin, oldFactor, oldPer, oldScan, oldChunk
	})
}

// pacedStats counts what a pacedRun exercised.
type pacedStats struct {
	probes, midRewrite, keptAcross, ends int
	err                                  error
}

// pacedRun drives 3 KV replicas with SET, APPEND and INCR (APPEND and
// INCR are not idempotent: an operation applied twice or lost changes
// the state), crashing and restarting one replica and then all three
// along the way, and after every step of every replica restores a new
// replica from that replica's disk, as a crash after that step would:
// the restored stable state must be exactly the replay, from the empty
// state, of the restored order of operations applied to it (which "g"
// or "s" holds), that order a prefix of the running replica's, and every
// operation the running replica has done (hence may have acknowledged)
// must be in the restored order or among the restored operations. It
// returns the counts and the first failure.
func pacedRun(t *testing.T) pacedStats {
	c := newCluster(t, "esds", 3, service.KV{}, nil)
	proto, err := automaton.Lookup("esds")
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]service.Op{}
	var st pacedStats
	inRewrite := map[automaton.NodeID]bool{}
	replay := func(log []string) []byte {
		s := service.KV{}.NewState()
		for _, id := range log {
			s.Apply(ops[id])
		}
		return s.Snapshot()
	}
	c.afterStep = func(a *ESDS) {
		id := a.cfg.Self
		if st.err != nil {
			return
		}
		if inRewrite[id] && a.rw == nil {
			st.ends++
			if len(a.uncompacted) > 0 {
				st.keptAcross++ // records kept across the new "s": collected after its copy
			}
		}
		inRewrite[id] = a.rw != nil
		if a.rw != nil {
			st.midRewrite++
		}
		st.probes++
		b, err := proto.New(automaton.Config{Self: id, Nodes: c.IDs(), Service: service.KV{}, Rand: rand.New(rand.NewSource(1))})
		if err != nil {
			st.err = err
			return
		}
		r := b.(*ESDS)
		r.RecordOrder()
		r.Step(automaton.Start{Records: c.Disk(id)})
		if got, want := r.stable.Snapshot(), replay(r.orderLog); !bytes.Equal(got, want) {
			st.err = fmt.Errorf("%s after step %d: restored stable state (%d operations in its order, %d records kept for \"g\") is not their replay",
				id, c.Steps(), len(r.orderLog), len(r.uncompacted))
			return
		}
		if len(r.orderLog) > len(a.orderLog) || !slices.Equal(r.orderLog, a.orderLog[:len(r.orderLog)]) {
			st.err = fmt.Errorf("%s after step %d: restored order (%d) is not a prefix of the running replica's (%d)", id, c.Steps(), len(r.orderLog), len(a.orderLog))
			return
		}
		restored := map[string]bool{}
		for _, x := range r.orderLog {
			restored[x] = true
		}
		for x := range r.ops {
			restored[x] = true
		}
		for _, x := range a.orderLog {
			if !restored[x] {
				st.err = fmt.Errorf("%s after step %d: operation %s, applied to the stable state, lost by a restart", id, c.Steps(), x)
				return
			}
		}
		for x, o := range a.ops {
			if o.done&a.bit() != 0 && o.label.Set && !restored[x] {
				st.err = fmt.Errorf("%s after step %d: operation %s, done here, lost by a restart", id, c.Steps(), x)
				return
			}
		}
	}
	ids := c.IDs()
	rng := rand.New(rand.NewSource(51))
	for i := range 600 {
		var op service.Op
		switch k := rng.Intn(12); rng.Intn(3) {
		case 0:
			op = service.Op{Kind: "set", Key: fmt.Sprintf("s%d", k), Args: [][]byte{[]byte(fmt.Sprint(i))}}
		case 1:
			op = service.Op{Kind: "append", Key: fmt.Sprintf("s%d", k), Args: [][]byte{[]byte(fmt.Sprint(i % 10))}}
		default:
			op = service.Op{Kind: "incr", Key: fmt.Sprintf("c%d", k)}
		}
		oid := fmt.Sprintf("w%d", i)
		ops[oid] = op
		c.Request(ids[rng.Intn(3)], op, opts(oid, false))
		if i%10 == 9 {
			c.settle(1)
		}
		switch i {
		case 250:
			c.Crash(ids[1])
			c.Restart(ids[1])
		case 450:
			for _, id := range ids {
				c.Crash(id)
			}
			for _, id := range ids {
				c.Restart(id)
			}
		}
		if st.err != nil {
			break
		}
	}
	if st.err == nil {
		c.settle(100)
	}
	return st
}

// TestPacedRewriteLosesNoRecord: with "s" rewritten a part a tick
// (rewrite.go), a crash after any step of any replica, in the middle of
// a rewrite, at its end or after, restores exactly the stable state the
// replica had persisted: no operation it had done is lost or applied
// twice (pacedRun). Fails when the end of a rewrite drops the kept
// records of the operations collected after its copy (brokenPacedKeep,
// TestBrokenPacedKeepCaught), and when "s" is written with the fields
// as they are at its end instead of at the copy (the restored state then
// lacks the operations between).
func TestPacedRewriteLosesNoRecord(t *testing.T) {
	pace(t)
	st := pacedRun(t)
	if st.err != nil {
		t.Fatal(st.err)
	}
	t.Logf("%d restores checked, %d in the middle of a rewrite; %d rewrites ended, %d with records kept across", st.probes, st.midRewrite, st.ends, st.keptAcross)
	if st.midRewrite == 0 || st.ends == 0 || st.keptAcross == 0 {
		t.Fatal("no rewrite spanned steps, ended, or kept records across its end: the test exercises nothing")
	}
}

// TestBrokenPacedKeepCaught: pacedRun catches a rewrite that, at its
// end, drops every kept record, also those of the operations collected
// after its copy was taken.
func TestBrokenPacedKeepCaught(t *testing.T) {
	pace(t)
	brokenPacedKeep = 1
	t.Cleanup(func() { brokenPacedKeep = 0 })
	st := pacedRun(t)
	if st.err == nil {
		t.Fatalf("not caught (%d restores checked, %d rewrites ended, %d with records kept across)", st.probes, st.ends, st.keptAcross)
	}
	t.Logf("caught: %v", st.err)
}

// TestPacedRewriteSim: the paced rewrite under the simulator's faults
// (crashes that lose unsynced records, power loss, a lossy network), with
// the invariants (stable orders agree across restarts) and the ESDS
// checker.
func TestPacedRewriteSim(t *testing.T) {
	pace(t)
	s0, e0 := deltaUse.pacedStarts.Load(), deltaUse.pacedEnds.Load()
	for seed := int64(1); seed <= 6; seed++ {
		cfg := sim.Config{Protocol: "esds", Service: "kv", Nodes: 3, Clients: 4, Ops: 300, Seed: seed, Faults: "all",
			StrictFrac: 0.3, PrevProb: 0.3, RequestTimeout: 3 * time.Second}
		res, err := sim.Run(cfg)
		if err != nil {
			t.Fatalf("%v\nreplay (with deltaMin=1, deltaFactor=2, gcPerTick=32, gcScanPerTick=64, snapChunk=8): %s", err, cfg.Command())
		}
		if res.Violation || res.Invariant != "" {
			t.Fatalf("seed %d: %s %s\nreplay (with deltaMin=1, deltaFactor=2, gcPerTick=32, gcScanPerTick=64, snapChunk=8): %s", seed, res.Invariant, res.ESDS.Detail(), cfg.Command())
		}
	}
	starts, ends := deltaUse.pacedStarts.Load()-s0, deltaUse.pacedEnds.Load()-e0
	t.Logf("%d paced rewrites started, %d ended", starts, ends)
	if starts == 0 || ends == 0 {
		t.Fatal("the paced rewrite was not exercised")
	}
}

// TestRestartKeepsPacedRewrite: a replica restarted with a large "s"
// (here: deltaMin 1) stays on the delta path, so every "s" it writes
// after the restart is the end of a paced rewrite. Before, its first
// collection after a restart rewrote "s" whole in one step (snapLen was
// 0 until then): fails there.
func TestRestartKeepsPacedRewrite(t *testing.T) {
	pace(t)
	c := newCluster(t, "esds", 3, service.KV{}, nil)
	ids := c.IDs()
	put := func(i int) {
		c.Request(ids[i%3], service.Op{Kind: "set", Key: fmt.Sprintf("k%d", i%20), Args: [][]byte{[]byte(fmt.Sprint(i))}}, opts(fmt.Sprintf("w%d", i), false))
	}
	for i := range 300 {
		put(i)
		if i%10 == 9 {
			c.settle(1)
		}
	}
	c.Crash(ids[1])
	c.Restart(ids[1])
	if !c.esds(ids[1]).collectEveryTick() {
		t.Fatal("restarted with a large \"s\" off the delta path")
	}
	// Outputs are observed after their step: an "s" of n2's is the end
	// of a paced rewrite iff pacedEnds grew in that step.
	sRecs, last := 0, deltaUse.pacedEnds.Load()
	var bad error
	c.Observe(func(id automaton.NodeID, o automaton.Output) {
		if p, ok := o.(automaton.Persist); ok && id == ids[1] && p.Key == recStable && !p.Delete {
			sRecs++
			if deltaUse.pacedEnds.Load() == last && bad == nil {
				bad = fmt.Errorf("%s wrote \"s\" after its restart in a step that ended no paced rewrite (step %d)", id, c.Steps())
			}
		}
	})
	c.afterStep = func(a *ESDS) { last = deltaUse.pacedEnds.Load() }
	e0 := deltaUse.pacedEnds.Load()
	for i := 300; i < 600; i++ {
		put(i)
		if i%10 == 9 {
			c.settle(1)
		}
	}
	c.settle(50)
	if bad != nil {
		t.Fatal(bad)
	}
	if sRecs == 0 || deltaUse.pacedEnds.Load() == e0 {
		t.Fatal("no \"s\" written after the restart: the test exercises nothing")
	}
	t.Logf("%d \"s\" written by %s after its restart", sRecs, ids[1])
}
