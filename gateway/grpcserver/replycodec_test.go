package grpcserver

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// appendResponse writes the Response that Server.response builds, for
// every kind of result, nested arrays (whose error elements keep their
// text: only the top result's gets a Redis code), groups, silent answers,
// op ids and options, terse or not: both decoded, they are equal.
func TestAppendResponse(t *testing.T) {
	s := New(kvBackend(), Options{Transport: TransportDirect})
	defer s.Close()
	results := []service.Result{
		{Type: service.ResultNil},
		{Type: service.ResultOK},
		{Type: service.ResultBytes},
		{Type: service.ResultBytes, Bytes: []byte{}},
		{Type: service.ResultBytes, Bytes: make([]byte, 300)},
		{Type: service.ResultInt, Int: -7},
		{Type: service.ResultInt, Int: 1 << 40},
		{Type: service.ResultErr, Err: "oops"},
		{Type: service.ResultErr, Err: "TRYAGAIN no quorum"},
		{Type: service.ResultErr},
		{Type: service.ResultArray},
		{Type: service.ResultArray, Elems: []service.Result{{Type: service.ResultInt, Int: 3}, {Type: service.ResultErr, Err: "inner"},
			{Type: service.ResultArray, Elems: []service.Result{{Type: service.ResultBytes, Bytes: []byte("x")}, {Type: service.ResultNil}}}}},
		{Type: service.ResultType(99)},
	}
	opts := []automaton.Options{
		{},
		{Ext: map[string][]string{automaton.OptOpID: {"00000000000000ab-3"}, "prev": {"a", "b"}, "empty": {}, "strict": {"1"}}},
	}
	n := 0
	for _, o := range opts {
		req := automaton.Request{ID: automaton.RequestID{Client: 9, Seq: 4}, Opts: o}
		for _, terse := range []bool{false, true} {
			for i, r := range results {
				for _, res := range []automaton.Response{
					{Result: r},
					{Result: service.Result{Type: service.ResultOK}, Results: []service.Result{r, results[(i+1)%len(results)]}},
					{Silent: true},
				} {
					name := fmt.Sprintf("opts %d terse %v result %d %+v", len(o.Ext), terse, i, res)
					want, err := s.response(context.Background(), context.Background(), req, res, nil, terse)
					if err != nil {
						t.Fatal(err)
					}
					var got synodpb.Response
					if err := proto.Unmarshal(appendResponse(nil, req, res, terse), &got); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if !proto.Equal(&got, want) {
						t.Fatalf("%s:\n got  %v\n want %v", name, &got, want)
					}
					n++
				}
			}
		}
	}
	t.Logf("%d responses compared", n)
}

// A lone Pipeline call's reply written by hand (loneReply.appendFrame) is
// the framed PipelineResponse of the reply message it stands for (msg),
// for answers of each kind, ids 0 and not, terse or not; a reply that is
// a message (a status) is framed as one.
func TestLoneReplyFrame(t *testing.T) {
	s := New(kvBackend(), Options{Transport: TransportDirect})
	defer s.Close()
	p := &pipe{s: s}
	req := automaton.Request{ID: automaton.RequestID{Client: 1, Seq: 2}, Opts: automaton.Options{Ext: map[string][]string{automaton.OptOpID: {"x-1"}}}}
	lrs := []loneReply{{r: failed(5, fmt.Errorf("boom"))}}
	for _, id := range []uint64{0, 1, 1 << 40} {
		for _, terse := range []bool{false, true} {
			for _, r := range []service.Result{{Type: service.ResultNil}, {Type: service.ResultBytes, Bytes: make([]byte, 200)}, {Type: service.ResultErr, Err: "x"}} {
				lrs = append(lrs, loneReply{id: id, req: req, res: automaton.Response{Result: r}, terse: terse})
			}
		}
	}
	for i, lr := range lrs {
		b, err := lr.appendFrame(p, []byte("prefix"))
		if err != nil {
			t.Fatal(err)
		}
		if string(b[:6]) != "prefix" || int(b[7])<<24|int(b[8])<<16|int(b[9])<<8|int(b[10]) != len(b)-11 || b[6] != 0 {
			t.Fatalf("case %d: bad frame prefix %x", i, b[:11])
		}
		var got synodpb.PipelineResponse
		if err := proto.Unmarshal(b[11:], &got); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		want := &synodpb.PipelineResponse{Replies: []*synodpb.CallReply{lr.msg(s)}}
		if !proto.Equal(&got, want) {
			t.Fatalf("case %d:\n got  %v\n want %v", i, &got, want)
		}
	}
}
