package node

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
)

// TestSubmitKeepsWriteOrder: requests submitted one after another
// (Node.Submit, without waiting for the answers) to a node of a 3-node
// Multi-Paxos cluster reach its loop in submission order, at the leader
// and through a follower, and the log keeps that order while the leader
// stays; each is answered as Do would answer it. Each request is an atomic
// group of RPUSHes of the next tokens onto one list, or a single RPUSH;
// the list must hold every token in order, and each push's reply must be
// the list's length after it.
func TestSubmitKeepsWriteOrder(t *testing.T) {
	nsPaxos := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv",
		Params: map[string]string{"heartbeat": "10ms", "election_timeout": "100ms"}}
	cfg, ls := mkCluster(t, 3, config.Fsync, nsPaxos)
	var nodes []*Node
	for i, n := range cfg.Nodes {
		nodes = append(nodes, startNode(t, cfg, n.ID, ls[i], Options{}))
	}
	if r := do(t, nodes[0], "default", req("set", "warm", "up")); r.IsErr() {
		t.Fatalf("set: %v", r)
	}
	var leader automaton.NodeID
	eventually(t, "a leader", func() bool {
		id, _, _ := nodes[0].Leader("default")
		leader = id
		return id != ""
	})
	for k, n := range nodes {
		role := "follower"
		if n.ID() == leader {
			role = "leader"
		}
		t.Run(role+"-"+string(n.ID()), func(t *testing.T) {
			list := "order-" + string(n.ID())
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			type sub struct {
				first, n int
				await    func() (automaton.Response, error)
			}
			var subs []sub
			base := uint64(1000 * (k + 1)) // client ids of its own: the session table would answer a reused one
			tok := 0
			for i := range 200 {
				size := 1 + i%5
				var ops []service.Op
				for range size {
					tok++
					ops = append(ops, service.Op{Kind: "rpush", Key: list, Args: [][]byte{[]byte(fmt.Sprint(tok))}})
				}
				r := automaton.Request{ID: automaton.RequestID{Client: base + uint64(i), Seq: 1}}
				if size == 1 {
					r.Op = ops[0]
				} else {
					r.Ops = ops
				}
				subs = append(subs, sub{tok - size + 1, size, n.Submit(ctx, "default", r)})
			}
			for _, s := range subs {
				resp, err := s.await()
				if err != nil {
					t.Fatalf("tokens %d..%d: %v", s.first, s.first+s.n-1, err)
				}
				rs := resp.Results
				if s.n == 1 {
					rs = []service.Result{resp.Result}
				}
				for j, r := range rs {
					if r.Type != service.ResultInt || r.Int != int64(s.first+j) {
						t.Fatalf("token %d answered %v, want the length %d", s.first+j, r, s.first+j)
					}
				}
			}
			got := do(t, n, "default", req("lrange", list, "0", "-1"))
			if len(got.Elems) != tok {
				t.Fatalf("the list holds %d tokens (%v), want %d", len(got.Elems), got, tok)
			}
			for i, e := range got.Elems {
				if string(e.Bytes) != fmt.Sprint(i+1) {
					t.Fatalf("position %d holds token %s, want %d: submissions overtook each other", i+1, e.Bytes, i+1)
				}
			}
		})
	}
}

// TestSubmitKeepsOrderDirect: requests one goroutine submits one after
// another (Node.Submit) are stepped in that order by a protocol that
// steps client batches, whose loop runs direct passes, while other
// goroutines' requests keep passes running (so some submissions are
// queued for the loop goroutine, which here waits a little when it is
// woken for them, before its pass): a request stepped directly on the
// submitting goroutine must not overtake one submitted before it, nor
// may passes reading the queued requests step them out of order.
func TestSubmitKeepsOrderDirect(t *testing.T) { submitKeepsOrderDirect(t, 0) }

// TestSubmitKeepsOrderDirectFullPass is TestSubmitKeepsOrderDirect with
// passes of 16 inputs at most (Options.BatchLimit), so that a direct pass
// often fills up on queued requests while more of them, submitted before
// its own, are still queued: its own must then wait behind them (session
// 58: it was stepped at once, ahead of them; the 1,024 default showed it
// about once in 300 runs of TestSubmitKeepsOrderDirect on a loaded
// machine).
func TestSubmitKeepsOrderDirectFullPass(t *testing.T) { submitKeepsOrderDirect(t, 16) }

func submitKeepsOrderDirect(t *testing.T, batchLimit int) {
	ns := config.Namespace{Name: "default", Protocol: "nodetest-order", Service: "kv"}
	cfg, ls := mkCluster(t, 1, config.Memory, ns)
	n := startNode(t, cfg, "n1", ls[0], Options{BatchLimit: batchLimit, reqNoted: func() { time.Sleep(50 * time.Microsecond) }})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stop := make(chan struct{})
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				select {
				case <-stop:
					return
				default:
				}
				n.Do(ctx, "default", req("set", "other", "x"))
			}
		}()
	}
	var waits []func() (automaton.Response, error)
	var want []string
	for i := range 2000 {
		waits = append(waits, n.Submit(ctx, "default", req("set", "ord", fmt.Sprint(i))))
		want = append(want, fmt.Sprint(i))
	}
	for _, w := range waits {
		if _, err := w(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	for range 4 {
		<-done
	}
	got := strings.Split(string(do(t, n, "default", req("get", "ord")).Bytes), ",")
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Fatalf("stepped out of submission order at %d: %v, want %v", i, got[max(0, i-3):min(len(got), i+5)], want[max(0, i-3):min(len(want), i+5)])
		}
	}
	if n.loop("default").directs.Load() == 0 {
		t.Errorf("no direct pass: the test does not exercise them")
	}
}

// TestSubmitCopiesGroupArgs: Submit takes a group's operation list as the
// node's own (SubmitBackend's contract) and copies the operations'
// arguments into it in place, so a caller that reuses its argument
// buffers once Submit has returned changes nothing the node applies; the
// list then points at the node's copies, not at the caller's bytes.
func TestSubmitCopiesGroupArgs(t *testing.T) {
	ns := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv",
		Params: map[string]string{"heartbeat": "10ms", "election_timeout": "100ms"}}
	cfg, ls := mkCluster(t, 1, config.Memory, ns)
	n := startNode(t, cfg, "n1", ls[0], Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for round := range 20 {
		bufs := [][]byte{[]byte(fmt.Sprintf("a-%d", round)), []byte(fmt.Sprintf("b-%d", round))}
		ops := []service.Op{
			{Kind: "set", Key: "ka", Args: [][]byte{bufs[0]}},
			{Kind: "set", Key: "kb", Args: [][]byte{bufs[1]}},
		}
		r := automaton.Request{ID: automaton.RequestID{Client: 77, Seq: uint64(round + 1)}, Ops: ops}
		await := n.Submit(ctx, "default", r)
		for i, op := range ops {
			if &op.Args[0][0] == &bufs[i][0] {
				t.Fatalf("round %d: operation %d still points at the caller's bytes", round, i)
			}
		}
		for _, b := range bufs {
			copy(b, "XXXX") // the caller reuses its buffers
		}
		if _, err := await(); err != nil {
			t.Fatal(err)
		}
		for i, k := range []string{"ka", "kb"} {
			want := fmt.Sprintf("%c-%d", 'a'+i, round)
			if got := string(do(t, n, "default", req("get", k)).Bytes); got != want {
				t.Fatalf("round %d: %s = %q, want %q", round, k, got, want)
			}
		}
	}
}

// TestCloneGroupArgs: cloneGroupArgs gives every operation of a group
// what cloneArgs gives it (nil and empty lists and arguments kept apart),
// each list capped at its length, so an append to one operation's list
// does not change the next operation's (fails when the shared array is
// carved uncapped); a group of 16 one-value SETs takes 17 allocations
// (the shared array and one value buffer per SET), not cloneArgs's 32.
func TestCloneGroupArgs(t *testing.T) {
	mk := func() []service.Op {
		return []service.Op{
			{Kind: "set", Key: "a", Args: [][]byte{[]byte("1")}},
			{Kind: "get", Key: "b"},
			{Kind: "mset", Key: "c", Args: [][]byte{[]byte("2"), nil, {}, []byte("d")}},
			{Kind: "ping", Args: [][]byte{}},
			{Kind: "set", Key: "e", Args: [][]byte{[]byte("3")}},
		}
	}
	src, got := mk(), mk()
	cloneGroupArgs(got)
	for i := range src {
		if want := cloneArgs(src[i].Args); !reflect.DeepEqual(got[i].Args, want) {
			t.Fatalf("op %d: %#v, cloneArgs gives %#v", i, got[i].Args, want)
		}
		if cap(got[i].Args) != len(got[i].Args) {
			t.Fatalf("op %d: list capacity %d beyond its length %d", i, cap(got[i].Args), len(got[i].Args))
		}
		for j, a := range got[i].Args {
			if len(a) > 0 && &a[0] == &src[i].Args[j][0] {
				t.Fatalf("op %d argument %d is the caller's bytes", i, j)
			}
		}
	}
	for i := range got {
		got[i].Args = append(got[i].Args, []byte("extra"))
	}
	for i := range src {
		if len(src[i].Args) > 0 && !bytes.Equal(got[i].Args[0], src[i].Args[0]) {
			t.Fatalf("op %d: argument 0 = %q after the previous operation's append, want %q", i, got[i].Args[0], src[i].Args[0])
		}
	}

	group, lists := make([]service.Op, 16), make([][][]byte, 16)
	for i := range lists {
		lists[i] = [][]byte{bytes.Repeat([]byte("x"), 100)}
	}
	allocs := testing.AllocsPerRun(50, func() {
		for i := range group {
			group[i] = service.Op{Kind: "set", Key: "k", Args: lists[i]}
		}
		cloneGroupArgs(group)
	})
	if allocs > 17 {
		t.Fatalf("%v allocations for a group of 16 SETs, want at most 17", allocs)
	}
}
