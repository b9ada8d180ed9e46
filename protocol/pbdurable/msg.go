package pbdurable

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/durability"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

// Peer messages.
const (
	kindHeartbeat = 1 // primary -> every node: view, index (HEARTBEAT)
	kindUpdate    = 2 // primary -> backups: one request's update buffer (commitA)
	kindAck       = 3 // backup -> primary: cumulative acknowledgement
	kindState     = 4 // primary -> backup: the replicated objects (a new backup, or a new view)
	kindJoin      = 5 // unsynced node -> every node: make me a backup
	kindForward   = 6 // non-primary -> primary: a client's request
	kindReply     = 7 // primary -> forwarder: its answer
)

var header = proto.Header{Protocol: "pbdurable", Version: 1, Kinds: []string{
	"heartbeat", "update", "ack", "state", "join", "forward", "reply"}}

const maxNode = 1 << 12

// msg is every message's fields; each kind uses some of them.
type msg struct {
	kind  byte
	view  proto.Ballot
	index uint64
	ups   []durability.Update // update
	state []byte              // state
	id    automaton.RequestID // forward, reply
	op    service.Op          // forward
	res   service.Result      // reply
}

func (m msg) encode() []byte {
	e := header.Message(m.kind, 32+len(m.state))
	m.view.Encode(&e)
	e.Uvarint(m.index)
	switch m.kind {
	case kindUpdate:
		durability.EncodeUpdates(&e, m.ups)
	case kindState:
		e.Bytes(m.state)
	case kindForward:
		e.Uvarint(m.id.Client)
		e.Uvarint(m.id.Seq)
		service.EncodeOp(&e, m.op)
	case kindReply:
		e.Uvarint(m.id.Client)
		e.Uvarint(m.id.Seq)
		service.EncodeResult(&e, m.res)
	}
	return e.B
}

func decode(b []byte) (msg, error) {
	d, k, err := header.OpenMessage(b)
	if err != nil {
		return msg{}, err
	}
	m := msg{kind: k, view: proto.DecodeBallot(d, maxNode), index: d.Uvarint()}
	switch k {
	case kindUpdate:
		m.ups = durability.DecodeUpdates(d)
	case kindState:
		m.state = d.BytesCopy()
	case kindForward:
		m.id = automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}
		m.op = service.DecodeOp(d)
	case kindReply:
		m.id = automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}
		m.res = service.DecodeResult(d)
	}
	return m, d.Done()
}
