package service

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/synod-dev/synod/shard"
)

// The served forms of a group's keyspace operations (kv_served.go): keys
// of slots the group is importing, has handed over or given up, and the
// reserved keys, are not the group's to answer for; FLUSHDB served
// deletes only the rest, marks a migrating slot's keys dirty, and refuses
// while a slot is frozen. Without the filter, dbsize served counts 9.
func TestKeyspaceServed(t *testing.T) {
	s := newKVState()
	set := func(k, v string) { s.Apply(Op{Kind: "set", Key: k, Args: [][]byte{[]byte(v)}}) }
	arg := func(a ...string) [][]byte {
		var out [][]byte
		for _, x := range a {
			out = append(out, []byte(x))
		}
		return out
	}
	// Keys a0..a3 in slot of "{a}" (importing), b0..b1 in "{b}" (migrating),
	// c0 in "{c}" (no state), d0 in "{d}" (gone).
	for i := 0; i < 4; i++ {
		set(fmt.Sprintf("a%d{a}", i), "v")
	}
	set("b0{b}", "v")
	set("b1{b}", "v")
	set("c0{c}", "v")
	set("d0{d}", "v")
	set(shard.StateKey(shard.KeySlot("{a}")), shard.SlotState{State: shard.StImporting, Peer: "s0", Token: 1}.String())
	set(shard.StateKey(shard.KeySlot("{b}")), shard.SlotState{State: shard.StMigrating, Peer: "s1", Token: 1}.String())
	set(shard.StateKey(shard.KeySlot("{d}")), shard.SlotState{State: shard.StGone, Peer: "s1", Token: 1}.String())
	served := []string{"b0{b}", "b1{b}", "c0{c}"}

	if r := s.Apply(Op{Kind: "dbsize", Args: arg(ServedArg)}); r.Int != 3 {
		t.Fatalf("dbsize served = %v, want 3 (plain: %v)", r, s.Apply(Op{Kind: "dbsize"}))
	}
	var got []string
	for _, e := range s.Apply(Op{Kind: "keys", Args: arg("*", ServedArg)}).Elems {
		got = append(got, string(e.Bytes))
	}
	if !slices.Equal(got, served) {
		t.Fatalf("keys * served = %v, want %v", got, served)
	}
	if r := s.Apply(Op{Kind: "dbinfo", Args: arg(ServedArg)}); len(r.Elems) != 3 || r.Elems[0].Int != 3 {
		t.Fatalf("dbinfo served = %v, want 3 keys", r)
	}
	if r := s.Apply(Op{Kind: "randomkey", Args: arg(ServedArg)}); !slices.Contains(served, string(r.Bytes)) {
		t.Fatalf("randomkey served = %v", r)
	}
	// A scan by slots, two keys a page: every served key of the range
	// once, in cluster positions, and nothing outside the range.
	lo, hi := min(shard.KeySlot("{b}"), shard.KeySlot("{c}")), max(shard.KeySlot("{b}"), shard.KeySlot("{c}"))
	rng := shard.Range{First: lo, Last: hi}.String()
	got = nil
	cur := uint64(lo) << ClusterCursorBits
	for pages := 0; ; pages++ {
		r := s.Apply(Op{Kind: "scan", Args: arg(strconv.FormatUint(cur, 10), "count", "2", "slots", rng)})
		if r.IsErr() || pages > 10 {
			t.Fatalf("scan slots %s: %v", rng, r)
		}
		for _, e := range r.Elems[1].Elems {
			got = append(got, string(e.Bytes))
		}
		if cur, _ = strconv.ParseUint(string(r.Elems[0].Bytes), 10, 64); cur == 0 {
			break
		}
		if sl := int(cur >> ClusterCursorBits); sl < lo || sl > hi {
			t.Fatalf("next cursor %d names slot %d outside %s", cur, sl, rng)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, served) {
		t.Fatalf("scan slots %s = %v, want %v", rng, got, served)
	}
	// A scan asked first for a slot the group gave away is refused as a
	// guard is, naming the slot's new group; a range running into it
	// stops before it (the next cursor names it).
	d := shard.KeySlot("{d}")
	if r := s.Apply(Op{Kind: "scan", Args: arg(strconv.FormatUint(uint64(d)<<ClusterCursorBits, 10), "slots", shard.Range{First: d, Last: d + 1}.String())}); !IsGuardFailure(r) || !strings.HasSuffix(r.Err, "slot MOVED s1") {
		t.Fatalf("scan of gone slot %d = %v, want GUARDFAILED slot MOVED s1", d, r)
	}
	if r := s.Apply(Op{Kind: "scan", Args: arg("0", "count", "100", "slots", shard.Range{First: 0, Last: shard.Slots - 1}.String())}); r.IsErr() || string(r.Elems[0].Bytes) != strconv.FormatUint(uint64(min(d, shard.KeySlot("{a}")))<<ClusterCursorBits, 10) {
		t.Fatalf("scan of every slot = %v, want it cut at slot %d", r, min(d, shard.KeySlot("{a}")))
	}
	if r := s.Apply(Op{Kind: "dbsize", Args: arg("x")}); r.Type != ResultErr {
		t.Fatalf("dbsize x = %v, want a syntax error", r)
	}

	// A frozen slot: FLUSHDB served refuses and deletes nothing.
	fz := shard.StateKey(shard.KeySlot("{f}"))
	set(fz, shard.SlotState{State: shard.StFrozen, Peer: "s1", Token: 1}.String())
	if r := s.Apply(Op{Kind: "flushdb", Args: arg(ServedArg)}); r.Type != ResultErr || s.Apply(Op{Kind: "dbsize", Args: arg(ServedArg)}).Int != 3 {
		t.Fatalf("flushdb served with a frozen slot = %v", r)
	}
	s.Apply(Op{Kind: "del", Key: fz})
	if r := s.Apply(Op{Kind: "flushdb", Args: arg(ServedArg)}); r.IsErr() {
		t.Fatal(r)
	}
	if r := s.Apply(Op{Kind: "dbsize", Args: arg(ServedArg)}); r.Int != 0 {
		t.Fatalf("dbsize served after flushdb served = %v", r)
	}
	// Unserved and reserved keys stay; the migrating slot's keys are dirty.
	if r := s.Apply(Op{Kind: "dbsize"}); r.Int != 4+1+3+1 { // a0-a3, d0, three state keys, the dirty set
		t.Fatalf("dbsize after flushdb served = %v, want 9", r)
	}
	if r := s.Apply(Op{Kind: "scard", Key: shard.DirtyKey}); r.Int != 2 {
		t.Fatalf("dirty set after flushdb served = %v, want b0 and b1", r)
	}
}

// BenchmarkDBSizeServed: what the served filter adds to a group's DBSIZE
// over 1,000,000 keys: plain; served with no slot state (a pass to find
// the states, no CRC16); served with one slot importing (a CRC16 per key).
// go test -run - -bench BenchmarkDBSizeServed -count 3 ./service
func BenchmarkDBSizeServed(b *testing.B) {
	s := newKVState()
	for i := 0; i < 1_000_000; i++ {
		s.Apply(Op{Kind: "set", Key: fmt.Sprintf("user:%08d:profile", i), Args: [][]byte{[]byte("v")}})
	}
	run := func(name string, args [][]byte) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if r := s.Apply(Op{Kind: "dbsize", Args: args}); r.Int < 999_000 {
					b.Fatal(r)
				}
			}
		})
	}
	run("plain", nil)
	run("served", [][]byte{[]byte(ServedArg)})
	s.Apply(Op{Kind: "set", Key: shard.StateKey(7), Args: [][]byte{[]byte(shard.SlotState{State: shard.StImporting, Peer: "s0", Token: 1}.String())}})
	run("served-1-importing", [][]byte{[]byte(ServedArg)})
}
