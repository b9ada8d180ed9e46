package paxos

import (
	"fmt"
	"sort"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// randService is a tiny nondeterministic service: "draw k" stores and
// returns a number drawn from the operation's environment, "peek k" reads it.
type randService struct{}

type randState map[string]uint64

func init() { service.Register(randService{}) }

func (randService) Name() string           { return "paxos-test-rand" }
func (randService) Nondeterministic() bool { return true }
func (randService) IsRead(op service.Op) bool {
	return op.Kind == "peek"
}
func (randService) Validate(op service.Op) error {
	if (op.Kind != "draw" && op.Kind != "peek") || len(op.Args) != 0 {
		return fmt.Errorf("want draw k or peek k")
	}
	return nil
}
func (randService) NewState() service.State { return randState{} }

func (s randState) Apply(op service.Op) service.Result { return s.ApplyEnv(op, service.Env{}) }
func (s randState) ApplyEnv(op service.Op, env service.Env) service.Result {
	if op.Kind == "draw" {
		s[op.Key] = env.Rand().Uint64()
	}
	return service.Int(int64(s[op.Key]))
}
func (s randState) Snapshot() []byte {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e := wire.Encoder{}
	e.Uvarint(uint64(len(keys)))
	for _, k := range keys {
		e.String(k)
		e.Uvarint(s[k])
	}
	return e.B
}
func (s randState) Restore(b []byte) error {
	d := wire.NewDecoder(b)
	clear(s)
	n := d.Count(1<<20, 2)
	for i := 0; i < n && d.Err() == nil; i++ {
		s[d.String()] = d.Uvarint()
	}
	return d.Done()
}

func draw(k string) service.Op { return service.Op{Kind: "draw", Key: k} }

// Every replica executes a nondeterministic command with the environment
// the log carries (the one the request had when it reached the leader), so
// all replicas reach the same state, the client's answer matches it, and a
// restart that replays the log rebuilds it.
func TestNondeterministicServiceReplicatesTheEnvironment(t *testing.T) {
	c := newCluster(t, 3, "paxos-test-rand", nil)
	c.elect("n1")
	seq := uint64(0)
	for i, at := range []automaton.NodeID{"n2", "n3", "n1", "n2"} {
		seq++
		env := service.Env{Time: int64(1000 + i), Seed: uint64(77 * (i + 1))}
		k := fmt.Sprintf("k%d", i)
		r, ok := c.doReq(at, automaton.Request{ID: automaton.RequestID{Client: 1, Seq: seq}, Op: draw(k), Env: env})
		if !ok || r.Result.IsErr() {
			t.Fatalf("draw at %s: %+v %v", at, r, ok)
		}
		if want := int64(env.Rand().Uint64()); r.Result.Int != want {
			t.Fatalf("draw at %s answered %d, want %d (the request's environment)", at, r.Result.Int, want)
		}
		c.tickAll() // commit notices
		for _, id := range c.IDs() {
			if got := int64(c.node(id).sm.st.(randState)[k]); got != r.Result.Int {
				t.Fatalf("%s holds %d for %s, the client got %d", id, got, k, r.Result.Int)
			}
		}
	}
	// A group draws twice in one environment: each operation its own numbers.
	env := service.Env{Time: 5, Seed: 9}
	r, ok := c.doReq("n3", automaton.Request{ID: automaton.RequestID{Client: 1, Seq: seq + 1}, Ops: []service.Op{draw("g"), draw("h")}, Env: env})
	if !ok || len(r.Results) != 2 || r.Results[0].Int == r.Results[1].Int {
		t.Fatalf("group: %+v %v", r, ok)
	}
	if want := int64(env.For(1).Rand().Uint64()); r.Results[1].Int != want {
		t.Fatalf("second draw %d, want %d", r.Results[1].Int, want)
	}
	c.tickAll()
	s1 := string(c.node("n1").sm.snapshot(0))
	for _, id := range c.IDs()[1:] {
		if string(c.node(id).sm.snapshot(0)) != s1 {
			t.Fatalf("%s's state differs from n1's", id)
		}
	}
	c.Crash("n2")
	c.Boot("n2")
	if string(c.node("n2").sm.snapshot(0)) != s1 {
		t.Fatal("n2 replayed its log into a different state")
	}
}
