package paxos

import (
	"flag"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/internal/fuzzcheck"
	"github.com/synod-dev/synod/service"
)

var updateWire = flag.Bool("update-wire", false, "rewrite golden/wire.txt from the current encoders")

// wireCodecs are the package's messages, batches and records: the golden
// test and the fuzz target run through them (fuzzcheck.Wire).
var wireCodecs = fuzzcheck.Wire{Golden: "golden/wire.txt", Codecs: []fuzzcheck.Codec{
	fuzzcheck.New("message", func(b []byte) (any, error) { return unmarshal(b) }, func(x any) []byte { return x.(*message).marshal() }),
	fuzzcheck.New("batch", func(b []byte) (any, error) { return decodeBatch(b) }, func(x any) []byte { return encodeBatch(x.([]cmd)) }),
	fuzzcheck.New("slot-record", func(b []byte) (any, error) { return decodeSlot(b) }, func(x any) []byte { return encodeSlot(x.(*slot)) }),
	fuzzcheck.New("uint-record", func(b []byte) (any, error) { return decodeUint(b) }, func(x any) []byte { return encodeUint(x.(uint64)) }),
	fuzzcheck.New("ballot-record", func(b []byte) (any, error) { return unmarshalBallotRec(b) }, func(x any) []byte { return encodeBallotRec(x.(Ballot)) }),
}}

// FuzzCodecs fuzzes every message and record decoder of the package (see
// fuzzcheck.Check), seeded with the encodings in golden/wire.txt.
func FuzzCodecs(f *testing.F) { wireCodecs.Fuzz(f) }

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
	msg := func(name string, m message) fuzzcheck.Sample { return fuzzcheck.Pin(name, "message", &m) }
	wireCodecs.Check(t, *updateWire, []fuzzcheck.Sample{
		msg("prepare", message{Kind: kindPrepare, Ballot: b, From: 17}),
		msg("promise", message{Kind: kindPromise, Ballot: b, OK: true, Promised: b, Commit: 4, Entries: entries}),
		msg("promise-refused", message{Kind: kindPromise, Ballot: b, Promised: Ballot{Round: 301, Node: 1}}),
		msg("accept", message{Kind: kindAccept, Ballot: b, Commit: 4, Entries: []entry{{I: 5, Value: []byte("x")}, {I: 6, Value: []byte("yy")}}}),
		msg("accepted", message{Kind: kindAccepted, Ballot: b, OK: true, Acks: []uint64{5, 6, 200}}),
		msg("heartbeat", message{Kind: kindHeartbeat, Ballot: b, Commit: 1000, Round: 77}),
		msg("heartbeat-ack", message{Kind: kindHeartbeatAck, Ballot: b, OK: true, Promised: b, Round: 77, Commit: 999}),
		msg("catchup-req", message{Kind: kindCatchupReq, From: 3, To: 300}),
		msg("catchup", message{Kind: kindCatchup, Ballot: b, Commit: 7, Entries: []entry{{I: 7, Value: []byte("z")}}}),
		msg("snapshot", message{Kind: kindSnapshot, Index: 20000, Data: []byte("state")}),
		msg("forward", message{Kind: kindForward, Req: automaton.Request{ID: id, Op: op}}),
		msg("forward-env-group", message{Kind: kindForward, Req: automaton.Request{ID: id, Ops: []service.Op{op, op}, Env: env}}),
		msg("forward-nested", message{Kind: kindForward, Req: automaton.Request{ID: id, Op: op, Nested: true}}),
		msg("forward-reply", message{Kind: kindForwardReply, Req: automaton.Request{ID: id}, Result: service.OK()}),
		msg("forward-reply-group", message{Kind: kindForwardReply, Req: automaton.Request{ID: id}, Result: service.OK(), Results: []service.Result{service.OK(), service.Int(3)}}),
		msg("take-over", message{Kind: kindTakeOver, Ballot: b, OK: true, Commit: 12}),
		fuzzcheck.Pin("slot-record", "slot-record", &slot{bal: b, val: []byte("v"), chosen: true}),
		fuzzcheck.Pin("ballot-record", "ballot-record", b),
		fuzzcheck.Pin("uint-record", "uint-record", uint64(1<<20)),
		fuzzcheck.Pin("batch-plain", "batch", []cmd{{ID: id, Op: op}}),
		fuzzcheck.Pin("batch-v3", "batch", []cmd{{ID: id, Ops: []service.Op{op}, Env: env}}),
		fuzzcheck.Pin("batch-nested", "batch", []cmd{{ID: id, Op: op, nested: true}}),
		fuzzcheck.Pin("noop", "batch", []cmd(nil)),
	})
}
