package cluster

import (
	"strings"
	"testing"
)

func TestUpOptionsParamsReachTheClusterFile(t *testing.T) {
	dir := t.TempDir()
	opts := UpOptions{Dir: dir, Nodes: 2, Protocol: "abd", Service: "kv", Durability: "memory",
		Params: map[string]string{"retransmit": "20ms"}}
	cfg, err := newConfig(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Namespaces[0].Params["retransmit"]; got != "20ms" {
		t.Fatalf("namespace params %v", cfg.Namespaces[0].Params)
	}
	if err := compatible(cfg, opts, dir); err != nil {
		t.Fatalf("same options judged incompatible: %v", err)
	}
	opts.Params = nil
	if err := compatible(cfg, opts, dir); err == nil || !strings.Contains(err.Error(), "protocol parameters differ") {
		t.Fatalf("different params: %v", err)
	}
}
