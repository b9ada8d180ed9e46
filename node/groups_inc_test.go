package node

import (
	"slices"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/wire"
)

// incGroups are three groups of namespace default: s0 and s1 declared in
// the cluster file, s2 created at run time (no file nodes).
func incGroups() []config.Group {
	return []config.Group{
		{Namespace: config.Namespace{Name: "default#s0"}, Parent: "default", Nodes: []automaton.NodeID{"n1", "n2", "n3"}},
		{Namespace: config.Namespace{Name: "default#s1"}, Parent: "default", Index: 1, Nodes: []automaton.NodeID{"n4", "n5", "n6"}},
		{Namespace: config.Namespace{Name: "default#s2"}, Parent: "default", Index: 2},
	}
}

// The members record's incarnation field (session 49): "<index>@<inc>:"
// names a created group's incarnation, "<index>@<inc>:" with no members a
// retired one (unplaced at that incarnation); both round-trip; a declared
// group cannot have one, and a bad one is refused.
func TestMembersRecordIncarnation(t *testing.T) {
	groups := incGroups()
	text := "0:n1,n2,n3 2@3:n4,n5,n6^n4,n5,n6"
	r, err := parseMembersRecord(text, groups)
	if err != nil || r.inc[2] != 3 || r.inc[0] != 0 || !slices.Equal(r.members[2], []automaton.NodeID{"n4", "n5", "n6"}) || !slices.Equal(r.boot[2], r.members[2]) {
		t.Fatalf("parsed %q: %+v %v", text, r, err)
	}
	if got := formatMembersRecord(r.members, nil, nil, r.former, r.boot, r.inc); got != text {
		t.Fatalf("formatted %q, want %q", got, text)
	}
	retired := "0:n1,n2,n3 2@4:"
	r, err = parseMembersRecord(retired, groups)
	if err != nil || r.inc[2] != 4 || r.members[2] != nil || len(r.hosts[2]) != 0 {
		t.Fatalf("parsed %q: %+v %v", retired, r, err)
	}
	if got := formatMembersRecord(r.members, nil, nil, r.former, r.boot, r.inc); got != retired {
		t.Fatalf("formatted %q, want %q", got, retired)
	}
	for _, bad := range []string{"0@1:n1,n2,n3", "2@0:n4", "2@x:n4", "2@:n4", "2@1"} {
		if _, err := parseMembersRecord(bad, groups); err == nil {
			t.Errorf("record %q accepted", bad)
		}
	}
}

// incNode is node n4 hosting loops of s2's incarnation 0 and 3, with a
// view (the members record "0:n1,n2,n3 2@3:n4,n5,n6^n4,n5,n6") that makes
// s2 incarnation 3 on n4-n6; both loops claim n4 leads them.
func incNode(t *testing.T) (*Node, *shardedNS) {
	t.Helper()
	groups := incGroups()
	s := &shardedNS{ns: config.Namespace{Name: "default"}, groups: groups, index: map[string]int{}}
	n := &Node{id: "n4", shards: map[string]*shardedNS{"default": s}, groupOf: map[string]*shardedNS{}}
	n.lt.m = map[string]*nsLoop{}
	for i, g := range groups {
		s.index[g.Namespace.Name] = i
		n.groupOf[g.Namespace.Name] = s
	}
	r, err := parseMembersRecord("0:n1,n2,n3 2@3:n4,n5,n6^n4,n5,n6", groups)
	if err != nil {
		t.Fatal(err)
	}
	v := initialView(groups)
	v.members, v.hosts, v.boot = r.members, r.hosts, r.boot
	v.setInc(groups, r.inc)
	s.cur.Store(v)
	self := automaton.NodeID("n4")
	for _, name := range []string{"default#s2", "default#s2@3", "default#s1"} {
		l := &nsLoop{ns: config.Namespace{Name: name}}
		l.leader.Store(&self)
		l.term.Store(7)
		n.lt.m[name] = l
	}
	return n, s
}

// A group is addressed by its incarnated name (session 49): its loop, its
// forwarded requests and its leader gossip name "default#s2@3", and a
// loop of an earlier incarnation left on the node neither serves nor is
// claimed: without the incarnation in the name, n4's old replica of s2
// would serve the new group's requests and claim its leadership.
func TestIncarnatedGroupNames(t *testing.T) {
	n, s := incNode(t)
	if got := s.name(2); got != "default#s2@3" {
		t.Fatalf("s2's name %q, want default#s2@3", got)
	}
	if got := s.group(2).Namespace.Name; got != "default#s2@3" {
		t.Fatalf("s2's group name %q", got)
	}
	if got := s.name(0); got != "default#s0" {
		t.Fatalf("s0's name %q (incarnation 0 is the plain name)", got)
	}
	if x, gi := n.shardIndex("default#s2@3"); x != s || gi != 2 {
		t.Fatalf("shardIndex(default#s2@3) = %v, %d", x, gi)
	}
	if x, _ := n.shardIndex("default#s2"); x != nil {
		t.Fatal("the earlier incarnation default#s2 is taken for the group")
	}
	if !n.serves("default#s2@3") {
		t.Fatal("n4 does not serve s2's incarnation 3")
	}
	if n.serves("default#s2") {
		t.Fatal("n4's replica of s2's incarnation 0 serves the group")
	}
	// Leader gossip names the incarnation, and only the current one.
	msg := n.leaderClaims()
	d := wire.NewDecoder(msg)
	if d.Byte() != fwdLeaders {
		t.Fatal("not a gossip frame")
	}
	var claimed []string
	for k := d.Uvarint(); k > 0; k-- {
		claimed = append(claimed, d.String())
		d.Uvarint()
	}
	if want := []string{"default#s1", "default#s2@3"}; !slices.Equal(claimed, want) {
		t.Fatalf("n4 claims %v, want %v", claimed, want)
	}
}
