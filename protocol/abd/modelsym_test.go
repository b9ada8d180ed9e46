package abd

import (
	"bytes"
	"testing"

	"github.com/synod-dev/synod/automaton"
)

// TestModelNodeRenaming: the renamings mc's node symmetry relies on rename
// a tag's writer in messages, records, the automaton's encoding and the
// checker's, permute an operation's replies, and leave what names no node
// as it is. (With ABD's groups, coordinators are never renamed in a
// search, so the tags' renaming is checked here.)
func TestModelNodeRenaming(t *testing.T) {
	ids := []automaton.NodeID{"n1", "n2", "n3"}
	swap := &automaton.NodeRenaming{IDs: ids, Perm: []int{1, 0, 2}} // n1 <-> n2
	a := &ABD{}
	tag := Tag{TS: 3, Node: "n1", Seq: 7}

	store := (&message{Kind: kindStore, Op: 9, Key: "x", Tag: tag, Value: []byte("v")}).marshal()
	m, err := unmarshal(a.RenameModelMessage(store, swap))
	if err != nil || m.Tag.Node != "n2" || m.Tag.TS != 3 || m.Tag.Seq != 7 || string(m.Value) != "v" || m.Op != 9 {
		t.Fatalf("renamed store: %+v, %v", m, err)
	}
	if q := (&message{Kind: kindQuery, Op: 9, Key: "x"}).marshal(); !bytes.Equal(a.RenameModelMessage(q, swap), q) {
		t.Fatal("a query names no node but was rewritten")
	}
	if same := (&message{Kind: kindStore, Op: 9, Key: "x", Tag: Tag{TS: 1, Node: "n3"}}).marshal(); !bytes.Equal(a.RenameModelMessage(same, swap), same) {
		t.Fatal("a tag of n3, which the renaming fixes, was rewritten")
	}
	rec := (&entry{Tag: tag, Value: []byte("v")}).marshal()
	e, err := unmarshalEntry(a.RenameModelRecord("k/x", rec, swap))
	if err != nil || e.Tag.Node != "n2" || string(e.Value) != "v" {
		t.Fatalf("renamed record: %+v, %v", e, err)
	}
	if inc := []byte{0, 0, 0, 0, 0, 0, 0, 1}; !bytes.Equal(a.RenameModelRecord("inc", inc, swap), inc) {
		t.Fatal("the incarnation record was rewritten")
	}

	// The automaton: its store's tag and an operation's replies.
	x := &ABD{store: map[string]*entry{"x": {Tag: tag, Value: []byte("v")}}, ops: map[uint64]*op{
		5: {id: 5, replied: []bool{true, false, false}, max: entry{Tag: tag}}}}
	y := &ABD{store: map[string]*entry{"x": {Tag: Tag{TS: 3, Node: "n2", Seq: 7}, Value: []byte("v")}}, ops: map[uint64]*op{
		5: {id: 5, replied: []bool{false, true, false}, max: entry{Tag: Tag{TS: 3, Node: "n2", Seq: 7}}}}}
	if !bytes.Equal(x.AppendRenamedModelState(nil, nil, swap), y.AppendModelState(nil, nil)) {
		t.Fatal("x renamed does not encode as y")
	}
	if bytes.Equal(x.AppendModelState(nil, nil), y.AppendModelState(nil, nil)) {
		t.Fatal("x and y encode alike unrenamed")
	}

	// The checker: maps keyed by node, tags per key.
	c := &checker{inc: map[automaton.NodeID]*ABD{"n1": x}, last: map[automaton.NodeID]map[string]Tag{"n1": {"x": tag}},
		floor: map[automaton.NodeID]map[string]Tag{}, vals: map[string]map[Tag]string{"x": {tag: "vv"}}}
	d := &checker{inc: map[automaton.NodeID]*ABD{"n2": x}, last: map[automaton.NodeID]map[string]Tag{"n2": {"x": Tag{TS: 3, Node: "n2", Seq: 7}}},
		floor: map[automaton.NodeID]map[string]Tag{}, vals: map[string]map[Tag]string{"x": {Tag{TS: 3, Node: "n2", Seq: 7}: "vv"}}}
	ref := func(automaton.Automaton) int { return 0 }
	if !bytes.Equal(c.AppendRenamedModelState(nil, func(automaton.Automaton) int { return swap.Index(0) }, nil, swap), d.AppendModelState(nil, func(automaton.Automaton) int { return 1 }, nil)) {
		t.Fatal("the checker renamed does not encode as its renaming")
	}
	if bytes.Equal(c.AppendModelState(nil, ref, nil), d.AppendModelState(nil, ref, nil)) {
		t.Fatal("the two checkers encode alike unrenamed")
	}

	// Groups: the nodes no client sends to.
	if g := (protocol{}).ModelNodeGroups(ids, []bool{true, false, false}); len(g) != 1 || len(g[0]) != 2 || g[0][0] != 1 || g[0][1] != 2 {
		t.Fatalf("groups %v, want [[1 2]]", g)
	}
	if g := (protocol{}).ModelNodeGroups(ids, []bool{true, true, false}); g != nil {
		t.Fatalf("groups %v, want none (one free node)", g)
	}
}
