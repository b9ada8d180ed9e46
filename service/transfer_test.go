package service

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// sameState fails unless a and b are equal: Snapshot bytes, StateHash and
// Version.
func sameState(t *testing.T, what string, a, b State) {
	t.Helper()
	if string(a.Snapshot()) != string(b.Snapshot()) {
		t.Fatalf("%s: snapshots differ", what)
	}
	if StateHash(a) != StateHash(b) {
		t.Fatalf("%s: hashes differ", what)
	}
	if a.(DeltaState).Version() != b.(DeltaState).Version() {
		t.Fatalf("%s: versions %d and %d", what, a.(DeltaState).Version(), b.(DeltaState).Version())
	}
}

func applyAll(st State, ops ...Op) {
	for _, o := range ops {
		st.Apply(o)
	}
}

// A lagging replica installs the leader's delta and becomes equal to it,
// for every service and for the kinds of KV change a delta must carry.
func TestDeltaCatchUp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		svc    Service
		common []Op // applied to both
		ahead  []Op // applied to the leader only
		hashed bool // hash the follower before the delta (tree kept up to date)
	}{
		{"kv sets", KV{}, []Op{op("set", "a", "1")}, []Op{op("set", "b", "2"), op("set", "a", "3")}, false},
		{"kv deletes", KV{}, []Op{op("set", "a", "1"), op("set", "b", "2")}, []Op{op("del", "a")}, true},
		{"kv re-created after delete", KV{}, []Op{op("set", "a", "1")}, []Op{op("del", "a"), op("set", "a", "2")}, true},
		{"kv deleted after re-creation", KV{}, []Op{op("set", "a", "1"), op("del", "a")}, []Op{op("set", "a", "2"), op("del", "a")}, false},
		{"kv created and deleted since", KV{}, nil, []Op{op("set", "t", "1"), op("del", "t")}, true},
		{"kv append incr cas", KV{}, []Op{op("set", "c", "1")}, []Op{op("append", "s", "x"), op("incr", "n", "5"), op("cas", "c", "1", "2")}, true},
		{"kv nothing new", KV{}, []Op{op("set", "a", "1")}, nil, true},
		{"kv failed writes change nothing", KV{}, []Op{op("set", "a", "1")}, []Op{op("set", "a", "2", "nx"), op("del", "zz"), op("get", "a")}, true},
		{"counter", Counter{}, []Op{op("add", "", "2")}, []Op{op("add", "", "5"), op("add", "", "-1")}, true},
		{"counter nothing new", Counter{}, []Op{op("add", "", "2")}, nil, false},
		{"string", String{}, []Op{op("append", "", "ab")}, []Op{op("append", "", "cd")}, true},
		{"string nothing new", String{}, []Op{op("append", "", "ab")}, []Op{op("read", "")}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leader, follower := tc.svc.NewState(), tc.svc.NewState()
			applyAll(leader, tc.common...)
			applyAll(follower, tc.common...)
			if tc.hashed {
				StateHash(follower)
				StateHash(leader)
			}
			applyAll(leader, tc.ahead...)
			since := follower.(DeltaState).Version()
			d, err := leader.(DeltaState).Delta(since)
			if err != nil {
				t.Fatal(err)
			}
			if err := follower.(DeltaState).ApplyDelta(d); err != nil {
				t.Fatal(err)
			}
			sameState(t, "after the delta", leader, follower)
			// Applying it again is harmless.
			if err := follower.(DeltaState).ApplyDelta(d); err != nil {
				t.Fatalf("second application: %v", err)
			}
			sameState(t, "after the delta twice", leader, follower)
			// The follower can now serve the same delta itself.
			d2, err := follower.(DeltaState).Delta(since)
			if err != nil || string(d2) != string(d) {
				t.Fatalf("follower's delta since %d differs from the leader's (%v)", since, err)
			}
			// And both go on alike.
			applyAll(leader, tc.ahead...)
			applyAll(follower, tc.ahead...)
			sameState(t, "after more writes", leader, follower)
		})
	}
}

// Random property: a leader and a follower that stopped at a random point;
// the follower catches up by delta (or, past the tombstone bound, by the
// snapshot fallback), then a third replica catches up from the follower.
func TestKVDeltaRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	byDelta, bySnapshot := 0, 0
	for round := range 200 {
		leader := KV{}.NewState().(*KVState)
		leader.SetTombstoneLimit(1 + r.IntN(8))
		for range r.IntN(60) {
			leader.Apply(randomKVOp(r, 12))
		}
		follower := leader.Clone().(*KVState)
		third := leader.Clone().(*KVState)
		if r.IntN(2) == 0 {
			leader.StateHash()
		}
		if r.IntN(2) == 0 {
			follower.StateHash()
		}
		for range r.IntN(60) {
			leader.Apply(randomKVOp(r, 12))
		}
		_, err := leader.Delta(follower.Version())
		if err != nil && !errors.Is(err, ErrDeltaUnavailable) {
			t.Fatalf("round %d: %v", round, err)
		}
		if err == nil {
			byDelta++
		} else {
			bySnapshot++
		}
		if err := TransferDelta(leader, follower, follower.Version()); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		sameState(t, fmt.Sprintf("round %d follower", round), leader, follower)
		if follower.StateHash() != rebuiltRoot(follower) {
			t.Fatalf("round %d: follower's tree not exact", round)
		}
		if err := TransferDelta(follower, third, third.Version()); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		sameState(t, fmt.Sprintf("round %d third", round), leader, third)
	}
	if byDelta < 20 || bySnapshot < 20 {
		t.Fatalf("weak test: %d transfers by delta, %d by snapshot", byDelta, bySnapshot)
	}
}

// Delta refuses versions it cannot express, with ErrDeltaUnavailable, and
// TransferDelta then falls back to the snapshot.
func TestDeltaUnavailable(t *testing.T) {
	leader := KV{}.NewState().(*KVState)
	leader.SetTombstoneLimit(2)
	applyAll(leader, op("set", "a", "1"), op("set", "b", "1"), op("set", "c", "1"))
	follower := leader.Clone().(*KVState)
	applyAll(leader, op("del", "a"), op("del", "b"), op("set", "d", "1")) // versions 4, 5, 6
	if _, err := leader.Delta(3); err != nil {
		t.Fatalf("two tombstones kept, delta since 3: %v", err)
	}
	applyAll(leader, op("del", "c")) // version 7 evicts the tombstone of a (4)
	for _, since := range []uint64{0, 3} {
		if _, err := leader.Delta(since); !errors.Is(err, ErrDeltaUnavailable) {
			t.Fatalf("delta since %d past a forgotten tombstone: %v", since, err)
		}
	}
	if _, err := leader.Delta(4); err != nil {
		t.Fatalf("delta since 4: %v", err)
	}
	if _, err := leader.Delta(8); !errors.Is(err, ErrDeltaUnavailable) {
		t.Fatalf("delta since a future version: %v", err)
	}
	if err := TransferDelta(leader, follower, follower.Version()); err != nil {
		t.Fatal(err)
	}
	sameState(t, "after the fallback", leader, follower)

	// A restored state cannot serve deltas from before its baseline.
	r := KV{}.NewState().(*KVState)
	if err := r.Restore(leader.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Delta(r.Version() - 1); !errors.Is(err, ErrDeltaUnavailable) {
		t.Fatalf("delta before the restore baseline: %v", err)
	}
	if d, err := r.Delta(r.Version()); err != nil || len(d) == 0 {
		t.Fatalf("empty delta at the baseline: %v", err)
	}
}

// ApplyDelta refuses a delta that does not fit and changes nothing.
func TestApplyDeltaMismatch(t *testing.T) {
	for _, svc := range []Service{KV{}, Counter{}, String{}} {
		t.Run(svc.Name(), func(t *testing.T) {
			w := map[string]Op{"kv": op("set", "k", "v"), "counter": op("add", "", "1"), "string": op("append", "", "x")}[svc.Name()]
			leader, behind, ahead := svc.NewState(), svc.NewState(), svc.NewState()
			applyAll(leader, w, w, w)
			applyAll(ahead, w, w, w, w)
			applyAll(behind, w)
			d, err := leader.(DeltaState).Delta(2)
			if err != nil {
				t.Fatal(err)
			}
			for name, st := range map[string]State{"behind since": behind, "ahead of to": ahead} {
				before := string(st.Snapshot())
				if err := st.(DeltaState).ApplyDelta(d); !errors.Is(err, ErrDeltaMismatch) {
					t.Fatalf("%s: %v", name, err)
				}
				if string(st.Snapshot()) != before {
					t.Fatalf("%s: a refused delta changed the state", name)
				}
			}
			for _, bad := range [][]byte{nil, {9}, d[:len(d)-1], append(append([]byte{}, d...), 0)} {
				if err := behind.(DeltaState).ApplyDelta(bad); !errors.Is(err, ErrDeltaMismatch) {
					t.Fatalf("malformed delta %x: %v", bad, err)
				}
			}
		})
	}
}

// plainState has Snapshot and Restore only.
type plainState struct{ State }

// TransferDelta works when either side lacks DeltaState, by snapshot, and
// StateHash falls back to hashing the snapshot.
func TestTransferDeltaWithoutDeltaState(t *testing.T) {
	from := KV{}.NewState()
	from.Apply(op("set", "a", "1"))
	to := plainState{KV{}.NewState()}
	if err := TransferDelta(from, to, 0); err != nil {
		t.Fatal(err)
	}
	if string(to.Snapshot()) != string(from.Snapshot()) {
		t.Fatal("snapshot fallback did not copy the state")
	}
	if StateHash(to) == StateHash(from) || StateHash(to) != StateHash(plainState{from}) {
		t.Fatal("StateHash should hash the snapshot of a state without a tree")
	}
}

// TransferRanges repairs replicas whose histories diverged by sending only
// the differing ranges.
func TestTransferRanges(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	a, b := KV{}.NewState().(*KVState), KV{}.NewState().(*KVState)
	for i := range 3000 {
		o := op("set", fmt.Sprint(i), "v")
		a.Apply(o)
		b.Apply(o)
	}
	for range 20 {
		a.Apply(randomKVOp(r, 3000))
		b.Apply(randomKVOp(r, 3000))
	}
	b.Apply(op("set", "only-b", "x"))
	a.Apply(op("del", "17"))
	rs, err := TransferRanges(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) == 0 || len(rs) > 45 {
		t.Fatalf("%d ranges sent for about 42 differing keys", len(rs))
	}
	sameState(t, "after the range transfer", a, b)
	if got := b.Apply(op("exists", "only-b")); !got.Equal(Int(0)) {
		t.Fatal("a key only the receiver had survived")
	}
	if b.StateHash() != rebuiltRoot(b) {
		t.Fatal("receiver's tree not exact after the import")
	}
	// The imported version is a new baseline: deltas from it work.
	a.Apply(op("set", "after", "1"))
	if err := TransferDelta(a, b, b.Version()); err != nil {
		t.Fatal(err)
	}
	sameState(t, "after a delta on top", a, b)
	if rs, err := TransferRanges(a, b); err != nil || rs != nil {
		t.Fatalf("equal states: ranges %v, %v", rs, err)
	}
	if err := b.ImportRanges([]byte{1, 0, 1, 0, 9}); err == nil {
		t.Fatal("range outside the tree accepted")
	}
}

// Old (format 1) snapshots still restore, as version 0.
func TestRestoreFormat1(t *testing.T) {
	kv := KV{}.NewState().(*KVState)
	if err := kv.Restore([]byte{1, 1, 1, 'k', 1, 'v'}); err != nil || kv.Version() != 0 {
		t.Fatalf("kv format 1: %v", err)
	}
	if got := kv.Apply(op("get", "k")); !got.Equal(Bytes([]byte("v"))) {
		t.Fatalf("kv format 1 content: %v", got)
	}
	ctr := Counter{}.NewState().(*CounterState)
	if err := ctr.Restore([]byte{1, 6}); err != nil || ctr.V != 3 || ctr.Version() != 0 {
		t.Fatalf("counter format 1: %v %d", err, ctr.V)
	}
}

// FuzzKVDelta drives a leader and a lagging follower by fuzzed operations
// and checks the catch-up.
func FuzzKVDelta(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, uint8(4), uint8(2))
	f.Add([]byte{4, 4, 4, 0, 0, 4, 4}, uint8(1), uint8(1))
	f.Fuzz(func(t *testing.T, prog []byte, split, limit uint8) {
		leader := KV{}.NewState().(*KVState)
		leader.SetTombstoneLimit(int(limit))
		var follower *KVState
		for i, b := range prog {
			if i == int(split) {
				follower = leader.Clone().(*KVState)
			}
			r := rand.New(rand.NewPCG(uint64(b), uint64(i)))
			leader.Apply(randomKVOp(r, 6))
		}
		if follower == nil {
			follower = KV{}.NewState().(*KVState)
		}
		if err := TransferDelta(leader, follower, follower.Version()); err != nil {
			t.Fatal(err)
		}
		sameState(t, "fuzzed catch-up", leader, follower)
	})
}
