package synodpb

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

func samplePhaseRequest(n int) *PhaseRequest {
	m := &PhaseRequest{Namespace: "ns"}
	for i := range n {
		p := &Phase{Id: uint64(i + 1), Key: fmt.Sprintf("key:%06d", i)}
		switch i % 3 {
		case 1:
			p.Tag, p.Value = fmt.Sprintf("%d:%d:client/%016x", i+1, i, i), []byte(fmt.Sprintf("value %d", i))
		case 2:
			p.Tag, p.Tomb = "7:1:n1", true
		}
		m.Phases = append(m.Phases, p)
	}
	return m
}

func samplePhaseResponse(n int) *PhaseResponse {
	m := &PhaseResponse{}
	for i := range n {
		r := &PhaseReply{Id: uint64(1 << (i % 40))}
		switch i % 4 {
		case 1:
			r.Tag, r.Value, r.Present = "3:9:client/00ff", []byte("v"), true
		case 2:
			r.Code, r.Message = 14, "unavailable"
		case 3:
			r.Err = "TRYAGAIN later"
		}
		m.Replies = append(m.Replies, r)
	}
	return m
}

// checkPhaseDecoders: whenever a hand decoder accepts b, proto.Unmarshal
// accepts it too and reads the same message.
func checkPhaseDecoders(t *testing.T, b []byte) (reqOK, respOK bool) {
	t.Helper()
	var hq PhaseRequest
	if reqOK = DecodePhaseRequest(b, &hq); reqOK {
		var pq PhaseRequest
		if err := proto.Unmarshal(b, &pq); err != nil {
			t.Fatalf("DecodePhaseRequest accepted %x, proto.Unmarshal: %v", b, err)
		}
		if !proto.Equal(&hq, &pq) {
			t.Fatalf("DecodePhaseRequest(%x) = %v, proto.Unmarshal %v", b, &hq, &pq)
		}
	}
	var hr PhaseResponse
	if respOK = DecodePhaseResponse(b, &hr); respOK {
		var pr PhaseResponse
		if err := proto.Unmarshal(b, &pr); err != nil {
			t.Fatalf("DecodePhaseResponse accepted %x, proto.Unmarshal: %v", b, err)
		}
		if !proto.Equal(&hr, &pr) {
			t.Fatalf("DecodePhaseResponse(%x) = %v, proto.Unmarshal %v", b, &hr, &pr)
		}
	}
	return reqOK, respOK
}

// The Phases messages are decoded by hand, as proto.Unmarshal decodes them,
// also after truncations, bit flips, unknown fields, repeated fields and
// invalid UTF-8 (on which the hand decoders give up); UnmarshalMessage
// falls back to proto.Unmarshal whatever they give up on.
func TestPhaseDecoders(t *testing.T) {
	for _, n := range []int{0, 1, 5, 100} {
		qb, _ := proto.Marshal(samplePhaseRequest(n))
		if ok, _ := checkPhaseDecoders(t, qb); !ok {
			t.Fatalf("a request of %d phases not decoded by hand", n)
		}
		rb, _ := proto.Marshal(samplePhaseResponse(n))
		if _, ok := checkPhaseDecoders(t, rb); !ok {
			t.Fatalf("a response of %d replies not decoded by hand", n)
		}
		var q PhaseRequest
		if err := UnmarshalMessage(qb, &q); err != nil || !proto.Equal(&q, samplePhaseRequest(n)) {
			t.Fatalf("UnmarshalMessage of %d phases: %v, %v", n, &q, err)
		}
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		for _, b := range [][]byte{qb, rb} {
			for i := range len(b) {
				checkPhaseDecoders(t, b[:i])
			}
			for range 2000 {
				c := append([]byte(nil), b...)
				if len(c) == 0 {
					break
				}
				for range 1 + rng.IntN(3) {
					c[rng.IntN(len(c))] ^= 1 << rng.IntN(8)
				}
				checkPhaseDecoders(t, c)
			}
		}
	}
	// Unknown fields, and a known field in another wire type: proto's.
	unk := protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 1)
	if ok, resp := checkPhaseDecoders(t, unk); ok || resp {
		t.Errorf("an unknown field decoded by hand")
	}
	var q PhaseRequest
	if err := UnmarshalMessage(unk, &q); err != nil || len(q.ProtoReflect().GetUnknown()) == 0 {
		t.Errorf("UnmarshalMessage of an unknown field: %v, unknown %x", err, q.ProtoReflect().GetUnknown())
	}
	// Invalid UTF-8 in a key: proto refuses it, and so does UnmarshalMessage.
	bad := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType),
		protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), []byte{0xff}))
	if ok, _ := checkPhaseDecoders(t, bad); ok {
		t.Errorf("invalid UTF-8 decoded by hand")
	}
	if err := UnmarshalMessage(bad, &PhaseRequest{}); err == nil {
		t.Errorf("UnmarshalMessage accepted a key of invalid UTF-8")
	}
	// A field repeated: the last one wins, as in proto.
	two := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("a"))
	two = protowire.AppendBytes(protowire.AppendTag(two, 1, protowire.BytesType), []byte("b"))
	if ok, _ := checkPhaseDecoders(t, two); !ok {
		t.Errorf("a repeated namespace not decoded by hand")
	}
}

// The hand decoders allocate one array of phases (replies) per message,
// not one phase (reply) at a time as proto.Unmarshal does.
func TestPhaseDecodersAllocations(t *testing.T) {
	qb, _ := proto.Marshal(samplePhaseRequest(30))
	rb, _ := proto.Marshal(samplePhaseResponse(30))
	hand := testing.AllocsPerRun(100, func() { UnmarshalMessage(qb, &PhaseRequest{}); UnmarshalMessage(rb, &PhaseResponse{}) })
	pb := testing.AllocsPerRun(100, func() { proto.Unmarshal(qb, &PhaseRequest{}); proto.Unmarshal(rb, &PhaseResponse{}) })
	t.Logf("30 phases and 30 replies: %.0f allocations by hand, %.0f by proto.Unmarshal", hand, pb)
	if hand >= pb-50 {
		t.Errorf("%.0f allocations by hand, %.0f by proto.Unmarshal: want at least 50 fewer", hand, pb)
	}
}

func BenchmarkPhaseDecode(b *testing.B) {
	qb, _ := proto.Marshal(samplePhaseRequest(30))
	rb, _ := proto.Marshal(samplePhaseResponse(30))
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			UnmarshalMessage(qb, &PhaseRequest{})
			UnmarshalMessage(rb, &PhaseResponse{})
		}
	})
	b.Run("proto", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			proto.Unmarshal(qb, &PhaseRequest{})
			proto.Unmarshal(rb, &PhaseResponse{})
		}
	})
}

// A phase's (a reply's) fields are copied into one buffer of its own: one
// allocation per phase with fields, whatever their number, and none of
// them shares memory with the message or with another field (writing to
// or appending to a value changes no string).
func TestPhaseFieldsOneBuffer(t *testing.T) {
	store := &Phase{Id: 9, Key: "key:000001", Tag: "3:1:client/00ff", Value: []byte("value one")}
	qb, _ := proto.Marshal(&PhaseRequest{Namespace: "ns", Phases: []*Phase{store, store, store}})
	// The namespace, the phases' array and list, one buffer per phase.
	if got := testing.AllocsPerRun(100, func() { DecodePhaseRequest(qb, &PhaseRequest{}) }); got != 6 {
		t.Errorf("decoding 3 store phases: %.0f allocations, want 6", got)
	}
	rb, _ := proto.Marshal(&PhaseResponse{Replies: []*PhaseReply{{Id: 1, Tag: "3:1:client/00ff", Value: []byte("v"), Present: true}, {Id: 2, Err: "ERR x", Message: "m"}}})
	if got := testing.AllocsPerRun(100, func() { DecodePhaseResponse(rb, &PhaseResponse{}) }); got != 4 {
		t.Errorf("decoding 2 replies with fields: %.0f allocations, want 4", got)
	}
	var m PhaseRequest
	if !DecodePhaseRequest(qb, &m) {
		t.Fatal("not decoded by hand")
	}
	p := m.Phases[1]
	clear(qb) // the message's buffer is not referenced
	p.Value[0] = 'V'
	p.Value = append(p.Value, "tail"...)
	if p.Key != store.Key || p.Tag != store.Tag || m.Phases[0].Key != store.Key || string(m.Phases[0].Value) != "value one" || string(p.Value) != "Value onetail" {
		t.Errorf("fields share memory: key %q tag %q value %q, other phase %q %q", p.Key, p.Tag, p.Value, m.Phases[0].Key, m.Phases[0].Value)
	}
	var r PhaseResponse
	if !DecodePhaseResponse(rb, &r) {
		t.Fatal("reply not decoded by hand")
	}
	r.Replies[0].Value = append(r.Replies[0].Value, "x"...)
	if r.Replies[0].Tag != "3:1:client/00ff" || r.Replies[1].Err != "ERR x" || r.Replies[1].Message != "m" {
		t.Errorf("reply fields share memory: %v", &r)
	}
}
