package esds

import "github.com/synod-dev/synod/automaton"

// Scenarios implements automaton.ScenarioDeclarer: a counter namespace with
// strict operations and prev sets (the ESDS thesis's test series), where the
// broken variants show, with pinned seeds.
func (p protocol) Scenarios() []automaton.Scenario {
	args := []string{"--nodes", "3", "--clients", "4", "--ops", "300", "--faults", "all", "--service", "counter", "--strict", "0.5", "--prev", "0.2"}
	seeds := "1-2"
	if p.earlyStrict || p.maxLabel || p.dupLabel || p.doubleReserve {
		seeds = "1-3"
	}
	// Local reads (reads=local, frontend.go localRead): KV reads with prev
	// sets, where the checker holds each read's value to its prev closure
	// and the order to the prev sets that name reads.
	local := []string{"--nodes", "3", "--clients", "4", "--ops", "300", "--faults", "all", "--service", "kv", "--strict", "0.2", "--prev", "0.5", "--param", "reads=local"}
	if p.readNoPrev {
		// Pinned: seeds 8 and 10 of 1-10 are caught (an operation naming
		// a read answered without its prev is ordered before that prev).
		return []automaton.Scenario{{Name: "reads=local, kv, prev", Args: local, Seeds: "8-10"}}
	}
	sc := []automaton.Scenario{{Name: "counter, strict and prev", Args: args, Seeds: seeds}}
	if !p.earlyStrict && !p.maxLabel && !p.dupLabel && !p.doubleReserve {
		sc = append(sc, automaton.Scenario{Name: "reads=local, kv, prev", Args: local, Seeds: "1-2"})
		// SimpleESDSImpl (reserve.go, combination.go): gossip by I/O
		// combinations under the reservation system, with both gossip
		// variants, under every fault; invariant 3.3.1 is checked.
		simple := append(append([]string(nil), args...), "--param", "impl=simple")
		sc = append(sc, automaton.Scenario{Name: "impl=simple: gossip by I/O combinations with reservations", Args: simple, Seeds: "1-2"},
			automaton.Scenario{Name: "impl=simple, variant=unopt", Args: append(simple, "--param", "variant=unopt"), Seeds: "1"})
		// The front end's policies (frontend.go): two replicas per
		// operation, and resends under a cap, under every fault.
		fe := append(append([]string(nil), args...), "--param", "send=2", "--param", "resend=60ms", "--param", "maxsends=2")
		sc = append(sc, automaton.Scenario{Name: "front ends: send=2, resend", Args: fe, Seeds: "1-2"})
		// Front-end-only nodes (frontend_only.go): 3 replicas and 2 nodes
		// that run only a front end, under every fault.
		feo := []string{"--nodes", "5", "--clients", "5", "--ops", "300", "--faults", "all", "--service", "counter", "--strict", "0.5", "--prev", "0.2",
			"--param", "replicas=n1,n2,n3", "--param", "resend=60ms"}
		sc = append(sc, automaton.Scenario{Name: "front-end-only nodes: 3 replicas + 2 front ends", Args: feo, Seeds: "1-2"},
			automaton.Scenario{Name: "front-end-only nodes, send=all", Args: append(feo, "--param", "send=all"), Seeds: "1"})
		// Client batches (sim --batch-window, as a live node steps the
		// requests of one pass over its inbox together): many requests
		// per step, and, from front-end-only nodes sending to every
		// replica, their requests and the responses as one batch message
		// per peer (msg.go, kindBatch), under every fault.
		batch := []string{"--clients", "16", "--batch-window", "2ms"}
		sc = append(sc, automaton.Scenario{Name: "client batches", Args: append(append([]string(nil), args...), batch...), Seeds: "1-2"},
			automaton.Scenario{Name: "client batches, front-end-only nodes, send=all", Args: append(append(append([]string(nil), feo...), "--param", "send=all"), batch...), Seeds: "1-2"})
	}
	return sc
}
