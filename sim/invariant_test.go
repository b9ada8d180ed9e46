package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// localProto is a one-node state machine used to test the simulator's
// invariant checks and atomic groups: the node applies every request to its
// own state (so it is linearizable with one node). Its broken variants
// decrement the step counter the invariant watches, or apply only the first
// operation of a group.
type localProto struct {
	name            string
	shrink, halfGrp bool
}

func (p localProto) Name() string          { return p.name }
func (p localProto) IdempotentRetry() bool { return false }
func (p localProto) Transactions() automaton.TxnSupport {
	return automaton.TxnSupport{Atomic: true}
}
func (p localProto) New(cfg automaton.Config) (automaton.Automaton, error) {
	return &local{p: p, st: cfg.Service.NewState()}, nil
}
func (p localProto) Invariants() ([]string, automaton.InvariantChecker) {
	return []string{"a node's request count never decreases"}, &countChecker{last: map[automaton.NodeID]int{}}
}

type local struct {
	p     localProto
	st    service.State
	count int
}

func (a *local) Step(in automaton.Input) []automaton.Output {
	cr, ok := in.(automaton.ClientRequest)
	if !ok {
		return nil
	}
	a.count++
	if a.p.shrink && a.count == 20 {
		a.count = 3
	}
	req := cr.Req
	if req.Ops != nil {
		var res []service.Result
		if a.p.halfGrp {
			// Broken: answers every operation, applies only the first.
			clone := service.KV{}.NewState()
			clone.Restore(a.st.Snapshot())
			res = automaton.ApplyGroup(clone, req.Ops, req.Env)
			a.st.Apply(req.Ops[0])
		} else {
			res = automaton.ApplyGroup(a.st, req.Ops, req.Env)
		}
		return []automaton.Output{automaton.Respond{Resp: automaton.Response{ID: req.ID, Result: service.OK(), Results: res}}}
	}
	return []automaton.Output{automaton.Respond{Resp: automaton.Response{ID: req.ID, Result: a.st.Apply(req.Op)}}}
}

type countChecker struct{ last map[automaton.NodeID]int }

func (c *countChecker) Check(stepped automaton.NodeID, up map[automaton.NodeID]automaton.Automaton) error {
	a, ok := up[stepped].(*local)
	if !ok {
		return nil
	}
	if a.count < c.last[stepped] {
		return fmt.Errorf("request count of %s went from %d down to %d", stepped, c.last[stepped], a.count)
	}
	c.last[stepped] = a.count
	return nil
}

func init() {
	automaton.Register(localProto{name: "test-local"})
	automaton.RegisterBroken("test-local", localProto{name: "test-local-shrink", shrink: true})
	automaton.RegisterBroken("test-local", localProto{name: "test-local-halfgroup", halfGrp: true})
}

func localCfg(proto string) Config {
	return Config{Protocol: proto, Nodes: 1, Clients: 3, Ops: 200, Seed: 1, Faults: "none"}
}

func TestInvariantCheckedAfterEveryStep(t *testing.T) {
	r, err := Run(localCfg("test-local"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Invariant != "" || r.Violation || r.InvariantChecks < r.Ops {
		t.Fatalf("real protocol: invariant %q, violation %v, %d checks for %d ops", r.Invariant, r.Violation, r.InvariantChecks, r.Ops)
	}
	r, err = Run(localCfg("test-local-shrink"))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Violation || !strings.Contains(r.Invariant, "went from 19 down to 3") || r.Check != nil {
		t.Fatalf("broken variant: invariant %q, violation %v, check %v", r.Invariant, r.Violation, r.Check)
	}
	cfg := localCfg("test-local-shrink")
	cfg.NoInvariants = true
	if r, err = Run(cfg); err != nil || r.Invariant != "" || r.InvariantChecks != 0 {
		t.Fatalf("NoInvariants: %v %q %d", err, r.Invariant, r.InvariantChecks)
	}
}

func TestAtomicGroupsCheckedForSerializability(t *testing.T) {
	cfg := localCfg("test-local")
	cfg.Groups, cfg.Keys = 0.5, 2
	r, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	groups := 0
	for _, op := range r.History.Ops {
		if op.IsTxn() {
			groups++
			if len(op.Txn) != 3 {
				t.Fatalf("group of %d operations recorded, want 3", len(op.Txn))
			}
		}
	}
	if groups < 50 || r.Violation || r.Check == nil {
		t.Fatalf("%d groups, violation %v, check %v", groups, r.Violation, r.Check)
	}
	if !strings.Contains(cfg.Command(), "--groups 0.5") {
		t.Errorf("replay command lacks --groups: %s", cfg.Command())
	}
	cfg.Protocol = "test-local-halfgroup"
	if r, err = Run(cfg); err != nil {
		t.Fatal(err)
	}
	if !r.Violation {
		t.Fatalf("half-applied groups not caught: %v", r.Check)
	}
	// A protocol without atomic groups is refused --groups.
	cfg.Protocol = "test-leader"
	if _, err := Run(cfg); err == nil || !strings.Contains(err.Error(), "atomically") {
		t.Fatalf("--groups with a protocol without groups: %v", err)
	}
}

// The replay command parses back into the same Config.
func TestCommandRoundTrips(t *testing.T) {
	cfg := localCfg("test-local-shrink")
	cfg.NoInvariants, cfg.Groups, cfg.GroupSize = true, 0.25, 4
	cfg.Txns, cfg.TxnSize, cfg.TxnAbort = 0.3, 5, 0.25
	args := strings.Fields(cfg.Command())[2:]
	got, seeds, err := ParseArgs(args)
	if err != nil {
		t.Fatalf("%s: %v", cfg.Command(), err)
	}
	got.Seed = seeds[0]
	if got.Command() != cfg.Command() || !got.NoInvariants || got.Groups != 0.25 || got.GroupSize != 4 ||
		got.Txns != 0.3 || got.TxnSize != 5 || got.TxnAbort != 0.25 {
		t.Fatalf("round trip: %s\n         -> %s", cfg.Command(), got.Command())
	}
	// The flag defaults (size 3, abort 0.1) are left out and come back.
	cfg.TxnSize, cfg.TxnAbort = 3, 0.1
	if strings.Contains(cfg.Command(), "--txn-size") || strings.Contains(cfg.Command(), "--txn-abort") {
		t.Fatalf("defaults spelled out: %s", cfg.Command())
	}
	if got, _, err = ParseArgs(strings.Fields(cfg.Command())[2:]); err != nil || got.TxnSize != 3 || got.TxnAbort != 0.1 {
		t.Fatalf("defaults round trip: %+v %v", got, err)
	}
}
