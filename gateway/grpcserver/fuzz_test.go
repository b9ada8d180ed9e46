package grpcserver

import (
	"context"
	"reflect"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/certs"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/service"
)

// FuzzDo fuzzes the server's conversion and checking of a gRPC request
// (Do: namespace, identity, operation or group or transaction step, read
// mode, options and their aliases, permissions) from the wire bytes of a
// synodpb.Request, as a read-only user and as the default user, against
// an in-memory backend with a plain, an ESDS (request options) and a
// Paxos (atomic groups, transactions) namespace. Whatever the bytes:
//
//   - no panic; a refusal is a status with a client-error code (never
//     UNKNOWN or INTERNAL) and reached no backend;
//   - a request that reached the backend carries the operations of the
//     message (synodpb.ToOp), a client id, a seq of at least 1, and only
//     options its namespace's protocol declares;
//   - nothing the read-only user sent that reached the backend writes.
func FuzzDo(f *testing.F) {
	h, err := certs.HashPasswordCost("pw", certs.MinIterations)
	if err != nil {
		f.Fatal(err)
	}
	b := gatewaytest.New(
		config.Namespace{Name: "default", Protocol: "memory", Service: "kv"},
		config.Namespace{Name: "es", Protocol: "esds", Service: "kv"},
		config.Namespace{Name: "px", Protocol: "paxos", Service: "kv"})
	s := New(b, Options{Users: []config.User{{Name: "ro", Password: h, Access: map[string]string{"*": config.ReadOnly}}}})
	defer s.Close()
	ro, ok := s.users.Login("ro", "pw")
	if !ok {
		f.Fatal("login")
	}
	kv, _ := service.Lookup("kv")
	for _, in := range []*synodpb.Request{
		{ClientId: 3, Seq: 4, Op: &synodpb.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}, Read: synodpb.ReadMode_READ_MODE_LEASE},
		{Op: &synodpb.Op{Kind: "get", Key: "k"}},
		{Namespace: "px", Ops: []*synodpb.Op{{Kind: "incr", Key: "a"}, {Kind: "get", Key: "b"}}},
		{Namespace: "es", Op: &synodpb.Op{Kind: "get", Key: "k"}, OpId: "x", Prev: []string{"y"}, Strict: true},
		{Namespace: "es", Op: &synodpb.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}, Options: map[string]*synodpb.OptionValues{"prev": {Values: []string{"a"}}}},
		{Namespace: "px", ClientId: 3, Seq: 5, Txn: &synodpb.TxnStep{TxnClient: 3, TxnSeq: 4, Action: synodpb.TxnStep_COMMIT}},
		{Namespace: "px", ClientId: 3, Seq: 4, Txn: &synodpb.TxnStep{Action: synodpb.TxnStep_BEGIN}, Fanout: true},
		{Namespace: "nope", Op: &synodpb.Op{Kind: "get", Key: "k"}},
	} {
		raw, err := proto.Marshal(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw, false)
		f.Add(raw, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, readOnly bool) {
		var in synodpb.Request
		if proto.Unmarshal(data, &in) != nil {
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if readOnly {
			ctx = context.WithValue(ctx, userKey{}, ro)
		}
		before := len(b.Log())
		resp, err := s.Do(ctx, &in)
		log := b.Log()
		if err != nil {
			st, ok := status.FromError(err)
			switch {
			case !ok:
				t.Fatalf("Do returned a non-status error %v", err)
			case st.Code() == codes.Unknown || st.Code() == codes.Internal || st.Code() == codes.OK:
				t.Fatalf("Do refused with %v", st)
			case len(log) != before:
				t.Fatalf("a refused request (%v) reached the backend", st)
			}
			return
		}
		if resp == nil || len(log) != before+1 {
			t.Fatalf("an accepted request: response %v, %d backend requests", resp, len(log)-before)
		}
		got := log[len(log)-1]
		req := got.Req
		if req.ID.Client == 0 || req.ID.Seq == 0 {
			t.Fatalf("request identity %v", req.ID)
		}
		switch {
		case len(in.GetOps()) > 0:
			if len(req.Ops) != len(in.GetOps()) {
				t.Fatalf("group of %d operations reached the backend as %d", len(in.GetOps()), len(req.Ops))
			}
			for i, m := range in.GetOps() {
				if !reflect.DeepEqual(req.Ops[i], synodpb.ToOp(m)) {
					t.Fatalf("operation %d: %v, sent %v", i, req.Ops[i], m)
				}
			}
		case in.GetOp() != nil:
			if !reflect.DeepEqual(req.Op, synodpb.ToOp(in.GetOp())) {
				t.Fatalf("operation %v, sent %v", req.Op, in.GetOp())
			}
		}
		var protoName string
		for _, ns := range b.Namespaces() {
			if ns.Name == got.NS {
				protoName = ns.Protocol
			}
		}
		for _, name := range req.Opts.Names() {
			if _, err := automaton.FindOption(protoName, name); err != nil {
				t.Fatalf("option %q reached namespace %s (%s), which does not declare it", name, got.NS, protoName)
			}
		}
		if readOnly {
			for _, op := range append(req.Ops, req.Op) {
				if op.Kind != "" && !kv.IsRead(op) {
					t.Fatalf("the read-only user's write %v reached the backend", op)
				}
			}
		}
	})
}
