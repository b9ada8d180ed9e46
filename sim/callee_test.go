package sim

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// relay is a test-only caller protocol: every replica turns each client
// request into a nested call of the same operation to the namespace named
// by param "callee" (default "remote"), and answers the client with the
// callee's answer. The contacted replica also sends the request to its
// peers, which call too with the same id, as the replicas of a replicated
// caller do (the Eve/Adam thesis §3); the callee must answer them alike. With
// alterCopies, the peers' copies carry other bytes under the same id
// (check (a) must catch it).
type relay struct {
	name        string
	alterCopies bool
}

func init() {
	automaton.Register(relay{name: "test-relay"})
	automaton.RegisterBroken("test-relay", relay{name: "test-relay-broken-copies", alterCopies: true})
}

func (p relay) Name() string        { return p.name }
func (relay) IdempotentRetry() bool { return true }
func (p relay) New(cfg automaton.Config) (automaton.Automaton, error) {
	ns := cfg.Params["callee"]
	if ns == "" {
		ns = DefaultCalleeNamespace
	}
	return &relayNode{p: p, cfg: cfg, ns: ns, local: map[automaton.EffectID]automaton.RequestID{}}, nil
}

type relayNode struct {
	p     relay
	cfg   automaton.Config
	ns    string
	next  automaton.EffectID
	local map[automaton.EffectID]automaton.RequestID
}

func (r *relayNode) call(req automaton.Request) automaton.Output {
	r.next++
	nested := automaton.Request{ID: req.ID, Op: req.Op, Ops: req.Ops, Opts: automaton.Options{Read: req.Opts.Read}, Nested: true}
	return automaton.Effect{ID: r.next, Kind: automaton.CallKind, Payload: automaton.Call{Namespace: r.ns, Req: nested}}
}

func (r *relayNode) Step(in automaton.Input) []automaton.Output {
	switch in := in.(type) {
	case automaton.ClientRequest:
		out := []automaton.Output{r.call(in.Req)}
		r.local[r.next] = in.Req.ID
		if len(in.Req.Ops) > 0 {
			return out
		}
		var e wire.Encoder
		e.Uvarint(in.Req.ID.Client)
		e.Uvarint(in.Req.ID.Seq)
		service.EncodeOp(&e, in.Req.Op)
		for _, n := range r.cfg.Nodes {
			if n != r.cfg.Self {
				out = append(out, automaton.Send{To: n, Msg: append([]byte(nil), e.B...)})
			}
		}
		return out
	case automaton.PeerMessage:
		d := wire.NewDecoder(in.Msg)
		req := automaton.Request{ID: automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}}
		req.Op = service.DecodeOp(d)
		if d.Err() != nil {
			return nil
		}
		if r.p.alterCopies && req.Op.Kind == "set" {
			req.Op.Args = [][]byte{append(req.Op.Args[0], "@"+string(r.cfg.Self)...)}
		}
		return []automaton.Output{r.call(req)}
	case automaton.EffectDone:
		id, ok := r.local[in.ID]
		if !ok {
			return nil
		}
		delete(r.local, in.ID)
		if in.Err != nil {
			return []automaton.Output{automaton.Respond{Resp: automaton.Response{ID: id, Result: service.Errorf("ERR %v", in.Err)}}}
		}
		resp := in.Result.(automaton.Response)
		resp.ID = id
		return []automaton.Output{automaton.Respond{Resp: resp}}
	}
	return nil
}

func relayConfig(seed int64, callee, faults string) Config {
	return Config{Protocol: "test-relay", Nodes: 3, Clients: 3, Ops: 150, Keys: 2, Seed: seed, Faults: faults,
		Callee: &Config{Protocol: callee, Nodes: 3, Faults: faults}, CalleeDelay: "uniform:1ms:10ms"}
}

// TestCalleeRelay: three caller replicas send every request to a callee
// (each protocol that serves nested requests: paxos, pbpaxos, unreplicated), under faults
// in both namespaces; the callee's history holds one operation per id
// (copies deduplicated), both histories check, and the run replays to the
// same digests. A late copy of an older id at pbpaxos (window 1,
// protocol/pbpaxos/nested.go) is answered an error that is not retryable
// (automaton.RetryableAnswer), which goes back to the relay like the live
// node hands it back, instead of being re-sent until the run ends.
func TestCalleeRelay(t *testing.T) {
	for _, c := range []struct {
		callee string
		seeds  int64
	}{{"paxos", 3}, {"pbpaxos", 3}, {"unreplicated", 3}} {
		t.Run(c.callee, func(t *testing.T) { testCalleeRelay(t, c.callee, c.seeds) })
	}
}

func testCalleeRelay(t *testing.T, callee string, seeds int64) {
	faults := 0
	for seed := int64(1); seed <= seeds; seed++ {
		cfg := relayConfig(seed, callee, "all")
		res, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Violation || res.Invariant != "" {
			t.Fatalf("seed %d: violation: %s %v\n  replay: %s", seed, res.Invariant, res.Check, cfg.Command())
		}
		c := res.Callee
		if c == nil || c.Check == nil || c.Ops == 0 {
			t.Fatalf("seed %d: no callee outcome: %+v", seed, c)
		}
		if c.Ops > res.Ops+res.Stats.Retries || res.Stats.Calls <= c.Ops {
			t.Fatalf("seed %d: %d calls for %d nested ids (%d client ops): copies not merged", seed, res.Stats.Calls, c.Ops, res.Ops)
		}
		if res.Completed < res.Ops/2 {
			t.Fatalf("seed %d: only %d of %d operations completed", seed, res.Completed, res.Ops)
		}
		faults += c.Stats.Crashes + c.Stats.Partitions + c.Stats.Pauses
		again, err := Run(cfg)
		if err != nil || again.Digest != res.Digest || again.Callee.Digest != c.Digest {
			t.Fatalf("seed %d: replay differs: %v", seed, err)
		}
	}
	if faults == 0 {
		t.Fatal("no crash, partition or pause in the callee namespace")
	}
}

// TestCalleeCatchesUncachedReads: paxos-broken-nestedread answers later
// copies of a nested read afresh; check (b) catches it.
func TestCalleeCatchesUncachedReads(t *testing.T) {
	caught := 0
	for seed := int64(1); seed <= 5; seed++ {
		res, err := Run(relayConfig(seed, "paxos-broken-nestedread", "none"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(res.Invariant, "answered differently") && res.Violation {
			caught++
		}
	}
	if caught == 0 {
		t.Fatal("paxos-broken-nestedread passed five seeds as a callee")
	}
}

// TestCalleeCatchesDifferentCopies: caller replicas that send different
// bytes under one id are caught by check (a).
func TestCalleeCatchesDifferentCopies(t *testing.T) {
	cfg := relayConfig(1, "paxos", "none")
	cfg.Protocol = "test-relay-broken-copies"
	res, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Violation || !strings.Contains(res.Invariant, "differ") {
		t.Fatalf("different copies not caught: %q", res.Invariant)
	}
}

// TestCalleeRefused: a call to a namespace not simulated, or to a protocol
// that does not serve nested requests, is answered with EffectDone.Err.
func TestCalleeRefused(t *testing.T) {
	for _, cfg := range []Config{
		{Protocol: "test-relay", Nodes: 1, Clients: 1, Ops: 5, Seed: 1, Params: map[string]string{"callee": "nowhere"},
			Callee: &Config{Protocol: "paxos", Nodes: 1}},
		{Protocol: "test-relay", Nodes: 1, Clients: 1, Ops: 5, Seed: 1, Callee: &Config{Protocol: "abd", Nodes: 3}},
	} {
		res, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Stats.ErrorReplies == 0 || res.Completed != 0 {
			t.Fatalf("%s: refused calls answered: %+v", cfg.Command(), res.Stats)
		}
	}
}

// TestCalleeCommand: the replay command carries the callee flags.
func TestCalleeCommand(t *testing.T) {
	cfg := relayConfig(4, "paxos", "crash")
	cfg.Callee.Params = map[string]string{"window": "2"}
	cmd := cfg.Command()
	cfg2, seeds, err := ParseArgs(strings.Fields(cmd)[2:])
	if err != nil {
		t.Fatal(err)
	}
	cfg2.Seed = seeds[0]
	if cfg2.Command() != cmd || len(seeds) != 1 || seeds[0] != 4 || cfg2.Callee == nil || cfg2.Callee.Params["window"] != "2" {
		t.Fatalf("round trip: %s\n  became %s", cmd, cfg2.Command())
	}
	for _, f := range []string{"--callee-protocol paxos", "--callee-nodes 3", "--callee-faults crash", "--callee-delay", "--callee-param window=2"} {
		if !strings.Contains(cmd, f) {
			t.Errorf("%s lacks %s", cmd, f)
		}
	}
}
