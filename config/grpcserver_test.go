package config

import (
	"strings"
	"testing"
)

func TestGRPCServerField(t *testing.T) {
	for _, v := range []string{"", "grpc-go", "direct"} {
		c, err := Parse([]byte("grpc_server: \"" + v + "\"\n" + good))
		if err != nil || c.GRPCServer != v {
			t.Fatalf("grpc_server: %q: %v, %q", v, err, c.GRPCServer)
		}
	}
	_, err := Parse([]byte("grpc_server: netty\n" + good))
	if err == nil || !strings.Contains(err.Error(), `grpc_server: "netty" must be "grpc-go" or "direct"`) {
		t.Fatalf("grpc_server: netty: error %v", err)
	}
}
