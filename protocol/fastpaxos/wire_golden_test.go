package fastpaxos

import (
	"flag"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

var updateWire = flag.Bool("update-wire", false, "rewrite golden/wire.txt from the current encoders")

// TestWireGolden: every message kind, value and record encodes to the
// bytes recorded in golden/wire.txt (wire and disk compatibility) and
// decodes back to the same encoding.
func TestWireGolden(t *testing.T) {
	b := Ballot{Round: 300, Node: 4}
	req := automaton.Request{ID: automaton.RequestID{Client: 0xabcdef, Seq: 9}, Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}}
	val := encodeValue(req)
	votes := []entry{{I: 5, Ballot: b, Value: val}, {I: 6}}
	msgs := []struct {
		name string
		m    message
	}{
		{"prepare", message{Kind: kindPrepare, Ballot: b, From: 17}},
		{"promise", message{Kind: kindPromise, Ballot: b, OK: true, Entries: votes}},
		{"promise-refused", message{Kind: kindPromise, Ballot: b, Promised: Ballot{Round: 301, Node: 2}}},
		{"any", message{Kind: kindAny, Ballot: b, From: 7, Commit: 6}},
		{"propose", message{Kind: kindPropose, Req: req}},
		{"accept", message{Kind: kindAccept, Ballot: recoveryOf(b), Entries: []entry{{I: 5, Value: val}, {I: 6, Value: noop}}}},
		{"voted", message{Kind: kindVoted, Entries: votes[:1]}},
		{"refuse", message{Kind: kindRefuse, Ballot: b, Promised: recoveryOf(b)}},
		{"recover", message{Kind: kindRecover, Ballot: recoveryOf(b), Insts: []uint64{5, 6, 900}}},
		{"recovered", message{Kind: kindRecovered, Ballot: recoveryOf(b), OK: true, Entries: votes}},
		{"not-chosen", message{Kind: kindNotChosen, Req: automaton.Request{ID: req.ID}}},
		{"catchup-req", message{Kind: kindCatchupReq, From: 3, To: 300}},
		{"catchup", message{Kind: kindCatchup, Entries: []entry{{I: 7, Value: val}}}},
	}
	var cases []proto.Encoded
	for _, c := range msgs {
		enc := c.m.marshal()
		m, err := unmarshal(enc)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		} else if again := m.marshal(); string(again) != string(enc) {
			t.Errorf("%s: decodes to %x, re-encoded from %x", c.name, again, enc)
		}
		cases = append(cases, proto.Encoded{Name: c.name, Bytes: enc})
	}
	s := &inst{rnd: recoveryOf(b), vrnd: b, vval: val}
	cases = append(cases,
		proto.Encoded{Name: "value", Bytes: val},
		proto.Encoded{Name: "noop", Bytes: noop},
		proto.Encoded{Name: "promise-record", Bytes: encodeBallotRec(b)},
		proto.Encoded{Name: "instance-record", Bytes: encodeInst(s)},
		proto.Encoded{Name: "learned-record", Bytes: encodeLearnRec(val)},
	)
	if got, err := decodeInst(encodeInst(s)); err != nil || got.rnd != s.rnd || got.vrnd != s.vrnd || string(got.vval) != string(val) {
		t.Errorf("instance record: %+v %v", got, err)
	}
	if got, ok, err := decodeValue(val); err != nil || !ok || got.ID != req.ID || got.Op.Key != "k" {
		t.Errorf("value: %+v %v %v", got, ok, err)
	}
	if _, ok, err := decodeValue(noop); err != nil || ok {
		t.Errorf("noop: %v %v", ok, err)
	}
	if err := proto.CheckGolden("golden/wire.txt", cases, *updateWire); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreIgnoresDamagedRecords: a damaged instance record is skipped
// at start, not a crash.
func TestRestoreIgnoresDamagedRecords(t *testing.T) {
	c := cluster(t, Name, 4, "n1")
	fanout(c, 1, "k", "v", all4...)
	c.DeliverAll()
	c.SetRecord("n3", instKey(1), []byte{9, 9})
	c.Restart("n3")
	if p := node(c, "n3"); p.insts[1] != nil || p.executed != 1 {
		t.Fatalf("%s", p.Dump())
	}
}
