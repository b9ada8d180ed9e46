package unreplicated

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Message kinds.
const (
	kindForward = 1 // forwarder -> server: a client's request
	kindReply   = 2 // server -> forwarder: its answer
	// kindTxnForward is a Forward of a transaction step: the Forward's
	// fields, then the TxnStep. A kind of its own keeps the bytes of every
	// other Forward as they were.
	kindTxnForward = 3
	// kindNestedForward is a Forward of a nested request (nested.go),
	// with the Forward's fields; a kind of its own for the same reason.
	kindNestedForward = 4
)

// header is the messages' and records' version 1 header.
var header = proto.Header{Protocol: "unreplicated", Version: 1, Kinds: []string{"forward", "reply", "txn-forward", "nested-forward"}}

// maxOps bounds the operations of a decoded group.
const maxOps = 1 << 16

// message is the union of the two messages. (Inc, Seq) names a forwarded
// request: Inc is the forwarder's incarnation nonce, Seq its number there.
type message struct {
	Kind byte
	Inc  uint64
	Seq  uint64
	// Forward.
	Req automaton.RequestID
	Op  service.Op
	Ops []service.Op
	Env service.Env
	Txn *automaton.TxnStep // TxnForward only
	// Reply.
	Result  service.Result
	Results []service.Result
}

func (m *message) marshal() []byte {
	e := header.Message(m.Kind, 64)
	e.Uvarint(m.Inc)
	e.Uvarint(m.Seq)
	switch m.Kind {
	case kindForward, kindTxnForward, kindNestedForward:
		e.Uvarint(m.Req.Client)
		e.Uvarint(m.Req.Seq)
		encodeOps(&e, m.Op, m.Ops)
		service.EncodeEnv(&e, m.Env)
		if m.Kind == kindTxnForward {
			e.Uvarint(m.Txn.Txn.Client)
			e.Uvarint(m.Txn.Txn.Seq)
			e.Byte(byte(m.Txn.Action))
		}
	case kindReply:
		service.EncodeResult(&e, m.Result)
		e.Uvarint(uint64(len(m.Results)))
		for _, r := range m.Results {
			service.EncodeResult(&e, r)
		}
	}
	return e.B
}

func unmarshal(b []byte) (message, error) {
	var m message
	d, kind, err := header.OpenMessage(b)
	if err != nil {
		return m, err
	}
	m.Kind = kind
	m.Inc = d.Uvarint()
	m.Seq = d.Uvarint()
	switch m.Kind {
	case kindForward, kindTxnForward, kindNestedForward:
		m.Req = automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}
		m.Op, m.Ops = decodeOps(d)
		m.Env = service.DecodeEnv(d)
		if m.Kind == kindTxnForward {
			m.Txn = &automaton.TxnStep{Txn: automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}}
			m.Txn.Action = automaton.TxnAction(d.Byte())
		}
	case kindReply:
		m.Result = service.DecodeResult(d)
		if n := d.Count(maxOps, 1); n > 0 {
			m.Results = make([]service.Result, n)
			for i := range m.Results {
				m.Results[i] = service.DecodeResult(d)
			}
		}
	}
	return m, d.Done()
}

// encodeOps writes a single operation (ops empty) or an atomic group.
func encodeOps(e *wire.Encoder, op service.Op, ops []service.Op) {
	if len(ops) == 0 {
		e.Uvarint(0)
		service.EncodeOp(e, op)
		return
	}
	e.Uvarint(uint64(len(ops)))
	for _, o := range ops {
		service.EncodeOp(e, o)
	}
}

func decodeOps(d *wire.Decoder) (service.Op, []service.Op) {
	n := d.Count(maxOps, 1)
	if n == 0 {
		return service.DecodeOp(d), nil
	}
	ops := make([]service.Op, n)
	for i := range ops {
		ops[i] = service.DecodeOp(d)
	}
	return service.Op{}, ops
}

// --- durable records ---

// Record keys: one snapshot, and one record per write since it.
const (
	snapKey   = "snap"
	writePfx  = "w/"
	indexBase = 16
)

// writeKey names the record of the index-th write; fixed width, so that
// keys sort by index.
func writeKey(index uint64) string { return fmt.Sprintf("%s%016x", writePfx, index) }

// parseWriteKey returns the index a write record's key names.
func parseWriteKey(k string) (uint64, bool) {
	if !strings.HasPrefix(k, writePfx) {
		return 0, false
	}
	i, err := strconv.ParseUint(k[len(writePfx):], indexBase, 64)
	return i, err == nil && i > 0
}

// writeRecord is what the server persists per write: enough to apply it
// again, in the same environment, at recovery. A committed transaction's
// record holds its writes in Ops and the Env of each in Envs, appended
// after the other fields (so other records keep their bytes). A nested
// request's record carries its id and outcome after the Envs' count
// (nested.go).
type writeRecord struct {
	Op     service.Op
	Ops    []service.Op
	Env    service.Env
	Envs   []service.Env
	Nested *nestedTrailer
}

func (r writeRecord) marshal() []byte {
	e := header.Record(64)
	encodeOps(&e, r.Op, r.Ops)
	service.EncodeEnv(&e, r.Env)
	if len(r.Envs) > 0 || r.Nested != nil {
		e.Uvarint(uint64(len(r.Envs)))
		for _, env := range r.Envs {
			service.EncodeEnv(&e, env)
		}
	}
	if r.Nested != nil {
		r.Nested.encode(&e)
	}
	return e.B
}

func unmarshalWrite(b []byte) (writeRecord, error) {
	var r writeRecord
	d, err := header.OpenRecord(b, "write")
	if err != nil {
		return r, err
	}
	r.Op, r.Ops = decodeOps(d)
	r.Env = service.DecodeEnv(d)
	if len(d.B) > 0 && d.Err() == nil {
		if n := d.Count(maxOps, 2); n > 0 {
			r.Envs = make([]service.Env, n)
			for i := range r.Envs {
				r.Envs[i] = service.DecodeEnv(d)
			}
			if d.Err() == nil && len(r.Envs) != len(r.Ops) {
				d.Fail(fmt.Errorf("a transaction record with %d writes and %d environments", len(r.Ops), len(r.Envs)))
			}
		}
	}
	if len(d.B) > 0 && d.Err() == nil {
		r.Nested = decodeNestedTrailer(d)
	}
	return r, d.Done()
}

// marshalSnap encodes the snapshot record: the number of writes it covers
// and the service state after them, then, when it is not empty, the
// nested requests' deduplication table (nested.go).
func marshalSnap(index uint64, state []byte, nested map[uint64]nestedEntry) []byte {
	e := header.Record(16 + len(state))
	e.Uvarint(index)
	e.Bytes(state)
	if len(nested) > 0 {
		encodeNestedTable(&e, nested)
	}
	return e.B
}

func unmarshalSnap(b []byte) (uint64, []byte, map[uint64]nestedEntry, error) {
	d, err := header.OpenRecord(b, "snapshot")
	if err != nil {
		return 0, nil, nil, err
	}
	index := d.Uvarint()
	state := d.BytesCopy()
	nested := map[uint64]nestedEntry{}
	if len(d.B) > 0 && d.Err() == nil {
		nested = decodeNestedTable(d)
	}
	return index, state, nested, d.Done()
}
