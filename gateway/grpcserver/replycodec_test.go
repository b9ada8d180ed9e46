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
