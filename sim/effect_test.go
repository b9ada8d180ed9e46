package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// testExec doubles an integer payload; its result costs payload ms of
// virtual time. It records the executors' lifecycle in execLog.
type testExec struct {
	env    automaton.ExecEnv
	closed bool
}

type costedInt int

func (c costedInt) Cost() time.Duration { return time.Duration(c) * time.Millisecond }

var execLog []string

func init() {
	automaton.RegisterExecutor("test.double", func(env automaton.ExecEnv) (automaton.Executor, error) {
		execLog = append(execLog, fmt.Sprintf("new %s %s sim=%v", env.Self, env.Namespace, env.Simulated))
		return &testExec{env: env}, nil
	})
}

func (x *testExec) Execute(payload any) (any, error) {
	n := payload.(int)
	if n < 0 {
		return nil, fmt.Errorf("negative %d", n)
	}
	return costedInt(2 * n), nil
}

func (x *testExec) Close() error {
	execLog = append(execLog, "close "+string(x.env.Self))
	x.closed = true
	return nil
}

func describeEffect(in automaton.Input) string {
	if d, ok := in.(automaton.EffectDone); ok {
		if d.Err != nil {
			return fmt.Sprintf("done %d err %v", d.ID, d.Err)
		}
		return fmt.Sprintf("done %d = %d", d.ID, d.Result)
	}
	return ""
}

func TestEffects(t *testing.T) {
	var done []string
	var at []time.Duration
	var s *simulator
	s = newScripted(t, 1, func(self automaton.NodeID, in automaton.Input) []automaton.Output {
		switch in := in.(type) {
		case automaton.ClientRequest:
			// A Persist before the effect: the effect waits for its fsync.
			return []automaton.Output{
				automaton.Persist{Key: "k", Value: []byte("v")},
				automaton.Effect{ID: 1, Kind: "test.double", Payload: 3},
				automaton.Effect{ID: 2, Kind: "test.double", Payload: -1},
			}
		case automaton.EffectDone:
			done = append(done, describeEffect(in))
			at = append(at, s.now)
		}
		return nil
	}, nil)
	execLog = nil
	n := s.nodes[0]
	s.step(n, automaton.ClientRequest{Req: automaton.Request{Op: service.Op{Kind: "get", Key: "x"}}})
	if len(execLog) != 0 || len(done) != 0 {
		t.Fatalf("an effect ran before the persist emitted before it was durable: %v %v", execLog, done)
	}
	s.runUntil(100 * time.Millisecond)
	// fsync 1ms, then effect 1 costs 2×3 ms; effect 2 fails at once.
	if fmt.Sprint(done) != "[done 2 err negative -1 done 1 = 6]" || at[0] != time.Millisecond || at[1] != 7*time.Millisecond {
		t.Fatalf("effects: %v at %v", done, at)
	}
	if fmt.Sprint(execLog) != "[new n1 "+Namespace+" sim=true]" || s.stats.Effects != 2 {
		t.Fatalf("executors: %v, stats %d", execLog, s.stats.Effects)
	}

	// A crash loses a pending effect and closes the incarnation's executors;
	// the next incarnation gets a new one.
	done = nil
	s.step(n, automaton.ClientRequest{Req: automaton.Request{Op: service.Op{Kind: "get", Key: "x"}}})
	s.runUntil(102 * time.Millisecond) // fsync done, effect 1 (6 ms) pending
	s.crash(n)
	s.runUntil(200 * time.Millisecond)
	s.boot(n)
	s.step(n, automaton.ClientRequest{Req: automaton.Request{Op: service.Op{Kind: "get", Key: "x"}}})
	s.runUntil(300 * time.Millisecond)
	if fmt.Sprint(done) != "[done 2 err negative -1 done 2 err negative -1 done 1 = 6]" {
		t.Fatalf("after a crash: %v", done)
	}
	if fmt.Sprint(execLog) != "[new n1 "+Namespace+" sim=true close n1 new n1 "+Namespace+" sim=true]" {
		t.Fatalf("executor lifecycle: %v", execLog)
	}
}

func TestEffectUnknownKindFails(t *testing.T) {
	s := newScripted(t, 1, func(self automaton.NodeID, in automaton.Input) []automaton.Output {
		if _, ok := in.(automaton.ClientRequest); ok {
			return []automaton.Output{automaton.Effect{ID: 1, Kind: "no.such.kind"}}
		}
		return nil
	}, nil)
	s.step(s.nodes[0], automaton.ClientRequest{Req: automaton.Request{Op: service.Op{Kind: "get", Key: "x"}}})
	if s.err == nil {
		t.Fatal("an effect of an unregistered kind was accepted")
	}
}

// With EffectCPU a costed effect holds its node's processor: a timer that
// fires during the effect's 10 ms waits until it is over, and the effect's
// EffectDone comes at its end. Without it the timer fires on time beside
// the running effect.
func TestEffectCPUHoldsTheProcessor(t *testing.T) {
	for _, charged := range []bool{false, true} {
		var events []string
		var s *simulator
		s = newScripted(t, 1, func(self automaton.NodeID, in automaton.Input) []automaton.Output {
			switch in := in.(type) {
			case automaton.ClientRequest:
				return []automaton.Output{automaton.Effect{ID: 1, Kind: "test.double", Payload: 5}, automaton.SetTimer{ID: 7, After: 2 * time.Millisecond}}
			case automaton.TimerFired:
				events = append(events, fmt.Sprintf("timer at %v", s.now))
			case automaton.EffectDone:
				events = append(events, fmt.Sprintf("%s at %v", describeEffect(in), s.now))
			}
			return nil
		}, func(c *Config) { c.EffectCPU = charged })
		s.step(s.nodes[0], automaton.ClientRequest{Req: automaton.Request{Op: service.Op{Kind: "get", Key: "x"}}})
		s.runUntil(100 * time.Millisecond)
		want := "[timer at 2ms done 1 = 10 at 10ms]"
		if charged {
			want = "[timer at 10ms done 1 = 10 at 10ms]" // the timer queued first
		}
		if fmt.Sprint(events) != want {
			t.Errorf("EffectCPU %v: %v, want %v", charged, events, want)
		}
	}
}
