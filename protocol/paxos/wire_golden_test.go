package paxos

import (
	"flag"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

var updateWire = flag.Bool("update-wire", false, "rewrite golden/wire.txt from the current encoders")

// TestWireGolden: every message kind and the records encode to the bytes
// recorded in golden/wire.txt before the codec moved onto
// protocol/proto's header and ballot (wire and disk compatibility), and
// decode back.
func TestWireGolden(t *testing.T) {
	b := Ballot{Round: 300, Node: 2}
	op := service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}
	id := automaton.RequestID{Client: 0xabcdef, Seq: 9}
	env := service.Env{Time: 1700000000, Seed: 42}
	entries := []entry{{I: 5, Ballot: b, Chosen: true, Value: []byte("x")}, {I: 6, Ballot: Ballot{Round: 1, Node: 1}, Value: nil}}
	msgs := []struct {
		name string
		m    message
	}{
		{"prepare", message{Kind: kindPrepare, Ballot: b, From: 17}},
		{"promise", message{Kind: kindPromise, Ballot: b, OK: true, Promised: b, Commit: 4, Entries: entries}},
		{"promise-refused", message{Kind: kindPromise, Ballot: b, Promised: Ballot{Round: 301, Node: 1}}},
		{"accept", message{Kind: kindAccept, Ballot: b, Commit: 4, Entries: []entry{{I: 5, Value: []byte("x")}, {I: 6, Value: []byte("yy")}}}},
		{"accepted", message{Kind: kindAccepted, Ballot: b, OK: true, Acks: []uint64{5, 6, 200}}},
		{"heartbeat", message{Kind: kindHeartbeat, Ballot: b, Commit: 1000, Round: 77}},
		{"heartbeat-ack", message{Kind: kindHeartbeatAck, Ballot: b, OK: true, Promised: b, Round: 77, Commit: 999}},
		{"catchup-req", message{Kind: kindCatchupReq, From: 3, To: 300}},
		{"catchup", message{Kind: kindCatchup, Ballot: b, Commit: 7, Entries: []entry{{I: 7, Value: []byte("z")}}}},
		{"snapshot", message{Kind: kindSnapshot, Index: 20000, Data: []byte("state")}},
		{"forward", message{Kind: kindForward, Req: automaton.Request{ID: id, Op: op}}},
		{"forward-env-group", message{Kind: kindForward, Req: automaton.Request{ID: id, Ops: []service.Op{op, op}, Env: env}}},
		{"forward-nested", message{Kind: kindForward, Req: automaton.Request{ID: id, Op: op, Nested: true}}},
		{"forward-reply", message{Kind: kindForwardReply, Req: automaton.Request{ID: id}, Result: service.OK()}},
		{"forward-reply-group", message{Kind: kindForwardReply, Req: automaton.Request{ID: id}, Result: service.OK(), Results: []service.Result{service.OK(), service.Int(3)}}},
		{"take-over", message{Kind: kindTakeOver, Ballot: b, OK: true, Commit: 12}},
	}
	var cases []proto.Encoded
	for _, c := range msgs {
		enc := c.m.marshal()
		if _, err := unmarshal(enc); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		cases = append(cases, proto.Encoded{Name: c.name, Bytes: enc})
	}
	recs := []proto.Encoded{
		{Name: "slot-record", Bytes: encodeSlot(&slot{bal: b, val: []byte("v"), chosen: true})},
		{Name: "ballot-record", Bytes: encodeBallotRec(b)},
		{Name: "uint-record", Bytes: encodeUint(1 << 20)},
		{Name: "batch-plain", Bytes: encodeBatch([]cmd{{ID: id, Op: op}})},
		{Name: "batch-v3", Bytes: encodeBatch([]cmd{{ID: id, Ops: []service.Op{op}, Env: env}})},
		{Name: "batch-nested", Bytes: encodeBatch([]cmd{{ID: id, Op: op, nested: true}})},
		{Name: "noop", Bytes: noop},
	}
	if _, err := decodeSlot(recs[0].Bytes); err != nil {
		t.Error(err)
	}
	if got, err := unmarshalBallotRec(recs[1].Bytes); err != nil || got != b {
		t.Errorf("ballot record: %v %v", got, err)
	}
	if got, err := decodeUint(recs[2].Bytes); err != nil || got != 1<<20 {
		t.Errorf("uint record: %v %v", got, err)
	}
	cases = append(cases, recs...)
	if err := proto.CheckGolden("golden/wire.txt", cases, *updateWire); err != nil {
		t.Fatal(err)
	}
}
