package sim

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/protocol/unreplicated"
)

func txnCfg(proto string) Config {
	return Config{Protocol: proto, Nodes: 3, Clients: 4, Ops: 150, Seed: 1, Faults: "none",
		Txns: 0.5, TxnSize: 3, TxnAbort: 0.1}
}

// Interactive transactions are recorded as TxnKind entries with one step
// per operation, judged for serializability, and the correct protocol
// passes while the dirty-transaction variant is caught.
func TestInteractiveTxnsRecordedAndChecked(t *testing.T) {
	r, err := Run(txnCfg(unreplicated.Name))
	if err != nil {
		t.Fatal(err)
	}
	var committed, failed int
	for _, op := range r.History.Ops {
		if op.Kind != history.TxnKind {
			continue
		}
		switch op.Outcome {
		case history.OK:
			committed++
			if len(op.Txn) != 3 {
				t.Fatalf("committed transaction with %d operations recorded, want 3", len(op.Txn))
			}
		case history.Failed:
			failed++
		}
	}
	st := r.Stats
	if committed == 0 || failed == 0 || committed != st.TxnCommitted || failed != st.TxnAborted+st.TxnConflicts+st.TxnFailed {
		t.Fatalf("history: %d committed, %d failed; stats %s", committed, failed, st.TxnString())
	}
	if r.Violation || r.Check == nil || !strings.Contains(r.Check.Guarantee, "serializ") {
		t.Fatalf("violation %v, check %v", r.Violation, r.Check)
	}
	bad, err := Run(txnCfg(unreplicated.BrokenDirtyTxn))
	if err != nil {
		t.Fatal(err)
	}
	if !bad.Violation {
		t.Fatalf("dirty transactions not caught: %v", bad.Check)
	}
}

// --txns is refused to protocols without interactive transactions, and
// leaves other workloads' runs (their digests) untouched.
func TestTxnsFlagRefusedAndInert(t *testing.T) {
	cfg := localCfg("test-local")
	if automaton.TransactionsOf(cfg.Protocol).Interactive {
		t.Fatal("test-local declares interactive transactions")
	}
	cfg.Txns = 0.3
	if _, err := Run(cfg); err == nil || !strings.Contains(err.Error(), "interactive") {
		t.Fatalf("--txns with a protocol without them: %v", err)
	}
	base := txnCfg(unreplicated.Name)
	base.Txns = 0
	a, err := Run(base)
	if err != nil {
		t.Fatal(err)
	}
	base.TxnSize, base.TxnAbort = 7, 0.9 // irrelevant without --txns
	b, err := Run(base)
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != b.Digest {
		t.Fatal("transaction settings changed a run without transactions")
	}
}
