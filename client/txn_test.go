package client

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/gateway/grpcserver"
	"github.com/synod-dev/synod/protocol/unreplicated"
	"github.com/synod-dev/synod/service"
)

// newUnreplicatedBackend really runs the unreplicated protocol.
func newUnreplicatedBackend(t *testing.T) *gatewaytest.AutomatonBackend {
	return gatewaytest.MustAutomaton(t, unreplicated.Name, "kv")
}

func set(k, v string) service.Op { return service.Op{Kind: "set", Key: k, Args: [][]byte{[]byte(v)}} }
func get(k string) service.Op    { return service.Op{Kind: "get", Key: k} }

func TestGRPCTxnCommitAbortConflict(t *testing.T) {
	n := startGRPCOver(t, newUnreplicatedBackend(t), nil, grpcserver.Options{})
	c, other := newGRPC(t, []string{n.addr}, Options{}), newGRPC(t, []string{n.addr}, Options{})
	ctx := tctx(t)

	txn, err := c.Begin(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Do(ctx, set("k", "v")); err != nil {
		t.Fatal(err)
	}
	if r, err := txn.Do(ctx, get("k")); err != nil || string(r.Bytes) != "v" {
		t.Fatalf("the transaction's read of its own write: %v %v", r, err)
	}
	if _, found, err := other.Get(ctx, "k"); err != nil || found {
		t.Fatalf("another client saw an uncommitted write: found=%v err=%v", found, err)
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if v, _, err := other.Get(ctx, "k"); err != nil || string(v) != "v" {
		t.Fatalf("after the commit: %q %v", v, err)
	}
	if _, err := txn.Do(ctx, get("k")); !errors.Is(err, ErrTxnDone) {
		t.Fatalf("a step after the commit: %v, want ErrTxnDone", err)
	}

	// First committer wins: a write in between aborts the transaction.
	txn, err = c.Begin(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Do(ctx, set("k", "mine")); err != nil {
		t.Fatal(err)
	}
	if err := other.Set(ctx, "k", []byte("theirs")); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(ctx); !errors.Is(err, ErrTxnAborted) || errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("a conflicting commit: %v, want ErrTxnAborted", err)
	}
	if v, _, _ := other.Get(ctx, "k"); string(v) != "theirs" {
		t.Fatalf("after the aborted commit k = %q, want \"theirs\"", v)
	}

	// Abort discards.
	txn, err = c.Begin(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Do(ctx, set("y", "1")); err != nil {
		t.Fatal(err)
	}
	if err := txn.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := other.Get(ctx, "y"); found {
		t.Fatal("an aborted transaction's write is visible")
	}
	// An operation's own error is a result and a *Error; the transaction goes on.
	txn, _ = c.Begin(ctx, "")
	if _, err := txn.Do(ctx, service.Op{Kind: "incr", Key: "k", Args: [][]byte{[]byte("1")}}); err == nil {
		t.Fatal("INCR of a non-integer in a transaction: no error")
	} else if e := (*Error)(nil); !errors.As(err, &e) {
		t.Fatalf("INCR of a non-integer: %v, want a *Error", err)
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatalf("a read-only commit: %v", err)
	}
}

// Every step goes to the node that served Begin, and none fails over: the
// transaction is lost with that node.
func TestGRPCTxnStaysAtItsNode(t *testing.T) {
	ba, bb := newUnreplicatedBackend(t), newUnreplicatedBackend(t)
	na := startGRPCOver(t, ba, nil, grpcserver.Options{})
	nb := startGRPCOver(t, bb, nil, grpcserver.Options{})
	c := newGRPC(t, []string{na.addr, nb.addr}, Options{})
	ctx := tctx(t)
	txn, err := c.Begin(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Do(ctx, set("k", "v")); err != nil {
		t.Fatal(err)
	}
	na.stop()
	if err := c.Set(ctx, "z", []byte("1")); err != nil { // plain requests fail over to b
		t.Fatal(err)
	}
	if _, err := txn.Do(ctx, get("k")); err == nil {
		t.Fatal("a step after its node stopped succeeded")
	}
	if err := txn.Commit(ctx); err == nil {
		t.Fatal("a commit after its node stopped succeeded")
	}
	if n := len(ba.TxnSteps()); n != 2 {
		t.Fatalf("node a received %d transaction steps, want 2 (begin, set)", n)
	}
	if n := len(bb.TxnSteps()); n != 0 {
		t.Fatalf("a transaction step failed over to node b (%d steps)", n)
	}
}

func TestGRPCBeginRefusedWithoutInteractiveTransactions(t *testing.T) {
	n := startGRPC(t, kvNS("memory"), grpcserver.Options{})
	c := newGRPC(t, []string{n.addr}, Options{})
	_, err := c.Begin(tctx(t), "")
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Begin on memory: %v, want FAILED_PRECONDITION", err)
	}
	if len(n.b.Log()) != 0 {
		t.Fatal("the refused Begin reached the backend")
	}
}
