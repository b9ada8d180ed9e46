package client

import (
	"math/rand"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/synod-dev/synod/api/synodpb"
)

// decodeResponse agrees with proto.Unmarshal: on replies of every kind
// (the common ones it decodes, the others it leaves to proto.Unmarshal),
// on repeated fields, truncations and random bytes: the same message, or
// an error from both. And it decodes the common replies itself.
func TestDecodeResponse(t *testing.T) {
	resps := []*synodpb.Response{
		{},
		{Result: &synodpb.Result{Value: &synodpb.Result_Nil{Nil: &synodpb.Empty{}}}},
		{Result: &synodpb.Result{Value: &synodpb.Result_Ok{Ok: &synodpb.Empty{}}}},
		{Result: &synodpb.Result{Value: &synodpb.Result_Bytes{Bytes: []byte("value")}}},
		{Result: &synodpb.Result{Value: &synodpb.Result_Bytes{Bytes: []byte{}}}},
		{Result: &synodpb.Result{Value: &synodpb.Result_Int{Int: -42}}},
		{Result: &synodpb.Result{}},
		{Silent: true},
		{Result: &synodpb.Result{Value: &synodpb.Result_Err{Err: "ERR x"}}},
		{Result: &synodpb.Result{Value: &synodpb.Result_Array{Array: &synodpb.ResultArray{Elems: []*synodpb.Result{{Value: &synodpb.Result_Int{Int: 1}}}}}}},
		{OpId: "a-1", Options: map[string]*synodpb.OptionValues{"opid": {Values: []string{"a-1"}}}, Result: &synodpb.Result{Value: &synodpb.Result_Ok{Ok: &synodpb.Empty{}}}},
		{Result: &synodpb.Result{Value: &synodpb.Result_Ok{Ok: &synodpb.Empty{}}}, Results: []*synodpb.Result{{Value: &synodpb.Result_Int{Int: 1}}}},
	}
	var corpus [][]byte
	for _, r := range resps {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		corpus = append(corpus, b)
	}
	common := len(corpus[:8])
	// A result given twice (merged by proto.Unmarshal), a Result with two
	// values (the last wins), an unknown field, a non-empty Empty.
	twice := append(append([]byte(nil), corpus[3]...), corpus[5]...)
	two := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType),
		protowire.AppendVarint(protowire.AppendTag(protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), []byte("x")), 4, protowire.VarintType), 2))
	full := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType),
		protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), protowire.AppendVarint(protowire.AppendTag(nil, 7, protowire.VarintType), 1)))
	corpus = append(corpus, twice, two, full, protowire.AppendVarint(protowire.AppendTag(corpus[3], 9, protowire.VarintType), 1))
	// ESDS's op ids (decoded by hand: esds), and what is left to proto:
	// two entries, an entry of two values or none, op_id twice (the last
	// wins), an entry twice (the last wins), invalid UTF-8 (refused).
	esds := corpus[10]
	ok := &synodpb.Result{Value: &synodpb.Result_Ok{Ok: &synodpb.Empty{}}}
	for _, r := range []*synodpb.Response{
		{OpId: "a-1", Options: map[string]*synodpb.OptionValues{"opid": {Values: []string{"a-1"}}, "x": {Values: []string{"y"}}}, Result: ok},
		{Options: map[string]*synodpb.OptionValues{"prev": {Values: []string{"a", "b"}}}},
		{Options: map[string]*synodpb.OptionValues{"prev": {}}},
		{Options: map[string]*synodpb.OptionValues{"": {Values: []string{""}}}},
		{OpId: "only"},
	} {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		corpus = append(corpus, b)
	}
	opID := func(id string) []byte {
		return protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), id)
	}
	corpus = append(corpus, append(opID("a"), opID("b")...), append(append([]byte(nil), esds...), esds...),
		append(append([]byte(nil), esds...), opID("\xff")...), append(opID("ok"), opID("")...))
	rnd := rand.New(rand.NewSource(1))
	corpus = append(corpus, variants(rnd, corpus[1:6])...)
	corpus = append(corpus, variants(rnd, [][]byte{esds})...)
	for range 2000 {
		c := make([]byte, rnd.Intn(30))
		rnd.Read(c)
		corpus = append(corpus, c)
	}
	for i, b := range corpus {
		want := &synodpb.Response{}
		werr := proto.Unmarshal(b, want)
		got, gerr := decodeResponse(append([]byte(nil), b...))
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("case %d (%x): proto.Unmarshal %v, decodeResponse %v", i, b, werr, gerr)
		}
		if werr == nil && !proto.Equal(got, want) {
			t.Fatalf("case %d (%x):\n got  %v\n want %v", i, b, got, want)
		}
	}
	for i := range common {
		if decodeCommonResponse(corpus[i]) == nil {
			t.Fatalf("reply %v was left to proto.Unmarshal", resps[i])
		}
	}
	if decodeCommonResponse(esds) == nil {
		t.Fatalf("reply %v (ESDS's op ids) was left to proto.Unmarshal", resps[10])
	}
	t.Logf("%d messages compared", len(corpus))
}

// decodePipelineResponse agrees with proto.Unmarshal on Pipeline messages:
// a lone OK reply (decoded by hand), replies with a status, several
// replies, an empty message, truncations and bit flips.
func TestDecodePipelineResponse(t *testing.T) {
	ok := &synodpb.Response{Result: &synodpb.Result{Value: &synodpb.Result_Bytes{Bytes: []byte("v")}}}
	msgs := []*synodpb.PipelineResponse{
		{Replies: []*synodpb.CallReply{{Id: 7, Response: ok}}},
		{Replies: []*synodpb.CallReply{{Id: 1}}},
		{Replies: []*synodpb.CallReply{{Id: 2, Code: 4, Message: "deadline"}}},
		{Replies: []*synodpb.CallReply{{Id: 1, Response: ok}, {Id: 2, Response: ok}}},
		{Replies: []*synodpb.CallReply{{Id: 3, Response: &synodpb.Response{OpId: "x", Result: ok.Result}}}},
		{Replies: []*synodpb.CallReply{{Id: 4, Response: &synodpb.Response{OpId: "x", Options: map[string]*synodpb.OptionValues{"opid": {Values: []string{"x"}}}, Result: ok.Result}}}},
		{},
	}
	var corpus [][]byte
	for _, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		corpus = append(corpus, b)
	}
	if decodeLoneReply(corpus[0]) == nil || decodeLoneReply(corpus[1]) == nil || decodeLoneReply(corpus[4]) == nil || decodeLoneReply(corpus[5]) == nil {
		t.Fatal("a lone OK reply was left to proto.Unmarshal")
	}
	rnd := rand.New(rand.NewSource(2))
	corpus = append(corpus, variants(rnd, corpus[:6])...)
	for i, b := range corpus {
		want := &synodpb.PipelineResponse{}
		werr := proto.Unmarshal(b, want)
		got, gerr := decodePipelineResponse(append([]byte(nil), b...))
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("case %d (%x): proto.Unmarshal %v, decodePipelineResponse %v", i, b, werr, gerr)
		}
		if werr == nil && !proto.Equal(got, want) {
			t.Fatalf("case %d (%x):\n got  %v\n want %v", i, b, got, want)
		}
	}
}

// variants are every truncation of each message of ms and 200 copies of
// it with one bit flipped, for a codec's agreement with proto.
func variants(rnd *rand.Rand, ms [][]byte) [][]byte {
	var out [][]byte
	for _, b := range ms {
		for i := range len(b) {
			out = append(out, b[:i])
		}
		for range 200 {
			c := append([]byte(nil), b...)
			c[rnd.Intn(len(c))] ^= byte(1 << rnd.Intn(8))
			out = append(out, c)
		}
	}
	return out
}
