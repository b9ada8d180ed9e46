package eve

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

// Durable records (package doc, "Durability"):
//
//	r           an execution replica's committed state: applied slot, epoch,
//	            snapshot, duplicate table; written after every applied slot,
//	            before the slot's answers
//	s           its speculative run of slot applied+1: the batch, the
//	            results and the state; written before the token leaves
//	vp          a verifier's promised ballot
//	va/<slot>   a verifier's accepted decision for a slot (a window of them)
const (
	recReplica  = "r"
	recSpec     = "s"
	recPromise  = "vp"
	recAccepted = "va/"
)

func (a *Eve) persistReplica() {
	r := a.ex
	e := header.Record(64)
	e.Uvarint(r.applied)
	e.Uvarint(r.epoch)
	e.Bytes(r.st.Snapshot())
	e.Bytes(r.encodeDups())
	a.Emit(automaton.Persist{Key: recReplica, Value: e.B})
}

func (a *Eve) persistSpec(x *execution) {
	e := header.Record(64)
	x.b.encode(&e)
	e.Uvarint(uint64(len(x.res)))
	for _, res := range x.res {
		service.EncodeResult(&e, res)
	}
	e.Bytes(x.spec.Snapshot())
	a.Emit(automaton.Persist{Key: recSpec, Value: e.B})
}

// recoverSpec restores a finished speculative run of slot applied+1, so
// that its token can still be committed.
func (a *Eve) recoverSpec(r *replica, b []byte) {
	d, err := header.OpenRecord(b, "speculation")
	if err != nil {
		return
	}
	bt := decodeBatch(d)
	n := d.Count(maxEntries, 1)
	res := make([]service.Result, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		res = append(res, service.DecodeResult(d))
	}
	snap := d.Bytes()
	st := a.stateSvc.NewState()
	if d.Done() != nil || bt.Slot != r.applied+1 || bt.Epoch != r.epoch || len(res) != len(bt.Entries) || st.Restore(snap) != nil {
		return
	}
	x := &execution{b: bt, digest: bt.digest(), done: true, spec: st, res: res, skip: r.skips(bt)}
	x.tok = token{Slot: bt.Slot, Epoch: bt.Epoch, Batch: x.digest, Start: r.hash,
		End: endHash(service.StateHash(st), res), Replica: a.cfg.Self}
	x.tok.sign(a.macKey)
	r.cur = x
}

func (a *Eve) recoverReplica(recs map[string][]byte) *replica {
	r := &replica{st: a.stateSvc.NewState(), dups: map[uint64]dupEntry{},
		queued: map[automaton.RequestID]bool{}, ahead: map[uint64]*batch{}}
	if b, ok := recs[recReplica]; ok {
		d, err := header.OpenRecord(b, "replica")
		if err == nil {
			applied, epoch, snap, dups := d.Uvarint(), d.Uvarint(), d.Bytes(), d.Bytes()
			st := a.stateSvc.NewState()
			dt, derr := decodeDups(dups)
			if d.Done() == nil && derr == nil && st.Restore(snap) == nil {
				r.applied, r.epoch, r.st, r.dups = applied, epoch, st, dt
			}
		}
	}
	r.hash = service.StateHash(r.st)
	r.end = r.hash
	r.proposed = r.applied
	if b, ok := recs[recSpec]; ok {
		a.recoverSpec(r, b)
	}
	return r
}

func (a *Eve) persistPromise() {
	a.Emit(automaton.Persist{Key: recPromise, Value: marshalPromise(a.ver.promised)})
}

// marshalPromise encodes the verifier's promise record.
func marshalPromise(b proto.Ballot) []byte {
	e := header.Record(16)
	b.Encode(&e)
	return e.B
}

// unmarshalPromise decodes a promise record.
func unmarshalPromise(b []byte) (proto.Ballot, error) {
	d, err := header.OpenRecord(b, "promise")
	if err != nil {
		return proto.Ballot{}, err
	}
	return proto.DecodeBallot(d, maxBallotNode), nil
}

// marshalAccepted encodes a verifier's accepted decision record.
func marshalAccepted(ac accepted) []byte {
	e := header.Record(64)
	ac.Ballot.Encode(&e)
	ac.Dec.encode(&e)
	return e.B
}

// unmarshalAccepted decodes an accepted decision record.
func unmarshalAccepted(b []byte) (accepted, error) {
	d, err := header.OpenRecord(b, "accepted")
	if err != nil {
		return accepted{}, err
	}
	ac := accepted{Ballot: proto.DecodeBallot(d, maxBallotNode), Dec: decodeDecision(d)}
	return ac, d.Done()
}

func (a *Eve) persistAccepted(slot uint64) {
	a.Emit(automaton.Persist{Key: recAccepted + strconv.FormatUint(slot, 10), Value: marshalAccepted(a.ver.acc[slot])})
	var old []uint64
	for s := range a.ver.acc {
		if s+decidedWindow <= slot {
			old = append(old, s)
		}
	}
	sort.Slice(old, func(i, j int) bool { return old[i] < old[j] })
	for _, s := range old {
		delete(a.ver.acc, s)
		a.Emit(automaton.Persist{Key: recAccepted + strconv.FormatUint(s, 10), Delete: true})
	}
}

func (a *Eve) recoverVerifier(recs map[string][]byte) *verifier {
	v := newVerifier()
	if b, ok := recs[recPromise]; ok {
		if p, err := unmarshalPromise(b); err == nil {
			v.promised = p
		}
	}
	for k, b := range recs {
		if !strings.HasPrefix(k, recAccepted) {
			continue
		}
		ac, err := unmarshalAccepted(b)
		if err != nil || k != fmt.Sprintf("%s%d", recAccepted, ac.Dec.Slot) {
			continue
		}
		v.acc[ac.Dec.Slot] = ac
		v.slot = max(v.slot, ac.Dec.Slot)
		if v.promised.Less(ac.Ballot) {
			v.promised = ac.Ballot // accepting promised it too
		}
	}
	return v
}
