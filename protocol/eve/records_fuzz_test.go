package eve

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

// recordsNode is node n1 of three, an execution replica and a verifier.
func recordsNode(t testing.TB) *Eve {
	svc, _ := service.Lookup("kv")
	au, err := protocol{Capabilities: capabilities(Name, "")}.New(automaton.Config{Self: "n1", Nodes: []automaton.NodeID{"n1", "n2", "n3"}, Service: svc, Rand: rand.New(rand.NewSource(1))})
	if err != nil {
		t.Fatal(err)
	}
	return au.(*Eve)
}

// persisted applies a's Persist outputs to recs and clears them.
func persisted(a *Eve, recs map[string][]byte) {
	for _, o := range a.Out {
		if p, ok := o.(automaton.Persist); ok {
			if p.Delete {
				delete(recs, p.Key)
			} else {
				recs[p.Key] = p.Value
			}
		}
	}
	a.Out = nil
}

// recordSeeds are the records of a replica that applied slot 6 with a
// finished speculative run of slot 7, and of a verifier that accepted a
// commit and a rollback.
func recordSeeds(t testing.TB) (r, s, vp, va []byte) {
	a := recordsNode(t)
	b := proto.Ballot{Round: 3, Node: 2}
	id := automaton.RequestID{Client: 0xabc, Seq: 9}
	req := automaton.Request{ID: id, Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}}
	bt := &batch{Slot: 7, Epoch: 2, Entries: []entry{{Req: req, Origin: "n2"}}}
	tok := token{Slot: 7, Epoch: 2, Batch: bt.digest(), Replica: "n1"}
	tok.sign([]byte(DefaultMACKey))
	a.ex, a.ver = a.recoverReplica(nil), newVerifier()
	a.ex.applied, a.ex.epoch = 6, 2
	a.ex.st.Apply(req.Op)
	a.ex.dups[id.Client] = dupEntry{seq: id.Seq, res: service.OK()}
	a.ver.promised = b
	a.ver.acc[7] = accepted{Ballot: b, Dec: &decision{Slot: 7, Kind: decCommit, Epoch: 2, Claim: tok.claim(), Tokens: []token{tok}}}
	a.persistReplica()
	a.persistSpec(&execution{b: bt, res: []service.Result{service.OK()}, spec: a.ex.st})
	a.persistPromise()
	a.persistAccepted(7)
	recs := map[string][]byte{}
	persisted(a, recs)
	return recs[recReplica], recs[recSpec], recs[recPromise], recs[recAccepted+"7"]
}

// FuzzRecords fuzzes eve's durable records as recovery reads them
// (recovery.go: the replica's committed state "r", its speculative run
// "s", the verifier's promise "vp" and accepted decisions "va/<slot>"),
// all at once, under the key the slot names. Whatever the bytes, recovery
// does not panic, and what it recovered, written again, recovers to the
// same: slot, epoch, state hash, duplicate table, finished run, promise
// and accepted decisions.
func FuzzRecords(f *testing.F) {
	r, s, vp, va := recordSeeds(f)
	f.Add(r, s, vp, va, uint64(7))
	f.Add(r, []byte{}, vp, va, uint64(8)) // va under another slot's key
	f.Add(r[:len(r)/2], s[:len(s)/2], vp[:1], va[:len(va)/2], uint64(7))
	f.Fuzz(func(t *testing.T, r, s, vp, va []byte, slot uint64) {
		recs := map[string][]byte{}
		for k, v := range map[string][]byte{recReplica: r, recSpec: s, recPromise: vp, fmt.Sprintf("%s%d", recAccepted, slot): va} {
			if len(v) > 0 {
				recs[k] = v
			}
		}
		a := recordsNode(t)
		a.ex, a.ver = a.recoverReplica(recs), a.recoverVerifier(recs)
		ex, ver := a.ex, a.ver

		again := map[string][]byte{}
		a.Out = nil
		a.persistReplica()
		if ex.cur != nil {
			a.persistSpec(ex.cur)
		}
		a.persistPromise()
		for sl := range ver.acc {
			a.persistAccepted(sl)
		}
		persisted(a, again)
		b := recordsNode(t)
		ex2, ver2 := b.recoverReplica(again), b.recoverVerifier(again)
		if ex2.applied != ex.applied || ex2.epoch != ex.epoch || ex2.hash != ex.hash {
			t.Fatalf("replica recovered slot %d epoch %d hash %x; written again: %d %d %x", ex.applied, ex.epoch, ex.hash, ex2.applied, ex2.epoch, ex2.hash)
		}
		if !reflect.DeepEqual(ex2.dups, ex.dups) && (len(ex2.dups) != 0 || len(ex.dups) != 0) {
			t.Fatalf("duplicate table %v; written again %v", ex.dups, ex2.dups)
		}
		if (ex.cur == nil) != (ex2.cur == nil) || ex.cur != nil && (ex.cur.b.Slot != ex2.cur.b.Slot || ex.cur.digest != ex2.cur.digest || ex.cur.tok != ex2.cur.tok) {
			t.Fatalf("finished run %+v; written again %+v", ex.cur, ex2.cur)
		}
		if ex.cur != nil && (ex.cur.b.Slot != ex.applied+1 || len(ex.cur.res) != len(ex.cur.b.Entries) || !ex.cur.tok.valid([]byte(DefaultMACKey))) {
			t.Fatalf("recovered a run of slot %d after slot %d, %d results for %d entries", ex.cur.b.Slot, ex.applied, len(ex.cur.res), len(ex.cur.b.Entries))
		}
		if ver2.promised != ver.promised || len(ver2.acc) != len(ver.acc) {
			t.Fatalf("verifier promised %v with %d accepted; written again %v with %d", ver.promised, len(ver.acc), ver2.promised, len(ver2.acc))
		}
		for sl, ac := range ver.acc {
			ac2 := ver2.acc[sl]
			if ac.Dec.Slot != sl || ac2.Ballot != ac.Ballot || ac2.Dec == nil || ac2.Dec.Claim != ac.Dec.Claim || ac2.Dec.Kind != ac.Dec.Kind {
				t.Fatalf("slot %d accepted %+v; written again %+v", sl, ac, ac2)
			}
			if ver.promised.Less(ac.Ballot) {
				t.Fatalf("accepted ballot %v above the promise %v", ac.Ballot, ver.promised)
			}
		}
	})
}

// TestRecordSeedsRecover: FuzzRecords's seeds recover a replica at slot 6
// with slot 7's finished run and a verifier's accepted slot 7, so that the
// fuzz target starts from records that mean something.
func TestRecordSeedsRecover(t *testing.T) {
	r, s, vp, va := recordSeeds(t)
	a := recordsNode(t)
	recs := map[string][]byte{recReplica: r, recSpec: s, recPromise: vp, recAccepted + "7": va}
	ex, ver := a.recoverReplica(recs), a.recoverVerifier(recs)
	if ex.applied != 6 || ex.cur == nil || ex.cur.b.Slot != 7 || len(ex.dups) != 1 || ver.acc[7].Dec == nil || ver.promised.Round != 3 {
		t.Fatalf("seeds recovered: replica slot %d run %v dups %d, verifier %v %v", ex.applied, ex.cur, len(ex.dups), ver.promised, ver.acc)
	}
}
