package paxos

import (
	"reflect"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// TestKeptCmds: the commands a leader keeps for execution are what
// decoding its batch gives (keptCmds against decodeBatch(encodeBatch)),
// for capped arguments kept as they are, empty argument lists and
// arguments, arguments with spare capacity, groups, environments and the
// nested flag; and a kept capped argument is the request's own slice (no
// copy); a group's list is the request's own when every operation is kept
// as it is (no list allocated per group), and a copy, leaving the
// request's unchanged, when one of them is not.
func TestKeptCmds(t *testing.T) {
	capped := func(s string) []byte { b := []byte(s); return b[:len(b):len(b)] }
	spare := append(make([]byte, 0, 64), "spare"...)
	val := capped("value")
	reqOps := []service.Op{{Kind: "set", Key: "a", Args: [][]byte{capped("1")}}, {Kind: "incr", Key: "b", Args: [][]byte{}}}
	plainOps := []service.Op{{Kind: "set", Key: "a", Args: [][]byte{capped("1")}}, {Kind: "get", Key: "b"}, {Kind: "set", Key: "c", Args: [][]byte{capped("2"), capped("nx")}}}
	mk := func() []cmd {
		return []cmd{
			{ID: automaton.RequestID{Client: 1, Seq: 1}, Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{val}}},
			{ID: automaton.RequestID{Client: 1, Seq: 2}, Op: service.Op{Kind: "get", Key: "k", Args: [][]byte{}}},
			{ID: automaton.RequestID{Client: 2, Seq: 1}, Op: service.Op{Kind: "set", Key: "e", Args: [][]byte{capped("x"), {}}}},
			{ID: automaton.RequestID{Client: 3, Seq: 1}, Op: service.Op{Kind: "append", Key: "s", Args: [][]byte{spare}}, nested: true},
			{ID: automaton.RequestID{Client: 4, Seq: 1}, Ops: reqOps, Env: service.Env{Time: 7}},
			{ID: automaton.RequestID{Client: 5, Seq: 1}, Ops: plainOps},
		}
	}
	want, err := decodeBatch(encodeBatch(mk()))
	if err != nil {
		t.Fatal(err)
	}
	got := keptCmds(mk())
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("kept %#v\ndecoded %#v", got, want)
	}
	for _, c := range got {
		for _, a := range c.Op.Args {
			if cap(a) != len(a) {
				t.Fatalf("%s: argument %q with spare capacity %d", c.Op.Kind, a, cap(a))
			}
		}
	}
	if &got[0].Op.Args[0][0] != &val[0] {
		t.Fatal("a capped argument was copied")
	}
	if &got[4].Ops[0] == &reqOps[0] || reqOps[1].Args == nil {
		t.Fatal("a group list with an operation to copy was changed or kept")
	}
	if &got[5].Ops[0] != &plainOps[0] {
		t.Fatal("a group list whose operations are all kept as they are was copied")
	}
}
