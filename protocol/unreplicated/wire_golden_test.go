package unreplicated

import (
	"flag"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

var updateWire = flag.Bool("update-wire", false, "rewrite golden/wire.txt from the current encoders")

// TestWireGolden: both messages and both records encode to the bytes
// recorded in golden/wire.txt before the codec moved onto
// protocol/proto's header (wire and disk compatibility), and decode back.
func TestWireGolden(t *testing.T) {
	op := service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}
	env := service.Env{Time: 1700000000, Seed: 42}
	id := automaton.RequestID{Client: 0xabcdef, Seq: 9}
	msgs := []struct {
		name string
		m    message
	}{
		{"forward", message{Kind: kindForward, Inc: 5, Seq: 300, Req: id, Op: op}},
		{"forward-group-env", message{Kind: kindForward, Inc: 5, Seq: 301, Req: id, Ops: []service.Op{op, op}, Env: env}},
		{"reply", message{Kind: kindReply, Inc: 5, Seq: 300, Result: service.OK()}},
		{"reply-group", message{Kind: kindReply, Inc: 5, Seq: 301, Result: service.OK(), Results: []service.Result{service.OK(), service.Int(2)}}},
	}
	var cases []proto.Encoded
	for _, c := range msgs {
		b := c.m.marshal()
		if _, err := unmarshal(b); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		cases = append(cases, proto.Encoded{Name: c.name, Bytes: b})
	}
	w := writeRecord{Op: op, Env: env}.marshal()
	s := marshalSnap(40, []byte("state"))
	if _, err := unmarshalWrite(w); err != nil {
		t.Error(err)
	}
	if _, _, err := unmarshalSnap(s); err != nil {
		t.Error(err)
	}
	cases = append(cases, proto.Encoded{Name: "write-record", Bytes: w}, proto.Encoded{Name: "snap-record", Bytes: s})
	if err := proto.CheckGolden("golden/wire.txt", cases, *updateWire); err != nil {
		t.Fatal(err)
	}
}
