package abd

import "github.com/synod-dev/synod/automaton"

// clientDrivenArgs is the client-driven scenario (sim --client-driven,
// coordinator.go): every client runs both phases itself against the three
// replicas. Client links get a heavy-tailed latency (the seed's clients are
// remote) and one key, so that a store reaches one replica long before the
// others while reads of that key run: what a read without its write-back
// needs to return a new value and then an old one.
var clientDrivenArgs = []string{"--nodes", "3", "--clients", "6", "--ops", "300", "--faults", "all",
	"--keys", "1", "--client-driven", "--client-latency", "pareto:1ms:1.5"}

// batchArgs is the client-batch scenario: the requests reaching a node
// within 2ms of each other are one automaton.ClientBatch (sim
// --batch-window, as a live node steps what it finds in its inbox
// together), so queries and stores of many operations travel as one batch
// message per peer (msg.go, kindBatch), under every fault.
var batchArgs = []string{"--nodes", "5", "--clients", "24", "--ops", "400", "--faults", "all",
	"--keys", "4", "--batch-window", "2ms"}

// Scenarios implements automaton.ScenarioDeclarer: the real protocol passes
// the client-driven and client-batch scenarios besides the suite's
// standard ones;
// abd-broken-clientnowriteback is caught in it (seeds pinned: the
// inversion needs a slow store and two reads in its window). The other
// broken variants are node-coordinated and keep the suite's default.
func (p protocol) Scenarios() []automaton.Scenario {
	switch {
	case p.clientNoWriteBack:
		return []automaton.Scenario{{Name: "client-driven reads without write-back", Args: clientDrivenArgs, Seeds: "2,18"}}
	case p.noWriteBack || p.tsOnly:
		return nil
	}
	return []automaton.Scenario{{Name: "client-driven", Args: clientDrivenArgs, Seeds: "1-20"},
		{Name: "client batches", Args: batchArgs, Seeds: "1-10"}}
}
