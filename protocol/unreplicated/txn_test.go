package unreplicated

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/service"
)

// txnClient drives interactive transactions through a harness cluster, one
// step at a time, each delivered and answered before the next.
type txnClient struct {
	t      *testing.T
	c      *harness.Cluster
	at     automaton.NodeID
	client uint64
	seq    uint64
}

func (tc *txnClient) step(txn automaton.RequestID, a automaton.TxnAction, o service.Op, env service.Env) (automaton.RequestID, service.Result) {
	tc.t.Helper()
	tc.seq++
	id := automaton.RequestID{Client: tc.client, Seq: tc.seq}
	if a == automaton.TxnBegin {
		txn = id
	}
	tc.c.Submit(tc.at, automaton.Request{ID: id, Op: o, Env: env, Txn: &automaton.TxnStep{Txn: txn, Action: a}})
	tc.c.DeliverAll()
	r, ok := tc.c.Response(id)
	if !ok {
		tc.t.Fatalf("%v step of txn %v at %s: no answer", a, txn, tc.at)
	}
	return txn, r
}

func (tc *txnClient) begin() automaton.RequestID {
	tc.t.Helper()
	id, r := tc.step(automaton.RequestID{}, automaton.TxnBegin, service.Op{}, service.Env{})
	if r.IsErr() {
		tc.t.Fatalf("begin: %v", r)
	}
	return id
}

func (tc *txnClient) op(txn automaton.RequestID, o service.Op) service.Result {
	tc.t.Helper()
	_, r := tc.step(txn, automaton.TxnOp, o, service.Env{})
	return r
}

func (tc *txnClient) end(txn automaton.RequestID, a automaton.TxnAction) service.Result {
	tc.t.Helper()
	_, r := tc.step(txn, a, service.Op{}, service.Env{})
	return r
}

// Operations answer at once from the workspace; nobody else sees them until
// the commit, which writes them as one record.
func TestTxnCommitIsIsolatedAndAtomic(t *testing.T) {
	c := newCluster(t, Name, nil)
	a := &txnClient{t: t, c: c, at: "n2", client: 1}
	do(t, c, "n1", op("set", "x", "1"))
	tx := a.begin()
	if r := a.op(tx, op("incr", "x", "10")); r.Int != 11 {
		t.Fatalf("incr in the transaction: %v, want 11", r)
	}
	if r := a.op(tx, op("set", "y", "v")); r.IsErr() {
		t.Fatalf("set in the transaction: %v", r)
	}
	if r := a.op(tx, op("get", "x")); string(r.Bytes) != "11" {
		t.Fatalf("the transaction reads its own write: %v, want 11", r)
	}
	if r := do(t, c, "n3", op("get", "x")); string(r.Bytes) != "1" {
		t.Fatalf("another client sees an uncommitted write: %v", r)
	}
	if server(c).applied != 1 {
		t.Fatalf("applied %d before the commit, want 1", server(c).applied)
	}
	if r := a.end(tx, automaton.TxnCommit); r.IsErr() {
		t.Fatalf("commit: %v", r)
	}
	if u := server(c); u.applied != 2 || len(c.Disk("n1")) != 2 || len(u.txns) != 0 {
		t.Fatalf("after the commit: applied %d, %d records, %d open; want 2, 2, 0", u.applied, len(c.Disk("n1")), len(u.txns))
	}
	if r := do(t, c, "n3", op("get", "x")); string(r.Bytes) != "11" {
		t.Fatalf("after the commit: %v, want 11", r)
	}
	// Recovery replays the transaction's record whole.
	before := service.StateHash(server(c).st)
	c.Restart("n1")
	if u := server(c); u.applied != 2 || service.StateHash(u.st) != before {
		t.Fatalf("after restart: applied %d, same state %v", u.applied, service.StateHash(u.st) == before)
	}
	if r := a.end(tx, automaton.TxnCommit); r.Err != automaton.ErrNoSuchTxn {
		t.Fatalf("a second commit: %v, want %q", r, automaton.ErrNoSuchTxn)
	}
}

// First committer wins: a write committed after the begin aborts the
// commit; the aborted transaction's writes never appear.
func TestTxnFirstCommitterWins(t *testing.T) {
	c := newCluster(t, Name, nil)
	a := &txnClient{t: t, c: c, at: "n2", client: 1}
	b := &txnClient{t: t, c: c, at: "n3", client: 2}
	ta, tb := a.begin(), b.begin()
	a.op(ta, op("set", "k", "a"))
	b.op(tb, op("set", "k", "b"))
	if r := b.end(tb, automaton.TxnCommit); r.IsErr() {
		t.Fatalf("first commit: %v", r)
	}
	if r := a.end(ta, automaton.TxnCommit); r.Err != automaton.ErrTxnAborted {
		t.Fatalf("second commit: %v, want %q", r, automaton.ErrTxnAborted)
	}
	if r := do(t, c, "n1", op("get", "k")); string(r.Bytes) != "b" {
		t.Fatalf("get: %v, want b", r)
	}
	// A read-only transaction whose begin preceded a write aborts too.
	tr := a.begin()
	a.op(tr, op("get", "k"))
	do(t, c, "n1", op("set", "z", "1"))
	if r := a.end(tr, automaton.TxnCommit); r.Err != automaton.ErrTxnAborted {
		t.Fatalf("read-only commit after a write: %v, want abort", r)
	}
	// Without an intervening write, a read-only commit succeeds and
	// persists nothing.
	tr = a.begin()
	a.op(tr, op("get", "k"))
	n := len(c.Disk("n1"))
	if r := a.end(tr, automaton.TxnCommit); r.IsErr() || len(c.Disk("n1")) != n {
		t.Fatalf("read-only commit: %v, records %d -> %d", r, n, len(c.Disk("n1")))
	}
}

// An abort discards the workspace; a crash aborts every open transaction;
// unknown transactions answer ErrNoSuchTxn.
func TestTxnAbortCrashAndUnknown(t *testing.T) {
	c := newCluster(t, Name, nil)
	a := &txnClient{t: t, c: c, at: "n2", client: 1}
	tx := a.begin()
	a.op(tx, op("set", "k", "gone"))
	if r := a.end(tx, automaton.TxnAbort); r.IsErr() {
		t.Fatalf("abort: %v", r)
	}
	if r := do(t, c, "n1", op("get", "k")); r.Type != service.ResultNil {
		t.Fatalf("get after abort: %v, want nil", r)
	}
	if r := a.op(tx, op("get", "k")); r.Err != automaton.ErrNoSuchTxn {
		t.Fatalf("op after abort: %v", r)
	}
	tx = a.begin()
	a.op(tx, op("set", "k", "lost"))
	c.Restart("n1")
	if r := a.end(tx, automaton.TxnCommit); r.Err != automaton.ErrNoSuchTxn {
		t.Fatalf("commit after the server's crash: %v, want %q", r, automaton.ErrNoSuchTxn)
	}
	if r := do(t, c, "n1", op("get", "k")); r.Type != service.ResultNil {
		t.Fatalf("get after crash: %v, want nil", r)
	}
}

// Beyond maxOpenTxns open transactions, beginning one aborts the oldest.
func TestTxnBoundEvictsTheOldest(t *testing.T) {
	c := newCluster(t, Name, nil)
	a := &txnClient{t: t, c: c, at: "n1", client: 1}
	first := a.begin()
	second := a.begin()
	a.end(second, automaton.TxnAbort) // an ended one in the middle of the order
	for i := 0; i < maxOpenTxns; i++ {
		a.begin()
	}
	if u := server(c); len(u.txns) != maxOpenTxns || u.txns[first] != nil {
		t.Fatalf("%d open, the oldest still open %v; want %d and evicted", len(u.txns), u.txns[first] != nil, maxOpenTxns)
	}
	if r := a.end(first, automaton.TxnCommit); r.Err != automaton.ErrNoSuchTxn {
		t.Fatalf("commit of the evicted transaction: %v", r)
	}
	if n := len(server(c).txnOrder); n > 2*maxOpenTxns+1 {
		t.Fatalf("txnOrder holds %d entries", n)
	}
}

// Nondeterministic services: each operation runs with its request's Env,
// and recovery replays the committed transaction with those Envs.
func TestTxnRecordKeepsEachEnv(t *testing.T) {
	c := harness.New(t, harness.Options{Protocol: Name, Nodes: 2, Service: service.Matchmaker{}})
	a := &txnClient{t: t, c: c, at: "n2", client: 1}
	for _, m := range []string{"m1", "m2", "m3", "m4"} {
		do(t, c, "n1", op("advertise", m, "4", "4", "4"))
	}
	tx := a.begin()
	var chosen []string
	for i, j := range []string{"j1", "j2"} {
		_, r := a.step(tx, automaton.TxnOp, op("submit", j, "1", "1", "1"), service.Env{Time: int64(i), Seed: uint64(500 + 31*i)})
		if r.IsErr() {
			t.Fatalf("submit %s: %v", j, r)
		}
		chosen = append(chosen, string(r.Bytes))
	}
	if r := a.end(tx, automaton.TxnCommit); r.IsErr() {
		t.Fatalf("commit: %v", r)
	}
	before := service.StateHash(server(c).st)
	c.Restart("n1")
	if service.StateHash(server(c).st) != before {
		t.Fatal("recovery gave another state: a transaction's Envs were not replayed")
	}
	for i, j := range []string{"j1", "j2"} {
		if r := do(t, c, "n2", op("job", j)); string(r.Bytes) != chosen[i] {
			t.Fatalf("job %s after restart: %v, want %s", j, r, chosen[i])
		}
	}
}

// The broken variant: a transaction's writes are visible before the
// commit and survive an abort.
func TestBrokenDirtyTxnLeaksWrites(t *testing.T) {
	c := newCluster(t, BrokenDirtyTxn, nil)
	a := &txnClient{t: t, c: c, at: "n2", client: 1}
	tx := a.begin()
	a.op(tx, op("set", "k", "dirty"))
	if r := do(t, c, "n3", op("get", "k")); string(r.Bytes) != "dirty" {
		t.Fatalf("the broken variant hid the write: %v", r)
	}
	a.end(tx, automaton.TxnAbort)
	if r := do(t, c, "n3", op("get", "k")); string(r.Bytes) != "dirty" {
		t.Fatalf("the broken variant rolled back: %v", r)
	}
}

// A transaction step's Forward round-trips with its TxnStep.
func TestTxnForwardWire(t *testing.T) {
	id := automaton.RequestID{Client: 7, Seq: 3}
	m := message{Kind: kindTxnForward, Inc: 1, Seq: 2, Req: id, Op: op("get", "k"),
		Txn: &automaton.TxnStep{Txn: automaton.RequestID{Client: 7, Seq: 1}, Action: automaton.TxnOp}}
	got, err := unmarshal(m.marshal())
	if err != nil || got.Txn == nil || *got.Txn != *m.Txn || got.Req != id || got.Op.Key != "k" {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	w := writeRecord{Ops: []service.Op{op("set", "a", "1"), op("set", "b", "2")}, Envs: []service.Env{{Time: 1}, {Time: 2, Seed: 3}}}
	r, err := unmarshalWrite(w.marshal())
	if err != nil || len(r.Envs) != 2 || r.Envs[1] != w.Envs[1] || len(r.Ops) != 2 {
		t.Fatalf("transaction record round trip: %+v, %v", r, err)
	}
	bad := writeRecord{Ops: w.Ops, Envs: w.Envs[:1]}
	if _, err := unmarshalWrite(bad.marshal()); err == nil {
		t.Fatal("a transaction record with fewer Envs than writes decoded")
	}
}
