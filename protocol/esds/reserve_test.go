package esds

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/service"
)

var simpleParams = map[string]string{"impl": "simple"}

// kindOf is the kind of an ESDS message ("reserve", "grant", ...).
func kindOf(t *testing.T, b []byte) string {
	t.Helper()
	m, err := unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return header.Kinds[m.Kind-1]
}

// deliverKind delivers the one message in flight from -> to, which must be
// of the given kind.
func (c *cluster) deliverKind(from, to automaton.NodeID, kind string) {
	c.t.Helper()
	for _, m := range c.Queue() {
		if m.From == from && m.To == to {
			if got := kindOf(c.t, m.Msg); got != kind {
				c.t.Fatalf("%s -> %s: %s in flight, want %s", from, to, got, kind)
			}
			c.Deliver(harness.Match(from, to), 1)
			return
		}
	}
	c.t.Fatalf("no %s message %s -> %s in flight (queue %d)", kind, from, to, c.Pending())
}

// status is node id's reservation status, "free" or "<status> <peer>".
func (c *cluster) status(id automaton.NodeID) string {
	a := c.esds(id)
	if a.resv.status == statusFree {
		return "free"
	}
	return a.resv.status.String() + " " + string(a.cfg.Nodes[a.resv.peer])
}

func (c *cluster) wantStatus(want map[automaton.NodeID]string) {
	c.t.Helper()
	for id, w := range want {
		if got := c.status(id); got != w {
			c.t.Fatalf("%s is %s, want %s", id, got, w)
		}
	}
}

// runCombinations delivers every message and runs every holder's
// initiation (the zero-delay timer the simulator fires at once) until
// nothing is in flight and nobody holds a reservation.
func (c *cluster) runCombinations() {
	for i := 0; i < 1000; i++ {
		c.DeliverAll()
		held := false
		for _, id := range c.IDs() {
			if a := c.esds(id); a != nil && a.resv.status == statusHolding {
				c.FireTimer(id, timerResv)
				held = true
			}
		}
		if !held && c.Pending() == 0 {
			return
		}
	}
	c.t.Fatal("combinations never stopped")
}

// TestGossipCombination follows one gossip I/O combination through the
// reservation system (the ESDS thesis §3.3.4, §3.3.5): request, grant (holding /
// reserved: Invariant 3.3.1, checked after every step), "Initiate X"
// carrying the gossip, "Done X" carrying the acknowledgement.
func TestGossipCombination(t *testing.T) {
	c := newCluster(t, "esds", 2, service.Counter{}, simpleParams)
	r := c.request("n1", opts("x", false), "add", "5")
	c.mustAnswer(r)
	if c.Pending() != 0 {
		t.Fatalf("impl=simple sent %d messages before any gossip interval", c.Pending())
	}
	c.tick() // n2 has nothing to gossip: it stays free
	c.wantStatus(map[automaton.NodeID]string{"n1": "negotiating n2", "n2": "free"})
	c.deliverKind("n1", "n2", "reserve")
	c.wantStatus(map[automaton.NodeID]string{"n1": "negotiating n2", "n2": "reserved n1"})
	c.deliverKind("n2", "n1", "grant")
	c.wantStatus(map[automaton.NodeID]string{"n1": "holding-reservation n2", "n2": "reserved n1"})
	if c.esds("n2").ops["x"] != nil {
		t.Fatal("n2 learned x before the combination")
	}
	if !c.FireTimer("n1", timerResv) { // the scheduler's next round: initiate
		t.Fatal("holding-reservation set no timer")
	}
	c.wantStatus(map[automaton.NodeID]string{"n1": "combining n2", "n2": "reserved n1"})
	c.deliverKind("n1", "n2", "initiate")
	c.wantStatus(map[automaton.NodeID]string{"n1": "combining n2", "n2": "free"})
	if o := c.esds("n2").ops["x"]; o == nil || o.done&1 == 0 {
		t.Fatalf("n2 did not merge the gossip: %v", o)
	}
	c.deliverKind("n2", "n1", "done")
	c.wantStatus(map[automaton.NodeID]string{"n1": "free", "n2": "free"})
	if p := c.esds("n1").peers[1]; p.acked == 0 || p.acked != p.sentUpTo {
		t.Fatalf("\"Done X\" did not acknowledge the stream: acked %d, sent %d", p.acked, p.sentUpTo)
	}
	// A resent "Initiate X" (its "Done X" lost) gets the same "Done X".
	st := c.esds("n1").Reservations()
	if st.Requests != 1 || st.Combinations != 1 {
		t.Fatalf("n1's counts %+v", st)
	}
	if c.esds("n2").Reservations().Grants != 1 {
		t.Fatalf("n2's counts %+v", c.esds("n2").Reservations())
	}
}

// TestLostMessagesResent: every handshake message lost once is resent and
// answered as the first time; the combination completes, and a resent
// "Initiate X" whose "Done X" was lost gets the same "Done X" without a
// second merge.
func TestLostMessagesResent(t *testing.T) {
	c := newCluster(t, "esds", 2, service.Counter{}, simpleParams)
	c.mustAnswer(c.request("n1", opts("x", false), "add", "5"))
	c.tick()
	c.Drop(harness.Match("n1", "n2")) // the request
	c.FireTimer("n1", timerResv)
	c.deliverKind("n1", "n2", "reserve")
	c.Drop(harness.Match("n2", "n1")) // the grant
	c.FireTimer("n1", timerResv)
	c.deliverKind("n1", "n2", "reserve")
	c.deliverKind("n2", "n1", "grant")
	c.FireTimer("n1", timerResv)
	c.deliverKind("n1", "n2", "initiate")
	c.Drop(harness.Match("n2", "n1")) // "Done X"
	c.FireTimer("n1", timerResv)
	c.deliverKind("n1", "n2", "initiate")
	c.deliverKind("n2", "n1", "done")
	c.wantStatus(map[automaton.NodeID]string{"n1": "free", "n2": "free"})
	if g := c.esds("n2").Reservations().Grants; g != 1 {
		t.Fatalf("n2 granted %d times, want 1", g)
	}
}

// TestContentionBacksOff: two replicas that ask each other at once are both
// negotiating, so both reject (§3.4.3's livelock); each doubles q_{i,j}
// and adds a random term (exponential backoff) and asks again when it has
// passed; a grant resets q_{i,j}.
func TestContentionBacksOff(t *testing.T) {
	c := newCluster(t, "esds", 2, service.Counter{}, simpleParams)
	c.mustAnswer(c.request("n1", opts("x", false), "add", "5"))
	c.mustAnswer(c.request("n2", opts("y", false), "add", "7"))
	a1 := c.esds("n1")
	base, jitter := a1.backoffBase(), a1.backoffJitter()
	c.tick()
	c.wantStatus(map[automaton.NodeID]string{"n1": "negotiating n2", "n2": "negotiating n1"})
	c.deliverKind("n1", "n2", "reserve")
	c.deliverKind("n2", "n1", "reserve")
	c.deliverKind("n2", "n1", "reject")
	c.deliverKind("n1", "n2", "reject")
	c.wantStatus(map[automaton.NodeID]string{"n1": "free", "n2": "free"})
	bt := timerBackoff + 1 // n1's timer towards n2 (index 1)
	d, ok := c.TimerAfter("n1", bt)
	if !ok || d < 2*base || d > 2*base+jitter {
		t.Fatalf("n1 backs off %v (set %v), want 2*%v plus up to %v", d, ok, base, jitter)
	}
	if a1.resv.backingOff != 1<<1 || a1.resv.q[1] != d {
		t.Fatalf("n1 backing off %b, q %v", a1.resv.backingOff, a1.resv.q[1])
	}
	c.tick() // a gossip interval: n1 still waits for q_{1,2}; n2 for q_{2,1}
	if c.Pending() != 0 {
		t.Fatalf("a replica asked during its backoff interval")
	}
	c.FireTimer("n1", bt)
	c.deliverKind("n1", "n2", "reserve") // n2 is free: granted
	c.deliverKind("n2", "n1", "grant")
	if a1.resv.q[1] != base {
		t.Fatalf("q_{1,2} after a grant: %v, want %v", a1.resv.q[1], base)
	}
	c.FireTimer("n1", timerResv)
	c.deliverKind("n1", "n2", "initiate")
	c.deliverKind("n2", "n1", "done")
	// A second rejection doubles q again: n1 asks while n2 negotiates.
	c.FireTimer("n2", timerBackoff+0)
	c.mustAnswer(c.request("n1", opts("z", false), "add", "1"))
	c.tick()
	c.deliverKind("n1", "n2", "reserve")
	c.deliverKind("n2", "n1", "reserve")
	c.deliverKind("n2", "n1", "reject")
	first, _ := c.TimerAfter("n1", bt)
	c.deliverKind("n1", "n2", "reject")
	c.FireTimer("n2", timerBackoff+0)
	c.deliverKind("n2", "n1", "reserve")
	c.deliverKind("n1", "n2", "grant")
	c.FireTimer("n2", timerResv)
	c.deliverKind("n2", "n1", "initiate")
	c.deliverKind("n1", "n2", "done")
	c.FireTimer("n1", bt)
	c.tick()
	c.DeliverAll()
	if first < 2*base {
		t.Fatalf("backoff %v below 2*%v", first, base)
	}
}

// TestRestartsReleaseReservations: a grantor that restarts starts free and
// rejects the holder's "Initiate X"; a holder that restarts releases its
// grantor with its next message. Gossip gets through afterwards.
func TestRestartsReleaseReservations(t *testing.T) {
	c := newCluster(t, "esds", 2, service.Counter{}, simpleParams)
	c.mustAnswer(c.request("n1", opts("x", false), "add", "5"))
	c.tick()
	c.deliverKind("n1", "n2", "reserve")
	c.deliverKind("n2", "n1", "grant")
	c.Crash("n2")
	c.Restart("n2")
	c.FireTimer("n1", timerResv)
	c.deliverKind("n1", "n2", "initiate")
	c.deliverKind("n2", "n1", "reject")
	c.wantStatus(map[automaton.NodeID]string{"n1": "free", "n2": "free"})

	// Now the holder restarts while n2 is reserved for it.
	c.tick()
	c.deliverKind("n1", "n2", "reserve")
	c.wantStatus(map[automaton.NodeID]string{"n2": "reserved n1"})
	c.Drop(harness.Match("n2", "n1"))
	c.Crash("n1")
	c.Restart("n1")
	c.tick() // the new n1 holds x (persisted) and asks n2
	c.deliverKind("n1", "n2", "reserve")
	c.wantStatus(map[automaton.NodeID]string{"n2": "reserved n1"})
	if c.esds("n2").resv.peerInc != c.esds("n1").inc {
		t.Fatal("n2 is still reserved for n1's first incarnation")
	}
	c.settle(5)
	for i := 0; i < 20 && c.Pending()+len(c.Timers("n1")) > 0; i++ {
		c.FireAllNodes()
		c.DeliverAll()
		if o := c.esds("n2").ops["x"]; o != nil {
			return
		}
	}
	t.Fatal("n2 never learned x")
}

// TestSimpleUnderFaults: impl=simple under loss, duplication, reordering
// and restarts, with strict operations: every operation answered, replicas
// agree, Invariant 3.3.1 and the other invariants hold after every step.
func TestSimpleUnderFaults(t *testing.T) {
	for _, variant := range []string{"opt", "unopt"} {
		t.Run(variant, func(t *testing.T) {
			c := newCluster(t, "esds", 3, service.Counter{}, map[string]string{"impl": "simple", "variant": variant})
			reqs := map[automaton.RequestID]automaton.NodeID{}
			for round := 0; round < 40; round++ {
				n := c.IDs()[c.rng.Intn(3)]
				reqs[c.request(n, opts("", round%3 == 0), "add", "1")] = n
				if round%13 == 5 {
					v := c.IDs()[c.rng.Intn(3)]
					for r, at := range reqs {
						if _, ok := c.answer(r); !ok && at == v {
							delete(reqs, r) // lost with the crash: a client would retry
						}
					}
					c.Crash(v)
					c.Restart(v)
				}
				c.FireAllNodes()
				c.deliver(0.1, 0.1, 0.3)
			}
			// The harness has no clock: firing every node's timers at once
			// keeps the random backoff intervals in step (all ask, all
			// reject); one node's timers at a time stands for them
			// drifting apart.
			for i := 0; i < 300; i++ {
				c.FireAll(c.IDs()[i%3])
				c.runCombinations()
			}
			for r := range reqs {
				if _, ok := c.answer(r); !ok {
					t.Fatalf("request %v not answered", r)
				}
			}
			if got := len(c.agreedOrder()); got == 0 {
				t.Fatal("empty order")
			}
		})
	}
}

// TestDoubleReserveCaught: esds-broken-doublereserve grants a second
// request while reserved for the first requester, and Invariant 3.3.1
// catches the first requester holding a reservation its grantor dropped;
// the correct protocol rejects the second request.
func TestDoubleReserveCaught(t *testing.T) {
	for _, name := range []string{"esds", "esds-broken-doublereserve"} {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t, name, 3, service.Counter{}, simpleParams)
			c.tolerateInv = true
			c.mustAnswer(c.request("n1", opts("x", false), "add", "5"))
			c.mustAnswer(c.request("n3", opts("y", false), "add", "7"))
			// n1 and n3 both ask n2 first (round-robin from themselves:
			// n1 -> n2; n3 -> n1 then n2, so make n3 ask n2 by ticking
			// once n1 is busy).
			c.FireTimer("n1", timerGossip)
			c.deliverKind("n1", "n2", "reserve")
			c.deliverKind("n2", "n1", "grant")
			c.esds("n3").resv.last = 0 // n3 asks n2 next
			c.FireTimer("n3", timerGossip)
			c.deliverKind("n3", "n2", "reserve")
			if name == "esds" {
				if c.invErr != nil {
					t.Fatalf("violation in the correct protocol: %v", c.invErr)
				}
				c.deliverKind("n2", "n3", "reject")
				return
			}
			if c.invErr == nil || !strings.Contains(c.invErr.Error(), invReservation) {
				t.Fatalf("invariant 3.3.1 not caught: %v", c.invErr)
			}
		})
	}
}
