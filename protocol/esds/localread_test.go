package esds

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/synod-dev/synod/service"
)

// refRead is val_r of a read placed after every operation done here,
// computed the seed's way: the stable state plus every done, non-applied
// operation in label order (Fig. 4.5), then the read.
func refRead(a *ESDS, sop service.Op) service.Result {
	st := a.copyStable()
	for _, o := range a.doneNotApplied() {
		st.Apply(o.sop)
	}
	return st.Apply(sop)
}

// TestReadValueIsValAfterEveryDone: readValue (localRead's value) equals
// the value of the read placed after every operation done at the replica,
// whatever state the tentative state is in (valid, stale on some keys,
// stale, rebuilt), in a random KV load on a faulty network with deletes
// (not key-local) among the operations.
func TestReadValueIsValAfterEveryDone(t *testing.T) {
	c := newCluster(t, "esds", 3, service.KV{}, map[string]string{"reads": "local"})
	c.rng = rand.New(rand.NewSource(28))
	keys := []string{"a", "b", "c", "d", "e", "f"}
	checked := 0
	for i := range 600 {
		n := c.IDs()[c.rng.Intn(len(c.IDs()))]
		k := keys[c.rng.Intn(len(keys))]
		var o service.Op
		switch c.rng.Intn(5) {
		case 0:
			o = service.Op{Kind: "set", Key: k, Args: [][]byte{[]byte(fmt.Sprint(i))}}
		case 1:
			o = service.Op{Kind: "get", Key: k}
		case 2:
			o = service.Op{Kind: "incr", Key: k, Args: [][]byte{[]byte("1")}}
		case 3:
			o = service.Op{Kind: "append", Key: k, Args: [][]byte{[]byte("x")}}
		default:
			if c.rng.Intn(3) == 0 {
				o = service.Op{Kind: "del", Key: k}
			} else {
				o = service.Op{Kind: "strlen", Key: k}
			}
		}
		c.Request(n, o, opts(fmt.Sprintf("op%d", i), c.rng.Intn(8) == 0))
		if c.rng.Intn(6) == 0 {
			c.tick()
		}
		if c.rng.Intn(3) == 0 {
			c.deliver(0.1, 0.1, 0.5)
		}
		for _, id := range c.IDs() {
			a := c.esds(id)
			for _, read := range []service.Op{{Kind: "get", Key: k}, {Kind: "strlen", Key: keys[c.rng.Intn(len(keys))]}, {Kind: "dbsize"}} {
				want := refRead(a, read)
				if got := a.readValue(read); !got.Equal(want) {
					t.Fatalf("after op%d, %s: read %s %s answered %v locally, %v after every done operation", i, id, read.Kind, read.Key, got, want)
				}
				checked++
			}
		}
	}
	local := 0
	for _, id := range c.IDs() {
		local += c.esds(id).localReads
	}
	if local == 0 {
		t.Fatal("no read answered locally: the test exercises nothing")
	}
	t.Logf("%d reads compared; %d client reads answered locally", checked, local)
}

// TestLocalReads: under reads=local a non-strict read is answered at once
// by the replica it reaches, with no label, record or gossip; a read whose
// prev is not done there, and a strict one, are ordered as before; an
// operation naming a local read in prev at that replica is done without
// waiting for it.
func TestLocalReads(t *testing.T) {
	c := newCluster(t, "esds", 3, service.String{}, map[string]string{"reads": "local"})
	a := c.request("n1", opts("a", false), "append", "a")
	c.mustAnswer(a)
	r1 := c.request("n1", opts("r1", false, "a"), "read")
	if got := c.mustAnswer(r1); string(got.Bytes) != "a" {
		t.Fatalf("local read answered %v, want a", got)
	}
	if n1 := c.esds("n1"); n1.localReads != 1 || n1.ops["r1"] != nil || slices.ContainsFunc(n1.dirtyOps, func(o *op) bool { return o.id == "r1" }) {
		t.Fatalf("r1: %d local reads, op kept %v", n1.localReads, n1.ops["r1"] != nil)
	}
	// n2 has not done a: r2 is received and waits for it, as any operation.
	r2 := c.request("n2", opts("r2", false, "a"), "read")
	if _, ok := c.answer(r2); ok {
		t.Fatal("r2 answered before its prev was done at n2")
	}
	// A strict read is ordered.
	r3 := c.request("n1", opts("r3", true), "read")
	// b names the local read r1 at n1: done at once, after a.
	b := c.request("n1", opts("b", false, "r1"), "append", "b")
	if got := c.mustAnswer(b); string(got.Bytes) != "ab" {
		t.Fatalf("b answered %v, want ab", got)
	}
	c.settle(8)
	if got := c.mustAnswer(r2); string(got.Bytes) != "a" && string(got.Bytes) != "ab" {
		t.Fatalf("r2 answered %v", got)
	}
	if got := c.mustAnswer(r3); string(got.Bytes) != "a" {
		t.Fatalf("strict r3 answered %v", got)
	}
	order := c.agreedOrder()
	if slices.Contains(order, "r1") || !slices.Contains(order, "r2") || !slices.Contains(order, "r3") {
		t.Fatalf("order %v: want r2 and r3 ordered, r1 not", order)
	}
	if got := c.esds("n1").AnswersReadsLocally(); !got {
		t.Fatal("AnswersReadsLocally false under reads=local")
	}
	if got := newCluster(t, "esds", 1, service.String{}, nil).esds("n1").AnswersReadsLocally(); got {
		t.Fatal("AnswersReadsLocally true by default")
	}
}
