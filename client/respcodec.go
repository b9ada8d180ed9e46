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
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType: // result
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || m.r.Result != nil || !decodeResult(v, m) {
				return nil
			}
			m.r.Result = &m.res
			b = b[n:]
		case num == 5 && typ == protowire.VarintType: // silent
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil
			}
			m.r.Silent = v != 0
			b = b[n:]
		default:
			return nil
		}
	}
	return m
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
