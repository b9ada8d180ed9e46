package grpcserver

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// A Do's reply written straight from the Backend's answer (issue 28 item
// 6, branch grpc51, session 51).
//
// Server.response builds a synodpb.Response (with its Result, the Result's
// oneof wrapper, an Empty for nil and ok, an options map and its values)
// that is marshalled once and dropped: three to six allocations per call.
// appendResponse appends the same message's wire form (api/synod.proto's
// Response, as proto.Marshal writes it; TestAppendResponse decodes both
// and compares them) to a buffer without building it. Only a Do answered
// without an error comes here (answerDo); errors are statuses, and
// Pipeline and the other calls keep the messages.

// Response's and Result's field numbers (api/synod.proto).
const (
	respResult  = 1
	respOpID    = 2
	respOptions = 3
	respResults = 4
	respSilent  = 5

	resNil   = 1
	resOK    = 2
	resBytes = 3
	resInt   = 4
	resErr   = 5
	resArray = 6
)

// appendResponse appends the wire form of the Response that Server.response
// makes of res, req's answer (without op id and options when terse).
func appendResponse(b []byte, req automaton.Request, res automaton.Response, terse bool) []byte {
	if res.Silent {
		b = appendRespOptions(b, req, terse)
		b = protowire.AppendTag(b, respSilent, protowire.VarintType)
		return protowire.AppendVarint(b, 1)
	}
	b = protowire.AppendTag(b, respResult, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(resultSize(res.Result, 0)))
	b = appendResult(b, res.Result, 0)
	b = appendRespOptions(b, req, terse)
	for _, r := range res.Results {
		b = protowire.AppendTag(b, respResults, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(resultSize(r, 0)))
		b = appendResult(b, r, 0)
	}
	return b
}

// appendRespOptions appends op_id and options (Server.response's) unless
// terse.
func appendRespOptions(b []byte, req automaton.Request, terse bool) []byte {
	if terse {
		return b
	}
	if id := req.Opts.String(automaton.OptOpID); id != "" {
		b = protowire.AppendTag(b, respOpID, protowire.BytesType)
		b = protowire.AppendString(b, id)
	}
	for k, vs := range req.Opts.Ext {
		// A map entry: key = 1, value (OptionValues{values = 1}) = 2.
		vsize := 0
		for _, v := range vs {
			vsize += protowire.SizeTag(1) + protowire.SizeBytes(len(v))
		}
		esize := protowire.SizeTag(1) + protowire.SizeBytes(len(k)) + protowire.SizeTag(2) + protowire.SizeBytes(vsize)
		b = protowire.AppendTag(b, respOptions, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(esize))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(vsize))
		for _, v := range vs {
			b = protowire.AppendTag(b, 1, protowire.BytesType)
			b = protowire.AppendString(b, v)
		}
	}
	return b
}

// wireResult is r as fromResult and synodpb.FromResult convert it: which
// field of Result's oneof it sets and, for err, its text (given a Redis
// code at the top, depth 0, only, as fromResult does).
func wireResult(r service.Result, depth int) (field protowire.Number, text string) {
	switch r.Type {
	case service.ResultNil:
		return resNil, ""
	case service.ResultOK:
		return resOK, ""
	case service.ResultBytes:
		return resBytes, ""
	case service.ResultInt:
		return resInt, ""
	case service.ResultErr:
		if depth > 0 {
			return resErr, r.Err
		}
		return resErr, synoderr.Text(r.Err)
	case service.ResultArray:
		return resArray, ""
	}
	return resErr, fmt.Sprintf("ERR internal error: result type %d", r.Type)
}

// resultSize is the size of r's Result message (depth: its nesting in
// arrays, for the array's elements).
func resultSize(r service.Result, depth int) int {
	f, text := wireResult(r, depth)
	n := protowire.SizeTag(f)
	switch f {
	case resNil, resOK:
		return n + protowire.SizeBytes(0)
	case resBytes:
		return n + protowire.SizeBytes(len(r.Bytes))
	case resInt:
		return n + protowire.SizeVarint(protowire.EncodeZigZag(r.Int))
	case resErr:
		return n + protowire.SizeBytes(len(text))
	}
	return n + protowire.SizeBytes(arraySize(r, depth))
}

// arraySize is the size of an array result's ResultArray message.
func arraySize(r service.Result, depth int) int {
	n := 0
	for _, e := range r.Elems {
		n += protowire.SizeTag(1) + protowire.SizeBytes(resultSize(e, depth+1))
	}
	return n
}

// appendResult appends r's Result message (without its tag and length).
func appendResult(b []byte, r service.Result, depth int) []byte {
	f, text := wireResult(r, depth)
	switch f {
	case resNil, resOK:
		b = protowire.AppendTag(b, f, protowire.BytesType)
		return protowire.AppendVarint(b, 0)
	case resBytes:
		b = protowire.AppendTag(b, f, protowire.BytesType)
		return protowire.AppendBytes(b, r.Bytes)
	case resInt:
		b = protowire.AppendTag(b, f, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeZigZag(r.Int))
	case resErr:
		b = protowire.AppendTag(b, f, protowire.BytesType)
		return protowire.AppendString(b, text)
	}
	b = protowire.AppendTag(b, resArray, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(arraySize(r, depth)))
	for _, e := range r.Elems {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(resultSize(e, depth+1)))
		b = appendResult(b, e, depth+1)
	}
	return b
}
