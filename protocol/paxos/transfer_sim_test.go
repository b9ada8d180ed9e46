package paxos_test

import (
	"testing"

	"github.com/synod-dev/synod/protocol/paxos"
	"github.com/synod-dev/synod/sim"
)

// TestTransferSim simulates leadership transfers every 150 ms of virtual
// time (rotating targets, paxos.TransferSimArgs) under every fault kind
// and lease reads: paxos keeps every invariant and a linearizable history
// on every seed, and transfers are done; the broken variant whose target
// skips phase 1 (leading under the old ballot) is caught on every seed by
// the invariant "one leader per ballot". Replay a seed with the printed
// command.
func TestTransferSim(t *testing.T) {
	seeds := int64(20)
	if testing.Short() {
		seeds = 4
	}
	run := func(proto string, seed int64, faults string) (*sim.Result, string, string) {
		args := append([]string{"--protocol", proto}, paxos.TransferSimArgs()...)
		cfg, _, err := sim.ParseArgs(append(args, "--faults", faults, "--param", "read=lease"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Seed = seed
		r, err := sim.Run(cfg)
		if err != nil {
			t.Fatalf("%s seed %d: %v\nreplay: %s", proto, seed, err, cfg.Command())
		}
		why := ""
		switch {
		case r.Invariant != "":
			why = r.Invariant
		case r.Violation:
			why = "history not linearizable"
		}
		return r, why, cfg.Command()
	}
	transfers := 0
	for seed := int64(1); seed <= seeds; seed++ {
		r, why, cmd := run("paxos", seed, "all")
		if why != "" {
			t.Errorf("paxos seed %d: %s\nreplay: %s", seed, why, cmd)
		}
		transfers += r.Stats.Transfers
	}
	if transfers < int(seeds)*5 {
		t.Errorf("only %d transfers done in %d seeds: the schedule no longer transfers", transfers, seeds)
	}
	caught := 0
	for seed := int64(1); seed <= 4; seed++ {
		if _, why, cmd := run(paxos.BrokenTransfer, seed, "none"); why != "" {
			caught++
			t.Logf("%s caught at seed %d: %.200s\nreplay: %s", paxos.BrokenTransfer, seed, why, cmd)
		}
	}
	if caught != 4 {
		t.Errorf("%s caught on %d of 4 seeds, want 4", paxos.BrokenTransfer, caught)
	}
	t.Logf("paxos: %d seeds under every fault kind, %d transfers, 0 violations; %s caught on %d of 4", seeds, transfers, paxos.BrokenTransfer, caught)
}
