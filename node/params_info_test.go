package node

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
)

// INFO's Params section: each namespace's protocol parameters in effect,
// the defaults overridden by the cluster file's.
func TestParamsInfo(t *testing.T) {
	n := &Node{nss: []config.Namespace{
		{Name: "default", Protocol: "abd", Service: "kv"},
		{Name: "fast", Protocol: "abd", Service: "kv", Params: map[string]string{"retransmit": "7ms"}},
	}}
	got := n.paramsInfo()
	def := automaton.DefaultParams("abd")["retransmit"]
	if def == "" || got["default.retransmit"] != def {
		t.Fatalf("default.retransmit = %q, want the default %q", got["default.retransmit"], def)
	}
	if got["fast.retransmit"] != "7ms" {
		t.Fatalf("fast.retransmit = %q, want the cluster file's 7ms", got["fast.retransmit"])
	}
}
