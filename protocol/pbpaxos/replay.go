package pbpaxos

import "github.com/synod-dev/synod/service"

// Per-instance choice between a delta and a replay (the Grid Services
// thesis VI.A.2, "reducing state-transfer size"; param state=delta).
//
// The seed names two ways to shrink an instance's value below the whole
// state: (1) the request plus "some additional information" from which
// every replica regenerates the state, and (2) only the updated state when
// the replicas already agree on the previous one. It presents them as
// alternatives and its own example already mixes them per request (the
// scheduler sends its queue "when it selects a new request"). It is silent
// on which to use when. Decision (an extension of the seed's primary-backup
// state shipping): with state=delta the leader computes the instance's
// delta (or whole state, for a service without deltas) and, when that is
// larger than the instance's encoded commands, ships the commands alone
// instead (updReplay): every replica executes them on its state, as with
// state=replay. The commands of a service that reads its environment carry
// the Env the leader executed them with (command: the leader's time and
// seed), so a replica regenerates exactly the leader's state; services are
// pure functions of (state, operation, Env), the rule paxos replays under,
// which is why this holds for the nondeterministic ones too. Why: a delta
// holds each changed key's whole value, so one LPUSH onto a 10,000-element
// list shipped ~49 KB (KVState.Delta: 37 B at 10 elements, 3,912 B at
// 1,000, 48,912 B at 10,000) where its command is ~40 B; Redis's sort unit
// pushed ~245 MB through the fsync'd log and the cluster lost its leader
// for 31 s (issue 34). The price of a replay is the backups' execution
// time (a long script runs at every replica, as on paxos) and a second
// execution at the leader when it applies; the price of a delta is bytes
// on the wire and on disk. The comparison is in bytes only.
//
// Safety is unchanged: a replay entry is chained like a delta (onAccept
// accepts it only on top of the previous instance of its ballot or of the
// applied state), so it always executes on the state the leader executed
// it on, and a replica that applies it reaches the leader's state. The
// simulator checks that (equal state hashes at equal applied instances,
// sim/converge.go); the broken variant pbpaxos-broken-replayorder, whose
// backups execute a replayed instance's commands in an order they draw at
// random (a nondeterministic apply), is caught by it.

// replayCheaper reports, before the delta is encoded, that it would
// outweigh cmds bytes of commands (service.DeltaSizer's estimate): the
// leader then skips encoding it. Encoding the delta of a SADD on a
// 10,000-member set took ~3 ms (sorting the members), 31 s for the 10,000
// SADDs of Redis's sort unit, and the leader that spent it inside its steps
// missed heartbeats and lost its leadership.
func (a *PBPaxos) replayCheaper(st service.State, since uint64, cmds int) bool {
	ds, ok := st.(service.DeltaSizer)
	return a.prm.hybrid && ok && ds.DeltaSizeHint(since) > cmds
}

// shipAs turns e into a replay entry when its update outweighs its
// commands (see above).
func (a *PBPaxos) shipAs(e *entry) {
	if a.prm.hybrid && e.Kind != updReplay && len(e.Upd) > len(e.Cmds) {
		e.Kind, e.Upd = updReplay, nil
	}
}

// replayOrder is the broken variant's nondeterministic apply: a backup
// executes a replayed instance's commands in an order it draws.
func (a *PBPaxos) replayOrder(s *slot, cs []cmd) {
	if !a.proto.replayShuffle || s.kind != updReplay || a.role == leader || len(cs) < 2 {
		return
	}
	a.cfg.Rand.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
}
