package service

import (
	"fmt"
	"strings"
	"testing"

	"github.com/synod-dev/synod/shard"
)

// "slotstats slots" gives each slot's keys and bytes (split47): the sums
// are the plain form's, a collection counts 32 bytes an element, expired
// and reserved keys are left out, and only slots holding a key appear.
func TestSlotStatsPerSlot(t *testing.T) {
	s := newKVState()
	s.Apply(Op{Kind: "set", Key: "a{x}", Args: [][]byte{[]byte("12345")}})
	s.Apply(Op{Kind: "set", Key: "b{x}", Args: [][]byte{[]byte("1")}})
	s.Apply(Op{Kind: "sadd", Key: "c", Args: [][]byte{[]byte("m1"), []byte("m2")}})
	s.Apply(Op{Kind: "set", Key: shard.DirtyKey, Args: [][]byte{[]byte("r")}})
	plain := s.Apply(Op{Kind: "slotstats"})
	per := s.Apply(Op{Kind: "slotstats", Args: [][]byte{[]byte("slots")}})
	if len(plain.Elems) != 2 || len(per.Elems) != 3 || plain.Elems[0].Int != 3 || per.Elems[0].Int != plain.Elems[0].Int || per.Elems[1].Int != plain.Elems[1].Int {
		t.Fatalf("plain %v, per slot %v", plain, per)
	}
	x, c := shard.KeySlot("{x}"), shard.KeySlot("c")
	want := []string{fmt.Sprintf("%d:2:%d", x, 4+5+4+1), fmt.Sprintf("%d:1:%d", c, 1+64)}
	if x > c {
		want[0], want[1] = want[1], want[0]
	}
	if got := string(per.Elems[2].Bytes); got != strings.Join(want, " ") {
		t.Fatalf("per slot %q, want %q", got, strings.Join(want, " "))
	}
	if r := s.Apply(Op{Kind: "slotstats", Args: [][]byte{[]byte("x")}}); r.Type != ResultErr {
		t.Fatalf("slotstats x: %v, want an error", r)
	}
}
