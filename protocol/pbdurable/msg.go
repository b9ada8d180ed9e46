package pbdurable

import (
	"fmt"
	"strings"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/durability"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

// Peer messages.
const (
	kindHeartbeat = 1 // primary -> every node: view, index (HEARTBEAT)
	kindUpdate    = 2 // primary -> backups: one request's update buffer, prepared (commitA)
	kindAck       = 3 // backup -> primary: cumulative acknowledgement
	kindState     = 4 // primary -> backup: the replicated objects (a new backup, or a new view)
	kindJoin      = 5 // unsynced node -> every node: make me a backup
	kindForward   = 6 // non-primary -> primary: a client's request
	kindReply     = 7 // primary -> forwarder: its answer
	kindReport    = 8 // restarted node -> every node: its durable views (durable.go)
	kindPromise   = 9 // node that adopted a new view -> its primary: the state it holds (takeover.go)
	// kindBatch carries several of the above to one peer, from a batch
	// step (batch.go; proto.Header.Coalesce).
	kindBatch = 10
)

// header is the messages' header. Version 4 (session 44): the take-over
// rules (takeover.go, 9886577) added the promise, and a new primary waits
// for every other node's: a version 3 node drops it as an unknown kind
// and never sends one, so a mixed cluster would stall without a word.
// Version 5 (session 54): the batch message (batch.go), which a version 4
// node would drop as an unknown kind, losing a batch's update buffers
// and forwards. Each version refuses the other's messages
// (proto.ErrBadVersion).
var header = proto.Header{Protocol: "pbdurable", Version: 5, Kinds: []string{
	"heartbeat", "update", "ack", "state", "join", "forward", "reply", "report", "promise", "batch"}}

// recordHeader frames the records that are message encodings (the state
// image, a kindState, and the update buffers, kindUpdate: durable.go):
// version 3, as before the messages' version 4, since their format did
// not change; a data directory of the earlier version is read as it is.
var recordHeader = proto.Header{Protocol: "pbdurable", Version: 3, Kinds: header.Kinds[:kindPromise]}

const maxNode = 1 << 12

// msg is every message's fields; each kind uses some of them.
type msg struct {
	kind  byte
	view  proto.Ballot
	index uint64
	// commit (heartbeat, update): the primary's commit index: a backup
	// applies its prepared buffers up to it (doc.go, all-or-nothing).
	commit uint64
	db     bool                // update: the request also has a database transaction
	ups    []durability.Update // update
	state  []byte              // state
	id     automaton.RequestID // forward, reply
	op     service.Op          // forward
	env    service.Env         // forward: the Env observed where the request arrived
	res    service.Result      // reply
	// report: the view of the sender's durable state (db: answer with yours).
	stateView proto.Ballot
}

func (m msg) encode() []byte { return m.encodeAs(header) }

// encodeAs encodes m under h: header for a message, recordHeader for a
// record.
func (m msg) encodeAs(h proto.Header) []byte {
	e := h.Message(m.kind, 32+len(m.state))
	m.view.Encode(&e)
	e.Uvarint(m.index)
	switch m.kind {
	case kindHeartbeat:
		e.Uvarint(m.commit)
	case kindUpdate:
		e.Uvarint(m.commit)
		e.Bool(m.db)
		durability.EncodeUpdates(&e, m.ups)
	case kindState:
		e.Bytes(m.state)
	case kindForward:
		e.Uvarint(m.id.Client)
		e.Uvarint(m.id.Seq)
		service.EncodeOp(&e, m.op)
		service.EncodeEnv(&e, m.env)
	case kindReply:
		e.Uvarint(m.id.Client)
		e.Uvarint(m.id.Seq)
		service.EncodeResult(&e, m.res)
	case kindReport:
		m.stateView.Encode(&e)
		e.Bool(m.db)
	case kindPromise:
		m.stateView.Encode(&e)
		e.Bytes(m.state)
	}
	return e.B
}

func decode(b []byte) (msg, error) { return decodeAs(header, b) }

// decodeAs decodes what encodeAs wrote under h.
func decodeAs(h proto.Header, b []byte) (msg, error) {
	d, k, err := h.OpenMessage(b)
	if err != nil {
		return msg{}, err
	}
	m := msg{kind: k, view: proto.DecodeBallot(d, maxNode), index: d.Uvarint()}
	switch k {
	case kindHeartbeat:
		m.commit = d.Uvarint()
	case kindUpdate:
		m.commit = d.Uvarint()
		m.db = d.Bool()
		m.ups = durability.DecodeUpdates(d)
	case kindState:
		m.state = d.BytesCopy()
	case kindForward:
		m.id = automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}
		m.op = service.DecodeOp(d)
		m.env = service.DecodeEnv(d)
	case kindReply:
		m.id = automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}
		m.res = service.DecodeResult(d)
	case kindReport:
		m.stateView = proto.DecodeBallot(d, maxNode)
		m.db = d.Bool()
	case kindPromise:
		m.stateView = proto.DecodeBallot(d, maxNode)
		m.state = d.BytesCopy()
	}
	return m, d.Done()
}

// DescribeMessage implements harness.MessageDescriber: the kind and the
// fields it uses, and an update buffer's method calls.
func (a *PBD) DescribeMessage(b []byte) string {
	if len(b) > 1 && b[1] == kindBatch {
		msgs, err := header.SplitBatch(b, kindBatch)
		if err != nil {
			return fmt.Sprintf("undecodable batch (%v)", err)
		}
		parts := make([]string, len(msgs))
		for i, m := range msgs {
			parts[i] = a.DescribeMessage(m)
		}
		return fmt.Sprintf("batch of %d: %s", len(msgs), strings.Join(parts, "; "))
	}
	m, err := decode(b)
	if err != nil {
		return fmt.Sprintf("undecodable (%v)", err)
	}
	name := header.Kinds[m.kind-1]
	switch m.kind {
	case kindHeartbeat:
		return fmt.Sprintf("%s view=%s index=%d commit=%d", name, m.view, m.index, m.commit)
	case kindUpdate:
		calls := make([]string, len(m.ups))
		for i, u := range m.ups {
			args := make([]string, len(u.Args))
			for j, v := range u.Args {
				if b, ok := v.([]byte); ok {
					args[j] = fmt.Sprintf("(%d bytes)", len(b))
				} else {
					args[j] = fmt.Sprintf("%q", fmt.Sprint(v))
				}
			}
			calls[i] = fmt.Sprintf("%s.%s(%s)", u.Object, u.Method, strings.Join(args, ", "))
		}
		db := ""
		if m.db {
			db = " +db"
		}
		return fmt.Sprintf("%s view=%s index=%d commit=%d%s %s", name, m.view, m.index, m.commit, db, strings.Join(calls, " "))
	case kindAck:
		if m.index == stateAck {
			return fmt.Sprintf("%s view=%s state", name, m.view)
		}
		return fmt.Sprintf("%s view=%s index=%d", name, m.view, m.index)
	case kindState:
		return fmt.Sprintf("%s view=%s index=%d (%d bytes)", name, m.view, m.index, len(m.state))
	case kindJoin:
		return fmt.Sprintf("%s view=%s", name, m.view)
	case kindPromise:
		return fmt.Sprintf("%s view=%s state of %s index=%d (%d bytes)", name, m.view, m.stateView, m.index, len(m.state))
	case kindForward:
		return fmt.Sprintf("%s view=%s %v %v", name, m.view, m.id, m.op)
	case kindReply:
		return fmt.Sprintf("%s %v %v", name, m.id, m.res)
	}
	return name
}
