package pb

import (
	"flag"
	"reflect"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

var updateWire = flag.Bool("update-wire", false, "rewrite golden/wire.txt from the current encoders")

// TestWireGolden: every message kind and the boot record encode to the
// bytes recorded in golden/wire.txt, and decode back to what was encoded.
func TestWireGolden(t *testing.T) {
	op := service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}
	id := automaton.RequestID{Client: 0xabcdef, Seq: 9}
	v := proto.Ballot{Round: 3, Node: 2}
	members := []automaton.NodeID{"n2", "n3"}
	msgs := []struct {
		name string
		m    message
	}{
		{"update", message{Kind: kindUpdate, View: v, Index: 7, Stable: 6, ID: id, Payload: []byte("delta"), Out: outcome{res: service.OK()}}},
		{"update-snapshot-group", message{Kind: kindUpdate, View: v, Index: 8, Stable: 7, ID: id, Full: true, Payload: []byte("snap"),
			Out: outcome{res: service.OK(), results: []service.Result{service.OK(), service.Int(2)}}}},
		{"ack", message{Kind: kindAck, View: v, Index: 7}},
		{"ack-joined", message{Kind: kindAck, View: v, Index: 9, Joined: true, Nonce: 77}},
		{"heartbeat", message{Kind: kindHeartbeat, View: v, Prev: proto.Ballot{Round: 2, Node: 1}, Base: 5, Epoch: 1, Members: members, Index: 9, Stable: 8}},
		{"newview", message{Kind: kindNewView, View: v, Prev: proto.Ballot{Round: 2, Node: 1}, Base: 5, Members: members, Index: 5, Stable: 4}},
		{"stale", message{Kind: kindStale, View: v, Prev: proto.Ballot{Round: 2, Node: 1}, Base: 5, Members: members, Index: 9, Stable: 8}},
		{"join", message{Kind: kindJoin}},
		{"chunk", message{Kind: kindChunk, View: v, Nonce: 77, Index: 9, Offset: 64, Total: 200, Data: []byte("image bytes")}},
		{"chunk-ack", message{Kind: kindChunkAck, Nonce: 77, Offset: 128}},
		{"forward", message{Kind: kindForward, Req: automaton.Request{ID: id, Op: op, Env: service.Env{Time: 1700000000, Seed: 42}}}},
		{"forward-group", message{Kind: kindForward, Req: automaton.Request{ID: id, Ops: []service.Op{op, op}, Opts: automaton.Options{Read: automaton.ReadLocal}}}},
		{"reply", message{Kind: kindReply, ID: id, Out: outcome{res: service.Bytes([]byte("x"))}}},
		{"report", message{Kind: kindReport, View: v, Prev: proto.Ballot{Round: 2, Node: 1}, Base: 5, Epoch: 1, Members: members, Index: 9, Joined: true, Nonce: 1}},
	}
	var cases []proto.Encoded
	for _, c := range msgs {
		b := c.m.marshal()
		got, err := unmarshal(b)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		} else if !reflect.DeepEqual(got.marshal(), b) {
			t.Errorf("%s: does not round-trip", c.name)
		}
		cases = append(cases, proto.Encoded{Name: c.name, Bytes: b})
	}
	boot := marshalBoot(proto.Ballot{Round: 1, Node: 1})
	if v, err := unmarshalBoot(boot); err != nil || v != (proto.Ballot{Round: 1, Node: 1}) {
		t.Errorf("boot record: %v %v", v, err)
	}
	cases = append(cases, proto.Encoded{Name: "boot-record", Bytes: boot})
	vr := viewRecord{view: v, prev: proto.Ballot{Round: 2, Node: 1}, base: 5, epoch: 1, members: members, hasState: true}
	vb := vr.marshal()
	if got, err := unmarshalViewRecord(vb); err != nil || !reflect.DeepEqual(got, vr) {
		t.Errorf("view record: %+v %v", got, err)
	}
	cases = append(cases, proto.Encoded{Name: "view-record", Bytes: vb})
	en := entry{index: 7, id: id, payload: []byte("delta"), out: outcome{res: service.OK()}}
	eb := marshalEntry(en)
	if got, err := unmarshalEntry(eb); err != nil || !reflect.DeepEqual(marshalEntry(got), eb) {
		t.Errorf("entry record: %+v %v", got, err)
	}
	cases = append(cases, proto.Encoded{Name: "entry-record", Bytes: eb})
	if err := proto.CheckGolden("golden/wire.txt", cases, *updateWire); err != nil {
		t.Fatal(err)
	}
	if _, err := unmarshal([]byte{9, kindAck}); err == nil {
		t.Error("a message of another version decoded")
	}
	if _, err := unmarshal([]byte{1, 42}); err == nil {
		t.Error("an unknown kind decoded")
	}
}
