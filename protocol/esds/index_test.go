package esds

import (
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/service"
)

// checkIndexes compares every index of index.go with the scan of a.ops it
// stands for. The test cluster runs it after every step.
func (a *ESDS) checkIndexes() error {
	if a.ops == nil {
		return nil
	}
	var want []*op
	var maxSolid Label
	applied := 0
	for _, o := range a.ops {
		if o.label.Set && !o.applied {
			want = append(want, o)
		}
		if o.applied {
			applied++
		}
		if o.solid&a.bit() != 0 && !o.applied && o.label.Set && (!maxSolid.Set || maxSolid.Less(o.label)) {
			maxSolid = o.label
		}
	}
	sort.Slice(want, func(i, j int) bool { return want[i].label.Less(want[j].label) })
	got := append([]*op(nil), a.doneNotApplied()...)
	if len(got) != len(want) {
		return fmt.Errorf("%s: done index holds %d operations, the scan %d", a.cfg.Self, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] || !got[i].inDNA {
			return fmt.Errorf("%s: done index position %d: %s, the scan %s", a.cfg.Self, i, got[i].id, want[i].id)
		}
	}
	if maxSolid.Set && !a.unopt { // after a step, advanceStable has applied every stable operation
		return fmt.Errorf("%s: operation with label %v stable here but not applied", a.cfg.Self, maxSolid)
	}
	keyed := 0
	for k, l := range a.byKey {
		for _, o := range l {
			if !o.inKeys || o.applied || !o.label.Set || a.ops[o.id] != o || o.sop.Key != k {
				return fmt.Errorf("%s: key index holds %s under %q, which is not a done, non-applied write of it", a.cfg.Self, o.id, k)
			}
			keyed++
		}
	}
	wantKeyed := 0
	if ks, ok := a.keyed(); ok {
		for _, o := range want {
			if ks.KeyLocal(o.sop) && !a.svc.IsRead(o.sop) {
				wantKeyed++
			}
			if o.inKeys != a.byKeyOn && ks.KeyLocal(o.sop) && !a.svc.IsRead(o.sop) {
				return fmt.Errorf("%s: %s in the key index: %v, the index kept: %v", a.cfg.Self, o.id, o.inKeys, a.byKeyOn)
			}
		}
	}
	if !a.byKeyOn {
		wantKeyed = 0 // dropped while nothing reads it (keyIndexIdle)
	}
	if keyed != wantKeyed {
		return fmt.Errorf("%s: key index holds %d operations, the scan %d", a.cfg.Self, keyed, wantKeyed)
	}
	live := 0
	for _, o := range a.appliedLive {
		if a.ops[o.id] != o || !o.applied {
			return fmt.Errorf("%s: applied list holds %s, which is not a live applied operation", a.cfg.Self, o.id)
		}
		live++
	}
	if live != applied {
		return fmt.Errorf("%s: applied list holds %d operations, the scan %d", a.cfg.Self, live, applied)
	}
	for j := range a.peers {
		for i := range a.peers[j].queue {
			q := &a.peers[j].queue[i]
			if o := q.live(); o != a.ops[q.id] {
				return fmt.Errorf("%s: peer %d's stream position %d holds %s as %p, the operation table %p", a.cfg.Self, j, i, q.id, o, a.ops[q.id])
			}
		}
	}
	return nil
}

// A KV load with reads and writes submitted at every replica, over a lossy,
// duplicating, reordering network with crashes: the indexes match the scans
// after every step (the cluster checks), the replicas converge, and
// everything is collected at the end.
func TestIndexesMatchScansKV(t *testing.T) {
	for _, batch := range []string{"4", "512"} {
		for _, crash := range []bool{false, true} {
			t.Run(fmt.Sprintf("batch=%s,crash=%v", batch, crash), func(t *testing.T) {
				kvLoad(t, map[string]string{"batch": batch}, crash)
			})
		}
	}
	// send=all: every replica does every operation, so gossip relabels
	// operations done here.
	t.Run("send=all", func(t *testing.T) { kvLoad(t, map[string]string{"send": "all"}, false) })
}

// TestDoneIndexRemove: removing operations from the done index, merged
// ones and arrivals not merged yet (dnaRemove does not merge them first),
// leaves exactly the others in label order, over random runs of inserts
// and removals.
func TestDoneIndexRemove(t *testing.T) {
	rng := rand.New(rand.NewSource(28))
	for run := range 200 {
		a := &ESDS{}
		var live []*op
		for i := range 60 {
			if len(live) > 0 && rng.Intn(3) == 0 {
				k := rng.Intn(len(live))
				a.dnaRemove(live[k])
				live = append(live[:k], live[k+1:]...)
				continue
			}
			if rng.Intn(8) == 0 {
				a.dnaSettle()
			}
			o := &op{id: fmt.Sprint(i), label: Label{C: uint64(rng.Intn(1000) + 1), R: uint32(i), Set: true}}
			a.dnaInsert(o)
			live = append(live, o)
		}
		sort.Slice(live, func(i, j int) bool { return live[i].label.Less(live[j].label) })
		a.dnaSettle()
		if !reflect.DeepEqual(append([]*op(nil), a.dna...), live) && !(len(a.dna) == 0 && len(live) == 0) {
			t.Fatalf("run %d: the done index holds %d operations, %d were inserted and not removed", run, len(a.dna), len(live))
		}
	}
}

// kvLoad runs a random KV load on three replicas over a lossy, duplicating,
// reordering network (with crashes and restarts if crash), then checks that
// the replicas agree on one order and collect everything.
func kvLoad(t *testing.T, params map[string]string, crash bool) {
	kvLoadSeeds(t, params, crash, 1, 4)
}

func kvLoadSeeds(t *testing.T, params map[string]string, crash bool, from, to int64) {
	for seed := from; seed <= to; seed++ {
		if s := quiescentKept(t, params, crash, seed); s != "" {
			t.Fatalf("seed %d: %s after quiescence", seed, s)
		}
	}
}

// Once a peer has acknowledged an operation's descriptor, later news about it
// (stable here, stable everywhere) travels bare; the receiver still converges.
func TestStreamSendsDescriptorOnce(t *testing.T) {
	c := newCluster(t, "esds", 2, service.KV{}, nil)
	big := string(make([]byte, 4000))
	r := kvRequest(c, "n1", opts("w", false), "set", "k", big)
	c.mustAnswer(r)
	full, bare := 0, 0
	for round := 0; round < 6; round++ {
		c.tick()
		for _, m := range c.Queue() {
			if m.From != "n1" {
				continue
			}
			msg, err := unmarshal(m.Msg)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range msg.Entries {
				if x.ID != "w" || x.Flags == flagGone {
					continue
				}
				if x.Flags&flagBare != 0 {
					bare++
					if len(m.Msg) > 1000 {
						t.Fatalf("a bare entry's message is %d bytes", len(m.Msg))
					}
				} else {
					full++
				}
			}
		}
		c.deliver(0, 0, 0)
	}
	if full != 1 || bare == 0 {
		t.Fatalf("n1 sent w with its descriptor %d times and bare %d times; want once and at least once", full, bare)
	}
	if got := c.esds("n2").stable.Apply(service.Op{Kind: "get", Key: "k"}); !got.Equal(service.Bytes([]byte(big))) {
		t.Fatalf("n2's stable state has k = %v", got)
	}
}

func kvRequest(c *cluster, id automaton.NodeID, opts automaton.Options, kind, key string, args ...string) automaton.RequestID {
	o := service.Op{Kind: kind, Key: key}
	for _, a := range args {
		o.Args = append(o.Args, []byte(a))
	}
	return c.Request(id, o, opts)
}

// A stream position says what was true when it was queued, never more. Here
// n1 queues x (waiting for its prev p), then does y and p, then x; with one
// entry per message, n2 must not hear "x done at n1" before it has heard of
// y and p, which n1 did before x: x would be stable at n2 (done at both)
// while y and p, labelled below it, are still unknown there. (The stream used
// to send each operation's current state at its first unsent position.)
func TestStreamPositionSaysWhatWasQueued(t *testing.T) {
	c := newCluster(t, "esds", 2, service.KV{}, map[string]string{"batch": "1"})
	x := kvRequest(c, "n1", opts("x", false, "p"), "set", "k", "x")
	kvRequest(c, "n1", opts("y", false), "set", "k", "y")
	kvRequest(c, "n1", opts("p", false), "set", "k", "p")
	c.mustAnswer(x)
	for round := 0; round < 20; round++ {
		c.tick()
		c.deliver(0, 0, 0)
		for _, id := range c.esds("n2").orderLog {
			if id == "x" && len(c.esds("n2").orderLog) < 3 {
				t.Fatalf("round %d: n2 applied x to its stable state before y and p: %v", round, c.esds("n2").orderLog)
			}
		}
	}
	if got := c.agreedOrder(); !reflect.DeepEqual(got, []string{"y", "p", "x"}) {
		t.Fatalf("order %v, want [y p x]", got)
	}
}

// News about an operation whose position has been sent is queued at a new
// position, even while a retransmission (one position per message here) has
// not yet reached the old one again: the receiver, which got the old position
// the first time, drops it as a duplicate when it comes again.
// (stability=positions: under the default prefix, "x stable at n1" travels
// as the stable prefix, which stops below a, not stable at n1 here.)
func TestStreamNewsAfterSentPositionIsNotLost(t *testing.T) {
	// The test forges a message from n3 below; the invariants compare what
	// n1 learns with n3's real state and would (rightly) flag the forgery.
	c := newClusterOpts(t, harness.Options{Protocol: "esds", Nodes: 3, Service: service.KV{},
		Params: map[string]string{"batch": "1", "stability": "positions"}, NoInvariants: true})
	kvRequest(c, "n1", opts("a", false), "set", "k", "a")
	kvRequest(c, "n1", opts("x", false), "set", "k", "x")
	// Only n1 -> n2 traffic gets through: n2's acknowledgements are lost.
	deliverN1N2 := func() {
		c.Deliver(harness.Match("n1", "n2"), 0)
		c.Drop(nil)
	}
	for i := 0; i < 6; i++ { // a, x, then the retransmission of a
		c.FireTimer("n1", timerGossip)
		deliverN1N2()
	}
	if p := c.esds("n1").peers[1]; p.acked != 0 || p.sentUpTo != 1 || len(p.queue) != 2 {
		t.Fatalf("setup: n1's stream to n2: acked %d, sent up to %d, %d queued", p.acked, p.sentUpTo, len(p.queue))
	}
	// n3 says x is stable there: x is now stable at n1 too.
	x := c.esds("n1").ops["x"]
	m := message{Kind: kindStream, Inc: 5, Stream: 9, From: 1, To: 1, Entries: []entry{
		{ID: "x", Op: x.sop, Flags: flagDone | flagSolid, Label: x.label}}}
	c.Step("n1", automaton.PeerMessage{From: "n3", Msg: m.marshal()})
	if x.solid&1 == 0 {
		t.Fatal("setup: x not stable at n1")
	}
	for i := 0; i < 3; i++ {
		c.FireTimer("n1", timerGossip)
		deliverN1N2()
	}
	if got := c.esds("n2").ops["x"]; got == nil || got.solid&1 == 0 {
		t.Fatal("n2 did not learn that x is stable at n1")
	}
}

// TestKeyIndexDropsChangeNoValue: dropping the key index while nothing
// reads it and rebuilding it from the done index when an answer over keys
// needs it (index.go keyIndexOn, keyIndexIdle) answers every operation as
// keeping it does, in a load of writes with a read now and then across
// gossip ticks (so it is dropped and rebuilt many times) on a faulty
// network; the cluster checks the indexes after every step.
func TestKeyIndexDropsChangeNoValue(t *testing.T) {
	defer func(k bool) { keyIndexKeep = k }(keyIndexKeep)
	run := func(keep bool) (map[string]string, [3]int) {
		keyIndexKeep = keep
		c := newCluster(t, "esds", 3, service.KV{}, nil)
		c.rng = rand.New(rand.NewSource(58))
		keys := []string{"a", "b", "c", "d", "e", "f"}
		out := kvAnswers(c, 900, 4, func(i int) service.Op {
			k := keys[c.rng.Intn(len(keys))]
			switch r := c.rng.Intn(20); {
			case r == 0:
				return service.Op{Kind: "get", Key: k}
			case r < 8:
				return service.Op{Kind: "incr", Key: k, Args: [][]byte{[]byte("1")}}
			case r < 14:
				return service.Op{Kind: "append", Key: k, Args: [][]byte{[]byte(fmt.Sprint(i))}}
			}
			return service.Op{Kind: "set", Key: k, Args: [][]byte{[]byte(fmt.Sprint(i))}}
		})
		var n [3]int // builds, drops, answers over keys
		for _, id := range c.IDs() {
			a := c.esds(id)
			n[0] += a.keyIndexBuilds
			n[1] += a.keyIndexDrops
			n[2] += a.keyAnswers
		}
		return out, n
	}
	kept, k := run(true)
	dropped, d := run(false)
	if k[1] != 0 {
		t.Fatalf("kept: %d drops", k[1])
	}
	if d[1] < 10 || d[0] < 10 || d[2] == 0 {
		t.Fatalf("builds %d, drops %d, answers over keys %d: the test exercises nothing", d[0], d[1], d[2])
	}
	if len(kept) < 800 {
		t.Fatalf("%d answers of 900", len(kept))
	}
	sameAnswers(t, "with the key index dropped when idle", dropped, kept)
	t.Logf("%d answers; dropped: %d builds, %d drops, %d answers over keys (kept: %d builds, %d answers over keys)", len(dropped), d[0], d[1], d[2], k[0], k[2])
}
