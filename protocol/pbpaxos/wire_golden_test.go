package pbpaxos

import (
	"flag"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

var updateWire = flag.Bool("update-wire", false, "rewrite golden/wire.txt from the current encoders")

// TestWireGolden: every message kind and record encodes to the bytes in
// golden/wire.txt (wire and disk compatibility) and decodes back.
func TestWireGolden(t *testing.T) {
	b := Ballot{Round: 3, Node: 2}
	id := automaton.RequestID{Client: 0xabc, Seq: 9}
	op := service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}
	cs := encodeCmds([]cmd{{Kind: cmdOp, ID: id, Op: op, Result: service.OK()}, {Kind: cmdNoop}})
	txnReq := automaton.Request{ID: id, Op: op, Txn: &automaton.TxnStep{Txn: id, Action: automaton.TxnOp}, Env: service.Env{Time: 5, Seed: 6}}
	msgs := []struct {
		name string
		m    message
	}{
		{"prepare", message{Kind: kindPrepare, Ballot: b, After: 90, Gaps: []uint64{88, 89}}},
		{"promise-ok", message{Kind: kindPromise, Ballot: b, OK: true, Commit: 87}},
		{"promise-state", message{Kind: kindPromise, Ballot: b, OK: true, Commit: 90, Entries: []entry{{I: 88, Bal: b, Known: true, Cmds: cs}}, StatePN: pn{b, 91}, State: []byte("st")}},
		{"accept", message{Kind: kindAccept, Ballot: b, Commit: 87, Entries: []entry{{I: 88, Cmds: cs, Kind: updCovered}, {I: 91, Cmds: cs, Kind: updFull, Upd: []byte("st")}}}},
		{"accepted", message{Kind: kindAccepted, Ballot: b, OK: true, Acks: []uint64{88, 91}, Commit: 87}},
		{"heartbeat", message{Kind: kindHeartbeat, Ballot: b, Commit: 91}},
		{"heartbeat-ack", message{Kind: kindHeartbeatAck, Ballot: b, OK: false, Promised: b, Commit: 4}},
		{"catchup-req", message{Kind: kindCatchupReq, Commit: 4}},
		{"snapshot", message{Kind: kindSnapshot, Commit: 91, StatePN: pn{b, 91}, State: []byte("st")}},
		{"forward", message{Kind: kindForward, Req: txnReq}},
		{"forward-reply", message{Kind: kindForwardReply, ID: id, Result: service.Int(3)}},
		{"read", message{Kind: kindRead, Req: automaton.Request{ID: id, Ops: []service.Op{op, op}}, Origin: "n2"}},
		{"confirm", message{Kind: kindConfirm, ID: id, Ballot: b}},
		{"read-reply", message{Kind: kindReadReply, ID: id, Result: service.Bytes([]byte("v"))}},
	}
	var cases []proto.Encoded
	for _, c := range msgs {
		e := c.m.marshal()
		if _, err := unmarshal(e); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		cases = append(cases, proto.Encoded{Name: c.name, Bytes: e})
	}
	slot := encodeSlotRec(&slot{bal: b, known: true, cmds: cs, kind: updDelta, upd: []byte("d")})
	if _, err := decodeSlotRec(slot); err != nil {
		t.Error(err)
	}
	snap := encodeSnapRec(91, pn{b, 91}, []byte("st"))
	if _, _, _, err := decodeSnapRec(snap); err != nil {
		t.Error(err)
	}
	cases = append(cases, proto.Encoded{Name: "slot-record", Bytes: slot}, proto.Encoded{Name: "snap-record", Bytes: snap},
		proto.Encoded{Name: "promise-record", Bytes: encodeBallotRec(b)}, proto.Encoded{Name: "commit-record", Bytes: encodeUintRec(91)},
		proto.Encoded{Name: "commands", Bytes: cs})
	if err := proto.CheckGolden("golden/wire.txt", cases, *updateWire); err != nil {
		t.Fatal(err)
	}
}
