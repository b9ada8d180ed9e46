package grpcserver

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/protocol/unreplicated"
	"github.com/synod-dev/synod/service"
)

// newUnreplicatedBackend really runs the unreplicated protocol.
func newUnreplicatedBackend(t *testing.T) *gatewaytest.AutomatonBackend {
	return gatewaytest.MustAutomaton(t, unreplicated.Name, "kv")
}

func txnReq(client, seq uint64, action synodpb.TxnStep_Action, begin *synodpb.Request, o *synodpb.Op) *synodpb.Request {
	r := &synodpb.Request{ClientId: client, Seq: seq, Op: o, Txn: &synodpb.TxnStep{Action: action}}
	if begin != nil {
		r.Txn.TxnClient, r.Txn.TxnSeq = begin.ClientId, begin.Seq
	}
	return r
}

func result(t *testing.T, c synodpb.SynodClient, ctx context.Context, r *synodpb.Request) string {
	t.Helper()
	resp, err := c.Do(ctx, r)
	if err != nil {
		t.Fatalf("%v: %v", r, err)
	}
	res, err := synodpb.ToResult(resp.GetResult())
	if err != nil {
		t.Fatal(err)
	}
	return res.String()
}

func TestTxnStepsReachTheProtocol(t *testing.T) {
	b := newUnreplicatedBackend(t)
	_, c := start(t, b, Options{})
	cx := ctx(t)
	nss, err := c.Namespaces(cx, &synodpb.NamespacesRequest{})
	if err != nil || !nss.GetNamespaces()[0].GetInteractiveTransactions() {
		t.Fatalf("Namespaces: %v %v, want interactive_transactions", nss, err)
	}
	begin := txnReq(7, 1, synodpb.TxnStep_BEGIN, nil, nil)
	steps := []struct {
		r    *synodpb.Request
		want string
	}{
		{&synodpb.Request{ClientId: 9, Seq: 1, Op: op("set", "k", "0")}, service.OK().String()},
		{begin, service.OK().String()},
		{txnReq(7, 2, synodpb.TxnStep_OP, begin, op("set", "k", "1")), service.OK().String()},
		{txnReq(7, 3, synodpb.TxnStep_OP, begin, op("get", "k")), service.Bytes([]byte("1")).String()},
		{&synodpb.Request{ClientId: 9, Seq: 2, Op: op("get", "k")}, service.Bytes([]byte("0")).String()}, // isolated
		{txnReq(7, 4, synodpb.TxnStep_COMMIT, begin, nil), service.OK().String()},
		{&synodpb.Request{ClientId: 9, Seq: 3, Op: op("get", "k")}, service.Bytes([]byte("1")).String()}, // committed
		// A conflicting commit: first committer wins.
		{txnReq(7, 5, synodpb.TxnStep_BEGIN, nil, nil), service.OK().String()},
		{txnReq(7, 6, synodpb.TxnStep_OP, &synodpb.Request{ClientId: 7, Seq: 5}, op("set", "k", "mine")), service.OK().String()},
		{&synodpb.Request{ClientId: 9, Seq: 4, Op: op("set", "k", "theirs")}, service.OK().String()},
		{txnReq(7, 7, synodpb.TxnStep_COMMIT, &synodpb.Request{ClientId: 7, Seq: 5}, nil), service.Errorf("%s", automaton.ErrTxnAborted).String()},
		{&synodpb.Request{ClientId: 9, Seq: 5, Op: op("get", "k")}, service.Bytes([]byte("theirs")).String()},
		{txnReq(7, 8, synodpb.TxnStep_ABORT, begin, nil), service.Errorf("%s", automaton.ErrNoSuchTxn).String()},
	}
	for _, s := range steps {
		if got := result(t, c, cx, s.r); got != s.want {
			t.Errorf("%v:\n got %s\nwant %s", s.r, got, s.want)
		}
	}
}

func TestTxnRefusals(t *testing.T) {
	m := gatewaytest.KV() // protocol "memory": no interactive transactions
	_, c := start(t, m, Options{})
	cx := ctx(t)
	_, err := c.Do(cx, txnReq(7, 1, synodpb.TxnStep_BEGIN, nil, nil))
	if status.Code(err) != codes.FailedPrecondition || status.Convert(err).Message() != fmt.Sprintf(automaton.ErrNoInteractive, "memory") {
		t.Fatalf("BEGIN on memory: %v, want FAILED_PRECONDITION %q", err, fmt.Sprintf(automaton.ErrNoInteractive, "memory"))
	}
	_, err = c.Do(cx, txnReq(7, 2, synodpb.TxnStep_OP, &synodpb.Request{ClientId: 7, Seq: 1}, op("set", "k", "v")))
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("OP on memory: %v, want FAILED_PRECONDITION", err)
	}
	if n := len(m.Log()); n != 0 {
		t.Fatalf("refused steps reached the backend: %d requests", n)
	}

	_, c = start(t, newUnreplicatedBackend(t), Options{})
	begin := &synodpb.Request{ClientId: 7, Seq: 1}
	for _, r := range []*synodpb.Request{
		txnReq(0, 0, synodpb.TxnStep_BEGIN, nil, nil),               // no client id: the transaction would have no known name
		txnReq(7, 1, synodpb.TxnStep_ACTION_UNSPECIFIED, nil, nil),  // no action
		txnReq(7, 1, synodpb.TxnStep_BEGIN, nil, op("get", "k")),    // BEGIN with an op
		txnReq(7, 2, synodpb.TxnStep_COMMIT, begin, op("get", "k")), // COMMIT with an op
		txnReq(7, 2, synodpb.TxnStep_OP, nil, op("get", "k")),       // names no transaction
		txnReq(7, 2, synodpb.TxnStep_OP, begin, nil),                // OP without an op
		{ClientId: 7, Seq: 2, Ops: []*synodpb.Op{op("get", "k")}, Txn: &synodpb.TxnStep{TxnClient: 7, TxnSeq: 1, Action: synodpb.TxnStep_OP}}, // group and step
	} {
		if _, err := c.Do(cx, r); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: %v, want INVALID_ARGUMENT", r, err)
		}
	}
}
