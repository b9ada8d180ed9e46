package service

import (
	"testing"
)

func bankOp(kind, acct string, args ...string) Op {
	op := Op{Kind: kind, Key: acct}
	for _, a := range args {
		op.Args = append(op.Args, []byte(a))
	}
	return op
}

// TestBankOperations: deposits, withdrawals and transfers; errors change
// nothing; transfers conserve the total.
func TestBankOperations(t *testing.T) {
	s := Bank{}.NewState().(*BankState)
	if r := s.Apply(bankOp("deposit", "a", "100")); r.Int != 100 {
		t.Fatalf("deposit: %v", r)
	}
	if r := s.Apply(bankOp("withdraw", "a", "150")); !r.IsErr() {
		t.Fatalf("overdraft allowed: %v", r)
	}
	if r := s.Apply(bankOp("transfer", "a", "b", "30")); r.Int != 70 {
		t.Fatalf("transfer: %v", r)
	}
	if r := s.Apply(bankOp("transfer", "b", "a", "31")); !r.IsErr() {
		t.Fatalf("transfer beyond the balance: %v", r)
	}
	if s.Balance("a") != 70 || s.Balance("b") != 30 || s.Total() != 100 {
		t.Fatalf("balances a=%d b=%d total=%d", s.Balance("a"), s.Balance("b"), s.Total())
	}
	if err := (Bank{}).Validate(bankOp("deposit", "a", "-3")); err == nil {
		t.Fatal("negative amount accepted")
	}
	if ls := (Bank{}).Locks(bankOp("transfer", "a", "b", "1")); len(ls) != 2 || !ls[0].Write || !ls[1].Write || ls[1].Key != "b" {
		t.Fatalf("transfer locks %v", ls)
	}
	if ls := (Bank{}).Locks(bankOp("balance", "a")); len(ls) != 1 || ls[0].Write {
		t.Fatalf("balance locks %v", ls)
	}
}

// TestBankDeltaSnapshot: a delta brings a copy level; a snapshot restores
// an equal state.
func TestBankDeltaSnapshot(t *testing.T) {
	a := Bank{}.NewState().(*BankState)
	a.Apply(bankOp("deposit", "x", "5"))
	b := a.Clone().(*BankState)
	v := a.Version()
	a.Apply(bankOp("transfer", "x", "y", "2"))
	if b.Balance("y") != 0 {
		t.Fatal("clone shares accounts")
	}
	d, err := a.Delta(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ApplyDelta(d); err != nil {
		t.Fatal(err)
	}
	if string(a.Snapshot()) != string(b.Snapshot()) {
		t.Fatal("delta did not make the states equal")
	}
	c := Bank{}.NewState()
	if err := c.Restore(a.Snapshot()); err != nil || string(c.Snapshot()) != string(a.Snapshot()) {
		t.Fatalf("restore: %v", err)
	}
	if _, err := c.(*BankState).Delta(0); err == nil {
		t.Fatal("delta before the restore baseline")
	}
}

// TestLockTableNoWait: shared locks share, an exclusive one conflicts, a
// refused request takes nothing, release frees everything.
func TestLockTableNoWait(t *testing.T) {
	lt := NewLockTable[int]()
	if _, ok := lt.Acquire(1, []Lock{{Key: "a"}}); !ok {
		t.Fatal("first shared lock refused")
	}
	if _, ok := lt.Acquire(2, []Lock{{Key: "a"}}); !ok {
		t.Fatal("second shared lock refused")
	}
	if hs, ok := lt.Acquire(2, []Lock{{Key: "b", Write: true}, {Key: "a", Write: true}}); ok || len(hs) != 1 || hs[0] != 1 {
		t.Fatalf("upgrade past another reader: %v %v", hs, ok)
	}
	if len(lt.Held(2)) != 1 {
		t.Fatalf("a refused request took locks: %v", lt.Held(2))
	}
	lt.Release(1)
	if _, ok := lt.Acquire(2, []Lock{{Key: "a", Write: true}}); !ok {
		t.Fatal("upgrade as the only reader refused")
	}
	if _, ok := lt.Acquire(3, []Lock{{Key: "a"}}); ok {
		t.Fatal("shared lock granted beside an exclusive one")
	}
	lt.Release(2)
	if lt.Len() != 0 {
		t.Fatalf("%d keys locked after release", lt.Len())
	}
}

// TestSeedConcurrencyCaveat: the Grid Services thesis VI.A.4's caveat. T2 writes r2 (not
// committed), T1 then reads it (r3) and would commit, after which T2
// aborts: T1 would have committed a value that never existed. Under
// strict two-phase locking T1's read conflicts with T2's exclusive lock,
// so T1 aborts (no-wait) instead of reading it; once T2 aborted and
// released, a new T1 reads the committed balance.
func TestSeedConcurrencyCaveat(t *testing.T) {
	svc := Bank{}
	lt := NewLockTable[string]()
	r1 := bankOp("deposit", "a", "10") // T1
	r2 := bankOp("deposit", "b", "99") // T2's write, never committed
	r3 := bankOp("balance", "b")       // T1 reads T2's account
	if _, ok := lt.Acquire("T1", svc.Locks(r1)); !ok {
		t.Fatal("r1 refused")
	}
	if _, ok := lt.Acquire("T2", svc.Locks(r2)); !ok {
		t.Fatal("r2 refused")
	}
	hs, ok := lt.Acquire("T1", svc.Locks(r3))
	if ok || len(hs) != 1 || hs[0] != "T2" {
		t.Fatalf("T1 read T2's uncommitted write: ok=%v holders=%v", ok, hs)
	}
	lt.Release("T1") // T1 aborts (no-wait)
	lt.Release("T2") // T2 aborts
	if _, ok := lt.Acquire("T1'", svc.Locks(r3)); !ok {
		t.Fatal("after both ended, the read is refused")
	}
}
