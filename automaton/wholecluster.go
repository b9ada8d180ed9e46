package automaton

import "slices"

// --- whole-cluster faults and standard callees (conformance) ---

// PowerLoss is the fault kind a FaultAssumer lists when it promises its
// consistency model across a power loss of the whole cluster (the
// simulator's --power-loss: every node crashes at once and loses the
// records it had not synced). It is not one of the kinds --faults all
// injects. A protocol that does not declare FaultAssumer promises it; one
// that declares FaultAssumer without it does not, and the conformance
// suite's standard "power loss" scenario must then fail for it (the
// evidence, printed, that the promise is not made), until it is listed.
const PowerLoss = "powerloss"

// SurvivesPowerLoss reports whether the named protocol promises to keep
// every acknowledged write, and to serve again, after a power loss of the
// whole cluster.
func SurvivesPowerLoss(name string) bool {
	c, err := capsOf(name)
	if err != nil || c.SafeFaults == nil {
		return true
	}
	return slices.Contains(c.SafeFaults, PowerLoss)
}

// CalleeNeeder is implemented by protocols whose service calls another
// namespace (nested requests, the Eve/Adam thesis Adam): the simulator flags of the
// callee namespace the conformance suite's standard scenarios run beside
// them (e.g. --callee-protocol paxos --callee-nodes 3). Without a callee
// every write of such a protocol fails, and a standard scenario proves
// nothing about its writes.
type CalleeNeeder interface {
	StandardCallee() []string
}

// StandardCalleeOf returns the named protocol's StandardCallee flags, or nil.
func StandardCalleeOf(name string) []string {
	c, _ := capsOf(name)
	return slices.Clone(c.StandardCallee)
}
