package grpcserver

import (
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// TestReflection: a reflection client (what grpcurl uses) lists the Synod
// service without the .proto file.
func TestReflection(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(gatewaytest.KV(), Options{})
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	defer func() { s.Close(); <-done }()
	cc, err := grpc.NewClient("passthrough:///"+l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	st, err := rpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	res, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, svc := range res.GetListServicesResponse().GetService() {
		names = append(names, svc.GetName())
		if svc.GetName() == "synod.v1.Synod" {
			return
		}
	}
	t.Fatalf("reflection lists %v, not synod.v1.Synod", names)
}
