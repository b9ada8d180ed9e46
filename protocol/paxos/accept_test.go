package paxos

import (
	"bytes"
	"fmt"
	"testing"
	"unsafe"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// TestMarshalAccept: an Accept whose batches are encoded straight into the
// message (marshalAccept) is marshal's message byte for byte, with each
// entry's value encodeBatch's, capped, inside the message (no buffer of its
// own): for a value whose length takes fewer bytes than its bound's (the
// value moved down), one whose length takes as many, an entry already
// encoded (a membership change) among them, plain and version-3 batches.
func TestMarshalAccept(t *testing.T) {
	val := func(n int) []byte { return bytes.Repeat([]byte{'v'}, n) }
	one := func(client uint64, n int) []cmd { // one SET of an n-byte value
		return []cmd{{ID: automaton.RequestID{Client: client, Seq: 1}, Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{val(n)}}}}
	}
	many := func(k, n int) []cmd {
		var cs []cmd
		for i := range k {
			cs = append(cs, cmd{ID: automaton.RequestID{Client: 7, Seq: uint64(i + 1)}, Op: service.Op{Kind: "set", Key: fmt.Sprint("key", i), Args: [][]byte{val(n)}}})
		}
		return cs
	}
	group := []cmd{{ID: automaton.RequestID{Client: 9, Seq: 4}, Ops: []service.Op{set("a", "1"), get("b")}, Env: service.Env{Time: 3}, low: 2}}
	for _, tc := range []struct {
		name    string
		batches [][]cmd
	}{
		{"shorter length", [][]cmd{one(1, 100)}},
		{"same length", [][]cmd{many(16, 100)}},
		{"several", [][]cmd{one(1, 100), many(16, 100), one(2, 3), many(40, 2000)}},
		{"with a change", [][]cmd{one(1, 1), nil, many(3, 500)}},
		{"version 3", [][]cmd{group, one(3, 120)}},
	} {
		var entries, want []entry
		for k, b := range tc.batches {
			v := []byte("change-already-encoded")
			if b != nil {
				v = encodeBatch(b)
				if uvarintLen(uint64(len(v))) < uvarintLen(uint64(batchBound(b))) && tc.name == "same length" {
					t.Fatalf("%s: batch %d's length is shorter than its bound's", tc.name, k)
				}
				if uvarintLen(uint64(len(v))) == uvarintLen(uint64(batchBound(b))) && tc.name == "shorter length" {
					t.Fatalf("%s: batch %d's length is as long as its bound's", tc.name, k)
				}
			}
			want = append(want, entry{I: uint64(10 + k), Value: v})
			if b != nil {
				v = nil
			}
			entries = append(entries, entry{I: uint64(10 + k), Value: v})
		}
		ballot := Ballot{Round: 300, Node: 2}
		wantMsg := (&message{Kind: kindAccept, Ballot: ballot, Commit: 9, Entries: want}).marshal()
		m := &message{Kind: kindAccept, Ballot: ballot, Commit: 9, Entries: entries}
		got := marshalAccept(m, tc.batches)
		if !bytes.Equal(got, wantMsg) {
			t.Fatalf("%s: marshalAccept\n%x\nmarshal\n%x", tc.name, got, wantMsg)
		}
		start, end := uintptr(unsafe.Pointer(unsafe.SliceData(got))), uintptr(unsafe.Pointer(unsafe.SliceData(got)))+uintptr(len(got))
		for k, en := range m.Entries {
			if !bytes.Equal(en.Value, want[k].Value) || cap(en.Value) != len(en.Value) {
				t.Fatalf("%s: entry %d's value %x (cap %d), want %x capped", tc.name, k, en.Value, cap(en.Value), want[k].Value)
			}
			if p := uintptr(unsafe.Pointer(unsafe.SliceData(en.Value))); tc.batches[k] != nil && (p < start || p >= end) {
				t.Fatalf("%s: entry %d's value is not in the message", tc.name, k)
			}
		}
	}
}

// The leader's slots keep the values its Accepts carry, encoded once
// (broadcastAccept): each Accept's value is the slot's and encodeBatch of
// the slot's commands; with one member (no Accept to send) the slot's
// value is encoded all the same, and every node's log ends up with the
// leader's values.
func TestAcceptValuesKept(t *testing.T) {
	for _, n := range []int{3, 1} {
		c := newCluster(t, n, "kv", nil)
		c.elect("n1")
		l := c.node("n1")
		accepts := 0
		for i := range 20 {
			req := automaton.Request{ID: automaton.RequestID{Client: uint64(1 + i%3), Seq: uint64(1 + i/3)}, Op: set(fmt.Sprint("k", i), fmt.Sprint("value-", i))}
			for _, o := range c.Submit("n1", req) {
				s, ok := o.(automaton.Send)
				if !ok {
					continue
				}
				m, err := unmarshal(s.Msg)
				if err != nil || m.Kind != kindAccept {
					continue
				}
				accepts++
				for _, en := range m.Entries {
					sl := l.log[en.I]
					if sl == nil || !bytes.Equal(sl.val, en.Value) {
						t.Fatalf("%d nodes: instance %d: the Accept's value is not the slot's", n, en.I)
					}
					if w := encodeBatch(sl.cmds); !bytes.Equal(sl.val, w) {
						t.Fatalf("%d nodes: instance %d's value %x, want encodeBatch of its commands %x", n, en.I, sl.val, w)
					}
				}
			}
		}
		if n > 1 && accepts == 0 {
			t.Fatalf("%d nodes: no Accept sent", n)
		}
		c.DeliverAll()
		held := map[automaton.RequestID]bool{}
		for i, s := range l.log {
			cs, err := decodeBatch(s.val)
			if err != nil {
				t.Fatalf("%d nodes: instance %d's value: %v", n, i, err)
			}
			for _, c := range cs {
				held[c.ID] = true
			}
		}
		if len(held) != 20 {
			t.Fatalf("%d nodes: the leader's values hold %d requests, want the 20 submitted", n, len(held))
		}
		for _, f := range c.IDs()[1:] {
			for i, s := range l.log {
				if fs := c.node(f).log[i]; fs == nil || !bytes.Equal(fs.val, s.val) {
					t.Fatalf("%d nodes: %s's instance %d differs from the leader's", n, f, i)
				}
			}
		}
	}
}

// BenchmarkAcceptEncode: an Accept of 8 instances of 16 SETs of 100 bytes
// (a pipelined leader's, issue 28), each batch encoded on its own and
// copied by marshal (before session 56) or straight into the message
// (marshalAccept).
func BenchmarkAcceptEncode(b *testing.B) {
	var batches [][]cmd
	for i := range 8 {
		var cs []cmd
		for j := range 16 {
			cs = append(cs, cmd{ID: automaton.RequestID{Client: uint64(j + 1), Seq: uint64(i + 1)}, Op: service.Op{Kind: "set", Key: "key:__rand_int__", Args: [][]byte{bytes.Repeat([]byte{'x'}, 100)}}})
		}
		batches = append(batches, cs)
	}
	entries := make([]entry, len(batches))
	b.Run("copied", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			for k, cs := range batches {
				entries[k] = entry{I: uint64(k), Value: encodeBatch(cs)}
			}
			(&message{Kind: kindAccept, Ballot: Ballot{Round: 3, Node: 1}, Commit: 7, Entries: entries}).marshal()
		}
	})
	b.Run("in-place", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			for k := range batches {
				entries[k] = entry{I: uint64(k)}
			}
			marshalAccept(&message{Kind: kindAccept, Ballot: Ballot{Round: 3, Node: 1}, Commit: 7, Entries: entries}, batches)
		}
	})
}
