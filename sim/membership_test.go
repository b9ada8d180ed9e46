package sim

import (
	"testing"
	"time"
)

// Membership changes mid-run under every fault: add a node, remove one of
// the bootstrap nodes (the first leader, often), add another; every change
// completes and every history is linearizable across them.
func TestPaxosMembershipChangesUnderFaults(t *testing.T) {
	seeds := int64(12)
	if testing.Short() {
		seeds = 4
	}
	for seed := int64(1); seed <= seeds; seed++ {
		cfg := Config{Protocol: "paxos", Nodes: 3, Clients: 4, Ops: 1200, Seed: seed, Faults: "all",
			Membership: []MemberChange{{At: time.Second, Add: true}, {At: 2 * time.Second, Node: "n1"}, {At: 3 * time.Second, Add: true}, {At: 4 * time.Second, Node: "n2"}}}
		r, err := Run(cfg)
		if err != nil {
			t.Fatalf("%v\nreplay: %s", err, cfg.Command())
		}
		if r.Violation {
			t.Fatalf("seed %d: %s\nreplay: %s", seed, r.Check, cfg.Command())
		}
		if r.Stats.MemberChanges != len(cfg.Membership) {
			t.Fatalf("seed %d: %d of %d membership changes completed (sim time %v)\nreplay: %s", seed, r.Stats.MemberChanges, len(cfg.Membership), r.SimTime, cfg.Command())
		}
		if r.Completed < r.Ops/2 {
			t.Fatalf("seed %d: %d of %d ops completed\nreplay: %s", seed, r.Completed, r.Ops, cfg.Command())
		}
	}
}

// Removing the leader costs no election timeout: the removed leader hands
// off (protocol/paxos TakeOver), so with a 300 ms liveness bound (below the
// 500 ms election timeout) every operation after heal+bound completes within
// it. n1 leads at 1 s in seeds 4 and 5; without the hand-off they fail (a get
// took 535 ms in seed 4), and 69 of seeds 1-200 fail, 0 with it:
// synod-lab sim --protocol paxos --nodes 3 --clients 4 --ops 3000 --faults none
// --membership remove:n1@1s --liveness 100ms --liveness-bound 300ms --seeds 1-200
func TestPaxosRemoveLeaderHandsOffWithinElectionTimeout(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		cfg := Config{Protocol: "paxos", Nodes: 3, Clients: 4, Ops: 3000, Seed: seed, Faults: "none",
			Liveness: 100 * time.Millisecond, LivenessBound: 300 * time.Millisecond,
			Membership: []MemberChange{{At: time.Second, Node: "n1"}}}
		r, err := Run(cfg)
		if err != nil {
			t.Fatalf("%v\nreplay: %s", err, cfg.Command())
		}
		if r.Violation || r.Liveness != "" || r.Stats.MemberChanges != 1 {
			t.Fatalf("seed %d: %s %s (%d changes)\nreplay: %s", seed, r.Check, r.Liveness, r.Stats.MemberChanges, cfg.Command())
		}
	}
}

func TestParseMembership(t *testing.T) {
	ms, err := ParseMembership("add@1s, remove:n1@2.5s")
	if err != nil || len(ms) != 2 || !ms[0].Add || ms[1].Node != "n1" || ms[1].At != 2500*time.Millisecond {
		t.Fatalf("%+v %v", ms, err)
	}
	if got := MembershipSpec(ms); got != "add@1s,remove:n1@2.5s" {
		t.Fatal(got)
	}
	for _, bad := range []string{"add", "remove@1s", "drop:n1@1s", "add@-1s"} {
		if _, err := ParseMembership(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := Run(Config{Protocol: "paxos", Nodes: 3, Clients: 1, Ops: 1, Membership: []MemberChange{{Node: "n9"}}}); err == nil {
		t.Error("remove of an unknown node accepted")
	}
}

// The simulator catches a membership bug: paxos-broken-bootquorum counts
// phase 2 majorities in the bootstrap configuration n1..n3, so after two adds
// a partition {n1,n2} | {n3,n4,n5} lets the old side decide instances the
// new configuration never sees. The correct paxos passes the same seeds.
// Seeds found with: synod-lab sim --protocol paxos-broken-bootquorum --nodes 3
// --clients 4 --ops 1200 --faults all --membership add@1s,add@2s --seeds
// 1-160 (58, 107, 115, 134, 136, 140, 143 and 150 fail since session 51's
// relayed Forward, issue 28; before, 21, 36, 72 and 74 of 1-80 since session
// 49's changes to a follower's timers and relayed answers; before, 2, 18 and 22 since a command's
// answer is positioned at its instance; before that, 4, 21, 22, 58 and ten more of 1-200 since
// quorum reads' rounds are sent once per step, each tripping the
// one-value-per-instance invariant before its history shows the lost
// write; before that, 94, 165, 181, 197 and five more did).
func TestPaxosBrokenBootQuorumCaughtWithMembership(t *testing.T) {
	caught := 0
	for _, seed := range []int64{58, 107} {
		for _, proto := range []string{"paxos", "paxos-broken-bootquorum"} {
			cfg := Config{Protocol: proto, Nodes: 3, Clients: 4, Ops: 1200, Seed: seed, Faults: "all",
				Membership: []MemberChange{{At: time.Second, Add: true}, {At: 2 * time.Second, Add: true}}}
			r, err := Run(cfg)
			if err != nil {
				t.Fatalf("%v\nreplay: %s", err, cfg.Command())
			}
			switch {
			case proto == "paxos" && (r.Violation || r.Invariant != ""):
				t.Fatalf("seed %d: correct paxos failed: %s %s\nreplay: %s", seed, r.Check, r.Invariant, cfg.Command())
			case proto != "paxos" && (r.Violation || r.Invariant != ""):
				caught++
			}
		}
	}
	if caught == 0 {
		t.Fatal("paxos-broken-bootquorum passed seeds 58 and 107 with membership changes and faults")
	}
}
