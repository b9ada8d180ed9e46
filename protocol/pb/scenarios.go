package pb

import "github.com/synod-dev/synod/automaton"

// Scenarios implements automaton.ScenarioDeclarer. The suite's standard
// scenarios (faults, groups, the nondeterministic matchmaker) run with
// SafeFaults only; these add the state transfer in small chunks, and the
// evidence that the failure model is needed.
func (p protocol) Scenarios() []automaton.Scenario {
	switch {
	case p.soloTakeOver:
		return []automaton.Scenario{
			{Name: "caught by the linearizability checker (slow disks: a backup takes over from a live primary, which answers alone; invariants off)",
				Args: append(SlowDiskArgs(), "--no-invariants"), Seeds: TakeOverSeeds},
		}
	case p.replyFirst:
		return []automaton.Scenario{
			{Name: "caught by the invariant reply-after-acks",
				Args:  []string{"--nodes", "3", "--clients", "4", "--ops", "50", "--faults", "none"},
				Seeds: "1"},
			{Name: "caught by linearizability when updates are lost and the primary crashes (invariants off)",
				Args:  []string{"--nodes", "3", "--clients", "4", "--ops", "300", "--faults", "crash,loss", "--no-invariants"},
				Seeds: replyFirstSeeds},
		}
	case p.noDedup:
		return []automaton.Scenario{
			{Name: "caught by the invariant exactly-once under duplicated forwards",
				Args:  []string{"--nodes", "3", "--clients", "4", "--ops", "300", "--faults", "dup"},
				Seeds: "1"},
			{Name: "caught by linearizability under duplicated forwards (invariants off)",
				Args:  []string{"--nodes", "3", "--clients", "4", "--ops", "300", "--faults", "dup", "--no-invariants"},
				Seeds: noDedupSeeds},
		}
	}
	return []automaton.Scenario{
		{Name: "take-overs from a live primary under slow disks lose no acknowledged write (takeover.go)",
			Args: SlowDiskArgs(), Seeds: TakeOverSeeds},
		{Name: "joins by state transfer in 64-byte chunks under crashes",
			Args:  []string{"--nodes", "3", "--clients", "4", "--ops", "300", "--faults", "crash,dup,reorder,slow", "--param", "chunk_bytes=64"},
			Seeds: "1-4"},
		{Name: "split brain under partitions: the isolated primary keeps serving while the senior backup takes over (outside the failure model)",
			Args:            []string{"--nodes", "3", "--clients", "4", "--ops", "300", "--faults", "partition"},
			Seeds:           partitionSeeds,
			ExpectViolation: true},
		{Name: "split brain under partitions, seen by clients: not linearizable (invariants and convergence checks off)",
			Args:            []string{"--nodes", "3", "--clients", "4", "--ops", "300", "--faults", "partition", "--no-invariants", "--converge-every", "1000000"},
			Seeds:           partitionSeeds,
			ExpectViolation: true},
	}
}

// Pinned seeds (found with the scenarios' flags; the correct protocol
// passes the broken variants' seeds):
//
//   - partitionSeeds: `synod-lab sim --protocol pb --faults partition --seeds
//     1-20` failed 20 of 20 (divergent committed states, or the invariant
//     exactly-once after the heal); with --no-invariants --converge-every
//     1000000, 10 of 10 were not linearizable. Since the take-over rules
//     (takeover.go) the scenario's flags fail 8 of seeds 1-40 (3, 4, 6,
//     19, 27, 31, 33, 34; not linearizable), with the checks off too.
//     Since client sessions (session 52: the simulator's clients tell
//     their bound, so forwards grew and the schedules moved) they fail 10
//     of seeds 1-40 (1, 10, 17, 24, 31, 33, 34, 37, 38, 40), with the
//     checks off too; 3 and 4 pass, so the pin is 33-34.
//   - replyFirstSeeds: `--faults crash,loss --no-invariants --seeds 1-20`
//     failed seeds 1, 4, 5, 6, ...; pb itself passes crash,loss on 1-100.
//   - noDedupSeeds: `--faults dup --no-invariants --seeds 1-10` failed 5.
//   - TakeOverSeeds: SlowDiskArgs with --no-invariants, seeds 1-100:
//     pb-broken-takeover was not linearizable on 15 and 39, and so was pb
//     at main 12eb6a9 (before takeover.go); since a member backup
//     acknowledges once per check (52778af, the idle-backup fix) the
//     schedules moved: it fails 13 and 83 (3 of seeds 1-100), and pb
//     passes seeds 1-100 with the invariants on.
const (
	// TakeOverSeeds are the seeds of SlowDiskArgs on which
	// pb-broken-takeover loses acknowledged writes (TestTakeOverSlowDisk
	// and the conformance suite's broken-variant catch share them).
	TakeOverSeeds   = "13,83"
	partitionSeeds  = "33-34"
	replyFirstSeeds = "1,4"
	noDedupSeeds    = "5"
)

// SlowDiskArgs is the simulation of take-overs from a live primary
// (takeover.go): crashes, slow windows (a node's fsyncs up to ~40 times
// slower, so a primary's heartbeats wait behind its own fsyncs for longer
// than a check period), fsyncs of 1-30 ms, and four whole-cluster power
// losses.
func SlowDiskArgs() []string {
	return []string{"--nodes", "3", "--clients", "8", "--ops", "300", "--faults", "crash,slow",
		"--fsync", "uniform:1ms:30ms", "--power-loss", "500ms,1s,1.5s,2s"}
}
