package adam

import (
	"bytes"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/protocol/eve"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// fakeCallee stands for the callee namespace in harness tests: the
// harness carries a CallKind effect through this executor, which applies
// each nested id once to a KV, answers repeats from its cache, and keeps
// every copy's bytes (the output-commit check of the simulator, by hand).
type fakeCallee struct {
	mu     sync.Mutex
	st     service.State
	cache  map[automaton.RequestID]service.Result
	copies map[automaton.RequestID][][]byte
	execs  int
}

var callee0 = &fakeCallee{}

func (f *fakeCallee) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st, f.cache, f.copies, f.execs = service.KV{}.NewState(), map[automaton.RequestID]service.Result{}, map[automaton.RequestID][][]byte{}, 0
}

type fakeExec struct{ f *fakeCallee }

func (x fakeExec) Execute(p any) (any, error) {
	c := p.(automaton.Call)
	f := x.f
	f.mu.Lock()
	defer f.mu.Unlock()
	var e wire.Encoder
	service.EncodeOp(&e, c.Req.Op)
	f.copies[c.Req.ID] = append(f.copies[c.Req.ID], e.B)
	res, ok := f.cache[c.Req.ID]
	if !ok {
		f.execs++
		res = f.st.Apply(c.Req.Op)
		f.cache[c.Req.ID] = res
	}
	return automaton.Response{ID: c.Req.ID, Result: res}, nil
}

func (fakeExec) Close() error { return nil }

func init() {
	callee0.reset()
	automaton.RegisterExecutor(automaton.CallKind, func(automaton.ExecEnv) (automaton.Executor, error) {
		return fakeExec{callee0}, nil
	})
}

// sameCopies checks that every copy of each nested id had the same bytes.
func (f *fakeCallee) sameCopies(t *testing.T) int {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for id, cs := range f.copies {
		for _, c := range cs[1:] {
			if !bytes.Equal(c, cs[0]) {
				t.Errorf("nested id %v: copies differ: %q vs %q", id, c, cs[0])
			}
		}
		n += len(cs)
	}
	return n
}

func settle(c *harness.Cluster) {
	for {
		if c.DeliverOne() {
			continue
		}
		if c.CompleteEffects() == 0 {
			return
		}
	}
}

func set(k, v string) service.Op { return service.Op{Kind: "set", Key: k, Args: [][]byte{[]byte(v)}} }
func get(k string) service.Op    { return service.Op{Kind: "get", Key: k} }

// node returns a node's engine and Adam part.
func node(c *harness.Cluster, n automaton.NodeID) (*eve.Eve, *ext) { return extOf(c.Node(n)) }

// kvGet reads a key of a node's committed state.
func kvGet(c *harness.Cluster, n automaton.NodeID, k string) string {
	a, _ := node(c, n)
	st, _ := committed(a)
	return st.Clone().Apply(get(k)).String()
}

// observe records, in order, every nested call and answer the cluster's
// nodes emit, with the emitting node's committed slot.
func observe(c *harness.Cluster) *[]string {
	var log []string
	c.Observe(func(n automaton.NodeID, o automaton.Output) {
		switch o := o.(type) {
		case automaton.Effect:
			if o.Kind == automaton.CallKind {
				a, _ := node(c, n)
				_, slot := committed(a)
				log = append(log, fmt.Sprintf("%s call %v slot=%d", n, o.Payload.(automaton.Call).Req.Op, slot))
			}
		case automaton.Respond:
			log = append(log, fmt.Sprintf("%s answer %v", n, o.Resp.Result))
		}
	})
	return &log
}

// One batch with a wall (the Eve/Adam thesis §3.2.2, §5.2.3): two SETs queued while
// an earlier batch runs form the next batch on one group of two threads;
// their local steps run, the wall is verified, and only then does every
// replica send the nested calls (the same bytes, the same id); the callee
// executes each once; the second steps run with the answers, and the
// clients are answered after that slot is verified.
func TestOneBatchWithWall(t *testing.T) {
	callee0.reset()
	c := harness.New(t, harness.Options{Protocol: Name, Nodes: 3, Params: map[string]string{"strategy": "walls", "threads": "2"}})
	settle(c)
	c.Request("n1", set("a", "0"), automaton.Options{}) // batch 1: its wall is slot 1
	log := observe(c)
	id1 := c.Request("n2", set("a", "1"), automaton.Options{})
	id2 := c.Request("n3", set("b", "2"), automaton.Options{})
	settle(c)
	for _, id := range []automaton.RequestID{id1, id2} {
		if res, ok := c.Response(id); !ok || res.Type != service.ResultOK {
			t.Fatalf("%v: %v %v", id, res, ok)
		}
	}
	// Batch 2 (slots 3, 4): both calls left from replicas that had applied
	// its wall, slot 3, and before either of its answers.
	calls, answers := 0, 0
	for _, l := range *log {
		switch {
		case strings.Contains(l, "trail:a \"0;\"") || strings.Contains(l, "trail:b"):
			calls++
			if !strings.HasSuffix(l, "slot=3") || answers > 0 {
				t.Errorf("call of batch 2 not right after its wall: %s in %v", l, *log)
			}
		case strings.Contains(l, "answer") && (strings.HasPrefix(l, "n2") || strings.HasPrefix(l, "n3")):
			answers++
			if calls != 6 {
				t.Errorf("answer before every call of its batch left: %v", *log)
			}
		}
	}
	if calls != 6 || answers != 2 || callee0.sameCopies(t) != 9 || callee0.execs != 3 {
		t.Fatalf("calls %d, answers %d, callee executions %d: %v", calls, answers, callee0.execs, *log)
	}
	for _, n := range c.IDs() {
		a, x := node(c, n)
		// The trail held "0;" before: the nested request carried the
		// caller's state, and the caller stored the callee's answer.
		if slot, _ := a.ServiceState(); slot != 4 || kvGet(c, n, "a") != `"1"` || kvGet(c, n, "trail-len:a") != `"3"` || kvGet(c, n, "trail-len:b") != `"1"` {
			t.Errorf("%s: slot %d a=%s trail-len:a=%s", n, slot, kvGet(c, n, "a"), kvGet(c, n, "trail-len:a"))
		}
		if st, _ := committed(a); len(st.Conts()) != 0 || len(x.answers) != 0 {
			t.Errorf("%s keeps suspended requests or answers", n)
		}
	}
	if got := callee0.st.Apply(get("trail:a")).String(); got != `";0;"` {
		t.Fatalf("callee's trail:a = %s", got)
	}
}

// A rollback in the middle of a request (the Eve/Adam thesis §5.3): the slot that
// resumes a suspended SET is rolled back (its tokens lost: no quorum); the
// replicas restore the request, from the committed state, to the point
// right before its nested call, and re-execute the slot sequentially with
// the same answer. The callee still executed the call once, and every copy
// was the same.
func TestRollbackInTheMiddleOfARequest(t *testing.T) {
	callee0.reset()
	c := harness.New(t, harness.Options{Protocol: Name, Nodes: 3, Params: map[string]string{"strategy": "naive"}})
	settle(c)
	id := c.Request("n1", set("k", "v"), automaton.Options{})
	applied := func(n automaton.NodeID) uint64 { a, _ := node(c, n); s, _ := a.ServiceState(); return s }
	// Lose n2's and n3's tokens for slot 2, the one that resumes the SET.
	c.SetLoss(func(m harness.Message) bool {
		return len(m.Msg) > 1 && m.Msg[1] == 4 && m.From != "n1" && applied(m.From) == 1
	})
	settle(c)
	a1, _ := node(c, "n1")
	st, _ := committed(a1)
	if applied("n1") != 1 || len(st.Conts()) != 1 || st.Conts()[0].Step != 1 {
		t.Fatalf("n1 should be at the wall with the SET suspended: %s", a1.Dump())
	}
	if _, ok := c.Response(id); ok {
		t.Fatal("answered before the request's last step was verified")
	}
	for range 3 {
		c.FireAll("n1") // the verifier leader times out: rollback
		settle(c)
	}
	c.SetLoss(nil)
	if res, ok := c.Response(id); !ok || res.Type != service.ResultOK {
		t.Fatalf("after the rollback: %v %v: %s", res, ok, a1.Dump())
	}
	if a1.Stats().Rollbacks == 0 {
		t.Fatalf("no rollback: %+v", a1.Stats())
	}
	for _, n := range c.IDs() {
		if applied(n) != 2 || kvGet(c, n, "k") != `"v"` || kvGet(c, n, "trail-len:k") != `"1"` {
			t.Errorf("%s: applied %d, k=%s", n, applied(n), kvGet(c, n, "k"))
		}
	}
	if callee0.execs != 1 || callee0.sameCopies(t) != 3 {
		t.Fatalf("callee executed %d calls", callee0.execs)
	}
}

// A replica that restarts while its request is suspended re-issues the
// nested call from its recovered committed state: the same id and bytes,
// answered from the callee's cache.
func TestReissueAfterRestart(t *testing.T) {
	callee0.reset()
	c := harness.New(t, harness.Options{Protocol: Name, Nodes: 3, Params: map[string]string{"strategy": "naive"}})
	settle(c)
	c.Request("n1", set("k", "v"), automaton.Options{})
	for { // up to the calls, which stay pending
		if c.DeliverOne() {
			continue
		}
		i := slices.IndexFunc(c.Effects(), func(e harness.PendingEffect) bool { return e.Effect.Kind != automaton.CallKind })
		if i < 0 {
			break
		}
		c.CompleteEffect(i)
	}
	if effectsOf(c, automaton.CallKind) != 3 {
		t.Fatalf("%d calls pending, want 3", effectsOf(c, automaton.CallKind))
	}
	for effectsOf(c, automaton.CallKind) > 0 {
		c.CompleteEffect(slices.IndexFunc(c.Effects(), func(e harness.PendingEffect) bool { return e.Effect.Kind == automaton.CallKind }))
	}
	c.Restart("n2") // its answer is lost with the incarnation; the slot that resumes the SET is not applied there
	if effectsOf(c, automaton.CallKind) != 1 {
		t.Fatalf("the restarted replica did not re-issue its call")
	}
	settle(c)
	if callee0.execs != 1 || callee0.sameCopies(t) != 4 {
		t.Fatalf("callee executed %d, copies %d (want 1 and 4: n2 re-issued)", callee0.execs, callee0.sameCopies(t))
	}
}

func effectsOf(c *harness.Cluster, kind string) int {
	n := 0
	for _, e := range c.Effects() {
		if e.Effect.Kind == kind {
			n++
		}
	}
	return n
}

// Adam runs over any service that declares its conflicts and is
// deterministic (issue 31, "any service"); others are refused at start with
// the reason, never served.
func TestNewOverAnyService(t *testing.T) {
	p, err := automaton.Lookup(Name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := func(svc string) automaton.Config {
		s, err := service.Lookup(svc)
		if err != nil {
			t.Fatal(err)
		}
		return automaton.Config{Self: "n1", Nodes: []automaton.NodeID{"n1", "n2", "n3"}, Namespace: "default",
			Service: s, Rand: rand.New(rand.NewSource(1))}
	}
	for svc, want := range map[string]string{
		"counter":    "declares no conflicts",
		"matchmaker": "declares no conflicts",
	} {
		if _, err := p.New(cfg(svc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("adam over %s: %v, want an error saying %q", svc, err, want)
		}
	}
	for _, svc := range []string{"kv", service.ShardedKVName} {
		if _, err := p.New(cfg(svc)); err != nil {
			t.Errorf("adam over %s: %v", svc, err)
		}
	}
	c := cfg("kv")
	c.Params = map[string]string{"conflicts": "loose"}
	if _, err := p.New(c); err != nil {
		t.Errorf("adam conflicts=loose over kv: %v", err)
	}
	// A counter that declares its conflicts is served; loose (a KV
	// declaration made incomplete on purpose) is not, for it.
	c.Service = declaredCounter{}
	if _, err := p.New(c); err == nil || !strings.Contains(err.Error(), "conflicts=loose needs a kv namespace") {
		t.Errorf("adam conflicts=loose over a counter: %v", err)
	}
	c.Params = nil
	if _, err := p.New(c); err != nil {
		t.Fatalf("adam over a counter that declares its conflicts: %v", err)
	}
}

// declaredCounter is the counter with a conflict declaration (every
// operation touches its one value).
type declaredCounter struct{ service.Counter }

func (declaredCounter) ConflictKeys(op service.Op) []service.Lock {
	return []service.Lock{{Key: "", Write: op.Kind != "read"}}
}
