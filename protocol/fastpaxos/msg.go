package fastpaxos

import (
	"fmt"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Ballot is a round (proto.Ballot). Node is 2*k for the fast round of the
// node numbered k (from 1) and 2*k+1 for that node's classic recovery round,
// so a fast round and its recovery round are adjacent: no other node owns a
// ballot between them (package doc, "Ballots").
type Ballot = proto.Ballot

// maxBallotNode bounds a decoded ballot's node field.
const maxBallotNode = 2*maxNodes + 1

// isFast reports whether b is a fast round.
func isFast(b Ballot) bool { return !b.IsZero() && b.Node%2 == 0 }

// recoveryOf is fast round b's classic recovery round (the next ballot).
func recoveryOf(b Ballot) Ballot { return Ballot{Round: b.Round, Node: b.Node | 1} }

// ownerOf is the configuration index of the node that owns ballot b.
func ownerOf(b Ballot) int { return int(b.Node/2) - 1 }

// Message kinds.
const (
	msgVersion = 1

	kindPrepare    = 1  // phase 1a of a fast round, for every instance from From
	kindPromise    = 2  // phase 1b: OK with the votes at instances >= From, or a refusal with the promise
	kindAny        = 3  // the leader's "any" (phase 2a with no value) from instance From; also its heartbeat, with Commit
	kindPropose    = 4  // a proposer's request to the acceptors (fast round)
	kindAccept     = 5  // phase 2a of a classic (recovery) round: Entries
	kindVoted      = 6  // phase 2b, to every learner: one vote
	kindRefuse     = 7  // an acceptor promised a higher ballot
	kindRecover    = 8  // phase 1a of the recovery round, for the instances in Insts
	kindRecovered  = 9  // its phase 1b: the votes at those instances
	kindNotChosen  = 10 // the leader: request Req "might not be chosen"; proposers resend it
	kindCatchupReq = 11 // chosen instances From..To, please
	kindCatchup    = 12 // chosen values
)

var header = proto.Header{Protocol: "fastpaxos", Version: msgVersion, Kinds: []string{
	"prepare", "promise", "any", "propose", "accept", "voted", "refuse",
	"recover", "recovered", "not-chosen", "catchup-req", "catchup"}}

// entry is an instance in a message: its vote (Ballot, Value; a zero
// Ballot: no vote) or, in Accept and Catchup, its value.
type entry struct {
	I      uint64
	Ballot Ballot
	Value  []byte
}

// message is the union of the messages; Kind says which fields count.
type message struct {
	Kind     byte
	Ballot   Ballot
	OK       bool
	Promised Ballot
	From, To uint64
	Commit   uint64
	Entries  []entry
	Insts    []uint64
	Req      automaton.Request
}

const maxEntries = 1 << 20

func (m *message) marshal() []byte {
	size := 24
	for _, en := range m.Entries {
		size += 16 + len(en.Value)
	}
	e := header.Message(m.Kind, size)
	switch m.Kind {
	case kindPrepare:
		m.Ballot.Encode(&e)
		e.Uvarint(m.From)
	case kindPromise, kindRecovered:
		m.Ballot.Encode(&e)
		e.Bool(m.OK)
		m.Promised.Encode(&e)
		encodeVotes(&e, m.Entries)
	case kindAny:
		m.Ballot.Encode(&e)
		e.Uvarint(m.From)
		e.Uvarint(m.Commit)
	case kindPropose, kindNotChosen:
		encodeRequest(&e, m.Req)
	case kindAccept, kindCatchup:
		m.Ballot.Encode(&e)
		e.Uvarint(uint64(len(m.Entries)))
		for _, en := range m.Entries {
			e.Uvarint(en.I)
			e.Bytes(en.Value)
		}
	case kindVoted:
		encodeVotes(&e, m.Entries)
	case kindRefuse:
		m.Ballot.Encode(&e)
		m.Promised.Encode(&e)
	case kindRecover:
		m.Ballot.Encode(&e)
		e.Uvarint(uint64(len(m.Insts)))
		for _, i := range m.Insts {
			e.Uvarint(i)
		}
	case kindCatchupReq:
		e.Uvarint(m.From)
		e.Uvarint(m.To)
	}
	return e.B
}

func encodeVotes(e *wire.Encoder, es []entry) {
	e.Uvarint(uint64(len(es)))
	for _, en := range es {
		e.Uvarint(en.I)
		en.Ballot.Encode(e)
		e.Bytes(en.Value)
	}
}

func decodeVotes(d *wire.Decoder) []entry {
	n := d.Count(maxEntries, 4)
	var out []entry
	for i := 0; i < n && d.Err() == nil; i++ {
		out = append(out, entry{I: d.Uvarint(), Ballot: proto.DecodeBallot(d, maxBallotNode), Value: d.BytesCopy()})
	}
	return out
}

// encodeRequest writes a request's id and operation (groups, transactions
// and environments never reach the wire: New refuses nondeterministic
// services, the edge refuses groups).
// reqLow flags, in a request's read-mode byte, that the client's lowest
// unanswered seq (automaton.Request.Unanswered; machine.go, session 51)
// follows the operation, as Seq minus it: a request without it is encoded
// byte for byte as before (and old records decode unchanged).
const reqLow = 0x80

func encodeRequest(e *wire.Encoder, r automaton.Request) {
	e.Uvarint(r.ID.Client)
	e.Uvarint(r.ID.Seq)
	rb := byte(r.Opts.Read)
	if r.Unanswered > 0 {
		rb |= reqLow
	}
	e.Byte(rb)
	service.EncodeOp(e, r.Op)
	if r.Unanswered > 0 {
		e.Uvarint(r.ID.Seq - min(r.Unanswered, r.ID.Seq)) // a request waits for itself
	}
}

func decodeRequest(d *wire.Decoder) automaton.Request {
	var r automaton.Request
	r.ID.Client = d.Uvarint()
	r.ID.Seq = d.Uvarint()
	rb := d.Byte()
	r.Opts.Read = automaton.ReadMode(rb &^ reqLow)
	r.Op = service.DecodeOp(d)
	if rb&reqLow != 0 {
		if back := d.Uvarint(); back < r.ID.Seq {
			r.Unanswered = r.ID.Seq - back
		}
	}
	return r
}

func unmarshal(b []byte) (*message, error) {
	d, kind, err := header.OpenMessage(b)
	if err != nil {
		return nil, err
	}
	m := &message{Kind: kind}
	switch kind {
	case kindPrepare:
		m.Ballot = proto.DecodeBallot(d, maxBallotNode)
		m.From = d.Uvarint()
	case kindPromise, kindRecovered:
		m.Ballot = proto.DecodeBallot(d, maxBallotNode)
		m.OK = d.Bool()
		m.Promised = proto.DecodeBallot(d, maxBallotNode)
		m.Entries = decodeVotes(d)
	case kindAny:
		m.Ballot = proto.DecodeBallot(d, maxBallotNode)
		m.From = d.Uvarint()
		m.Commit = d.Uvarint()
	case kindPropose, kindNotChosen:
		m.Req = decodeRequest(d)
	case kindAccept, kindCatchup:
		m.Ballot = proto.DecodeBallot(d, maxBallotNode)
		n := d.Count(maxEntries, 2)
		for i := 0; i < n && d.Err() == nil; i++ {
			m.Entries = append(m.Entries, entry{I: d.Uvarint(), Value: d.BytesCopy()})
		}
	case kindVoted:
		m.Entries = decodeVotes(d)
	case kindRefuse:
		m.Ballot = proto.DecodeBallot(d, maxBallotNode)
		m.Promised = proto.DecodeBallot(d, maxBallotNode)
	case kindRecover:
		m.Ballot = proto.DecodeBallot(d, maxBallotNode)
		n := d.Count(maxEntries, 1)
		for i := 0; i < n && d.Err() == nil; i++ {
			m.Insts = append(m.Insts, d.Uvarint())
		}
	case kindCatchupReq:
		m.From = d.Uvarint()
		m.To = d.Uvarint()
	}
	if err := d.Done(); err != nil {
		return nil, err
	}
	return m, nil
}

// Values. An instance's value is a client command (the request's id, read
// mode and operation, as in Propose) or the no-op a recovery picks when no
// acceptor of its quorum voted.
const (
	valNoop = 0
	valCmd  = 1
)

var noop = []byte{msgVersion, valNoop}

func encodeValue(r automaton.Request) []byte {
	e := wire.Encoder{B: make([]byte, 0, 32)}
	e.Byte(msgVersion)
	e.Byte(valCmd)
	encodeRequest(&e, r)
	return e.B
}

// decodeValue returns the command a value holds (ok false: the no-op).
func decodeValue(b []byte) (automaton.Request, bool, error) {
	d := wire.NewDecoder(b)
	v, k := d.Byte(), d.Byte()
	if d.Err() != nil || v != msgVersion || k > valCmd {
		return automaton.Request{}, false, fmt.Errorf("fastpaxos: bad value %x", b)
	}
	if k == valNoop {
		return automaton.Request{}, false, d.Done()
	}
	r := decodeRequest(d)
	return r, true, d.Done()
}

// valueID is the request a value holds (zero for the no-op or garbage).
func valueID(b []byte) (automaton.RequestID, bool) {
	r, ok, err := decodeValue(b)
	if err != nil || !ok {
		return automaton.RequestID{}, false
	}
	return r.ID, true
}

// Records.
//
//	"p"          promised ballot
//	"a/%016x"    acceptor state of an instance: its round, vote round, vote value
//	"l/%016x"    a value this learner knows chosen
const (
	recPromised = "p"
	recInstPfx  = "a/"
	recLearnPfx = "l/"
)

func instKey(i uint64) string  { return fmt.Sprintf("%s%016x", recInstPfx, i) }
func learnKey(i uint64) string { return fmt.Sprintf("%s%016x", recLearnPfx, i) }

func encodeBallotRec(b Ballot) []byte {
	e := header.Record(8)
	b.Encode(&e)
	return e.B
}

func decodeBallotRec(b []byte) (Ballot, error) {
	d, err := header.OpenRecord(b, "promise")
	if err != nil {
		return Ballot{}, err
	}
	bl := proto.DecodeBallot(d, maxBallotNode)
	return bl, d.Done()
}

func encodeInst(s *inst) []byte {
	e := header.Record(16 + len(s.vval))
	s.rnd.Encode(&e)
	s.vrnd.Encode(&e)
	e.Bytes(s.vval)
	return e.B
}

func decodeInst(b []byte) (*inst, error) {
	d, err := header.OpenRecord(b, "instance")
	if err != nil {
		return nil, err
	}
	s := &inst{rnd: proto.DecodeBallot(d, maxBallotNode), vrnd: proto.DecodeBallot(d, maxBallotNode), vval: d.BytesCopy()}
	return s, d.Done()
}

func encodeLearnRec(v []byte) []byte {
	e := header.Record(4 + len(v))
	e.Bytes(v)
	return e.B
}

func decodeLearnRec(b []byte) ([]byte, error) {
	d, err := header.OpenRecord(b, "learned")
	if err != nil {
		return nil, err
	}
	v := d.BytesCopy()
	return v, d.Done()
}
