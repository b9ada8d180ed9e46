package pb

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
)

// TestViewRecordWithoutStateView: a view record written before the state's
// view was kept (before takeover.go) still opens, with the zero ballot as
// its state's view; a record cut inside that field is still corrupt.
func TestViewRecordWithoutStateView(t *testing.T) {
	r := viewRecord{view: proto.Ballot{Round: 4, Node: 2}, prev: proto.Ballot{Round: 3, Node: 1}, base: 7, epoch: 2,
		members: []automaton.NodeID{"n1", "n2", "n3"}, hasState: true, sv: proto.Ballot{Round: 4, Node: 2}}
	got, err := unmarshalViewRecord(r.marshal())
	if err != nil || got.sv != r.sv || got.view != r.view || got.prev != r.prev || !got.hasState || len(got.members) != 3 {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	old := r
	old.sv = proto.Ballot{}
	b := old.marshal()
	b = b[:len(b)-2] // the zero ballot is two one-byte varints: the old format ends before it
	got, err = unmarshalViewRecord(b)
	if err != nil {
		t.Fatalf("a record of the old format: %v", err)
	}
	if got.sv != (proto.Ballot{}) || got.view != r.view || got.epoch != r.epoch || !got.hasState || len(got.members) != 3 {
		t.Fatalf("a record of the old format read as %+v", got)
	}
	cut := r.marshal()
	if _, err := unmarshalViewRecord(cut[:len(cut)-1]); err == nil {
		t.Fatal("a record cut inside the state's view was read")
	}
}
