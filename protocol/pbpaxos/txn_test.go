package pbpaxos

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/service"
)

func bank(kind, acct string, args ...string) service.Op {
	op := service.Op{Kind: kind, Key: acct}
	for _, a := range args {
		op.Args = append(op.Args, []byte(a))
	}
	return op
}

// step sends one transaction step (fanned out) and delivers everything.
func step(c *harness.Cluster, client uint64, txn automaton.RequestID, action automaton.TxnAction, op service.Op) (automaton.RequestID, service.Result) {
	seq++
	req := automaton.Request{ID: automaton.RequestID{Client: client, Seq: seq}, Op: op, Txn: &automaton.TxnStep{Txn: txn, Action: action}}
	if action == automaton.TxnBegin {
		req.Txn.Txn = req.ID
	}
	fanout(c, req)
	c.DeliverAll()
	return req.ID, answers(c, req.ID)["n1"]
}

// TestTransfersConserveMoney: interleaved transactions of transfers, some
// conflicting (no-wait aborts), some aborted by their clients; every
// replica ends with the deposited total, and a transaction never sees
// another's uncommitted transfer.
func TestTransfersConserveMoney(t *testing.T) {
	c := cluster(t, service.Bank{}, nil)
	for _, acct := range []string{"a", "b", "c"} {
		w := newReq(bank("deposit", acct, "100"))
		fanout(c, w)
		c.DeliverAll()
	}
	t1, _ := step(c, 11, automaton.RequestID{}, automaton.TxnBegin, service.Op{})
	t2, _ := step(c, 12, automaton.RequestID{}, automaton.TxnBegin, service.Op{})
	if _, r := step(c, 11, t1, automaton.TxnOp, bank("transfer", "a", "b", "40")); r.Int != 60 {
		t.Fatalf("T1 transfer: %v", r)
	}
	// T2 reads b, which T1 wrote and has not committed: refused, T2 aborts.
	if _, r := step(c, 12, t2, automaton.TxnOp, bank("balance", "b")); r.Err != automaton.ErrTxnAborted {
		t.Fatalf("T2 read T1's uncommitted write: %v", r)
	}
	if _, r := step(c, 12, t2, automaton.TxnCommit, service.Op{}); r.Err != automaton.ErrTxnAborted {
		t.Fatalf("T2 commit: %v", r)
	}
	if _, r := step(c, 11, t1, automaton.TxnCommit, service.Op{}); r.Type != service.ResultOK {
		t.Fatalf("T1 commit: %v", r)
	}
	t3, _ := step(c, 13, automaton.RequestID{}, automaton.TxnBegin, service.Op{})
	if _, r := step(c, 13, t3, automaton.TxnOp, bank("transfer", "b", "c", "140")); r.Int != 0 {
		t.Fatalf("T3 transfer: %v", r)
	}
	if _, r := step(c, 13, t3, automaton.TxnAbort, service.Op{}); r.Type != service.ResultOK {
		t.Fatalf("T3 abort: %v", r)
	}
	c.FireAll("n1")
	c.DeliverAll()
	for _, id := range c.IDs() {
		st := c.Node(id).(*PBPaxos).sm.st.(*service.BankState)
		if st.Total() != 300 || st.Balance("a") != 60 || st.Balance("b") != 140 || st.Balance("c") != 100 {
			t.Fatalf("%s: a=%d b=%d c=%d total=%d", id, st.Balance("a"), st.Balance("b"), st.Balance("c"), st.Total())
		}
	}
}

// TestLeaderSwitchAbortsTransaction: a transaction begun at n1 cannot
// commit at n2 after a takeover (the Grid Services thesis VI.A.5); its writes never
// appear.
func TestLeaderSwitchAbortsTransaction(t *testing.T) {
	c := cluster(t, service.Bank{}, nil)
	tx, _ := step(c, 21, automaton.RequestID{}, automaton.TxnBegin, service.Op{})
	step(c, 21, tx, automaton.TxnOp, bank("deposit", "z", "5"))
	c.Crash("n1")
	silence(c)
	elect(t, c, "n2")
	seq++
	commit := automaton.Request{ID: automaton.RequestID{Client: 21, Seq: seq}, Txn: &automaton.TxnStep{Txn: tx, Action: automaton.TxnCommit}, Fanout: true}
	for _, id := range []automaton.NodeID{"n2", "n3"} {
		c.Submit(id, commit)
	}
	c.DeliverAll()
	if r := answers(c, commit.ID)["n2"]; r.Err != automaton.ErrTxnAborted {
		t.Fatalf("commit after a leader switch: %v", r)
	}
	if b := c.Node("n2").(*PBPaxos).sm.st.(*service.BankState).Balance("z"); b != 0 {
		t.Fatalf("aborted deposit visible: %d", b)
	}
}
