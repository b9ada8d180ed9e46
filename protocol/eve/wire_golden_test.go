package eve

import (
	"bytes"
	"flag"
	"math/rand"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

var updateWire = flag.Bool("update-wire", false, "rewrite golden/wire.txt from the current encoders")

// TestWireGolden: every message kind and record encodes to the bytes in
// golden/wire.txt (wire and disk compatibility), decodes, and re-encodes to
// the same bytes.
func TestWireGolden(t *testing.T) {
	b := proto.Ballot{Round: 3, Node: 2}
	id := automaton.RequestID{Client: 0xabc, Seq: 9}
	req := automaton.Request{ID: id, Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}, Env: service.Env{Time: 5, Seed: 6}}
	bt := &batch{Slot: 7, Epoch: 2, Entries: []entry{{Req: req, Origin: "n2"}}}
	tok := token{Slot: 7, Epoch: 2, Batch: bt.digest(), Start: [32]byte{1}, End: [32]byte{2}, Replica: "n1"}
	tok.sign([]byte(DefaultMACKey))
	commit := &decision{Slot: 7, Kind: decCommit, Epoch: 2, Claim: tok.claim(), Tokens: []token{tok}}
	rollback := &decision{Slot: 7, Kind: decRollback, Epoch: 3, Batch: bt}
	msgs := []struct {
		name string
		m    message
	}{
		{"forward", message{Kind: kindForward, Req: req, Origin: "n2"}},
		{"reply", message{Kind: kindReply, ID: id, Result: service.Int(3)}},
		{"batch", message{Kind: kindBatch, Batch: bt}},
		{"token", message{Kind: kindToken, Token: tok}},
		{"prepare", message{Kind: kindPrepare, Ballot: b}},
		{"promise", message{Kind: kindPromise, Ballot: b, OK: true, Accepted: []accepted{{Ballot: b, Dec: rollback}, {Ballot: decidedBallot, Dec: commit}}}},
		{"accept", message{Kind: kindAccept, Ballot: b, Dec: commit}},
		{"accepted", message{Kind: kindAccepted, Ballot: b, Slot: 7, OK: true}},
		{"decide", message{Kind: kindDecide, Dec: rollback}},
		{"complain", message{Kind: kindComplain, Epoch: 2, Slot: 6, OK: true}},
		{"fetch", message{Kind: kindFetch, Slot: 6, Roots: [][32]byte{{3}, {4}}}},
		{"transfer", message{Kind: kindTransfer, Slot: 7, Epoch: 2, State: []byte("shards"), Dups: []byte("dups"), Hash: [32]byte{5}}},
	}
	var cases []proto.Encoded
	for _, c := range msgs {
		e := c.m.marshal()
		d, err := unmarshal(e)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		} else if again := d.marshal(); !bytes.Equal(again, e) {
			t.Errorf("%s: re-encodes to %x, first %x", c.name, again, e)
		}
		cases = append(cases, proto.Encoded{Name: c.name, Bytes: e})
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
		if p.Key != recReplica && p.Key != recSpec {
			// The replica records embed the service's snapshot, whose
			// format the service owns: they are checked by recovery below.
			cases = append(cases, proto.Encoded{Name: "record-" + p.Key, Bytes: p.Value})
		}
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
	if err := proto.CheckGolden("golden/wire.txt", cases, *updateWire); err != nil {
		t.Fatal(err)
	}
}
