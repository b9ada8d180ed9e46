package client

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/synod-dev/synod/api/synodpb"
)

// A Do's reply decoded by hand (issue 28 item 6, branch grpc51, session
// 51).
//
// proto.Unmarshal makes a Response, its Result, the Result's oneof
// wrapper, an Empty for nil and ok, and a copy of a value: four or five
// allocations per call. decodeResponse reads the common reply (one
// result, of any kind but an array, and silent) into one allocation
// holding all of them, the value a slice of msg itself: msg is the
// stream's own copy of the message (handleData assembles each message in
// a buffer of its own), so the reply may keep it. Anything else (op id,
// options, a group's results, an array, a field this client does not
// know, a repeated result) or anything malformed falls back to
// proto.Unmarshal, which decides. TestDecodeResponse checks both agree.

// respMsg is a Response, its Result and the Result's value in one
// allocation (one of the wrappers is used).
type respMsg struct {
	r      synodpb.Response
	res    synodpb.Result
	empty  synodpb.Empty
	nilv   synodpb.Result_Nil
	okv    synodpb.Result_Ok
	bytesv synodpb.Result_Bytes
	intv   synodpb.Result_Int
}

// decodeResponse decodes msg (a Do's reply) into a Response.
func decodeResponse(msg []byte) (*synodpb.Response, error) {
	if m := decodeCommonResponse(msg); m != nil {
		return &m.r, nil
	}
	resp := &synodpb.Response{}
	if err := synodpb.UnmarshalMessage(msg, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// decodeCommonResponse is decodeResponse's hand decoder: nil when the
// reply is not a common one (or malformed).
func decodeCommonResponse(b []byte) *respMsg {
	m := &respMsg{}
	if !decodeCommonResponseInto(b, m) {
		return nil
	}
	return m
}

// decodeCommonResponseInto is decodeCommonResponse into m, reporting
// whether the reply was a common one.
func decodeCommonResponseInto(b []byte, m *respMsg) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType: // result
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || m.r.Result != nil || !decodeResult(v, m) {
				return false
			}
			m.r.Result = &m.res
			b = b[n:]
		case num == 5 && typ == protowire.VarintType: // silent
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			m.r.Silent = v != 0
			b = b[n:]
		default:
			return false
		}
	}
	return true
}

// decodeResult decodes a Result of one field (nil, ok, bytes or int) into
// m.res, reporting whether it was one.
func decodeResult(b []byte, m *respMsg) bool {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return len(b) == 0 // no value: proto.Unmarshal's too (an empty Result)
	}
	b = b[n:]
	switch {
	case (num == 1 || num == 2) && typ == protowire.BytesType:
		v, n := protowire.ConsumeBytes(b)
		if n < 0 || len(v) != 0 || n != len(b) {
			return false
		}
		if num == 1 {
			m.nilv.Nil = &m.empty
			m.res.Value = &m.nilv
		} else {
			m.okv.Ok = &m.empty
			m.res.Value = &m.okv
		}
	case num == 3 && typ == protowire.BytesType:
		v, n := protowire.ConsumeBytes(b)
		if n < 0 || n != len(b) {
			return false
		}
		if v == nil {
			v = []byte{}
		}
		m.bytesv.Bytes = v[:len(v):len(v)]
		m.res.Value = &m.bytesv
	case num == 4 && typ == protowire.VarintType:
		v, n := protowire.ConsumeVarint(b)
		if n < 0 || n != len(b) {
			return false
		}
		m.intv.Int = protowire.DecodeZigZag(v)
		m.res.Value = &m.intv
	default:
		return false
	}
	return true
}

// pipeMsg is a PipelineResponse of one reply, with its Response, in one
// allocation.
type pipeMsg struct {
	pr   synodpb.PipelineResponse
	refs [1]*synodpb.CallReply
	cr   synodpb.CallReply
	resp respMsg
}

// decodePipelineResponse decodes msg (a Pipeline stream's message): by
// hand when it is one reply (a lone call's) of status OK with a common
// Response, else with proto.Unmarshal.
func decodePipelineResponse(msg []byte) (*synodpb.PipelineResponse, error) {
	if m := decodeLoneReply(msg); m != nil {
		return &m.pr, nil
	}
	pr := &synodpb.PipelineResponse{}
	if err := synodpb.UnmarshalMessage(msg, pr); err != nil {
		return nil, err
	}
	return pr, nil
}

// decodeLoneReply is decodePipelineResponse's hand decoder: nil when msg
// is not a lone OK reply with a common Response (or is malformed).
func decodeLoneReply(b []byte) *pipeMsg {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != 1 || typ != protowire.BytesType {
		return nil
	}
	cr, n2 := protowire.ConsumeBytes(b[n:])
	if n2 < 0 || n+n2 != len(b) {
		return nil // not exactly one reply
	}
	m := &pipeMsg{}
	for len(cr) > 0 {
		num, typ, n := protowire.ConsumeTag(cr)
		if n < 0 {
			return nil
		}
		cr = cr[n:]
		switch {
		case num == 1 && typ == protowire.VarintType: // id
			v, n := protowire.ConsumeVarint(cr)
			if n < 0 {
				return nil
			}
			m.cr.Id = v
			cr = cr[n:]
		case num == 4 && typ == protowire.BytesType: // response
			v, n := protowire.ConsumeBytes(cr)
			if n < 0 || m.cr.Response != nil || !decodeCommonResponseInto(v, &m.resp) {
				return nil
			}
			m.cr.Response = &m.resp.r
			cr = cr[n:]
		default:
			return nil // a status (code, message), or a field not known here
		}
	}
	m.refs[0] = &m.cr
	m.pr.Replies = m.refs[:]
	return m
}
