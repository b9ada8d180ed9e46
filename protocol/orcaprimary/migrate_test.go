package orcaprimary_test

import (
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/orca/programs"
	"github.com/synod-dev/synod/protocol/orcaprimary"
)

// A node that keeps writing an object gets its primary copy (§3.3): after
// migrate_after remote writes its writes cost no message; a node that still
// addresses the old primary is forwarded and sees every write.
func TestPrimaryMigratesToFrequentWriter(t *testing.T) {
	w, err := programs.NewWorld("orca-primary", 3, map[string]string{"migrate_after": "2", "retransmit": "1s", "replicate_after": "0"}, programs.Ethernet10, 1)
	if err != nil {
		t.Fatal(err)
	}
	ids := []automaton.NodeID{w.ID(0), w.ID(1), w.ID(2)}
	key := "x"
	for i := 0; orcaprimary.InitialPrimary(ids, key) != ids[0]; i++ {
		key = "x" + string(rune('a'+i))
	}
	phase := func(node int, f func(p *programs.Proc)) {
		t.Helper()
		if err := w.Phase(node, "p", f, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	inc := orca.Call("int", key, "inc", orca.Int(1))
	phase(0, func(p *programs.Proc) { p.Must(orca.New("int", key)) })
	phase(1, func(p *programs.Proc) { p.Must(inc); p.Must(inc) }) // two remote writes: the primary moves to n2
	before := w.Stats.Sends
	phase(1, func(p *programs.Proc) { p.Must(inc) })
	if s := w.Stats.Sends - before; s != 0 {
		t.Fatalf("a write at the migrated primary sent %d messages", s)
	}
	// n3 still addresses n1; n1 forwards to n2, which answers n3 directly.
	before = w.Stats.Sends
	var got int64
	phase(2, func(p *programs.Proc) { got = p.Must(inc).Int })
	if got != 4 {
		t.Fatalf("n3's write through the old primary returned %d, want 4", got)
	}
	if s := w.Stats.Sends - before; s != 3 {
		t.Fatalf("forwarded write: %d messages, want 3 (n3→n1, n1→n2, n2→n3)", s)
	}
	// n3 now knows n2: a read goes there directly.
	before = w.Stats.Sends
	phase(2, func(p *programs.Proc) { got = p.Must(orca.Call("int", key, "value")).Int })
	if got != 4 || w.Stats.Sends-before != 2 {
		t.Fatalf("read after learning the location: %d in %d messages", got, w.Stats.Sends-before)
	}
	// With migrate_after=0 the primary stays: n2's writes stay remote.
	w2, _ := programs.NewWorld("orca-primary", 3, map[string]string{"retransmit": "1s", "replicate_after": "0", "migrate_after": "0"}, programs.Ethernet10, 1)
	if err := w2.Phase(0, "p", func(p *programs.Proc) { p.Must(orca.New("int", key)) }, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := w2.Phase(1, "p", func(p *programs.Proc) { p.Must(inc); p.Must(inc); p.Must(inc) }, time.Hour); err != nil {
		t.Fatal(err)
	}
	if w2.Stats.Sends != 6 {
		t.Fatalf("no migration: %d messages for three remote writes, want 6", w2.Stats.Sends)
	}
}

// The two records of a hand-over are written new-first: the old primary
// persists its forwarding pointer before it deletes its copy, and the new
// one its copy before it deletes its old pointer. A crash that keeps only
// the first of the two (a runtime makes both durable before the migrate
// goes out, but may lose a suffix of them) then leaves the old primary
// holding its copy. Written the other way round, it kept only the delete:
// the node forgot the object, and as its initial primary would have
// created it anew, empty.
func TestHandOverRecordsNewFirst(t *testing.T) {
	c := harness.New(t, harness.Options{Protocol: "orca-primary", Nodes: 3,
		Service: &orca.Service{Types: orca.Builtin},
		Params:  map[string]string{"migrate_after": "1", "replicate_after": "0"}})
	ids := c.IDs()
	from := orcaprimary.InitialPrimary(ids, "x")
	writer := ids[0]
	if writer == from {
		writer = ids[1]
	}
	do(t, c, from, orca.New("int", "x"))
	before := c.Disk(from)
	type put struct {
		key string
		del bool
		val []byte
	}
	var puts []put
	c.Observe(func(id automaton.NodeID, o automaton.Output) {
		if p, ok := o.(automaton.Persist); ok && id == from {
			puts = append(puts, put{p.Key, p.Delete, p.Value})
		}
	})
	do(t, c, writer, orca.Call("int", "x", "assign", orca.Int(5))) // one remote write: the primary moves
	c.Observe(nil)
	first := -1
	for i, p := range puts {
		if (p.key == "o/x" && p.del) || p.key == "f/x" {
			first = i
			break
		}
	}
	if first < 0 {
		t.Fatalf("no hand-over records at %s: %v", from, puts)
	}
	// The crash: everything before the hand-over, and its first record.
	c.Crash(from)
	c.Wipe(from)
	for k, v := range before {
		c.SetRecord(from, k, v)
	}
	for _, p := range puts[:first+1] {
		if p.del {
			c.SetRecord(from, p.key, nil)
		} else {
			c.SetRecord(from, p.key, p.val)
		}
	}
	c.Restart(from)
	pl := c.Node(from).(*orcaprimary.Primary).Placement()["x"]
	if !strings.HasPrefix(pl, "primary=") || !strings.Contains(pl, "version=2") { // new, then the write that moved it
		t.Fatalf("after a crash that kept the hand-over's first record (%s, delete=%v), %s holds x as %q: the object is lost",
			puts[first].key, puts[first].del, from, pl)
	}
}
