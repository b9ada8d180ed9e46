package esds

import (
	"fmt"
	"sort"
	"testing"

	"github.com/synod-dev/synod/automaton"
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
		for id := range a.peers[j].has {
			if a.ops[id] == nil {
				return fmt.Errorf("%s: peer %d's descriptor set keeps collected %s", a.cfg.Self, j, id)
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
	const crash = true
	for seed := int64(1); seed <= 4; seed++ {
		c := newCluster(t, "esds", 3, service.KV{}, nil)
		c.rng.Seed(seed)
		for i := 0; i < 150; i++ {
			n := c.ids[c.rng.Intn(len(c.ids))]
			if crash && c.rng.Intn(25) == 0 {
				c.crash(n)
				c.boot(n)
			}
			key := fmt.Sprint("k", c.rng.Intn(4))
			if c.rng.Intn(2) == 0 {
				kvRequest(c, n, automaton.Options{Strict: c.rng.Intn(4) == 0}, "get", key)
			} else {
				kvRequest(c, n, automaton.Options{}, "set", key, fmt.Sprint(i))
			}
			if c.rng.Intn(2) == 0 {
				c.tick()
				c.deliver(0.2, 0.1, 0.3)
			}
		}
		c.settle(300)
		c.agreedOrder()
		c.settle(2 * gcEveryTicks)
		for _, id := range c.ids {
			if a := c.a[id]; len(a.ops) != 0 || len(a.dna) != 0 || len(a.appliedLive) != 0 {
				t.Fatalf("seed %d: %s keeps %d operations (%d done, %d applied) after quiescence", seed, id, len(a.ops), len(a.dna), len(a.appliedLive))
			}
		}
	}
}

// Once a peer has acknowledged an operation's descriptor, later news about it
// (stable here, stable everywhere) travels bare; the receiver still converges.
func TestStreamSendsDescriptorOnce(t *testing.T) {
	c := newCluster(t, "esds", 2, service.KV{}, nil)
	big := string(make([]byte, 4000))
	r := kvRequest(c, "n1", automaton.Options{OpID: "w"}, "set", "k", big)
	c.mustAnswer(r)
	full, bare := 0, 0
	for round := 0; round < 6; round++ {
		c.tick()
		for _, m := range c.msgs {
			if m.from != "n1" {
				continue
			}
			msg, err := unmarshal(m.b)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range msg.Entries {
				if x.ID != "w" || x.Flags == flagGone {
					continue
				}
				if x.Flags&flagBare != 0 {
					bare++
					if len(m.b) > 1000 {
						t.Fatalf("a bare entry's message is %d bytes", len(m.b))
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
	if got := c.a["n2"].stable.Apply(service.Op{Kind: "get", Key: "k"}); !got.Equal(service.Bytes([]byte(big))) {
		t.Fatalf("n2's stable state has k = %v", got)
	}
}

func kvRequest(c *cluster, id automaton.NodeID, opts automaton.Options, kind, key string, args ...string) automaton.RequestID {
	c.seq++
	r := automaton.RequestID{Client: 7, Seq: c.seq}
	o := service.Op{Kind: kind, Key: key}
	for _, a := range args {
		o.Args = append(o.Args, []byte(a))
	}
	c.step(id, automaton.ClientRequest{Req: automaton.Request{ID: r, Op: o, Opts: opts}})
	return r
}
