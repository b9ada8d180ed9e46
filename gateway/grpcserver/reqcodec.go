package grpcserver

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/synod-dev/synod/api/synodpb"
)

// A Do's request decoded by hand (issue 28 item 6, branch grpc51, session
// 51).
//
// proto.Unmarshal makes a Request, its Op, a string for the kind, one for
// the key, the args' list and a copy of each arg: six allocations for a
// SET. decodeRequest reads the common request (namespace, identity, one
// op, read mode, strict, fanout, terse, the session's unanswered and
// end_session) into one allocation holding the
// Request and its Op, with the kind and the namespace taken from the
// strings the server knows when they match (a kind the service knows, a
// namespace of the node's), the key's string made, and the args slices
// of msg itself: msg is the stream's own copy of the message (handleData
// assembles every message in a buffer of its own, never reused), so the
// request may keep it. Any other field (op_id, prev, options, ops, txn,
// one this server does not know), a repeated op, or anything malformed
// (including a string that is not UTF-8, which proto3 refuses) falls
// back to proto.Unmarshal, which decides. TestDecodeRequest checks both
// agree.

// reqMsg is a Request and its Op in one allocation.
type reqMsg struct {
	r  synodpb.Request
	op synodpb.Op
}

// knownKinds are the operation kinds whose strings decodeRequest reuses.
var knownKinds = []string{"get", "set", "del", "exists", "incr", "append", "cas", "read", "add", "mget", "mset", "getset", "setnx", "decr", "incrby", "decrby", "strlen"}

// decodeRequest decodes msg into a Request: by hand for the common
// request, else with proto.Unmarshal; names are the namespaces' names.
func decodeRequest(msg []byte, names []string) (*synodpb.Request, error) {
	if m := decodeCommon(msg, names); m != nil {
		return &m.r, nil
	}
	in := &synodpb.Request{}
	if err := decode(msg, in); err != nil {
		return nil, err
	}
	return in, nil
}

// decodeCommon is decodeRequest's hand decoder: nil when the request is
// not a common one (or malformed).
func decodeCommon(b []byte, names []string) *reqMsg {
	m := &reqMsg{}
	if !decodeCommonInto(b, names, m) {
		return nil
	}
	return m
}

// decodeCommonInto is decodeCommon into m, reporting whether the request
// was a common one.
func decodeCommonInto(b []byte, names []string, m *reqMsg) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType: // namespace
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || !utf8.Valid(v) {
				return false
			}
			m.r.Namespace = intern(v, names)
			b = b[n:]
		case (num == 2 || num == 3 || num == 5 || num == 8 || num == 12 || num == 13 || num == 14 || num == 15) && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			b = b[n:]
			switch num {
			case 2:
				m.r.ClientId = v
			case 3:
				m.r.Seq = v
			case 5:
				m.r.Read = synodpb.ReadMode(int32(v))
			case 8:
				m.r.Strict = v != 0
			case 12:
				m.r.Fanout = v != 0
			case 13:
				m.r.Terse = v != 0
			case 14:
				m.r.Unanswered = v
			case 15:
				m.r.EndSession = v != 0
			}
		case num == 4 && typ == protowire.BytesType: // op
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || m.r.Op != nil || !decodeOp(v, &m.op) {
				return false // a second op merges into the first: proto.Unmarshal's
			}
			m.r.Op = &m.op
			b = b[n:]
		default:
			return false
		}
	}
	return true
}

// decodeOp decodes an Op into op, reporting whether it was a plain one.
func decodeOp(b []byte, op *synodpb.Op) bool {
	nargs := 0
	for c := b; len(c) > 0; {
		num, typ, n := protowire.ConsumeTag(c)
		if n < 0 || typ != protowire.BytesType || num < 1 || num > 3 {
			return false
		}
		c = c[n:]
		v, n := protowire.ConsumeBytes(c)
		if n < 0 {
			return false
		}
		c = c[n:]
		switch num {
		case 1, 2:
			if !utf8.Valid(v) {
				return false
			}
		case 3:
			nargs++
		}
	}
	if nargs > 0 {
		op.Args = make([][]byte, 0, nargs)
	}
	for len(b) > 0 {
		num, _, n := protowire.ConsumeTag(b)
		b = b[n:]
		v, n := protowire.ConsumeBytes(b)
		b = b[n:]
		switch num {
		case 1:
			op.Kind = intern(v, knownKinds)
		case 2:
			op.Key = string(v)
		case 3:
			if v == nil {
				v = []byte{} // present, empty: as proto.Unmarshal
			}
			op.Args = append(op.Args, v[:len(v):len(v)])
		}
	}
	return true
}

// intern is v as a string: one of known when it is one (no allocation),
// else a new one.
func intern(v []byte, known []string) string {
	for _, k := range known {
		if string(v) == k {
			return k
		}
	}
	return string(v)
}

// pipeReq is a PipelineRequest of one call, with its Request, in one
// allocation.
type pipeReq struct {
	pr   synodpb.PipelineRequest
	refs [1]*synodpb.Call
	call synodpb.Call
	req  reqMsg
}

// decodePipelineRequest decodes msg (a Pipeline stream's message): by
// hand when it is one call (a lone call's, named or not) of a common
// request, else with proto.Unmarshal.
func decodePipelineRequest(msg []byte, names []string) (*synodpb.PipelineRequest, error) {
	if m := decodeLoneCall(msg, names); m != nil {
		return &m.pr, nil
	}
	pr := &synodpb.PipelineRequest{}
	if err := decode(msg, pr); err != nil {
		return nil, err
	}
	return pr, nil
}

// decodeLoneCall is decodePipelineRequest's hand decoder: nil when msg is
// not one call of a common request (or is malformed).
func decodeLoneCall(b []byte, names []string) *pipeReq {
	var call []byte
	m := &pipeReq{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType && call == nil: // calls: exactly one
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil
			}
			call = v
			if call == nil {
				call = []byte{}
			}
			b = b[n:]
		case (num == 2 || num == 3) && typ == protowire.VarintType: // client_id, seq
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil
			}
			if num == 2 {
				m.pr.ClientId = v
			} else {
				m.pr.Seq = v
			}
			b = b[n:]
		default:
			return nil
		}
	}
	if call == nil {
		return nil
	}
	for len(call) > 0 {
		num, typ, n := protowire.ConsumeTag(call)
		if n < 0 {
			return nil
		}
		call = call[n:]
		switch {
		case num == 1 && typ == protowire.VarintType: // id
			v, n := protowire.ConsumeVarint(call)
			if n < 0 {
				return nil
			}
			m.call.Id = v
			call = call[n:]
		case num == 2 && typ == protowire.BytesType: // request
			v, n := protowire.ConsumeBytes(call)
			if n < 0 || m.call.Request != nil || !decodeCommonInto(v, names, &m.req) {
				return nil
			}
			m.call.Request = &m.req.r
			call = call[n:]
		default:
			return nil
		}
	}
	m.refs[0] = &m.call
	m.pr.Calls = m.refs[:]
	return m
}
