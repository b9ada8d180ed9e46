package grpcserver

import (
	"math/rand"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/synod-dev/synod/api/synodpb"
)

// decodeRequest agrees with proto.Unmarshal: on requests of every field
// (the hand decoder's and the ones it leaves to proto.Unmarshal), on
// repeated fields, on strings that are not UTF-8, on truncations and on
// random bytes: the same message, or an error from both. And it decodes
// the common requests itself (the ones it must not leave to
// proto.Unmarshal), with interned kinds and namespaces.
func TestDecodeRequest(t *testing.T) {
	names := []string{"default", "hits"}
	reqs := []*synodpb.Request{
		{},
		{Op: &synodpb.Op{Kind: "get", Key: "k"}},
		{Namespace: "hits", ClientId: 7, Seq: 9, Op: &synodpb.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v"), {}, []byte("nx")}}, Read: synodpb.ReadMode(3), Terse: true, Fanout: true, Strict: true, Unanswered: 8, EndSession: true},
		{Namespace: "other", Op: &synodpb.Op{Kind: "weird", Key: "ключ"}},
		{Op: &synodpb.Op{}},
		{OpId: "x", Op: &synodpb.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}},
		{Prev: []string{"a"}, Options: map[string]*synodpb.OptionValues{"strict": {Values: []string{"1"}}}},
		{Ops: []*synodpb.Op{{Kind: "get", Key: "a"}, {Kind: "get", Key: "b"}}},
		{Txn: &synodpb.TxnStep{Action: synodpb.TxnStep_BEGIN}, ClientId: 1, Seq: 1},
	}
	var corpus [][]byte
	for _, r := range reqs {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		corpus = append(corpus, b)
	}
	// Fields the generated code never writes twice, an unknown field,
	// strings that are not UTF-8.
	op1, _ := proto.Marshal(&synodpb.Op{Kind: "get", Key: "a"})
	op2, _ := proto.Marshal(&synodpb.Op{Key: "b", Args: [][]byte{[]byte("x")}})
	twice := protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType), op1)
	twice = protowire.AppendBytes(protowire.AppendTag(twice, 4, protowire.BytesType), op2)
	corpus = append(corpus, twice,
		protowire.AppendVarint(protowire.AppendTag(corpus[2], 99, protowire.VarintType), 1),
		protowire.AppendVarint(protowire.AppendTag(corpus[2], 2, protowire.VarintType), 5), // client_id again: the last wins
		protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0xff, 0xfe}),
		protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType), protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), []byte{0xc0})),
		protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType), protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 3)),
	)
	rnd := rand.New(rand.NewSource(1))
	corpus = append(corpus, variants(rnd, corpus[1:4])...)
	for range 2000 {
		c := make([]byte, rnd.Intn(40))
		rnd.Read(c)
		corpus = append(corpus, c)
	}
	for i, b := range corpus {
		want := &synodpb.Request{}
		werr := proto.Unmarshal(b, want)
		got, gerr := decodeRequest(append([]byte(nil), b...), names)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("case %d (%x): proto.Unmarshal %v, decodeRequest %v", i, b, werr, gerr)
		}
		if werr == nil && !proto.Equal(got, want) {
			t.Fatalf("case %d (%x):\n got  %v\n want %v", i, b, got, want)
		}
	}
	for _, i := range []int{0, 1, 2, 3, 4} {
		if decodeCommon(corpus[i], names) == nil {
			t.Fatalf("request %v was left to proto.Unmarshal", reqs[i])
		}
	}
	for _, i := range []int{5, 6, 7, 8, 9} {
		if decodeCommon(corpus[i], names) != nil {
			t.Fatalf("case %d was decoded by hand; want it left to proto.Unmarshal", i)
		}
	}
	m := decodeCommon(corpus[2], names)
	if m.r.Namespace != "hits" || m.op.Kind != "set" {
		t.Fatal(m.r.Namespace, m.op.Kind)
	}
	// The session fields (sessions.go): the Go client sends unanswered
	// with every request on a namespace with sessions, so they are common.
	for _, r := range []*synodpb.Request{
		{ClientId: 7, Seq: 9, Unanswered: 9, Op: &synodpb.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}},
		{ClientId: 7, Seq: 10, EndSession: true},
	} {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		m := decodeCommon(b, names)
		if m == nil || !proto.Equal(&m.r, r) {
			t.Fatalf("%v decoded by hand as %v", r, m)
		}
	}
	t.Logf("%d messages compared", len(corpus))
}

// decodePipelineRequest agrees with proto.Unmarshal on Pipeline messages:
// one call of a common request, named (its own client_id and seq) or not
// (decoded by hand), several calls, a call of another request,
// truncations and bit flips.
func TestDecodePipelineRequest(t *testing.T) {
	names := []string{"default"}
	get := &synodpb.Request{Op: &synodpb.Op{Kind: "get", Key: "k"}}
	set := &synodpb.Request{Op: &synodpb.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}, Terse: true}
	msgs := []*synodpb.PipelineRequest{
		{Calls: []*synodpb.Call{{Id: 1, Request: get}}},
		{Calls: []*synodpb.Call{{Id: 0, Request: set}}},
		{Calls: []*synodpb.Call{{Id: 3}}},
		{Calls: []*synodpb.Call{{Id: 1, Request: get}}, ClientId: 5, Seq: 6},
		{Calls: []*synodpb.Call{{Id: 1, Request: get}, {Id: 2, Request: set}}},
		{Calls: []*synodpb.Call{{Id: 1, Request: &synodpb.Request{OpId: "x", Op: get.Op}}}},
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
	for i := range 4 {
		if decodeLoneCall(corpus[i], names) == nil {
			t.Fatalf("message %d was left to proto.Unmarshal", i)
		}
	}
	for i := 4; i < 6; i++ {
		if decodeLoneCall(corpus[i], names) != nil {
			t.Fatalf("message %d was decoded by hand", i)
		}
	}
	rnd := rand.New(rand.NewSource(3))
	corpus = append(corpus, variants(rnd, corpus[:6])...)
	for i, b := range corpus {
		want := &synodpb.PipelineRequest{}
		werr := proto.Unmarshal(b, want)
		got, gerr := decodePipelineRequest(append([]byte(nil), b...), names)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("case %d (%x): proto.Unmarshal %v, decodePipelineRequest %v", i, b, werr, gerr)
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

// A Phases message is decoded by synodpb's hand decoder (one array of
// phases per message), and anything it gives up on by proto.Unmarshal:
// an unknown field is kept, invalid UTF-8 refused.
func TestDecodePhaseRequest(t *testing.T) {
	in := &synodpb.PhaseRequest{Namespace: "ns", Phases: []*synodpb.Phase{
		{Id: 1, Key: "a"}, {Id: 2, Key: "b", Tag: "1:1:client/01", Value: []byte("v")}, {Id: 3, Key: "c", Tag: "2:1:n1", Tomb: true}}}
	b, err := proto.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var m synodpb.PhaseRequest
	if err := decode(b, &m); err != nil || !proto.Equal(&m, in) {
		t.Fatalf("decode: %v, %v; want %v", &m, err, in)
	}
	// The hand decoder puts the phases in one array.
	// By hand: fewer allocations than proto.Unmarshal (one array of
	// phases, not one phase at a time).
	hand := testing.AllocsPerRun(50, func() { decode(b, &synodpb.PhaseRequest{}) })
	pb := testing.AllocsPerRun(50, func() { proto.Unmarshal(b, &synodpb.PhaseRequest{}) })
	if hand >= pb {
		t.Errorf("decode made %.0f allocations, proto.Unmarshal %.0f: not decoded by hand", hand, pb)
	}
	unk := protowire.AppendVarint(protowire.AppendTag(append([]byte(nil), b...), 9, protowire.VarintType), 5)
	var u synodpb.PhaseRequest
	if err := decode(unk, &u); err != nil || len(u.GetPhases()) != 3 || len(u.ProtoReflect().GetUnknown()) == 0 {
		t.Errorf("decode with an unknown field: %v, %v, unknown %x", &u, err, u.ProtoReflect().GetUnknown())
	}
	bad := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0xff})
	if err := decode(bad, &synodpb.PhaseRequest{}); err == nil {
		t.Errorf("decode accepted a namespace of invalid UTF-8")
	}
}
