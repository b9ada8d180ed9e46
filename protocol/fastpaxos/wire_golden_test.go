package fastpaxos

import (
	"flag"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/internal/fuzzcheck"
	"github.com/synod-dev/synod/service"
)

var updateWire = flag.Bool("update-wire", false, "rewrite golden/wire.txt from the current encoders")

// value is a decoded log value, for the codec table.
type value struct {
	Req automaton.Request
	Cmd bool
}

// wireCodecs are the package's messages, log values and records: the
// golden test and the fuzz target run through them (fuzzcheck.Wire).
var wireCodecs = fuzzcheck.Wire{Golden: "golden/wire.txt", Codecs: []fuzzcheck.Codec{
	fuzzcheck.New("message", func(b []byte) (any, error) { return unmarshal(b) }, func(x any) []byte { return x.(*message).marshal() }),
	fuzzcheck.New("value", func(b []byte) (any, error) {
		r, ok, err := decodeValue(b)
		return value{r, ok}, err
	}, func(x any) []byte {
		if !x.(value).Cmd {
			return noop
		}
		return encodeValue(x.(value).Req)
	}),
	fuzzcheck.New("promise-record", func(b []byte) (any, error) { return decodeBallotRec(b) }, func(x any) []byte { return encodeBallotRec(x.(Ballot)) }),
	fuzzcheck.New("instance-record", func(b []byte) (any, error) { return decodeInst(b) }, func(x any) []byte { return encodeInst(x.(*inst)) }),
	fuzzcheck.New("learned-record", func(b []byte) (any, error) { return decodeLearnRec(b) }, func(x any) []byte { return encodeLearnRec(x.([]byte)) }),
}}

// TestWireGolden: every message kind, value and record encodes to the
// bytes recorded in golden/wire.txt (wire and disk compatibility) and
// decodes back to the same value.
func TestWireGolden(t *testing.T) {
	b := Ballot{Round: 300, Node: 4}
	req := automaton.Request{ID: automaton.RequestID{Client: 0xabcdef, Seq: 9}, Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}}
	val := encodeValue(req)
	votes := []entry{{I: 5, Ballot: b, Value: val}, {I: 6}}
	msg := func(name string, m message) fuzzcheck.Sample { return fuzzcheck.Pin(name, "message", &m) }
	wireCodecs.Check(t, *updateWire, []fuzzcheck.Sample{
		msg("prepare", message{Kind: kindPrepare, Ballot: b, From: 17}),
		msg("promise", message{Kind: kindPromise, Ballot: b, OK: true, Entries: votes}),
		msg("promise-refused", message{Kind: kindPromise, Ballot: b, Promised: Ballot{Round: 301, Node: 2}}),
		msg("any", message{Kind: kindAny, Ballot: b, From: 7, Commit: 6}),
		msg("propose", message{Kind: kindPropose, Req: req}),
		msg("accept", message{Kind: kindAccept, Ballot: recoveryOf(b), Entries: []entry{{I: 5, Value: val}, {I: 6, Value: noop}}}),
		msg("voted", message{Kind: kindVoted, Entries: votes[:1]}),
		msg("refuse", message{Kind: kindRefuse, Ballot: b, Promised: recoveryOf(b)}),
		msg("recover", message{Kind: kindRecover, Ballot: recoveryOf(b), Insts: []uint64{5, 6, 900}}),
		msg("recovered", message{Kind: kindRecovered, Ballot: recoveryOf(b), OK: true, Entries: votes}),
		msg("not-chosen", message{Kind: kindNotChosen, Req: automaton.Request{ID: req.ID}}),
		msg("catchup-req", message{Kind: kindCatchupReq, From: 3, To: 300}),
		msg("catchup", message{Kind: kindCatchup, Entries: []entry{{I: 7, Value: val}}}),
		fuzzcheck.Pin("value", "value", value{req, true}),
		fuzzcheck.Pin("noop", "value", value{}),
		fuzzcheck.Pin("promise-record", "promise-record", b),
		fuzzcheck.Pin("instance-record", "instance-record", &inst{rnd: recoveryOf(b), vrnd: b, vval: val}),
		fuzzcheck.Pin("learned-record", "learned-record", val),
	})
}

// FuzzCodecs fuzzes every message and record decoder of the package (see
// fuzzcheck.Check), seeded with the encodings in golden/wire.txt.
func FuzzCodecs(f *testing.F) { wireCodecs.Fuzz(f) }

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
