package node

import (
	"context"
	"log/slog"
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
		opts := Options{GRPC: func(b gateway.Backend, pw string, log *slog.Logger) ClientServer {
			return grpcserver.New(b, grpcserver.Options{Password: pw, Logger: log})
		}}
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
	cc, err := grpc.NewClient("passthrough:///"+cfg.Nodes[0].GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := synodpb.NewSynodClient(cc)
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
