package paxos

import "github.com/synod-dev/synod/automaton"

// BrokenUnpinOne is the name of the broken variant that unpins an
// instance (automaton.Unpin) on the leader's own vote and one follower's.
const BrokenUnpinOne = "paxos-broken-unpinone"

func init() {
	automaton.RegisterBroken("paxos", brokenUnpinOne{protocol{Capabilities: capabilities(BrokenUnpinOne, "")}})
}

// brokenUnpinOne is Multi-Paxos that misuses automaton.Unpin (package doc,
// "The leader's own acceptance against the followers'"): the leader
// unpins an instance as soon as it is chosen, that is on its own vote,
// counted at once and still unsynced, and one follower's durable
// acceptance, instead of once acceptors other than itself form a majority.
// Its answers then leave before its own vote is durable, which is the loss
// paxos-broken-answerearly shows: a crash erases the vote while the client
// holds the answer, and a later leader elected without the follower that
// completed the majority chooses another value. It marks the edge of the
// rule: one durable follower plus the leader's unsynced write is not a
// quorum of durable acceptances; two durable followers are.
type brokenUnpinOne struct{ protocol }

var (
	_ automaton.Describer        = brokenUnpinOne{}
	_ automaton.ScenarioDeclarer = brokenUnpinOne{}
)

// Describe implements automaton.Describer.
func (brokenUnpinOne) Describe() string {
	return "the leader unpins an instance (automaton.Unpin) on its own unsynced vote and one follower's, so its answers leave before its vote is durable; a crash erases the vote and a later leader chooses another value: caught under crashes with slow fsyncs by the linearizability check, and by the model checker (AnswerEarlyModel)"
}

// Scenarios implements automaton.ScenarioDeclarer: pinned seeds on which
// the simulator catches the lost write (broken_unpin_test.go).
func (brokenUnpinOne) Scenarios() []automaton.Scenario {
	return []automaton.Scenario{{Name: "crashes, two clients",
		Args:  brokenUnpinArgs,
		Seeds: brokenUnpinSeeds}}
}

// The scenario's flags and pinned seeds: `synod-lab sim --protocol
// paxos-broken-unpinone --nodes 3 --clients 2 --ops 300 --faults crash
// --fsync uniform:20ms:80ms --seeds 1-100` fails seeds 23 and 44 (an
// acknowledged SET lost); paxos passes them. With paxos-broken-answerearly's
// eight clients it failed none of seeds 1-150: under load the leader's
// acceptance of the instance before is usually in the same fsync as this
// one's, so an answer that waits for the positions below its own waits for
// that fsync anyway; with two clients the instance before is durable
// already and the answer leaves on the unsynced vote alone.
var brokenUnpinArgs = []string{"--nodes", "3", "--clients", "2", "--ops", "300", "--faults", "crash", "--fsync", "uniform:20ms:80ms"}

const brokenUnpinSeeds = "23,44"
