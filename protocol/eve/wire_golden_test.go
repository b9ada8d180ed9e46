package eve

import (
	"bytes"
	"flag"
	"math/rand"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/internal/fuzzcheck"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

var updateWire = flag.Bool("update-wire", false, "rewrite golden/wire.txt from the current encoders")

// wireCodecs are the package's messages and verifier records: the golden
// test and the fuzz target run through them (fuzzcheck.Wire). The
// replica's records embed the service's snapshot, whose format the service
// owns: recovery checks them (TestWireGolden, FuzzRecords).
var wireCodecs = fuzzcheck.Wire{Golden: "golden/wire.txt", Codecs: []fuzzcheck.Codec{
	fuzzcheck.New("message", func(b []byte) (any, error) { return unmarshal(b) }, func(x any) []byte { return x.(*message).marshal() }),
	fuzzcheck.New("promise-record", func(b []byte) (any, error) { return unmarshalPromise(b) }, func(x any) []byte { return marshalPromise(x.(proto.Ballot)) }),
	fuzzcheck.New("accepted-record", func(b []byte) (any, error) { return unmarshalAccepted(b) }, func(x any) []byte { return marshalAccepted(x.(accepted)) }),
}}

// dupsCodec is the duplicate table inside the replica record: fuzzed
// beside the table, pinned by the replica record's recovery.
var dupsCodec = fuzzcheck.New("dups", func(b []byte) (any, error) { return decodeDups(b) }, func(x any) []byte {
	return (&replica{dups: x.(map[uint64]dupEntry)}).encodeDups()
})

// FuzzCodecs fuzzes every message and record decoder of the package (see
// fuzzcheck.Check), seeded with the encodings in golden/wire.txt.
func FuzzCodecs(f *testing.F) {
	fuzzcheck.Decoders(f, fuzzcheck.GoldenSeeds(f, wireCodecs.Golden), append(wireCodecs.Codecs[:len(wireCodecs.Codecs):len(wireCodecs.Codecs)], dupsCodec))
}

// TestWireGolden: every message kind and verifier record encodes to the
// bytes in golden/wire.txt (wire and disk compatibility) and decodes to
// what was encoded; the records are those an execution replica and a
// verifier write, and recover.
func TestWireGolden(t *testing.T) {
	b := proto.Ballot{Round: 3, Node: 2}
	id := automaton.RequestID{Client: 0xabc, Seq: 9}
	req := automaton.Request{ID: id, Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}, Env: service.Env{Time: 5, Seed: 6}}
	bt := &batch{Slot: 7, Epoch: 2, Entries: []entry{{Req: req, Origin: "n2"}}}
	tok := token{Slot: 7, Epoch: 2, Batch: bt.digest(), Start: [32]byte{1}, End: [32]byte{2}, Replica: "n1"}
	tok.sign([]byte(DefaultMACKey))
	commit := &decision{Slot: 7, Kind: decCommit, Epoch: 2, Claim: tok.claim(), Tokens: []token{tok}}
	rollback := &decision{Slot: 7, Kind: decRollback, Epoch: 3, Batch: bt}
	msg := func(name string, m message) fuzzcheck.Sample { return fuzzcheck.Pin(name, "message", &m) }
	samples := []fuzzcheck.Sample{
		msg("forward", message{Kind: kindForward, Req: req, Origin: "n2"}),
		msg("reply", message{Kind: kindReply, ID: id, Result: service.Int(3)}),
		msg("batch", message{Kind: kindBatch, Batch: bt}),
		msg("token", message{Kind: kindToken, Token: tok}),
		msg("prepare", message{Kind: kindPrepare, Ballot: b}),
		msg("promise", message{Kind: kindPromise, Ballot: b, OK: true, Accepted: []accepted{{Ballot: b, Dec: rollback}, {Ballot: decidedBallot, Dec: commit}}}),
		msg("accept", message{Kind: kindAccept, Ballot: b, Dec: commit}),
		msg("accepted", message{Kind: kindAccepted, Ballot: b, Slot: 7, OK: true}),
		msg("decide", message{Kind: kindDecide, Dec: rollback}),
		msg("complain", message{Kind: kindComplain, Epoch: 2, Slot: 6, OK: true}),
		msg("fetch", message{Kind: kindFetch, Slot: 6, Roots: [][32]byte{{3}, {4}}}),
		msg("transfer", message{Kind: kindTransfer, Slot: 7, Epoch: 2, State: []byte("shards"), Dups: []byte("dups"), Hash: [32]byte{5}}),
		fuzzcheck.Pin("record-"+recPromise, "promise-record", b),
		fuzzcheck.Pin("record-"+recAccepted+"7", "accepted-record", accepted{Ballot: b, Dec: commit}),
	}
	if !tok.valid([]byte(DefaultMACKey)) || tok.valid([]byte("another key")) {
		t.Error("token MAC check")
	}
	// Records, as an execution replica and a verifier write them.
	svc, _ := service.Lookup("kv")
	au, err := protocol{Capabilities: capabilities(Name, "")}.New(automaton.Config{Self: "n1", Nodes: []automaton.NodeID{"n1", "n2", "n3"}, Service: svc, Rand: rand.New(rand.NewSource(1))})
	if err != nil {
		t.Fatal(err)
	}
	a := au.(*Eve)
	a.ex, a.ver = a.recoverReplica(nil), newVerifier()
	a.ex.applied, a.ex.epoch = 6, 2
	a.ex.st.Apply(req.Op)
	a.ex.dups[id.Client] = dupEntry{seq: id.Seq, res: service.OK()}
	a.ver.promised, a.ver.acc[7] = b, accepted{Ballot: b, Dec: commit}
	a.persistReplica()
	a.persistSpec(&execution{b: bt, res: []service.Result{service.OK()}, spec: a.ex.st})
	a.persistPromise()
	a.persistAccepted(7)
	recs := map[string][]byte{}
	for _, o := range a.Out {
		p := o.(automaton.Persist)
		recs[p.Key] = p.Value
	}
	// The verifier writes the records pinned above.
	if !bytes.Equal(recs[recPromise], marshalPromise(b)) || !bytes.Equal(recs[recAccepted+"7"], marshalAccepted(accepted{Ballot: b, Dec: commit})) {
		t.Errorf("the verifier's records %x and %x are not the pinned ones", recs[recPromise], recs[recAccepted+"7"])
	}
	r := a.recoverReplica(recs)
	if r.applied != 6 || r.epoch != 2 || r.hash != service.StateHash(a.ex.st) {
		t.Errorf("replica record: applied %d epoch %d", r.applied, r.epoch)
	}
	if r.cur == nil || !r.cur.done || r.cur.b.Slot != 7 || r.cur.tok.Slot != 7 || !r.cur.tok.valid([]byte(DefaultMACKey)) {
		t.Errorf("speculation record: slot 7's finished run not recovered: %+v", r.cur)
	}
	if v := a.recoverVerifier(recs); v.promised != b || v.acc[7].Dec == nil || v.acc[7].Dec.Claim != commit.Claim {
		t.Errorf("verifier records: promised %v, accepted %v", v.promised, v.acc[7])
	}
	wireCodecs.Check(t, *updateWire, samples)
}
