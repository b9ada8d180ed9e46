package mc

import (
	"strings"
	"testing"
)

// TestTxnWorkload: interactive transactions in the workload (txn-begin,
// operations, txn-abort / txn-commit; unreplicated.TxnModel). The history
// holds each transaction as one entry, so the serializability checker
// finds unreplicated-broken-dirtytxn's read of an aborted write, while
// unreplicated itself exhausts the model and commits a transaction (a
// write completes).
func TestTxnWorkload(t *testing.T) {
	bad := caught(t, "unreplicated-broken-dirtytxn", "not strict-serializable")
	if s := bad.Violation.String(); !strings.Contains(s, "sends txn-begin") || !strings.Contains(s, "sends txn-abort") {
		t.Fatalf("the counterexample does not show the transaction's steps:\n%s", s)
	}
	ok := clean(t, "unreplicated", "unreplicated-broken-dirtytxn", 16, 0)
	if !ok.Complete || !ok.Sometimes[0].Reached {
		t.Fatalf("unreplicated in the transaction model: complete %v, a write (commit) completes %v", ok.Complete, ok.Sometimes[0].Reached)
	}
}

// TestTxnHistory: the history groups a transaction's steps into one
// TxnKind entry with the outcome of its end, and leaves copies out.
func TestTxnHistory(t *testing.T) {
	cfg := NewConfig("unreplicated-broken-dirtytxn")
	w, err := newWorld(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []Event{{Kind: EvInvoke, Client: 0}, {Kind: EvInvoke, Client: 0}, {Kind: EvInvoke, Client: 1}, {Kind: EvInvoke, Client: 0}} {
		if err := w.apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	h := w.history()
	if len(h.Ops) != 2 {
		t.Fatalf("want 2 entries (client 1's aborted transaction, client 2's open one), got %+v", h.Ops)
	}
	a, b := h.Ops[0], h.Ops[1]
	if a.Kind != "txn" || a.Outcome != "failed" || len(a.Txn) != 1 || a.Txn[0].Kind != "set" || a.Txn[0].Outcome != "ok" {
		t.Fatalf("client 1's transaction: %+v", a)
	}
	if b.Kind != "txn" || b.Outcome != "unknown" || len(b.Txn) != 0 {
		t.Fatalf("client 2's transaction (begun only): %+v", b)
	}
}
