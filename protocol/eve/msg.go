package eve

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Messages and records (one union, every field encoded: the messages are
// few and small beside the batches they carry).

const msgVersion = 1

// Message kinds.
const (
	kindForward  = 1  // origin -> primary: a client request
	kindReply    = 2  // execution replica -> origin: a committed request's answer
	kindBatch    = 3  // primary -> execution replicas and verifiers (the Eve/Adam thesis §2.2)
	kindToken    = 4  // execution replica -> verifiers: (start hash, end hash), MAC'd (§2.2.3)
	kindPrepare  = 5  // verifier agreement, phase 1a
	kindPromise  = 6  // phase 1b
	kindAccept   = 7  // phase 2a: a decision for a slot
	kindAccepted = 8  // phase 2b
	kindDecide   = 9  // verifiers -> everyone: the outcome of a slot
	kindComplain = 10 // origin -> verifiers: a request waits too long (the primary may be down)
	kindFetch    = 11 // execution replica -> execution replica: state transfer request with shard roots
	kindTransfer = 12 // the answer: the differing shards (or a snapshot), the duplicate table
)

var header = proto.Header{Protocol: "eve", Version: msgVersion, Kinds: []string{
	"forward", "reply", "batch", "token", "prepare", "promise", "accept", "accepted",
	"decide", "complain", "fetch", "transfer"}}

// Decision kinds (§2.2.3: "commit", commit plus state transfer for the
// replicas that diverged, or sequential re-execution with a view change).
const (
	decCommit   = 1
	decRollback = 2
	decNoop     = 3 // no batch reached the verifiers: the slot is empty, the primary rotates
)

var decNames = map[byte]string{decCommit: "commit", decRollback: "rollback", decNoop: "noop"}

// entry is one request of a batch and the node that answers its client.
type entry struct {
	Req    automaton.Request
	Origin automaton.NodeID
}

// batch is what the primary sends for one slot: the requests, each with the
// environment observed when it arrived (§2.2: "a seed to a random number
// generator and other environment variables (such as the current time)").
type batch struct {
	Slot    uint64
	Epoch   uint64
	Entries []entry
}

func (b *batch) encode(e *wire.Encoder) {
	e.Uvarint(b.Slot)
	e.Uvarint(b.Epoch)
	e.Uvarint(uint64(len(b.Entries)))
	for _, en := range b.Entries {
		encodeRequest(e, en.Req)
		e.String(string(en.Origin))
	}
}

func decodeBatch(d *wire.Decoder) *batch {
	b := &batch{Slot: d.Uvarint(), Epoch: d.Uvarint()}
	n := d.Count(maxEntries, 4)
	for i := 0; i < n && d.Err() == nil; i++ {
		b.Entries = append(b.Entries, entry{Req: decodeRequest(d), Origin: automaton.NodeID(d.String())})
	}
	return b
}

// digest names a batch in tokens and decisions.
func (b *batch) digest() [32]byte {
	var e wire.Encoder
	b.encode(&e)
	return sha256.Sum256(e.B)
}

// token is an execution replica's claim about one slot (§2.2.3: "the root
// hash they started with before processing the current batch, and the
// hash of their state after processing the batch"). End covers the state
// root and the batch's results, so that replicas with equal tokens hold
// equal answers too. MAC authenticates the token (package doc, "Tokens").
type token struct {
	Slot    uint64
	Epoch   uint64
	Batch   [32]byte
	Start   [32]byte
	End     [32]byte
	Replica automaton.NodeID
	MAC     [32]byte
}

func (t *token) body() []byte {
	e := wire.Encoder{B: []byte("eve-token\x00")}
	e.Uvarint(t.Slot)
	e.Uvarint(t.Epoch)
	e.B = append(e.B, t.Batch[:]...)
	e.B = append(e.B, t.Start[:]...)
	e.B = append(e.B, t.End[:]...)
	e.String(string(t.Replica))
	return e.B
}

// replicaKey derives replica r's token key from the cluster key.
func replicaKey(cluster []byte, r automaton.NodeID) []byte {
	m := hmac.New(sha256.New, cluster)
	m.Write([]byte("eve-replica-key\x00" + string(r)))
	return m.Sum(nil)
}

func (t *token) sign(cluster []byte) {
	m := hmac.New(sha256.New, replicaKey(cluster, t.Replica))
	m.Write(t.body())
	copy(t.MAC[:], m.Sum(nil))
}

func (t *token) valid(cluster []byte) bool {
	m := hmac.New(sha256.New, replicaKey(cluster, t.Replica))
	m.Write(t.body())
	return hmac.Equal(m.Sum(nil), t.MAC[:])
}

// claim is what matching tokens share.
type claim struct{ Batch, Start, End [32]byte }

func (t *token) claim() claim { return claim{t.Batch, t.Start, t.End} }

func (t *token) encode(e *wire.Encoder) {
	e.Uvarint(t.Slot)
	e.Uvarint(t.Epoch)
	for _, h := range [][32]byte{t.Batch, t.Start, t.End, t.MAC} {
		e.B = append(e.B, h[:]...)
	}
	e.String(string(t.Replica))
}

func decodeToken(d *wire.Decoder) token {
	t := token{Slot: d.Uvarint(), Epoch: d.Uvarint()}
	for _, h := range []*[32]byte{&t.Batch, &t.Start, &t.End, &t.MAC} {
		*h = decodeHash(d)
	}
	t.Replica = automaton.NodeID(d.String())
	return t
}

func decodeHash(d *wire.Decoder) (h [32]byte) {
	for i := range h {
		h[i] = d.Byte()
	}
	return h
}

// decision is the verifiers' outcome for one slot.
type decision struct {
	Slot uint64
	Kind byte
	// Epoch is the epoch after the slot: a rollback or a noop rotates the
	// primary (§2.2.3: "a view change is also performed and the primary
	// replica is rotated").
	Epoch uint64
	// Commit: the committed claim and the matching tokens (the proof
	// that r+1 replicas reached it).
	Claim  claim
	Tokens []token
	// Rollback: the batch every replica re-executes sequentially.
	Batch *batch
}

func (x *decision) encode(e *wire.Encoder) {
	e.Uvarint(x.Slot)
	e.Byte(x.Kind)
	e.Uvarint(x.Epoch)
	for _, h := range [][32]byte{x.Claim.Batch, x.Claim.Start, x.Claim.End} {
		e.B = append(e.B, h[:]...)
	}
	e.Uvarint(uint64(len(x.Tokens)))
	for i := range x.Tokens {
		x.Tokens[i].encode(e)
	}
	e.Bool(x.Batch != nil)
	if x.Batch != nil {
		x.Batch.encode(e)
	}
}

func decodeDecision(d *wire.Decoder) *decision {
	x := &decision{Slot: d.Uvarint(), Kind: d.Byte(), Epoch: d.Uvarint()}
	x.Claim = claim{decodeHash(d), decodeHash(d), decodeHash(d)}
	n := d.Count(maxEntries, 100)
	for i := 0; i < n && d.Err() == nil; i++ {
		x.Tokens = append(x.Tokens, decodeToken(d))
	}
	if d.Bool() {
		x.Batch = decodeBatch(d)
	}
	return x
}

func (x *decision) String() string {
	if x == nil {
		return "none"
	}
	s := fmt.Sprintf("%s slot=%d epoch=%d", decNames[x.Kind], x.Slot, x.Epoch)
	if x.Kind == decCommit {
		s += fmt.Sprintf(" end=%x tokens=%d", x.Claim.End[:4], len(x.Tokens))
	}
	return s
}

// message is the union of the messages; Kind says which fields count.
type message struct {
	Kind     byte
	Slot     uint64 // Fetch: the sender's applied slot; Transfer: the sender's
	Epoch    uint64 // Complain, Transfer
	Ballot   proto.Ballot
	OK       bool
	Req      automaton.Request // Forward
	Origin   automaton.NodeID  // Forward
	ID       automaton.RequestID
	Result   service.Result // Reply
	Batch    *batch         // Batch
	Token    token          // Token
	Dec      *decision      // Accept, Decide; Promise: the accepted decisions
	Accepted []accepted     // Promise
	Roots    [][32]byte     // Fetch: the sender's shard roots
	State    []byte         // Transfer: shards or a snapshot
	Full     bool           // Transfer: State is a snapshot
	Dups     []byte         // Transfer: the duplicate table
	Hash     [32]byte       // Transfer: the sender's state hash
}

// accepted is a verifier's accepted decision for a slot (phase 2b state).
type accepted struct {
	Ballot proto.Ballot
	Dec    *decision
}

const (
	maxEntries    = 1 << 20
	maxOps        = 1 << 16
	maxBallotNode = 1 << 16
)

func (m *message) marshal() []byte {
	e := header.Message(m.Kind, 64+len(m.State)+len(m.Dups))
	e.Uvarint(m.Slot)
	e.Uvarint(m.Epoch)
	m.Ballot.Encode(&e)
	e.Bool(m.OK)
	switch m.Kind {
	case kindForward:
		encodeRequest(&e, m.Req)
		e.String(string(m.Origin))
	case kindReply:
		encodeID(&e, m.ID)
		service.EncodeResult(&e, m.Result)
	case kindBatch:
		m.Batch.encode(&e)
	case kindToken:
		m.Token.encode(&e)
	case kindAccept, kindDecide:
		m.Dec.encode(&e)
	case kindPromise:
		e.Uvarint(uint64(len(m.Accepted)))
		for _, a := range m.Accepted {
			a.Ballot.Encode(&e)
			a.Dec.encode(&e)
		}
	case kindFetch:
		e.Uvarint(uint64(len(m.Roots)))
		for _, r := range m.Roots {
			e.B = append(e.B, r[:]...)
		}
	case kindTransfer:
		e.Bytes(m.State)
		e.Bool(m.Full)
		e.Bytes(m.Dups)
		e.B = append(e.B, m.Hash[:]...)
	}
	return e.B
}

func unmarshal(b []byte) (*message, error) {
	d, kind, err := header.OpenMessage(b)
	if err != nil {
		return nil, err
	}
	m := &message{Kind: kind, Slot: d.Uvarint(), Epoch: d.Uvarint()}
	m.Ballot = proto.DecodeBallot(d, maxBallotNode)
	m.OK = d.Bool()
	switch kind {
	case kindForward:
		m.Req = decodeRequest(d)
		m.Origin = automaton.NodeID(d.String())
	case kindReply:
		m.ID = decodeID(d)
		m.Result = service.DecodeResult(d)
	case kindBatch:
		m.Batch = decodeBatch(d)
	case kindToken:
		m.Token = decodeToken(d)
	case kindAccept, kindDecide:
		m.Dec = decodeDecision(d)
	case kindPromise:
		n := d.Count(maxEntries, 8)
		for i := 0; i < n && d.Err() == nil; i++ {
			m.Accepted = append(m.Accepted, accepted{Ballot: proto.DecodeBallot(d, maxBallotNode), Dec: decodeDecision(d)})
		}
	case kindFetch:
		n := d.Count(1<<16, 32)
		for i := 0; i < n && d.Err() == nil; i++ {
			m.Roots = append(m.Roots, decodeHash(d))
		}
	case kindTransfer:
		m.State = d.BytesCopy()
		m.Full = d.Bool()
		m.Dups = d.BytesCopy()
		m.Hash = decodeHash(d)
	}
	if err := d.Done(); err != nil {
		return nil, fmt.Errorf("eve: %s: %w", header.KindName(kind), err)
	}
	return m, nil
}

func encodeID(e *wire.Encoder, id automaton.RequestID) {
	e.Uvarint(id.Client)
	e.Uvarint(id.Seq)
}

func decodeID(d *wire.Decoder) automaton.RequestID {
	return automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}
}

// encodeRequest writes a single-operation request with its environment
// (New's edge refuses groups and transactions).
func encodeRequest(e *wire.Encoder, r automaton.Request) {
	encodeID(e, r.ID)
	e.Byte(byte(r.Opts.Read))
	service.EncodeOp(e, r.Op)
	service.EncodeEnv(e, r.Env)
}

func decodeRequest(d *wire.Decoder) automaton.Request {
	r := automaton.Request{ID: decodeID(d)}
	r.Opts.Read = automaton.ReadMode(d.Byte())
	r.Op = service.DecodeOp(d)
	r.Env = service.DecodeEnv(d)
	return r
}

// DescribeMessage implements harness's describer.
func (a *Eve) DescribeMessage(b []byte) string {
	m, err := unmarshal(b)
	if err != nil {
		return err.Error()
	}
	s := header.KindName(m.Kind)
	switch m.Kind {
	case kindForward:
		s += fmt.Sprintf(" %v %v", m.Req.ID, m.Req.Op)
	case kindReply:
		s += fmt.Sprintf(" %v %v", m.ID, m.Result)
	case kindBatch:
		s += fmt.Sprintf(" slot=%d epoch=%d n=%d", m.Batch.Slot, m.Batch.Epoch, len(m.Batch.Entries))
	case kindToken:
		s += fmt.Sprintf(" slot=%d %s end=%x", m.Token.Slot, m.Token.Replica, m.Token.End[:4])
	case kindAccept, kindDecide:
		s += fmt.Sprintf(" %v %v", m.Ballot, m.Dec)
	default:
		s += fmt.Sprintf(" slot=%d epoch=%d ballot=%v ok=%v", m.Slot, m.Epoch, m.Ballot, m.OK)
	}
	return s
}
