package mc

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/paxos"
)

// fastPathModels are the checks each fast-path protocol (and each of its
// broken variants) runs both ways: its model within a depth, ABD with
// interchangeable clients (the renaming goes through AppendModelState),
// and the paxos variants mc catches in their own models, whole (a leader
// change, and a crash before an fsync).
func fastPathModels(t *testing.T, base string) []Config {
	names := []string{base}
	for _, b := range automaton.BrokenNames() {
		if automaton.BrokenOf(b) == base {
			names = append(names, b)
		}
	}
	var cfgs []Config
	for _, n := range names {
		cfg := NewConfig(n)
		if !wholeModel[n] {
			cfg.Depth, cfg.MaxStates = 9, 2500
		}
		cfgs = append(cfgs, cfg)
	}
	if base == "abd" {
		cfgs = append(cfgs, symmetricABD("abd", 3, true), symmetricABD("abd-broken-nowriterid", 3, true))
		cfgs[len(cfgs)-1].Depth, cfgs[len(cfgs)-2].Depth = 7, 7
	}
	return cfgs
}

// wholeModel: the broken variants checked in their declared models to
// their counterexamples.
var wholeModel = map[string]bool{"paxos-broken-skipphase1values": true, paxos.BrokenEarlyAck: true}

// TestFastPathMatchesReflective: a protocol that encodes and copies its
// own state (automaton.ModelStater, and its checker's
// ModelCheckerStater) visits exactly the states the reflective fingerprint
// and copier visit, with the same transitions, and finds the same
// counterexample, for the protocol and each of its broken variants.
func TestFastPathMatchesReflective(t *testing.T) {
	for _, base := range []string{"abd", "paxos"} {
		for _, cfg := range fastPathModels(t, base) {
			var rs [2]*Result
			for k, refl := range []bool{true, false} {
				c := cfg
				c.Reflective = refl
				r, err := Check(c)
				if err != nil {
					t.Fatal(err)
				}
				rs[k] = r
			}
			a, b := rs[0], rs[1]
			name := cfg.Protocol
			if base == "abd" && cfg.Model.Scripts != nil {
				name += " (3 interchangeable clients)"
			}
			if a.States != b.States || a.Transitions != b.Transitions || a.Depth != b.Depth {
				t.Errorf("%s: reflective %d states (%d transitions, depth %d), fast path %d (%d, %d)",
					name, a.States, a.Transitions, a.Depth, b.States, b.Transitions, b.Depth)
			}
			av, bv := "", ""
			if a.Violation != nil {
				av = a.Violation.Violation
			}
			if b.Violation != nil {
				bv = b.Violation.Violation
			}
			if av != bv || (a.Violation != nil && len(a.Violation.Events) != len(b.Violation.Events)) {
				t.Errorf("%s: reflective found %q, fast path %q", name, av, bv)
			}
			t.Logf("%s: %d states, violation %q; reflective %.0f states/s, fast path %.0f states/s",
				name, b.States, bv, a.StatesPerSecond(), b.StatesPerSecond())
		}
	}
}
