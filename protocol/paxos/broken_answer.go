package paxos

import "github.com/synod-dev/synod/automaton"

// BrokenAnswerEarly is the name of the broken variant whose answers do
// not wait for the leader's own acceptances.
const BrokenAnswerEarly = "paxos-broken-answerearly"

// BrokenRelayAll is the name of the broken variant that marks every answer
// relayed (automaton.Respond.Relayed), the leader's own too.
const BrokenRelayAll = "paxos-broken-relayall"

func init() {
	automaton.RegisterBroken("paxos", brokenAnswerEarly{protocol{Capabilities: capabilities(BrokenAnswerEarly, "")}})
	automaton.RegisterBroken("paxos", brokenRelayAll{protocol{Capabilities: capabilities(BrokenRelayAll, "")}})
}

// brokenAnswerEarly is Multi-Paxos that misuses positioned answers
// (automaton.Respond.UpTo, package doc "Positioned answers"): the leader
// persists its own acceptances without a position, so the answer to a
// command of instance i, positioned at i, does not wait for the leader's
// acceptance of i (nor of any instance): the runtime releases it as soon
// as a follower's Accepted completes the majority, before the leader's
// vote is durable. If the leader then crashes before its fsync, the vote
// is erased while the client holds the answer, and a later leader elected
// by the forgetful leader and an acceptor that never accepted i chooses
// something else at i: an acknowledged write is lost.
type brokenAnswerEarly struct{ protocol }

var (
	_ automaton.Describer        = brokenAnswerEarly{}
	_ automaton.ScenarioDeclarer = brokenAnswerEarly{}
)

// Describe implements automaton.Describer.
func (brokenAnswerEarly) Describe() string {
	return "the leader persists its own acceptances without a position, so its positioned answers leave before its own vote is durable; a crash erases the vote and a later leader chooses another value: caught under crashes with slow fsyncs by the linearizability check, and by the model checker (AnswerEarlyModel)"
}

// Scenarios implements automaton.ScenarioDeclarer: pinned seeds on which
// the simulator catches the lost write (broken_answer_test.go).
func (brokenAnswerEarly) Scenarios() []automaton.Scenario {
	return []automaton.Scenario{{Name: "crashes",
		Args:  brokenAnswerArgs,
		Seeds: brokenAnswerSeeds}}
}

// The scenario's flags and pinned seeds: `synod-lab sim --protocol
// paxos-broken-answerearly --nodes 3 --clients 8 --ops 500 --faults crash
// --fsync uniform:20ms:80ms --seeds 1-300` fails seeds 90, 104, 170 and
// 236 (an acknowledged SET lost; seed 290 before session 51's relayed
// Forward, seeds 39 and 155 of 1-200 before session 49, whose changes (a
// follower's timers, relayed answers) moved the schedules); paxos passes
// all 300. The loss needs the leader to crash between its answer
// and its fsync and the next leader to be elected without the acceptor
// that completed the majority, hence about one seed in 100.
var brokenAnswerArgs = []string{"--nodes", "3", "--clients", "8", "--ops", "500", "--faults", "crash", "--fsync", "uniform:20ms:80ms"}

const brokenAnswerSeeds = "90"

// brokenRelayAll is Multi-Paxos that misuses relayed answers
// (automaton.Respond.Relayed, package doc "Positioned answers"): every
// answer is marked relayed, the leader's answers to its own clients too,
// so they wait for none of the leader's records and leave as soon as a
// follower's Accepted completes the majority, before the leader's own
// acceptance is durable: the loss paxos-broken-answerearly shows. Only an
// answer that relays the leader's ForwardReply may be marked.
type brokenRelayAll struct{ protocol }

var (
	_ automaton.Describer        = brokenRelayAll{}
	_ automaton.ScenarioDeclarer = brokenRelayAll{}
)

// Describe implements automaton.Describer.
func (brokenRelayAll) Describe() string {
	return "every answer is marked relayed (it waits for none of the node's records), the leader's own too, so an answer leaves before the leader's acceptance is durable; a crash erases the vote and a later leader chooses another value: caught under crashes with slow fsyncs by the linearizability check"
}

// Scenarios implements automaton.ScenarioDeclarer: pinned seeds on which
// the simulator catches the lost write (broken_answer_test.go), with
// paxos-broken-answerearly's flags: `synod-lab sim --protocol
// paxos-broken-relayall --nodes 3 --clients 8 --ops 500 --faults crash
// --fsync uniform:20ms:80ms --seeds 1-300` fails seeds 129, 135, 156,
// 172, 265 and 284 (an acknowledged SET lost; 64, 130 and 193 of 1-200
// before session 51's relayed Forward); paxos passes all 300.
func (brokenRelayAll) Scenarios() []automaton.Scenario {
	return []automaton.Scenario{{Name: "crashes",
		Args:  brokenAnswerArgs,
		Seeds: brokenRelaySeeds}}
}

const brokenRelaySeeds = "129,135"
