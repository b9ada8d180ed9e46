package sim

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// The trace digest is a SHA-256 over every delivered input and every output,
// plus fault and client events, each written as (virtual time, node, tag,
// payload). Two runs with equal digests took the same path, byte for byte.

func (s *simulator) digestHead(node int, tag byte) {
	s.scratch.B = s.scratch.B[:0]
	s.scratch.Varint(int64(s.now))
	s.scratch.Varint(int64(node))
	s.scratch.Byte(tag)
}

func (s *simulator) digestFlush() { s.digest.Write(s.scratch.B) }

// digestEvent records a fault or disk event.
func (s *simulator) digestEvent(node int, tag byte, payload []byte) {
	s.digestHead(node, tag)
	s.scratch.Bytes(payload)
	s.digestFlush()
}

func (s *simulator) digestInput(n *node, in automaton.Input) {
	e := &s.scratch
	switch in := in.(type) {
	case automaton.Start:
		s.digestHead(n.idx, 's')
		keys := sortedKeys(in.Records)
		e.Uvarint(uint64(len(keys)))
		for _, k := range keys {
			e.String(k)
			e.Bytes(in.Records[k])
		}
	case automaton.ClientRequest:
		s.digestHead(n.idx, 'q')
		encodeRequest(e, in.Req)
	case automaton.ClientBatch: // only with Config.BatchWindow: other digests unchanged
		s.digestHead(n.idx, 'b')
		e.Uvarint(uint64(len(in.Reqs)))
		for _, r := range in.Reqs {
			encodeRequest(e, r)
		}
	case automaton.PeerMessage:
		s.digestHead(n.idx, 'm')
		e.String(string(in.From))
		e.Bytes(in.Msg)
	case automaton.TimerFired:
		s.digestHead(n.idx, 't')
		e.Uvarint(uint64(in.ID))
	case automaton.EffectDone:
		s.digestHead(n.idx, 'e')
		e.Uvarint(uint64(in.ID))
		e.Bool(in.Err != nil)
	}
	s.digestFlush()
}

func (s *simulator) digestOutput(n *node, o automaton.Output) {
	e := &s.scratch
	switch o := o.(type) {
	case automaton.Send:
		s.digestHead(n.idx, 'S')
		e.String(string(o.To))
		e.Bytes(o.Msg)
	case automaton.Respond:
		s.digestHead(n.idx, 'A')
		e.Uvarint(o.Resp.ID.Client)
		e.Uvarint(o.Resp.ID.Seq)
		service.EncodeResult(e, o.Resp.Result)
	case automaton.Persist:
		s.digestHead(n.idx, 'W')
		e.String(o.Key)
		e.Bool(o.Delete)
		e.Bytes(o.Value)
	case automaton.SetTimer:
		s.digestHead(n.idx, 'T')
		e.Uvarint(uint64(o.ID))
		e.Varint(int64(o.After))
	case automaton.CancelTimer:
		s.digestHead(n.idx, 'K')
		e.Uvarint(uint64(o.ID))
	case automaton.Effect:
		s.digestHead(n.idx, 'E')
		e.Uvarint(uint64(o.ID))
		e.String(o.Kind)
	default:
		return
	}
	s.digestFlush()
}

// digestClient records a client's completion ('C', with res) or give-up ('U').
func (s *simulator) digestClient(c *client, tag byte, res *service.Result) {
	s.digestHead(-1-c.idx, tag)
	s.scratch.Uvarint(c.seq)
	if res != nil {
		service.EncodeResult(&s.scratch, *res)
	}
	s.digestFlush()
}

func encodeRequest(e *wire.Encoder, r automaton.Request) {
	e.Uvarint(r.ID.Client)
	e.Uvarint(r.ID.Seq)
	e.Byte(byte(r.Opts.Read))
	service.EncodeOp(e, r.Op)
	// Groups and options only when present, so that digests of runs without
	// them are unchanged.
	for _, op := range r.Ops {
		service.EncodeOp(e, op)
	}
	if r.Txn != nil {
		e.Uvarint(r.Txn.Txn.Client)
		e.Uvarint(r.Txn.Txn.Seq)
		e.Byte(byte(r.Txn.Action))
	}
	for _, k := range r.Opts.Names() {
		e.String(k)
		for _, v := range r.Opts.Ext[k] {
			e.String(v)
		}
	}
}
