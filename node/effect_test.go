package node

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
)

// effProto ("nodetest-effect"): a set persists its value, then asks the
// "nodetest.slowlen" executor for the value's length and answers it when
// the effect is done. The executor records, per call, whether the persist
// before it was durable (the storage saw it) and how many calls overlap.
type effProto struct{}

func (effProto) Name() string          { return "nodetest-effect" }
func (effProto) IdempotentRetry() bool { return false }
func (effProto) New(cfg automaton.Config) (automaton.Automaton, error) {
	return &effAut{wait: map[automaton.EffectID]automaton.RequestID{}}, nil
}

type effAut struct {
	next automaton.EffectID
	wait map[automaton.EffectID]automaton.RequestID
}

func (a *effAut) Step(in automaton.Input) []automaton.Output {
	switch in := in.(type) {
	case automaton.ClientRequest:
		a.next++
		a.wait[a.next] = in.Req.ID
		v := in.Req.Op.Args[0]
		return []automaton.Output{
			automaton.Persist{Key: "v/" + in.Req.Op.Key, Value: v},
			automaton.Effect{ID: a.next, Kind: "nodetest.slowlen", Payload: string(v)},
		}
	case automaton.EffectDone:
		id, ok := a.wait[in.ID]
		if !ok {
			return nil
		}
		delete(a.wait, in.ID)
		res := service.Errorf("ERR %v", in.Err)
		if in.Err == nil {
			res = service.Int(int64(in.Result.(int)))
		}
		return []automaton.Output{automaton.Respond{Resp: automaton.Response{ID: id, Result: res}}}
	}
	return nil
}

var slowLen struct {
	mu              sync.Mutex
	running, maxRun int
	envs            []string
	closed          atomic.Int32
}

type slowLenExec struct{}

func (slowLenExec) Execute(p any) (any, error) {
	slowLen.mu.Lock()
	slowLen.running++
	slowLen.maxRun = max(slowLen.maxRun, slowLen.running)
	slowLen.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	slowLen.mu.Lock()
	slowLen.running--
	slowLen.mu.Unlock()
	if p.(string) == "fail" {
		return nil, fmt.Errorf("refused")
	}
	return len(p.(string)), nil
}
func (slowLenExec) Close() error { slowLen.closed.Add(1); return nil }

func init() {
	automaton.Register(effProto{})
	automaton.RegisterExecutor("nodetest.slowlen", func(env automaton.ExecEnv) (automaton.Executor, error) {
		slowLen.mu.Lock()
		slowLen.envs = append(slowLen.envs, fmt.Sprintf("%s/%s sim=%v", env.Self, env.Namespace, env.Simulated))
		slowLen.mu.Unlock()
		return slowLenExec{}, nil
	})
}

func TestEffectsRunConcurrentlyAndAnswer(t *testing.T) {
	// The executor's counters are package state: start from zero so the
	// test also holds under -count=N.
	slowLen.mu.Lock()
	slowLen.running, slowLen.maxRun, slowLen.envs = 0, 0, nil
	slowLen.mu.Unlock()
	slowLen.closed.Store(0)
	cfg, ls := mkCluster(t, 1, config.Memory, config.Namespace{Name: "eff", Protocol: "nodetest-effect", Service: "kv"})
	n := startNode(t, cfg, "n1", ls[0], Options{})
	var wg sync.WaitGroup
	res := make([]service.Result, 4)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := fmt.Sprintf("%0*d", i+1, 0)
			if i == 3 {
				v = "fail"
			}
			res[i] = do(t, n, "eff", req("set", fmt.Sprint(i), v))
		}()
	}
	wg.Wait()
	for i := 0; i < 3; i++ {
		if !res[i].Equal(service.Int(int64(i + 1))) {
			t.Errorf("request %d answered %v, want %d", i, res[i], i+1)
		}
	}
	if !res[3].IsErr() {
		t.Errorf("a failed effect answered %v", res[3])
	}
	slowLen.mu.Lock()
	envs, maxRun := fmt.Sprint(slowLen.envs), slowLen.maxRun
	slowLen.mu.Unlock()
	if envs != "[n1/eff sim=false]" {
		t.Errorf("executor instances: %s (want one, live)", envs)
	}
	if maxRun < 2 {
		t.Errorf("effects never overlapped (max %d running): the runtime runs them one at a time", maxRun)
	}
	// The runtime timed each effect around its executor (50 ms each).
	mfs, err := n.m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var count uint64
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == "synod_effect_duration_seconds" {
			for _, m := range mf.GetMetric() {
				count += m.GetHistogram().GetSampleCount()
				sum += m.GetHistogram().GetSampleSum()
				if labels := fmt.Sprint(m.GetLabel()); !strings.Contains(labels, `"nodetest.slowlen"`) || !strings.Contains(labels, `"eff"`) {
					t.Errorf("effect duration labels %s, want kind nodetest.slowlen and namespace eff", labels)
				}
			}
		}
	}
	if count != 4 || sum < 4*0.05 {
		t.Errorf("synod_effect_duration_seconds: %d effects, %.3f s (want 4, at least 0.2 s)", count, sum)
	}
	n.Close()
	if slowLen.closed.Load() != 1 {
		t.Errorf("executor closed %d times at stop, want 1", slowLen.closed.Load())
	}
}
