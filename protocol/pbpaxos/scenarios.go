package pbpaxos

import "github.com/synod-dev/synod/automaton"

// Scenarios implements automaton.ScenarioDeclarer. The suite's standard
// scenarios (faults, groups, transactions, the nondeterministic
// matchmaker) run with clients that fan out; these add the other modes.
func (p protocol) Scenarios() []automaton.Scenario {
	base := []string{"--nodes", "3", "--clients", "4", "--ops", "200", "--faults", "all"}
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	switch {
	case p.noConfirm:
		return []automaton.Scenario{
			{Name: "caught by the invariant reads-confirmed", Args: []string{"--nodes", "3", "--clients", "4", "--ops", "50", "--faults", "none"}, Seeds: "1"},
			// A paused leader that resumes still believes it leads and
			// answers stale reads: 3 of 60 seeds (18, 20, 48) fail
			// linearizability; the correct protocol passes all 60.
			{Name: "caught by linearizability after pauses (invariants off)", Args: []string{"--nodes", "3", "--clients", "4", "--ops", "300", "--faults", "pause,partition", "--no-invariants"}, Seeds: "18,20"},
		}
	case p.earlyServe:
		return []automaton.Scenario{
			{Name: "caught by the invariant serve-after-takeover", Args: with(), Seeds: "5"},
			{Name: "caught by the invariant serve-after-takeover under partitions", Args: []string{"--nodes", "3", "--clients", "4", "--ops", "200", "--faults", "partition"}, Seeds: "1"},
		}
	case p.replayShuffle:
		// `synod-lab sim --protocol pbpaxos-broken-replayorder --service
		// gridmatchmaker --nodes 3 --clients 4 --ops 200 --faults none
		// --param batch=4 --seeds 1-5` fails all 5 seeds (replicas
		// diverged at applied count 3 to 7); pbpaxos passes them and 30
		// seeds of --faults all.
		return []automaton.Scenario{
			{Name: "caught by the convergence check (replayed batches)", Args: []string{"--service", "gridmatchmaker", "--nodes", "3", "--clients", "4", "--ops", "200", "--faults", "none", "--param", "batch=4"}, Seeds: "1-2"},
		}
	}
	return []automaton.Scenario{
		{Name: "deltas and replays mixed, batched (replay.go)", Args: with("--service", "gridmatchmaker", "--param", "batch=4"), Seeds: "1-2"},
		{Name: "clients at one node (RESP path: forward, relay)", Args: with("--no-fanout"), Seeds: "1-4"},
		{Name: "pipelined chained deltas", Args: with("--param", "pipeline=4", "--param", "batch=4"), Seeds: "1-4"},
		{Name: "whole states", Args: with("--param", "state=full", "--param", "snapshot_every=8"), Seeds: "1-3"},
		{Name: "replayed requests", Args: with("--param", "state=replay"), Seeds: "1-3"},
		{Name: "reads through the log", Args: with("--param", "read=log"), Seeds: "1-3"},
		// Liveness after every fault heals (issue 29): seed 2 stalled for
		// good (a candidate that applied its whole takeover batch during
		// phase 1 never became ready, takeover.go), seed 76 answered no
		// read until the next write (followers that had applied the
		// batch kept confirming to the deposed leader, phase2.go's
		// onAccept). Seeds 1-100 of this command pass but for 33 and 48,
		// whose workload ends before the bound (vacuous).
		{Name: "progress after faults heal", Args: []string{"--nodes", "3", "--clients", "4", "--ops", "1500", "--faults", "all",
			"--latency", "uniform:1ms:5ms", "--liveness", "5s", "--liveness-bound", "3s"}, Seeds: "2,76"},
	}
}

// The pinned seeds of the broken variants: `synod-lab sim --protocol
// pbpaxos-broken-earlyserve --nodes 3 --clients 4 --ops 200 --seeds 1-20`
// failed seed 5 of 20 with --faults all and seed 1 of 20 with --faults
// partition (a new leader's window between its takeover's phases is one
// round trip, so few runs have a request arrive in it); the correct
// protocol passes 200 seeds of --faults all.
