package sim

import (
	"strings"
	"testing"

	_ "github.com/synod-dev/synod/protocol/abd"
	_ "github.com/synod-dev/synod/protocol/paxos"
)

// clientDriven is abd's client-driven conformance scenario (protocol/abd,
// scenarios.go) without --protocol and --seeds.
var clientDriven = []string{"--nodes", "3", "--clients", "6", "--ops", "300", "--faults", "all",
	"--keys", "1", "--client-driven", "--client-latency", "pareto:1ms:1.5"}

func runArgs(t *testing.T, args ...string) *Result {
	t.Helper()
	cfg, seeds, err := ParseArgs(args)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seed = seeds[0]
	r, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Client-driven ABD is linearizable under faults, and its clients, not the
// nodes, coordinate: the nodes send each other nothing.
func TestClientDrivenABD(t *testing.T) {
	for _, seed := range []string{"2", "18", "5"} {
		r := runArgs(t, append([]string{"--protocol", "abd", "--seeds", seed}, clientDriven...)...)
		if r.Violation {
			t.Fatalf("seed %s: %v", seed, r.Check)
		}
		if r.Completed == 0 || r.Ops != 300 {
			t.Fatalf("seed %s: %d of %d operations completed", seed, r.Completed, r.Ops)
		}
		if r.Stats.MsgsSent != 0 {
			t.Errorf("seed %s: nodes sent %d messages to each other; client-driven replicas never talk to each other", seed, r.Stats.MsgsSent)
		}
		if r.Stats.LateReplies == 0 {
			t.Errorf("seed %s: no late replies: every phase should leave the replicas beyond a majority answering late", seed)
		}
	}
	// Node-coordinated, the same run has the nodes talk.
	args := append([]string{"--protocol", "abd", "--seeds", "5"}, clientDriven...)
	for i, a := range args {
		if a == "--client-driven" {
			args = append(args[:i:i], args[i+1:]...)
			break
		}
	}
	if r := runArgs(t, args...); r.Stats.MsgsSent == 0 {
		t.Errorf("node-coordinated abd sent no peer messages")
	}
}

// The client's one-phase read (no write-back) is caught by the checker.
func TestClientDrivenBrokenCaught(t *testing.T) {
	r := runArgs(t, append([]string{"--protocol", "abd-broken-clientnowriteback", "--seeds", "2"}, clientDriven...)...)
	if !r.Violation || r.Check == nil {
		t.Fatalf("reads without write-back passed seed 2 (invariant %q)", r.Invariant)
	}
}

// Crashes time phases out: a phase is sent again with fresh request ids,
// and writes are retried rather than given up (their phases are
// idempotent).
func TestClientDrivenRetries(t *testing.T) {
	r := runArgs(t, "--protocol", "abd", "--seeds", "3", "--nodes", "3", "--clients", "4", "--ops", "400",
		"--faults", "crash,pause", "--client-driven", "--client-latency", "uniform:1ms:5ms", "--timeout", "4ms")
	if r.Violation {
		t.Fatalf("%v", r.Check)
	}
	if r.Stats.Retries == 0 {
		t.Errorf("no phase was retried under crashes and pauses with a 4ms timeout (round trips up to 10ms)")
	}
	if r.Stats.UnknownWrites != 0 {
		t.Errorf("%d writes given up: client-driven writes retry their phases", r.Stats.UnknownWrites)
	}
}

func TestClientDrivenRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--protocol", "paxos", "--client-driven"},
		{"--protocol", "abd", "--client-driven", "--groups", "0.3"},
	} {
		cfg, _, err := ParseArgs(args)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Seed = 1
		if _, err := Run(cfg); err == nil || !strings.Contains(err.Error(), "--client-driven") {
			t.Errorf("%v: got %v, want a --client-driven refusal", args, err)
		}
	}
}

func TestClientDrivenCommand(t *testing.T) {
	cfg, _, err := ParseArgs(append([]string{"--protocol", "abd", "--seeds", "4"}, clientDriven...))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seed = 4
	back, _, err := ParseArgs(strings.Fields(cfg.Command())[2:])
	if err != nil {
		t.Fatal(err)
	}
	if !back.ClientDriven {
		t.Errorf("Command() %q loses --client-driven", cfg.Command())
	}
}
