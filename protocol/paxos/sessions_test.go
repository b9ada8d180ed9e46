package paxos

import (
	"fmt"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Client sessions (package doc): N clients that write and close leave no
// row behind on any replica. Each writes through a follower (forwarded,
// the bound travelling in the forward and in the log), then its
// connection's SessionEnd is ordered like a write. Before sessions the
// table kept all 50 rows for good (the old code: 50; checked by making
// endSession keep the row). A late copy of an ended client's write is
// refused and not executed, at every replica alike.
func TestSessionEndForgetsClosedClients(t *testing.T) {
	const n = 50
	c := newCluster(t, 3, "kv", nil)
	c.elect("n1")
	for cl := uint64(1); cl <= n; cl++ {
		at := automaton.NodeID(fmt.Sprintf("n%d", 2+cl%2))
		w := automaton.Request{ID: automaton.RequestID{Client: cl, Seq: 1}, Op: incr("n", "1"), Unanswered: 1}
		if r, ok := c.doReq(at, w); !ok || r.Result.IsErr() {
			t.Fatalf("client %d write: %v %v", cl, r, ok)
		}
		end := automaton.Request{ID: automaton.RequestID{Client: cl, Seq: 2}, Op: automaton.SessionEnd(), Unanswered: 2}
		if r, ok := c.doReq(at, end); !ok || r.Result.IsErr() {
			t.Fatalf("client %d session end: %v %v", cl, r, ok)
		}
	}
	c.tickAll()
	for _, id := range c.IDs() {
		sm := c.node(id).sm
		if len(sm.clients) != 0 || len(sm.closed) != n {
			t.Fatalf("%s: %d rows and %d ended sessions after %d clients wrote and closed, want 0 and %d", id, len(sm.clients), len(sm.closed), n, n)
		}
	}
	// A late copy of client 7's write (a delayed forward, a retry) is
	// refused: the counter stays at n.
	late := automaton.Request{ID: automaton.RequestID{Client: 7, Seq: 1}, Op: incr("n", "1"), Unanswered: 1}
	if r, ok := c.doReq("n3", late); !ok || !r.Result.IsErr() || !strings.Contains(r.Result.Err, "session ended") {
		t.Fatalf("late write of an ended session: %v %v, want refused", r, ok)
	}
	if r, ok := c.do("n1", automaton.RequestID{Client: 99, Seq: 1}, get("n"), automaton.ReadLog); !ok || string(r.Bytes) != fmt.Sprint(n) {
		t.Fatalf("counter %v %v, want %d: an ended client's write ran again", r, ok, n)
	}
}

// pipelined runs one client's writes as a -P 16 client does: 16 requests
// in flight, each a group of 16 SETs (100-byte values), request s carrying
// the lowest unanswered one, s-15 (or none when bound is false, as before
// sessions), and returns the machine.
func pipelined(t *testing.T, writes int, bound bool) *machine {
	t.Helper()
	m := newMachine(service.KV{}, 100000, bootstrapConf([]automaton.NodeID{"n1"}))
	val := strings.Repeat("v", 100)
	for s := uint64(1); s <= uint64(writes); s++ {
		g := cmd{ID: automaton.RequestID{Client: 1, Seq: s}}
		for k := 0; k < 16; k++ {
			g.Ops = append(g.Ops, set(fmt.Sprintf("key:%012d", (int(s)*16+k)%1000), val))
		}
		if bound {
			g.low = max(16, s) - 15
		}
		if r, _ := m.apply(g, s); r.res.IsErr() {
			t.Fatalf("write %d: %v", s, r.res)
		}
	}
	return m
}

// The table keeps what a retry can still ask for: with the bound, a -P 16
// client's row holds the outcomes of its 16 requests in flight, not the
// last 64 (dedupWindow), and the snapshot shrinks accordingly. Fails on
// the old code (the bound ignored: 64 outcomes of 16 results each).
func TestUnansweredBoundsTable(t *testing.T) {
	with, without := pipelined(t, 1000, true), pipelined(t, 1000, false)
	if k := len(with.clients[1].Seqs); k > 16 {
		t.Fatalf("row holds %d outcomes with 16 in flight", k)
	}
	if k := len(without.clients[1].Seqs); k != dedupWindow {
		t.Fatalf("without the bound the row holds %d outcomes, want the window %d", k, dedupWindow)
	}
	svc := len(with.st.Snapshot())
	a, b := len(with.snapshot(1000))-svc, len(without.snapshot(1000))-svc
	t.Logf("dedup part of the snapshot: %d bytes with the bound, %d without (service state %d bytes)", a, b, svc)
	if a*3 > b {
		t.Fatalf("table bytes %d with the bound, %d without: want under a third", a, b)
	}
	// A retry of an answered request, below the bound, is refused and
	// not executed; the lowest unanswered one is still answered its first
	// outcome.
	old := cmd{ID: automaton.RequestID{Client: 1, Seq: 900}, Ops: []service.Op{incr("c", "1")}, low: 985}
	if r, _ := with.apply(old, 1001); !r.res.IsErr() {
		t.Fatalf("retry below the bound: %v, want refused", r)
	}
	first := with.clients[1].Res[985]
	again := cmd{ID: automaton.RequestID{Client: 1, Seq: 985}, Ops: []service.Op{incr("c", "1")}, low: 985}
	if r, _ := with.apply(again, 1002); r.res.IsErr() || len(r.results) != len(first.results) {
		t.Fatalf("retry of the lowest unanswered request: %v, want its first outcome %v", r, first)
	}
}

// The bound, the ended sessions and the trimmed rows survive the wire: a
// forward carries Unanswered, a log command its low, a snapshot the
// tombstones and floors.
func TestSessionsEncoding(t *testing.T) {
	req := automaton.Request{ID: automaton.RequestID{Client: 5, Seq: 40}, Op: set("k", "v"), Unanswered: 33}
	m, err := unmarshal((&message{Kind: kindForward, Req: req}).marshal())
	if err != nil || m.Req.Unanswered != 33 {
		t.Fatalf("forward: %v %+v", err, m)
	}
	cmds, err := decodeBatch(encodeBatch([]cmd{{ID: req.ID, Op: req.Op, low: 33}, {ID: automaton.RequestID{Client: 6, Seq: 1}, Op: automaton.SessionEnd()}}))
	if err != nil || cmds[0].low != 33 || cmds[1].low != 0 || !automaton.IsSessionEnd(cmds[1].Op) {
		t.Fatalf("batch: %v %+v", err, cmds)
	}
	src := pipelined(t, 100, true)
	src.endSession(77, 101)
	dst := newMachine(service.KV{}, 100000, bootstrapConf([]automaton.NodeID{"n1"}))
	if _, err := dst.restore(src.snapshot(101)); err != nil {
		t.Fatal(err)
	}
	if dst.closed[77] != 101 || dst.clients[1].Floor != src.clients[1].Floor || len(dst.clients[1].Seqs) != len(src.clients[1].Seqs) {
		t.Fatalf("restored: closed %v, floor %d (want %d), %d outcomes (want %d)", dst.closed, dst.clients[1].Floor, src.clients[1].Floor, len(dst.clients[1].Seqs), len(src.clients[1].Seqs))
	}
}
