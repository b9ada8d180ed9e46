package pbpaxos

import (
	"strconv"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/service"
)

// skewMs is each node's clock offset: n2 runs 10 s ahead, n3 10 s behind.
var skewMs = map[automaton.NodeID]int64{"n1": 0, "n2": 10_000, "n3": -10_000}

const baseMs = 1_700_000_000_000

// runAt submits op at node at, stamped with that node's clock, and returns
// its answer.
func runAt(t *testing.T, c *harness.Cluster, at automaton.NodeID, kind, key string, args ...string) service.Result {
	t.Helper()
	op := service.Op{Kind: kind, Key: key}
	for _, a := range args {
		op.Args = append(op.Args, []byte(a))
	}
	req := newReq(op)
	req.Env = service.Env{Time: (baseMs + skewMs[at]) * 1e6, Seed: req.ID.Seq}
	c.Submit(at, req)
	c.DeliverAll()
	r, ok := c.Response(req.ID)
	if !ok {
		t.Fatalf("%v at %s: no answer", op, at)
	}
	return r
}

func kvOf(c *harness.Cluster, id automaton.NodeID) *service.KVState {
	return c.Node(id).(*PBPaxos).sm.st.(*service.KVState)
}

// agree fails unless every replica holds the same state (after a
// heartbeat carries the commit point).
func agree(t *testing.T, c *harness.Cluster, what string) {
	t.Helper()
	c.FireTimer("n1", tmTick)
	c.DeliverAll()
	s1 := string(kvOf(c, "n1").Snapshot())
	for _, id := range c.IDs()[1:] {
		if string(kvOf(c, id).Snapshot()) != s1 {
			t.Fatalf("%s: %s's state differs from n1's", what, id)
		}
	}
}

// The leader's estimate (the max of the arrival times reaching it,
// service.LeaderClock) decides deadlines and expiry whatever node the client
// reached, replicas agree (installing deltas or replaying with the logged
// time), and active expiry removes the key on every replica.
func TestExpiryUnderClockSkew(t *testing.T) {
	for _, state := range []string{"delta", "replay"} {
		t.Run(state, func(t *testing.T) {
			c := cluster(t, nil, map[string]string{"state": state})
			runAt(t, c, "n1", "set", "warm", "x")
			if r := runAt(t, c, "n2", "set", "k", "v", "px", "1000"); !r.Equal(service.OK()) {
				t.Fatalf("set px: %v", r)
			}
			agree(t, c, "after set px")
			for _, id := range c.IDs() {
				if r := kvOf(c, id).Apply(service.Op{Kind: "pexpiretime", Key: "k"}); r.Int != baseMs+10_000+1000 {
					t.Fatalf("%s: deadline %d, want n2's arrival time (10 s ahead of n1's) + 1000", id, r.Int-baseMs)
				}
			}
			// An absolute deadline half a second after n2's clock: the
			// TTL read through n2 (an X-Paxos read relayed to the
			// leader) is at most what was asked; it was 10.5 s when the
			// leader took a forwarded time only while it had none.
			runAt(t, c, "n2", "set", "abs", "v")
			runAt(t, c, "n2", "pexpireat", "abs", strconv.FormatInt(baseMs+10_000+500, 10))
			if r := runAt(t, c, "n2", "pttl", "abs"); r.Int <= 0 || r.Int > 500 {
				t.Fatalf("PTTL through n2 after PEXPIREAT n2's clock + 500 ms: %v", r)
			}
			runAt(t, c, "n2", "del", "abs")
			if r := runAt(t, c, "n2", "get", "k"); !r.Equal(service.Bytes([]byte("v"))) {
				t.Fatalf("a read at n2 saw the key expired early: %v", r)
			}
			for i := 0; i < 30 && kvOf(c, "n1").Len() > 1; i++ {
				c.FireTimer("n1", tmTick)
				c.DeliverAll()
			}
			agree(t, c, "after active expiry")
			for _, id := range c.IDs() {
				if n := kvOf(c, id).Len(); n != 1 {
					t.Fatalf("%s holds %d keys after active expiry, want 1", id, n)
				}
			}
		})
	}
}
