package client

import (
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
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
//
// An ESDS reply carries its op id twice, as op_id and as the options
// entry opid (gateway/grpcserver Server.response): proto.Unmarshal made
// of them eleven or twelve allocations per call (the map by reflection,
// its entry, the OptionValues, the list, three strings; branch grpc52,
// session 52). The hand decoder takes op_id and one options entry of one
// value: the strings are msg's bytes (msg is never written again: see
// above), the OptionValues and its list are respMsg's, the map is the one
// allocation left; anything else (two entries, several values, invalid
// UTF-8, which proto.Unmarshal refuses) falls back.

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
	optv   synodpb.OptionValues // the one options entry's value
	optval [1]string            // its one value
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
		case num == 2 && typ == protowire.BytesType: // op_id
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || m.r.OpId != "" || !utf8.Valid(v) {
				return false // given twice (the last wins): left to proto
			}
			m.r.OpId = bytesString(v)
			b = b[n:]
		case num == 3 && typ == protowire.BytesType: // an options entry
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || m.r.Options != nil || !decodeOptionEntry(v, m) {
				return false
			}
			b = b[n:]
		default:
			return false
		}
	}
	return true
}

// decodeOptionEntry decodes an options map entry of a key and one value
// into m (the key interned when it is automaton.OptOpID), reporting
// whether it was one.
func decodeOptionEntry(b []byte, m *respMsg) bool {
	var key, val []byte
	haveKey, haveVal := false, false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return false
		}
		b = b[n:]
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case num == 1 && !haveKey:
			key, haveKey = v, true
		case num == 2 && !haveVal:
			val, haveVal = v, true
		default:
			return false
		}
	}
	if !haveKey || !haveVal || !utf8.Valid(key) {
		return false
	}
	// The value, OptionValues: exactly one values field.
	num, typ, n := protowire.ConsumeTag(val)
	if n < 0 || num != 1 || typ != protowire.BytesType {
		return false
	}
	v, n2 := protowire.ConsumeBytes(val[n:])
	if n2 < 0 || n+n2 != len(val) || !utf8.Valid(v) {
		return false
	}
	k := automaton.OptOpID
	if string(key) != k {
		k = bytesString(key)
	}
	m.optval[0] = bytesString(v)
	m.optv.Values = m.optval[:]
	m.r.Options = map[string]*synodpb.OptionValues{k: &m.optv}
	return true
}

// bytesString is b as a string without a copy: b is a slice of a
// received message, which is never written again (decodeResponse).
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
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
