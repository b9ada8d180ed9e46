package cluster

import (
	"testing"

	"github.com/synod-dev/synod/config"
)

// TestGRPCPorts: every node of a new cluster gets its own gRPC address,
// distinct from all others, and BasePort places it at N+300+i.
func TestGRPCPorts(t *testing.T) {
	cfg, err := newConfig(t.TempDir(), UpOptions{Nodes: 3, Protocol: "abd", Service: "kv", Durability: config.Memory})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil { // rejects duplicate addresses
		t.Fatal(err)
	}
	for _, n := range cfg.Nodes {
		if n.GRPC == "" {
			t.Errorf("%s has no grpc address", n.ID)
		}
	}
	cfg, err = newConfig(t.TempDir(), UpOptions{Nodes: 2, BasePort: 20000, Protocol: "abd", Service: "kv", Durability: config.Memory})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Nodes[0].GRPC != "127.0.0.1:20300" || cfg.Nodes[1].GRPC != "127.0.0.1:20301" {
		t.Errorf("grpc addresses with base port 20000: %s, %s", cfg.Nodes[0].GRPC, cfg.Nodes[1].GRPC)
	}
	if _, err := Up(UpOptions{Dir: t.TempDir(), Nodes: 2, BasePort: 65535 - 300}); err == nil {
		t.Error("Up accepted a base port whose gRPC ports exceed 65535")
	}
}
