package cluster

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/config"
)

// TestUpOptionsTransportReachesTheClusterFile: --transport selects the
// default namespace's peer transport in the file Up writes, and a stopped
// cluster with another transport is not resumed as if it matched.
func TestUpOptionsTransportReachesTheClusterFile(t *testing.T) {
	opts := UpOptions{Nodes: 3, Protocol: "paxos", Service: "kv", Durability: config.Memory, Transport: config.TransportGRPCStream}
	cfg, err := newConfig(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	b, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := config.Parse(b)
	if err != nil || back.Namespaces[0].PeerTransport() != config.TransportGRPCStream {
		t.Fatalf("transport in the written file: %v %+v", err, back)
	}
	if err := compatible(back, opts, "dir"); err != nil {
		t.Errorf("same options: %v", err)
	}
	opts.Transport = ""
	if err := compatible(back, opts, "dir"); err == nil || !strings.Contains(err.Error(), "transport is grpc-stream") {
		t.Errorf("tcp over a grpc-stream cluster: %v", err)
	}
	opts.Transport = config.TransportTCP
	cfg, _ = newConfig(t.TempDir(), opts)
	if err := compatible(cfg, UpOptions{Nodes: 3, Protocol: "paxos", Service: "kv", Durability: config.Memory}, "dir"); err != nil {
		t.Errorf("tcp and the default are the same transport: %v", err)
	}
}
