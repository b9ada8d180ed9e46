package paxos

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// skewedKV is a KV cluster whose nodes' clocks disagree: a request that
// reaches node n carries the time base+offset[n] (ms) as its runtime
// stamps it.
type skewedKV struct {
	*cluster
	offset map[automaton.NodeID]int64
	base   int64 // ms
	seq    uint64
}

func newSkewedKV(t *testing.T) *skewedKV {
	c := newCluster(t, 3, "kv", nil)
	return &skewedKV{cluster: c, base: 1_700_000_000_000,
		offset: map[automaton.NodeID]int64{"n1": 0, "n2": 10_000, "n3": -10_000}}
}

func (c *skewedKV) run(at automaton.NodeID, kind, key string, args ...string) service.Result {
	c.t.Helper()
	c.seq++
	op := service.Op{Kind: kind, Key: key}
	for _, a := range args {
		op.Args = append(op.Args, []byte(a))
	}
	env := service.Env{Time: (c.base + c.offset[at]) * 1e6, Seed: c.seq}
	r, ok := c.doReq(at, automaton.Request{ID: automaton.RequestID{Client: 9, Seq: c.seq}, Op: op, Env: env})
	if !ok {
		c.t.Fatalf("%s %s at %s: no answer", kind, key, at)
	}
	return r.Result
}

func (c *skewedKV) kv(id automaton.NodeID) *service.KVState {
	return c.node(id).sm.st.(*service.KVState)
}

// agree fails unless every replica comes to hold the same state within a
// few heartbeats (commit notices; a tick may also propose active expiry,
// whose own notice takes another). Diverged replicas never agree again.
func (c *skewedKV) agree(what string) {
	c.t.Helper()
	differ := ""
	for range 4 {
		c.tickAll()
		differ = ""
		s1 := string(c.kv("n1").Snapshot())
		for _, id := range c.IDs()[1:] {
			if string(c.kv(id).Snapshot()) != s1 {
				differ = string(id)
			}
		}
		if differ == "" {
			return
		}
	}
	c.t.Fatalf("%s: %s's state differs from n1's", what, differ)
}

// The leader's estimate decides deadlines and expiry: every replica agrees;
// a request forwarded by a follower whose clock is ahead (or a leader whose
// estimate lags: ticks late under load) is stamped no earlier than its
// arrival at that follower (service.LeaderClock's max rule), so a TTL read
// there never exceeds what was asked; active expiry removes the key on
// every replica; and a new leader with a slow clock does not move time
// back.
func TestExpiryUnderClockSkew(t *testing.T) {
	c := newSkewedKV(t)
	c.elect("n1")
	c.run("n1", "set", "warm", "x") // the leader observes its own clock
	if r := c.run("n2", "set", "k", "v", "px", "1000"); !r.Equal(service.OK()) {
		t.Fatalf("set px: %v", r)
	}
	c.agree("after set px")
	want := c.base + 10_000 + 1000 // n2's arrival time (10 s ahead of n1's), not the leader's older one
	for _, id := range c.IDs() {
		if r := c.kv(id).Apply(service.Op{Kind: "pexpiretime", Key: "k"}); r.Int != want {
			t.Fatalf("%s: deadline %d, want %d (n2's clock + 1000)", id, r.Int-c.base, want-c.base)
		}
	}
	// An absolute deadline half a second after n2's clock: the TTL read
	// through n2 is at most what was asked (it was 10.5 s when the leader
	// took a forwarded time only while it had none).
	c.run("n2", "set", "abs", "v")
	c.run("n2", "pexpireat", "abs", strconv.FormatInt(c.base+10_000+500, 10))
	if r := c.run("n2", "pttl", "abs"); r.Int <= 0 || r.Int > 500 {
		t.Fatalf("PTTL through n2 after PEXPIREAT n2's clock + 500 ms: %v", r)
	}
	c.run("n2", "del", "abs")
	if r := c.run("n2", "get", "k"); !r.Equal(service.Bytes([]byte("v"))) {
		t.Fatalf("a read reaching n2 saw the key expired early: %v", r)
	}
	// Time passes at the leader only by its ticks (50 ms each): after about
	// a second of ticks active expiry removes k everywhere.
	for i := 0; i < 30 && c.kv("n1").Len() > 1; i++ {
		c.fire("n1", tmTick)
	}
	c.agree("after active expiry")
	for _, id := range c.IDs() {
		if n := c.kv(id).Len(); n != 1 {
			t.Fatalf("%s holds %d keys after active expiry, want 1 (warm)", id, n)
		}
	}
	// A leader whose clock is 10 s behind: its writes carry at least the
	// state's clock, so deadlines do not move back and nothing returns.
	clock := c.kv("n1").Clock()
	c.elect("n3")
	if r := c.run("n3", "set", "j", "v", "px", "100"); !r.Equal(service.OK()) {
		t.Fatalf("set at the slow leader: %v", r)
	}
	c.agree("after the slow leader's write")
	if r := c.kv("n2").Apply(service.Op{Kind: "pexpiretime", Key: "j"}); r.Int < clock+100 {
		t.Fatalf("deadline %d set behind the state's clock %d", r.Int, clock)
	}
	if c.kv("n2").Clock() < clock {
		t.Fatal("the state's clock went back")
	}
}

// Without a deadline in the state the leader proposes nothing: a KV
// namespace that never uses expiry has no extra log entries.
func TestNoActiveExpiryWithoutDeadlines(t *testing.T) {
	c := newSkewedKV(t)
	c.elect("n1")
	c.run("n1", "set", "a", "1")
	next := c.node("n1").next
	for range 10 {
		c.fire("n1", tmTick)
	}
	if c.node("n1").next != next {
		t.Fatalf("the leader proposed %d instances with no deadline in the state", c.node("n1").next-next)
	}
}

// Random writes with deadlines at nodes with skewed clocks, active expiry
// ticks and leader changes: every replica ends with the same state, and a
// key a read once saw expired never comes back without a new write.
//
// The second property holds while successive leaders' clocks differ by
// less than an election takes (expiry.go, "Clock assumption"); here
// elections are instant and clocks 10 s apart, so it rests on active
// expiry removing a key within a period of the read that saw it expired
// (these seeds never elect a slower leader inside that window).
func TestExpiryRandomUnderSkew(t *testing.T) {
	for seed := range uint64(4) {
		expiryRandomRun(t, seed)
	}
}

func expiryRandomRun(t *testing.T, seed uint64) {
	c := newSkewedKV(t)
	c.elect("n1")
	r := rand.New(rand.NewPCG(seed, 4))
	ids := c.IDs()
	gone := map[string]bool{} // keys a read saw absent since their last write
	for step := range 400 {
		at := ids[r.IntN(len(ids))]
		k := fmt.Sprint("k", r.IntN(4))
		switch r.IntN(10) {
		case 0, 1:
			c.run(at, "set", k, "v", "px", fmt.Sprint(50+r.IntN(400)))
			delete(gone, k)
		case 2:
			c.run(at, "set", k, "v")
			delete(gone, k)
		case 3:
			if res := c.run(at, "expire", k, "1"); res.Int == 1 {
				delete(gone, k) // a deadline change is a write; the key exists
			}
		case 4:
			c.elect(ids[r.IntN(len(ids))])
		default:
			res := c.run(at, "get", k)
			if res.Type == service.ResultNil {
				gone[k] = true
			} else if gone[k] {
				t.Fatalf("seed %d step %d: %s came back after a read saw it absent", seed, step, k)
			}
		}
		for range r.IntN(4) {
			c.base += 50 // every node's clock moves on with the leader's ticks
			for _, id := range ids {
				if c.node(id).role == leader {
					c.fire(id, tmTick)
				}
			}
		}
	}
	c.agree(fmt.Sprintf("seed %d, after the random run", seed))
}

// A leader that no client reaches directly takes its first time from a
// forwarded request, so deadlines work when every client sits behind a
// follower (found by the compatibility suite: its clients all use one node,
// which may not lead the namespace).
func TestExpiryThroughFollowerOnly(t *testing.T) {
	c := newSkewedKV(t)
	c.elect("n1")
	follower := automaton.NodeID("n2")
	if r := c.run(follower, "set", "k", "v", "px", "100000"); r.IsErr() {
		t.Fatalf("set with a deadline through follower %s: %v", follower, r)
	}
	if r := c.run(follower, "pttl", "k"); r.Type != service.ResultInt || r.Int <= 0 || r.Int > 100000 {
		t.Fatalf("pttl through the follower: %v", r)
	}
}
