package esds

import (
	"testing"

	"github.com/synod-dev/synod/service"
)

// TestOpLocksNoAllocation: a key-local put's one lock goes into the
// operation's own array (opLocks) and a local read's into the replica's
// scratch array (readLocks), with no allocation; ks.Locks took one for
// each, per replica (session 50, issue 28). It also holds both to
// service.KV's Locks.
func TestOpLocksNoAllocation(t *testing.T) {
	ks := keyedService(service.KV{})
	set := service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}
	get := service.Op{Kind: "get", Key: "k"}
	o := &op{sop: set}
	if got, want := opLocks(ks, o), (service.KV{}).Locks(set); len(got) != 1 || got[0] != want[0] {
		t.Fatalf("opLocks = %v, want %v", got, want)
	}
	a := &ESDS{}
	if got, want := a.readLocks(ks, get), (service.KV{}).Locks(get); len(got) != 1 || got[0] != want[0] {
		t.Fatalf("readLocks = %v, want %v", got, want)
	}
	if n := testing.AllocsPerRun(100, func() {
		o.locks = nil
		_ = opLocks(ks, o)
	}); n != 0 {
		t.Errorf("opLocks of a SET: %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = a.readLocks(ks, get) }); n != 0 {
		t.Errorf("readLocks of a GET: %v allocations, want 0", n)
	}
}
