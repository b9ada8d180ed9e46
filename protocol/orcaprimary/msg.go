package orcaprimary

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Message kinds (the Orca paper §3.1–§3.3).
const (
	kRemote   byte = iota + 1 // node → primary: a remote read or write (the operation is executed at the primary)
	kReply                    // primary → node: its result
	kFetch                    // node → primary: fetch-object on a read miss
	kInstall                  // primary → node: a copy of the object (a new secondary)
	kLockUpd                  // primary → secondary: lock-and-update (object, operation, parameters)
	kInval                    // primary → secondary: invalidate
	kAck                      // secondary → primary: acknowledgement (has: it holds a copy)
	kUnlock                   // primary → secondary: unlock
	kMigrate                  // old primary → new primary: the primary copy (record in state, epoch in nonce)
	kMigrated                 // new primary → old primary: installed (epoch in nonce)
)

var header = proto.Header{Protocol: Name, Version: 1,
	Kinds: []string{"remote", "reply", "fetch", "install", "lock-and-update", "invalidate", "ack", "unlock", "migrate", "migrated"}}

type message struct {
	kind    byte
	key     string
	version uint64
	nonce   uint64 // fetch/install
	has     bool   // ack
	req     automaton.Request
	res     service.Result
	state   []byte
	origin  automaton.NodeID // remote, fetch, ack: the first sender when a former primary forwarded it
}

func (m message) encode() []byte {
	e := header.Message(m.kind, 48+len(m.state))
	e.String(m.key)
	e.Uvarint(m.version)
	switch m.kind {
	case kRemote, kLockUpd:
		e.Uvarint(m.req.ID.Client)
		e.Uvarint(m.req.ID.Seq)
		service.EncodeOp(&e, m.req.Op)
	case kReply:
		e.Uvarint(m.req.ID.Client)
		e.Uvarint(m.req.ID.Seq)
		service.EncodeResult(&e, m.res)
	case kFetch, kMigrated:
		e.Uvarint(m.nonce)
	case kInstall, kMigrate:
		e.Uvarint(m.nonce)
		e.Bytes(m.state)
	case kAck:
		e.Bool(m.has)
	}
	if m.kind == kRemote || m.kind == kFetch || m.kind == kAck {
		e.String(string(m.origin))
	}
	return e.B
}

func decodeMessage(b []byte) (message, error) {
	d, k, err := header.OpenMessage(b)
	if err != nil {
		return message{}, err
	}
	m := message{kind: k, key: d.String(), version: d.Uvarint()}
	switch k {
	case kRemote, kLockUpd:
		m.req.ID = automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}
		m.req.Op = service.DecodeOp(d)
	case kReply:
		m.req.ID = automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}
		m.res = service.DecodeResult(d)
	case kFetch, kMigrated:
		m.nonce = d.Uvarint()
	case kInstall, kMigrate:
		m.nonce = d.Uvarint()
		m.state = d.BytesCopy()
	case kAck:
		m.has = d.Bool()
	}
	if k == kRemote || k == kFetch || k == kAck {
		m.origin = automaton.NodeID(d.String())
	}
	return m, d.Done()
}

// done is a client's last write on an object and its result (the
// deduplication table, per object, persisted with it).
type done struct {
	seq uint64
	res service.Result
}

// record is a primary copy as persisted under "o/<key>": its version, its
// state, its copy set, its deduplication table, and the write in phase one
// (version == its version) if any.
type record struct {
	version  uint64
	state    []byte
	copies   []automaton.NodeID
	dedup    orca.Dedup
	inflight *automaton.Request
	epoch    uint64 // migrations of the primary copy so far
}

func (r record) encode() []byte {
	e := header.Record(64 + len(r.state))
	e.Uvarint(r.version)
	e.Bytes(r.state)
	e.Uvarint(uint64(len(r.copies)))
	for _, c := range r.copies {
		e.String(string(c))
	}
	r.dedup.Encode(&e)
	e.Bool(r.inflight != nil)
	if r.inflight != nil {
		e.Uvarint(r.inflight.ID.Client)
		e.Uvarint(r.inflight.ID.Seq)
		service.EncodeOp(&e, r.inflight.Op)
	}
	e.Uvarint(r.epoch)
	return e.B
}

func decodeRecord(d *wire.Decoder) record {
	r := record{version: d.Uvarint(), state: d.BytesCopy()}
	n := d.Count(1<<16, 1)
	for i := 0; i < n && d.Err() == nil; i++ {
		r.copies = append(r.copies, automaton.NodeID(d.String()))
	}
	r.dedup = orca.DecodeDedup(d)
	if d.Bool() {
		req := automaton.Request{ID: automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}}
		req.Op = service.DecodeOp(d)
		r.inflight = &req
	}
	r.epoch = d.Uvarint()
	return r
}
