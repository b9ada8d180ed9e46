package node

import (
	"fmt"
	"testing"

	"github.com/synod-dev/synod/automaton"
)

// A commit of several batches lists their records in order in the
// committer's kept buffer (groupRecs): after the first, such a commit
// allocates no list; a lone batch's records are committed as they are.
func TestGroupRecsReusesList(t *testing.T) {
	l := &nsLoop{}
	var group []*batch
	n := 0
	for i := 0; i < 3; i++ {
		b := &batch{}
		for j := 0; j < 20; j++ {
			b.persists = append(b.persists, automaton.Persist{Key: fmt.Sprintf("k%d", n)})
			n++
		}
		group = append(group, b)
	}
	recs := l.groupRecs(group)
	if len(recs) != n {
		t.Fatalf("%d records, want %d", len(recs), n)
	}
	for i, r := range recs {
		if r.Key != fmt.Sprintf("k%d", i) {
			t.Fatalf("record %d is %q: out of order", i, r.Key)
		}
	}
	l.keepRecs(recs, group)
	if a := testing.AllocsPerRun(50, func() {
		l.keepRecs(l.groupRecs(group), group)
	}); a != 0 {
		t.Fatalf("a group commit's record list: %.1f allocations after the first, want 0", a)
	}
	lone := group[:1]
	if r := l.groupRecs(lone); &r[0] != &lone[0].persists[0] {
		t.Fatal("a lone batch's records were copied")
	}
	// A list grown past maxCommitRecs is not kept.
	big := &batch{persists: make([]automaton.Persist, maxCommitRecs+1)}
	l.keepRecs(l.groupRecs([]*batch{big, group[0]}), []*batch{big, group[0]})
	if cap(l.commitRecs) > maxCommitRecs {
		t.Fatalf("kept a list of capacity %d, over %d", cap(l.commitRecs), maxCommitRecs)
	}
}
