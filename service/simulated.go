package service

import "math/rand"

// Simulated is implemented by services the simulator's random clients can
// drive (`synod-lab sim --service NAME`; the built-in kv, counter, string and
// matchmakers have their own generators in package sim). The simulator
// checks the history against the service itself as its sequential
// specification (check/generic.go), so a deterministic service needs
// nothing more.
type Simulated interface {
	// SimMix is the default operation mix, "kind:weight,...": the kinds
	// SimOp draws (--mix may reweigh them).
	SimMix() string
	// SimOp draws an operation of kind from r, over keys keys. client and
	// n (the client's index and its operation count) make written values
	// unique, so that a read identifies the write it saw. It must use r
	// alone for randomness: a seed replays the run.
	SimOp(kind string, r *rand.Rand, keys, client, n int) Op
}
