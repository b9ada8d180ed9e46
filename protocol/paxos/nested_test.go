package paxos

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// nestedReq is a nested request (automaton.Request.Nested) of client 77.
func nestedReq(seq uint64, op service.Op) automaton.Request {
	return automaton.Request{ID: automaton.RequestID{Client: 77, Seq: seq}, Op: op, Nested: true}
}

// TestNestedReadCached: a nested read is ordered and cached, so a copy of it
// sent later (by another caller replica, at another node) gets the first
// answer even though the key changed in between; a plain read sees the
// change. The broken variant answers the copy by a fresh read.
func TestNestedReadCached(t *testing.T) {
	for _, tc := range []struct {
		proto  string
		cached bool
	}{{"paxos", true}, {BrokenNestedRead, false}} {
		t.Run(tc.proto, func(t *testing.T) {
			c := newClusterOf(t, tc.proto, 3, "kv", nil)
			c.elect("n1")
			if r, ok := c.do("n1", automaton.RequestID{Client: 1, Seq: 1}, set("k", "a"), automaton.ReadDefault); !ok || r.IsErr() {
				t.Fatalf("set: %v %v", r, ok)
			}
			read := nestedReq(1, get("k"))
			first, ok := c.doReq("n2", read)
			if !ok || string(first.Result.Bytes) != "a" {
				t.Fatalf("nested read: %+v %v", first, ok)
			}
			if r, ok := c.do("n1", automaton.RequestID{Client: 1, Seq: 2}, set("k", "b"), automaton.ReadDefault); !ok || r.IsErr() {
				t.Fatalf("set: %v %v", r, ok)
			}
			for _, at := range []automaton.NodeID{"n1", "n3"} {
				again, ok := c.doReq(at, read)
				if !ok {
					t.Fatalf("copy at %s not answered", at)
				}
				if got := string(again.Result.Bytes); (got == "a") != tc.cached {
					t.Fatalf("copy of the nested read at %s answered %q (cached: %v)", at, got, tc.cached)
				}
			}
			if r, _ := c.do("n3", automaton.RequestID{Client: 2, Seq: 1}, get("k"), automaton.ReadDefault); string(r.Bytes) != "b" {
				t.Fatalf("plain read: %v", r)
			}
		})
	}
}

// TestNestedWriteOnce: copies of a nested write sent to every node, before
// and after it executed, apply it once and get the same answer.
func TestNestedWriteOnce(t *testing.T) {
	c := newCluster(t, 3, "kv", nil)
	c.elect("n1")
	inc := nestedReq(5, service.Op{Kind: "incr", Key: "n", Args: [][]byte{[]byte("1")}})
	c.Submit("n2", inc)
	c.Submit("n3", inc)
	c.DeliverAll()
	for _, at := range []automaton.NodeID{"n1", "n2", "n3"} {
		r, ok := c.doReq(at, inc)
		if !ok || r.Result.Int != 1 {
			t.Fatalf("copy at %s: %+v %v", at, r, ok)
		}
	}
	if r, _ := c.do("n1", automaton.RequestID{Client: 1, Seq: 1}, get("n"), automaton.ReadDefault); string(r.Bytes) != "1" {
		t.Fatalf("n = %v after three copies of one increment", r)
	}
}

// TestNestedCodecs: the mark survives the forward message and the log
// batch; without it both encode as before.
func TestNestedCodecs(t *testing.T) {
	req := nestedReq(3, get("k"))
	m, err := unmarshal((&message{Kind: kindForward, Req: req}).marshal())
	if err != nil || !m.Req.Nested {
		t.Fatalf("forward: %+v %v", m, err)
	}
	cmds, err := decodeBatch(encodeBatch([]cmd{{ID: req.ID, Op: req.Op, nested: true}}))
	if err != nil || len(cmds) != 1 || !cmds[0].nested {
		t.Fatalf("batch: %+v %v", cmds, err)
	}
	if b := encodeBatch([]cmd{{ID: req.ID, Op: req.Op}}); b[0] != msgVersion {
		t.Fatalf("a batch without nested commands is no longer the plain version: %d", b[0])
	}
	if !automaton.ServesNested("paxos") {
		t.Fatal("paxos does not serve nested requests")
	}
}
