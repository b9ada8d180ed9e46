package main

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/bench"
)

func TestApplyBenchTarget(t *testing.T) {
	for _, name := range []string{"", "resp"} {
		cfg := bench.DefaultConfig()
		cfg.Namespace = "kv"
		if err := applyBenchTarget(name, &cfg); err != nil || cfg.NewTarget != nil || cfg.TargetName != "" {
			t.Fatalf("%q: err %v, target %q", name, err, cfg.TargetName)
		}
	}
	for _, name := range []string{"etcd", "zookeeper"} {
		cfg := bench.DefaultConfig()
		if err := applyBenchTarget(name, &cfg); err != nil || cfg.NewTarget == nil || cfg.TargetName != name {
			t.Fatalf("%q: err %v, target %q", name, err, cfg.TargetName)
		}
		cfg = bench.DefaultConfig()
		cfg.ReadMode = "regular"
		if err := applyBenchTarget(name, &cfg); err == nil || !strings.Contains(err.Error(), "--read-mode") {
			t.Fatalf("%q with a read mode: %v", name, err)
		}
	}
	cfg := bench.DefaultConfig()
	if err := applyBenchTarget("consul", &cfg); err == nil || !strings.Contains(err.Error(), "etcd") {
		t.Fatalf("unknown target: %v", err)
	}
}
