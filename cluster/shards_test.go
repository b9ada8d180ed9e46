package cluster

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/shard"
)

func TestShardLayout(t *testing.T) {
	got := func(nodes, shards, replicas int) string {
		t.Helper()
		l, err := ShardLayout(nodes, shards, replicas)
		if err != nil {
			t.Fatal(err)
		}
		var parts []string
		var slots [][]shard.Range
		for _, s := range l {
			parts = append(parts, s.Name+"="+s.Slots+":"+strings.Join(s.Nodes, ","))
			rs, err := shard.ParseSlots(s.Slots)
			if err != nil {
				t.Fatal(err)
			}
			slots = append(slots, rs)
		}
		if err := shard.Check(slots); err != nil {
			t.Fatalf("layout %d/%d: %v", nodes, shards, err)
		}
		return strings.Join(parts, " ")
	}
	if s := got(9, 3, 3); s != "s0=0-5460:n1,n2,n3 s1=5461-10922:n4,n5,n6 s2=10923-16383:n7,n8,n9" {
		t.Fatalf("9 nodes, 3 shards: %s", s)
	}
	if s := got(3, 3, 3); s != "s0=0-5460:n1,n2,n3 s1=5461-10922:n2,n3,n1 s2=10923-16383:n3,n1,n2" {
		t.Fatalf("3 nodes, 3 shards: %s", s)
	}
	got(5, 8, 3)
	if _, err := ShardLayout(3, 2, 4); err == nil {
		t.Fatal("4 replicas on 3 nodes accepted")
	}
	if _, err := ShardLayout(3, 0, 3); err == nil {
		t.Fatal("0 shards accepted")
	}
}
