package service

import (
	"fmt"
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

// A writing transaction's prepare with EvalPrepare answers its operations'
// results, and its commit, later, applies them as evaluated: at the
// prepare's time (a key that expired in between is as it was then) and
// environment (SRANDMEMBER's draw), with active expiry passing over its locked
// slots meanwhile. Applied at the commit's own time (the old path, a
// prepare without eval), the same INCR answers 1, not the 6 an answer at
// the decision would have given.
func TestTxEvalAtPrepare(t *testing.T) {
	const t0 = int64(1_800_000_000_000) // ms
	at := func(ms int64) Env { return Env{Time: ms * 1e6, Seed: uint64(ms)} }
	setup := func() State {
		st := (KV{}).NewState()
		for _, op := range []Op{
			{Kind: "set", Key: "k", Args: [][]byte{[]byte("5"), []byte("px"), []byte("1000")}},
			{Kind: "sadd", Key: "s", Args: [][]byte{[]byte("a"), []byte("b"), []byte("c"), []byte("d")}},
		} {
			if r := ApplyEnv(st, op, at(t0)); r.IsErr() {
				t.Fatal(r)
			}
		}
		return st
	}
	ops := []Op{
		{Kind: GuardKind, Key: "s", Args: [][]byte{[]byte("exists"), []byte("1")}},
		{Kind: "incr", Key: "k", Args: [][]byte{[]byte("1")}},
		{Kind: "srandmember", Key: "s", Args: [][]byte{[]byte("2")}},
		{Kind: "get", Key: "k"},
		{Kind: "set", Key: "n", Args: [][]byte{[]byte("v"), []byte("ex"), []byte("10")}},
		{Kind: "pttl", Key: "n"},
	}
	st := setup()
	prep := ApplyEnv(st, TxPrepareOp("t1", "g0 "+EvalPrepare, ops), at(t0+100))
	if prep.Type != ResultArray || len(prep.Elems) != len(ops) {
		t.Fatalf("eval prepare answered %v", prep)
	}
	if prep.Elems[0].Type != ResultOK || prep.Elems[1].Int != 6 || string(prep.Elems[3].Bytes) != "6" || prep.Elems[5].Int != 10000 {
		t.Fatalf("eval prepare's results %v", prep.Elems)
	}
	if r := ApplyEnv(st, Op{Kind: "get", Key: "k"}, at(t0+100)); string(r.Bytes) != "5" {
		t.Fatalf("the prepare applied something: GET k = %v", r)
	}
	// k's deadline passes; active expiry leaves the locked slot alone.
	if r := ApplyEnv(st, ActiveExpire(10), at(t0+5000)); len(r.Elems) != 0 {
		t.Fatalf("active expiry removed %v from a locked slot", r.Elems)
	}
	com := ApplyEnv(st, TxCommitOp("t1", nil), at(t0+5000))
	if com.Type != ResultArray || len(com.Elems) != len(ops) {
		t.Fatalf("commit answered %v", com)
	}
	for i := range ops {
		if !com.Elems[i].Equal(prep.Elems[i]) {
			t.Fatalf("commit's result %d = %v, the prepare evaluated %v", i, com.Elems[i], prep.Elems[i])
		}
	}
	if r := ApplyEnv(st, Op{Kind: "pttl", Key: "n"}, at(t0+5000)); r.Int != 10000-4900 {
		t.Fatalf("PTTL n after the commit = %v: its deadline is the prepare's time + 10 s", r)
	}
	// The old path (no eval): the commit applies at its own time.
	old := setup()
	ApplyEnv(old, TxPrepareOp("t1", "g0", ops), at(t0+100))
	if r := ApplyEnv(old, TxCommitOp("t1", nil), at(t0+5000)); r.Elems[1].Int != 1 {
		t.Fatalf("INCR of an expired key at the commit's time = %v, want 1", r.Elems[1])
	}

	// Not evaluated (answered OK, applied at the commit as before): SPOP
	// (its draw depends on the state's version), a script, and
	// collections over evalMaxElems.
	if r := ApplyEnv(setup(), TxPrepareOp("t4", "g0 "+EvalPrepare, []Op{{Kind: "spop", Key: "s"}}), at(t0)); r.Type != ResultOK {
		t.Fatalf("eval prepare of SPOP answered %v, want OK", r)
	}
	big := (KV{}).NewState()
	for i := 0; i <= evalMaxElems; i++ {
		ApplyEnv(big, Op{Kind: "hset", Key: "h", Args: [][]byte{fmt.Appendf(nil, "f%d", i), []byte("1")}}, at(t0))
	}
	if r := ApplyEnv(big, TxPrepareOp("t2", "g0 "+EvalPrepare, []Op{{Kind: "hincrby", Key: "h", Args: [][]byte{[]byte("f0"), []byte("1")}}}), at(t0)); r.Type != ResultOK {
		t.Fatalf("eval prepare over %d elements answered %v, want OK", evalMaxElems+1, r)
	}
	if r := ApplyEnv(big, TxCommitOp("t2", nil), at(t0)); len(r.Elems) != 1 || r.Elems[0].Int != 2 {
		t.Fatalf("its commit answered %v", r)
	}
	script := Op{Kind: "eval", Key: "k", Args: [][]byte{[]byte("eval"), []byte("return 1"), []byte("1")}}
	if (KV{}).Validate(script) == nil {
		if r := ApplyEnv(setup(), TxPrepareOp("t3", "g0 "+EvalPrepare, []Op{script}), at(t0)); r.Type != ResultOK {
			t.Fatalf("eval prepare of a script answered %v, want OK", r)
		}
	}
}
