package grpcserver

import (
	"crypto/tls"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/certs"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// Over TLS, and over TLS to a ReplyBackend (the direct transport's Do
// answered where it completes: written by a goroutine of its own, as a
// TLS write may wait).
func TestTLS(t *testing.T) {
	t.Run("mem", func(t *testing.T) { testTLS(t, gatewaytest.KV()) })
	t.Run("reply", func(t *testing.T) { testTLS(t, newAnswerer()) })
}

func testTLS(t *testing.T, b gateway.Backend) {
	dir := t.TempDir()
	if _, err := certs.Generate(dir, certs.Spec{Cluster: "c", Nodes: []certs.Node{{ID: "n1"}}}); err != nil {
		t.Fatal(err)
	}
	cfg, err := certs.LoadNodeTLS(dir, "n1")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(b, Options{TLS: cfg})
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() { s.Close(); <-done })

	call := func(creds credentials.TransportCredentials) error {
		cc, err := grpc.NewClient("passthrough:///"+l.Addr().String(), grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		_, err = synodpb.NewSynodClient(cc).Do(ctx(t), &synodpb.Request{ClientId: 1, Seq: 1, Op: op("set", "k", "v")})
		return err
	}
	if err := call(credentials.NewTLS(&tls.Config{RootCAs: cfg.RootCAs, ServerName: "localhost"})); err != nil {
		t.Fatalf("over TLS: %v", err)
	}
	if err := call(insecure.NewCredentials()); err == nil {
		t.Fatal("a plaintext call to a TLS-only gRPC server succeeded")
	}
	// A client that does not trust the cluster CA refuses the server.
	if err := call(credentials.NewTLS(&tls.Config{ServerName: "localhost"})); err == nil {
		t.Fatal("a server certificate from an unknown CA was trusted")
	}
}
