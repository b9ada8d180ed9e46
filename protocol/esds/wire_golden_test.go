package esds

import (
	"flag"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

var updateWire = flag.Bool("update-wire", false, "rewrite golden/wire.txt from the current encoders")

// TestWireGolden: both gossip messages and the operation record encode to
// the bytes recorded in golden/wire.txt before the codec moved onto
// protocol/proto's header (wire and disk compatibility), and decode back.
func TestWireGolden(t *testing.T) {
	sop := service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}
	entries := []entry{
		{ID: "a", Prev: []string{"p1", "p2"}, Strict: true, Op: sop, Flags: flagDone | flagSolid, Label: Label{C: 3, R: 1, Set: true}},
		{ID: "b", Flags: flagGone},
		{ID: "c", Flags: flagDone | flagBare, Label: Label{C: 200, R: 0, Set: true}},
		{ID: "d", Op: sop},
	}
	msgs := []struct {
		name string
		m    message
	}{
		{"stream", message{Kind: kindStream, Inc: 99, Removed: 4, Stream: 7, From: 10, To: 13, AckStream: 5, AckSeq: 300, Entries: entries}},
		{"stream-empty", message{Kind: kindStream, Inc: 1, Stream: 1, From: 1, To: 0}},
		{"full", message{Kind: kindFull, Inc: 2, Entries: entries[:2]}},
		{"request", message{Kind: kindRequest, Inc: 3, Entries: []entry{{ID: "a", Prev: []string{"p1"}, Strict: true, Op: sop}}}},
		{"response", message{Kind: kindResponse, Inc: 4, Entries: []entry{{ID: "a", Flags: flagGone}}, Value: service.Bytes([]byte("v"))}},
		{"reserve", message{Kind: kindReserve, Inc: 5, Removed: 2, Seq: 9}},
		{"grant", message{Kind: kindGrant, Inc: 6, Seq: 9}},
		{"reject", message{Kind: kindReject, Inc: 6, Seq: 10}},
		{"initiate", message{Kind: kindInitiate, Inc: 5, Seq: 9, Inner: (&message{Kind: kindFull, Inc: 5, Entries: entries[:1]}).marshal()}},
		{"done", message{Kind: kindDone, Inc: 6, Seq: 9, AckStream: 7, AckSeq: 12}},
	}
	var cases []proto.Encoded
	for _, c := range msgs {
		b := c.m.marshal()
		if _, err := unmarshal(b); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		cases = append(cases, proto.Encoded{Name: c.name, Bytes: b})
	}
	aut, err := protocol{Capabilities: capabilities("esds", optParams, "")}.New(automaton.Config{Self: "n2", Nodes: []automaton.NodeID{"n1", "n2", "n3"}, Service: service.KV{}})
	if err != nil {
		t.Fatal(err)
	}
	a := aut.(*ESDS)
	o := &op{id: "x", prev: []string{"w"}, sop: sop, label: Label{C: 4, R: 1, Set: true}, solid: a.bit()}
	cases = append(cases, proto.Encoded{Name: "op-record", Bytes: a.marshalOp(o)})
	if err := proto.CheckGolden("golden/wire.txt", cases, *updateWire); err != nil {
		t.Fatal(err)
	}
}
