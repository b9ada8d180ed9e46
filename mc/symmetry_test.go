package mc

import (
	"testing"

	"github.com/synod-dev/synod/service"
)

// symmetricABD is ABD with n clients running the same script at n1.
func symmetricABD(protocol string, n int, sym bool) Config {
	cfg := NewConfig(protocol)
	cfg.Model.Clients, cfg.Model.Target, cfg.Model.SymmetricClients = n, "first", sym
	cfg.Model.SymmetricNodes = false // clients only (nodesym_test.go has the nodes)
	cfg.Model.Scripts = nil
	for i := 0; i < n; i++ {
		cfg.Model.Scripts = append(cfg.Model.Scripts, []service.Op{{Kind: "set", Key: "x", Args: [][]byte{[]byte("v")}}})
	}
	cfg.Timers, cfg.Depth = "none", 8
	return cfg
}

// TestSymmetryReduces: with interchangeable clients the search of every
// state within 8 events visits fewer states, reaches the same verdict and the same sometimes
// properties, and still finds a broken variant's bug.
func TestSymmetryReduces(t *testing.T) {
	var states [2]int64
	for k, sym := range []bool{false, true} {
		cfg := symmetricABD("abd", 2, sym)
		r, err := Check(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r.Violation != nil || !r.Complete || r.Depth != 8 || !r.Sometimes[0].Reached {
			t.Fatalf("symmetry %v: violation %v, complete %v, sometimes %+v", sym, r.Violation, r.Complete, r.Sometimes)
		}
		states[k] = r.States
	}
	if states[1] >= states[0] || states[1]*3 < states[0] {
		t.Fatalf("states without symmetry %d, with %d: want fewer, at most 2x fewer with 2 clients", states[0], states[1])
	}
	t.Logf("abd, 2 interchangeable clients, every state within 8 events: %d states, %d with symmetry (%.2fx)", states[0], states[1], float64(states[0])/float64(states[1]))
	cfg := symmetricABD("abd-broken-nowriterid", 2, true)
	cfg.Model.Scripts[1] = []service.Op{{Kind: "set", Key: "x", Args: [][]byte{[]byte("w")}}}
	cfg.Model.Scripts = append(cfg.Model.Scripts, cfg.Model.Scripts[0])
	cfg.Model.Clients, cfg.Depth = 3, 12
	cfg.MaxStates = 40000
	r, err := Check(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Violation == nil {
		t.Fatalf("abd-broken-nowriterid not found under symmetry in %d states", r.States)
	}
}

// TestForEachPerm: every renaming within groups, each once.
func TestForEachPerm(t *testing.T) {
	seen := map[[4]int]bool{}
	forEachPerm(4, [][]int{{0, 2, 3}}, func(p []int) {
		if p[1] != 1 {
			t.Fatalf("client 1 is outside the group but renamed: %v", p)
		}
		seen[[4]int(p)] = true
	})
	if len(seen) != 6 {
		t.Fatalf("%d renamings, want 3! = 6", len(seen))
	}
}
