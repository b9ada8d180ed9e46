package service

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/shard"
)

// Shared locks: read-only transactions' prepares share a slot, which reads
// pass and writes and exclusive prepares do not; each release drops only
// its own holder.
func TestTxSharedLocks(t *testing.T) {
	st := (KV{}).NewState()
	slot := shard.KeySlot("k")
	lock := func() string {
		r := st.Apply(Op{Kind: "get", Key: shard.LockKey(slot)})
		return string(r.Bytes)
	}
	guard := func(mode string) Result {
		return st.Apply(Op{Kind: GuardKind, Key: shard.StateKey(slot), Args: [][]byte{[]byte("slot"), []byte(mode)}})
	}
	prep := func(id string, shared bool) Result {
		coord := "g0"
		if shared {
			coord += " " + SharedPrepare
		}
		return st.Apply(TxPrepareOp(id, coord, []Op{{Kind: "get", Key: "k"}}))
	}
	if r := prep("t1", true); r.IsErr() || lock() != "r:t1" {
		t.Fatalf("shared prepare: %v, lock %q", r, lock())
	}
	if r := guard(shard.ModeRead); r.IsErr() {
		t.Fatalf("a read's guard on a shared lock: %v", r)
	}
	if r := guard(shard.ModeWrite); !IsGuardFailure(r) || !strings.Contains(r.Err, shard.RefuseLocked) {
		t.Fatalf("a write's guard on a shared lock: %v", r)
	}
	if r := prep("t2", true); r.IsErr() || lock() != "r:t1,t2" {
		t.Fatalf("second shared prepare: %v, lock %q", r, lock())
	}
	if r := prep("t3", false); !r.IsErr() || !strings.Contains(r.Err, "TXCONFLICT") {
		t.Fatalf("exclusive prepare on a shared lock: %v", r)
	}
	if r := st.Apply(Op{Kind: "txabort", Key: shard.TxKey("t1")}); r.IsErr() || lock() != "r:t2" {
		t.Fatalf("release of t1: %v, lock %q", r, lock())
	}
	if r := st.Apply(Op{Kind: "txabort", Key: shard.TxKey("t2")}); r.IsErr() || lock() != "" {
		t.Fatalf("release of t2: %v, lock %q", r, lock())
	}
	if r := prep("t3", false); r.IsErr() || lock() != "t3" {
		t.Fatalf("exclusive prepare: %v, lock %q", r, lock())
	}
	if r := prep("t4", true); !r.IsErr() || !strings.Contains(r.Err, "TXCONFLICT") {
		t.Fatalf("shared prepare on an exclusive lock: %v", r)
	}
	if r := guard(shard.ModeRead); !IsGuardFailure(r) {
		t.Fatalf("a read's guard on an exclusive lock: %v", r)
	}
}
