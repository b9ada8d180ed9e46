package node

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/gateway/grpcserver"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
)

// TestGRPCAPI: a node with a grpc address serves the gRPC API over its real
// namespaces (ABD here), with the cluster password, and stops it on Close.
func TestGRPCAPI(t *testing.T) {
	cfg, ls := mkCluster(t, 3, config.Memory, config.Namespace{Name: "default", Protocol: "abd", Service: "kv"})
	cfg.Password = "pw"
	gl := listen(t)
	cfg.Nodes[0].GRPC = gl.Addr().String()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var nodes []*Node
	for i, n := range cfg.Nodes {
		opts := Options{GRPC: grpcServer}
		if i == 0 {
			opts.GRPCListener = gl
		}
		nodes = append(nodes, startNode(t, cfg, n.ID, ls[i], opts))
	}
	if nodes[0].GRPCAddr() == nil || nodes[0].GRPCAddr().String() != cfg.Nodes[0].GRPC || nodes[1].GRPCAddr() != nil {
		t.Fatalf("grpc addresses: %v %v", nodes[0].GRPCAddr(), nodes[1].GRPCAddr())
	}
	if got := nodes[0].Info()["synod"]["grpc_addr"]; got != cfg.Nodes[0].GRPC {
		t.Errorf("INFO grpc_addr = %q", got)
	}
	c := grpcDial(t, cfg.Nodes[0].GRPC)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	set := &synodpb.Request{ClientId: 9, Seq: 1, Op: &synodpb.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v1")}}}
	if _, err := c.Do(ctx, set); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without the cluster password: %v", err)
	}
	actx := metadata.AppendToOutgoingContext(ctx, synodpb.PasswordKey, "pw")
	resp, err := c.Do(actx, set)
	if err != nil || resp.GetResult().GetOk() == nil || resp.GetOpId() != "" {
		t.Fatalf("set over gRPC: %v %v", resp, err)
	}
	// ABD refuses read-modify-write: a result error, not a status.
	resp, err = c.Do(actx, &synodpb.Request{ClientId: 9, Seq: 2, Op: &synodpb.Op{Kind: "incr", Key: "n", Args: [][]byte{[]byte("1")}}})
	if err != nil || resp.GetResult().GetErr() == "" {
		t.Fatalf("incr on abd: %v %v", resp, err)
	}
	// The write is visible through another node.
	if r := do(t, nodes[2], "default", req("get", "k")); string(r.Bytes) != "v1" {
		t.Fatalf("n3 reads %v", r)
	}
	nodes[0].Close()
	cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
	defer ccancel()
	if _, err := c.Do(cctx, set); status.Code(err) != codes.Unavailable {
		t.Errorf("after Close: %v, want Unavailable", err)
	}
}

// Interactive transactions over gRPC on a sharded namespace (issue 33
// item 5): its nodes run them (itxn.go), so the gRPC server takes them as
// the RESP gateway does (gateway.InteractiveTransactions) and says so in
// Namespaces; before, it refused them with FAILED_PRECONDITION because
// paxos has none of its own. A transaction over keys of two groups
// commits atomically, is isolated until then, and one whose read key
// changed aborts and applies nothing.
func TestGRPCInteractiveTxnSharded(t *testing.T) {
	cfg, ls := mkCluster(t, 1, config.Memory, shardedOnOne(2, nil))
	n := startGRPCNode(t, cfg, ls[0])
	c := grpcDial(t, cfg.Nodes[0].GRPC)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nss, err := c.Namespaces(ctx, &synodpb.NamespacesRequest{})
	if err != nil || len(nss.GetNamespaces()) == 0 || !nss.GetNamespaces()[0].GetInteractiveTransactions() {
		t.Fatalf("Namespaces: %v %v, want interactive_transactions on the sharded namespace", nss, err)
	}
	a, b := keyOf(0, 2), keyOf(1, 2) // one key in each group
	op := func(kind, key string, args ...string) *synodpb.Op {
		o := &synodpb.Op{Kind: kind, Key: key}
		for _, x := range args {
			o.Args = append(o.Args, []byte(x))
		}
		return o
	}
	seq := uint64(0)
	step := func(action synodpb.TxnStep_Action, begin uint64, o *synodpb.Op) string {
		t.Helper()
		seq++
		r := &synodpb.Request{Namespace: "default", ClientId: 7, Seq: seq, Op: o, Txn: &synodpb.TxnStep{Action: action}}
		if begin != 0 {
			r.Txn.TxnClient, r.Txn.TxnSeq = 7, begin
		}
		resp, err := c.Do(ctx, r)
		if err != nil {
			t.Fatalf("%v %v: %v", action, o, err)
		}
		res, err := synodpb.ToResult(resp.GetResult())
		if err != nil {
			t.Fatal(err)
		}
		return res.String()
	}
	get := func(k string) string { return string(do(t, n, "default", req("get", k)).Bytes) }
	do(t, n, "default", req("set", a, "0"))
	do(t, n, "default", req("set", b, "0"))

	step(synodpb.TxnStep_BEGIN, 0, nil)
	tx := seq
	for _, k := range []string{a, b} {
		if got := step(synodpb.TxnStep_OP, tx, op("incr", k, "1")); got != service.Int(1).String() {
			t.Fatalf("INCR %s in the transaction: %s", k, got)
		}
	}
	if got := get(a); got != "0" {
		t.Fatalf("outside the open transaction %s = %q, want 0 (isolated)", a, got)
	}
	if got := step(synodpb.TxnStep_COMMIT, tx, nil); got != service.OK().String() {
		t.Fatalf("COMMIT: %s", got)
	}
	if ga, gb := get(a), get(b); ga != "1" || gb != "1" {
		t.Fatalf("after COMMIT %s=%q %s=%q, want 1 and 1", a, ga, b, gb)
	}
	// A key it read changes before its commit: aborted, nothing applied.
	step(synodpb.TxnStep_BEGIN, 0, nil)
	tx = seq
	step(synodpb.TxnStep_OP, tx, op("get", a))
	step(synodpb.TxnStep_OP, tx, op("set", b, "mine"))
	do(t, n, "default", req("set", a, "theirs"))
	if got := step(synodpb.TxnStep_COMMIT, tx, nil); !strings.Contains(got, "EXECABORT") {
		t.Fatalf("COMMIT after %s changed: %s, want EXECABORT", a, got)
	}
	if gb := get(b); gb != "1" {
		t.Fatalf("%s = %q after an aborted transaction, want 1", b, gb)
	}
}

// keyOf is a key of group i of groups groups (shard.Even's slots).
func keyOf(i, groups int) string {
	r := shard.Even(groups)[i]
	for j := 0; ; j++ {
		k := fmt.Sprintf("g%d-%d", i, j)
		if s := shard.KeySlot(k); s >= r.First && s <= r.Last {
			return k
		}
	}
}

// grpcServer is the gRPC API a test node serves (Options.GRPC).
func grpcServer(b gateway.Backend, pw string, log *slog.Logger) ClientServer {
	return grpcserver.New(b, grpcserver.Options{Password: pw, Logger: log})
}

// startGRPCNode starts cfg's first node, n1, serving the gRPC API on a
// fresh loopback listener (cfg.Nodes[0].GRPC).
func startGRPCNode(t *testing.T, cfg *config.Cluster, l lns) *Node {
	t.Helper()
	gl := listen(t)
	cfg.Nodes[0].GRPC = gl.Addr().String()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return startNode(t, cfg, "n1", l, Options{GRPCListener: gl, GRPC: grpcServer})
}

// grpcDial is a gRPC client of addr, closed when the test ends.
func grpcDial(t *testing.T, addr string) synodpb.SynodClient {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return synodpb.NewSynodClient(cc)
}
