package config

import (
	"strings"
	"testing"
)

const shardedFile = `
cluster: c
durability: memory
nodes:
  - {id: n1, peer: 127.0.0.1:7001, client: 127.0.0.1:6001}
  - {id: n2, peer: 127.0.0.1:7002, client: 127.0.0.1:6002}
  - {id: n3, peer: 127.0.0.1:7003, client: 127.0.0.1:6003}
  - {id: n4, peer: 127.0.0.1:7004, client: 127.0.0.1:6004}
namespaces:
  - name: default
    protocol: paxos
    service: kv
    shards:
      - {name: s0, slots: SLOTS0, nodes: [n1, n2, n3]}
      - {name: s1, slots: SLOTS1, nodes: NODES1}
  - name: plain
    protocol: paxos
    service: kv
`

func sharded(slots0, slots1, nodes1 string) string {
	return strings.NewReplacer("SLOTS0", slots0, "SLOTS1", slots1, "NODES1", nodes1).Replace(shardedFile)
}

func TestShardsValid(t *testing.T) {
	c, err := Parse([]byte(sharded("0-8191", "8192-16383", "[n2, n3, n4]")))
	if err != nil {
		t.Fatal(err)
	}
	gs := c.Groups()
	var names []string
	for _, g := range gs {
		names = append(names, g.Namespace.Name+":"+strings.Join(func() []string {
			var s []string
			for _, n := range g.Nodes {
				s = append(s, string(n))
			}
			return s
		}(), ","))
	}
	if got := strings.Join(names, " "); got != "default#s0:n1,n2,n3 default#s1:n2,n3,n4 plain:n1,n2,n3,n4 #placement:n1,n2,n3" {
		t.Fatalf("groups = %s", got)
	}
	m := SlotMap(c.Namespaces[0])
	if m.Owner[8191] != 0 || m.Owner[8192] != 1 {
		t.Fatal("slot map")
	}
}

func TestShardsInvalid(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{sharded("0-8191", "8193-16383", "[n2, n3, n4]"), "slots 8192 are owned by no group"},
		{sharded("0-8192", "8192-16383", "[n2, n3, n4]"), "slot 8192 is owned by groups 0 and 1"},
		{sharded("0-8191", "8192-16384", "[n2, n3, n4]"), `"16384" is not a slot`},
		{sharded("0-8191", "8192-16383", "[n2, n9]"), `node "n9" is not in this cluster`},
		{sharded("0-8191", "8192-16383", "[n2, n2]"), `node "n2" listed twice`},
		{sharded("0-8191", "8192-16383", "[]"), "at least one node is required"},
	} {
		_, err := Parse([]byte(c.file))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want %q, got %v", c.want, err)
		}
	}
}

// TestIncarnationName: incarnation 0 is the plain name (no stored data
// moves), a later one "<name>@<inc>", and parsing inverts both.
func TestIncarnationName(t *testing.T) {
	for _, c := range []struct {
		name string
		inc  uint64
		want string
	}{{"default#s2", 0, "default#s2"}, {"default#s2", 3, "default#s2@3"}, {"#placement", 0, "#placement"}} {
		got := IncarnationName(c.name, c.inc)
		if got != c.want {
			t.Errorf("IncarnationName(%q, %d) = %q, want %q", c.name, c.inc, got, c.want)
		}
		if n, i := SplitIncarnation(got); n != c.name || i != c.inc {
			t.Errorf("SplitIncarnation(%q) = %q, %d, want %q, %d", got, n, i, c.name, c.inc)
		}
	}
	for _, bad := range []string{"default#s2@", "default#s2@x", "default#s2@0"} {
		if n, i := SplitIncarnation(bad); n != bad || i != 0 {
			t.Errorf("SplitIncarnation(%q) = %q, %d, want the name whole at 0", bad, n, i)
		}
	}
}
