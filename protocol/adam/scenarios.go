package adam

import "github.com/synod-dev/synod/automaton"

// callee is the co-simulated callee: paxos on 3 nodes.
var callee = []string{"--callee-protocol", "paxos", "--callee-nodes", "3"}

// scenarios are the conformance suite's simulations of adam and its broken
// variant.
func scenarios(p protocol) []automaton.Scenario {
	args := func(a ...string) []string { return append(append([]string(nil), callee...), a...) }
	if p.callFirst {
		return []automaton.Scenario{
			{Name: "caught by the invariant call-after-commit",
				Args: args("--nodes", "3", "--clients", "4", "--ops", "40", "--faults", "none"), Seeds: "1"},
			{Name: "caught by the simulator's same-bytes-per-nested-id check: diverged replicas call with different bytes (invariants off)",
				Args: args("--nodes", "3", "--clients", "6", "--ops", "200", "--faults", "none", "--keys", "2",
					"--param", "conflicts=loose", "--param", "groups=2", "--param", "threads=1", "--no-invariants"), Seeds: callFirstSeeds},
		}
	}
	return []automaton.Scenario{
		{Name: "ppm calling paxos, faults in both namespaces",
			Args: args("--nodes", "3", "--clients", "6", "--ops", "150", "--faults", "all", "--callee-faults", "all",
				"--param", "groups=2", "--param", "threads=2"), Seeds: "1-2"},
		{Name: "diverging declaration: rollbacks in the middle of requests, faults in the callee",
			Args: args("--nodes", "3", "--clients", "6", "--ops", "150", "--faults", "crash,loss", "--callee-faults", "all", "--keys", "2",
				"--param", "conflicts=loose", "--param", "groups=2", "--param", "threads=1"), Seeds: "1-2"},
		{Name: "walls and naive strategies",
			Args: args("--nodes", "3", "--clients", "4", "--ops", "100", "--faults", "all", "--param", "strategy=walls"), Seeds: "1"},
	}
}

// callFirstSeeds: with the scenario's flags seeds 1-6 all failed the
// same-bytes check (replicas that ordered a resume and a begin of one key
// differently call with different old values); the correct protocol
// passed all 6.
const callFirstSeeds = "1-2"
