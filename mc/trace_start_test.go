package mc

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
)

// TestStartTraceAppliesPrefix: the explorer's hand-driven trace of a model
// with a scripted prefix starts after it, holding the prefix's events in
// order (so the view after them is the search's root), and a model without
// one starts empty.
func TestStartTraceAppliesPrefix(t *testing.T) {
	var name string
	for _, n := range append(automaton.Names(), automaton.BrokenNames()...) {
		if len(NewConfig(n).Model.Prefix) > 0 {
			name = n
			break
		}
	}
	if name == "" {
		t.Fatal("no registered model declares a prefix")
	}
	cfg := NewConfig(name)
	tr, err := StartTrace(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Prefix != len(cfg.Model.Prefix) || len(tr.Events) != tr.Prefix {
		t.Fatalf("%s: trace has %d events, prefix %d, model prefix %d", name, len(tr.Events), tr.Prefix, len(cfg.Model.Prefix))
	}
	v, err := tr.ViewAt(tr.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range cfg.Model.Prefix {
		if got := v.Path[i].Desc; got != want {
			t.Fatalf("%s: event %d is %q, the prefix says %q", name, i+1, got, want)
		}
	}
	if len(v.Enabled) == 0 {
		t.Fatalf("%s: nothing enabled after the prefix", name)
	}
	cfg.Model.Prefix = nil
	if tr, err = StartTrace(cfg); err != nil || len(tr.Events) != 0 || tr.Prefix != 0 {
		t.Fatalf("without a prefix: %d events, prefix %d, err %v", len(tr.Events), tr.Prefix, err)
	}
	// A prefix event that is not enabled is refused, naming it.
	cfg.Model.Prefix = []string{"n9: timer 7 fires"}
	if _, err := StartTrace(cfg); err == nil {
		t.Fatal("a prefix event that is not enabled was accepted")
	}
}
