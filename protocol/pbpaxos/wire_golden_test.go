package pbpaxos

import (
	"flag"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/internal/fuzzcheck"
	"github.com/synod-dev/synod/service"
)

var updateWire = flag.Bool("update-wire", false, "rewrite golden/wire.txt from the current encoders")

// snapRec is the snapshot record's fields, for the codec table.
type snapRec struct {
	I     uint64
	P     pn
	State []byte
}

// wireCodecs are the package's messages, command lists and records: the
// golden test and the fuzz target run through them (fuzzcheck.Wire).
var wireCodecs = fuzzcheck.Wire{Golden: "golden/wire.txt", Codecs: []fuzzcheck.Codec{
	fuzzcheck.New("message", func(b []byte) (any, error) { return unmarshal(b) }, func(x any) []byte { return x.(*message).marshal() }),
	fuzzcheck.New("commands", func(b []byte) (any, error) { return decodeCmds(b) }, func(x any) []byte { return encodeCmds(x.([]cmd)) }),
	fuzzcheck.New("promise-record", func(b []byte) (any, error) { return decodeBallotRec(b) }, func(x any) []byte { return encodeBallotRec(x.(Ballot)) }),
	fuzzcheck.New("commit-record", func(b []byte) (any, error) { return decodeUintRec(b) }, func(x any) []byte { return encodeUintRec(x.(uint64)) }),
	fuzzcheck.New("slot-record", func(b []byte) (any, error) { return decodeSlotRec(b) }, func(x any) []byte { return encodeSlotRec(x.(*slot)) }),
	fuzzcheck.New("snap-record", func(b []byte) (any, error) {
		i, p, s, err := decodeSnapRec(b)
		return snapRec{i, p, s}, err
	}, func(x any) []byte { r := x.(snapRec); return encodeSnapRec(r.I, r.P, r.State) }),
}}

// FuzzCodecs fuzzes every message and record decoder of the package (see
// fuzzcheck.Check), seeded with the encodings in golden/wire.txt.
func FuzzCodecs(f *testing.F) { wireCodecs.Fuzz(f) }

// TestWireGolden: every message kind and record encodes to the bytes in
// golden/wire.txt (wire and disk compatibility) and decodes back.
func TestWireGolden(t *testing.T) {
	b := Ballot{Round: 3, Node: 2}
	id := automaton.RequestID{Client: 0xabc, Seq: 9}
	op := service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}
	cmds := []cmd{{Kind: cmdOp, ID: id, Op: op, Result: service.OK()}, {Kind: cmdNoop}}
	cs := encodeCmds(cmds)
	txnReq := automaton.Request{ID: id, Op: op, Txn: &automaton.TxnStep{Txn: id, Action: automaton.TxnOp}, Env: service.Env{Time: 5, Seed: 6}}
	msg := func(name string, m message) fuzzcheck.Sample { return fuzzcheck.Pin(name, "message", &m) }
	wireCodecs.Check(t, *updateWire, []fuzzcheck.Sample{
		msg("prepare", message{Kind: kindPrepare, Ballot: b, After: 90, Gaps: []uint64{88, 89}}),
		msg("promise-ok", message{Kind: kindPromise, Ballot: b, OK: true, Commit: 87}),
		msg("promise-state", message{Kind: kindPromise, Ballot: b, OK: true, Commit: 90, Entries: []entry{{I: 88, Bal: b, Known: true, Cmds: cs}}, StatePN: pn{b, 91}, State: []byte("st")}),
		msg("accept", message{Kind: kindAccept, Ballot: b, Commit: 87, Entries: []entry{{I: 88, Cmds: cs, Kind: updCovered}, {I: 91, Cmds: cs, Kind: updFull, Upd: []byte("st")}}}),
		msg("accepted", message{Kind: kindAccepted, Ballot: b, OK: true, Acks: []uint64{88, 91}, Commit: 87}),
		msg("heartbeat", message{Kind: kindHeartbeat, Ballot: b, Commit: 91}),
		msg("heartbeat-ack", message{Kind: kindHeartbeatAck, Ballot: b, OK: false, Promised: b, Commit: 4}),
		msg("catchup-req", message{Kind: kindCatchupReq, Commit: 4}),
		msg("snapshot", message{Kind: kindSnapshot, Commit: 91, StatePN: pn{b, 91}, State: []byte("st")}),
		msg("forward", message{Kind: kindForward, Req: txnReq}),
		msg("forward-reply", message{Kind: kindForwardReply, ID: id, Result: service.Int(3)}),
		msg("read", message{Kind: kindRead, Req: automaton.Request{ID: id, Ops: []service.Op{op, op}}, Origin: "n2"}),
		msg("confirm", message{Kind: kindConfirm, ID: id, Ballot: b}),
		msg("read-reply", message{Kind: kindReadReply, ID: id, Result: service.Bytes([]byte("v"))}),
		fuzzcheck.Pin("slot-record", "slot-record", &slot{bal: b, known: true, cmds: cs, kind: updDelta, upd: []byte("d")}),
		fuzzcheck.Pin("snap-record", "snap-record", snapRec{91, pn{b, 91}, []byte("st")}),
		fuzzcheck.Pin("promise-record", "promise-record", b),
		fuzzcheck.Pin("commit-record", "commit-record", uint64(91)),
		fuzzcheck.Pin("commands", "commands", cmds),
	})
}
