package node

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
)

// callerProto is a test-only caller: each client request becomes a nested
// call of the same operation to the namespace named by param "callee", and
// the client gets the callee's answer (or the refusal as an error).
type callerProto struct{}

func init() { automaton.Register(callerProto{}) }

func (callerProto) Name() string          { return "nodetest-caller" }
func (callerProto) IdempotentRetry() bool { return true }
func (callerProto) New(cfg automaton.Config) (automaton.Automaton, error) {
	return &callerNode{ns: cfg.Params["callee"], ids: map[automaton.EffectID]automaton.RequestID{}}, nil
}

type callerNode struct {
	ns   string
	next automaton.EffectID
	ids  map[automaton.EffectID]automaton.RequestID
}

func (c *callerNode) Step(in automaton.Input) []automaton.Output {
	switch in := in.(type) {
	case automaton.ClientRequest:
		c.next++
		c.ids[c.next] = in.Req.ID
		r := automaton.Request{ID: automaton.RequestID{Client: in.Req.ID.Client, Seq: in.Req.ID.Seq}, Op: in.Req.Op, Nested: true}
		return []automaton.Output{automaton.Effect{ID: c.next, Kind: automaton.CallKind, Payload: automaton.Call{Namespace: c.ns, Req: r}}}
	case automaton.EffectDone:
		id := c.ids[in.ID]
		delete(c.ids, in.ID)
		if in.Err != nil {
			return []automaton.Output{automaton.Respond{Resp: automaton.Response{ID: id, Result: service.Errorf("ERR %v", in.Err)}}}
		}
		resp := in.Result.(automaton.Response)
		resp.ID = id
		return []automaton.Output{automaton.Respond{Resp: resp}}
	}
	return nil
}

// TestNestedCallToPaxos: namespace "a" calls namespace "b" (paxos) on the
// same node; a repeat of one nested id is answered from b's cache (the
// increment applied once); calls to a missing namespace or to a protocol
// that does not serve nested requests are refused.
func TestNestedCallToPaxos(t *testing.T) {
	cfg, ls := mkCluster(t, 1, config.Memory,
		config.Namespace{Name: "a", Protocol: "nodetest-caller", Service: "kv", Params: map[string]string{"callee": "b"}},
		config.Namespace{Name: "b", Protocol: "paxos", Service: "kv"},
		config.Namespace{Name: "bad", Protocol: "nodetest-caller", Service: "kv", Params: map[string]string{"callee": "nowhere"}},
		config.Namespace{Name: "plain", Protocol: "nodetest-caller", Service: "kv", Params: map[string]string{"callee": "a"}},
	)
	n := startNode(t, cfg, "n1", ls[0], Options{})
	inc := req("incr", "x", "5")
	inc.ID = automaton.RequestID{Client: 9042, Seq: 1}
	for i := 0; i < 2; i++ {
		if r := do(t, n, "a", inc); !r.Equal(service.Int(5)) {
			t.Fatalf("copy %d of the nested increment answered %v", i, r)
		}
	}
	get := req("get", "x")
	get.ID = automaton.RequestID{Client: 9043, Seq: 1}
	if r := do(t, n, "b", get); string(r.Bytes) != "5" {
		t.Fatalf("x = %v after two copies of one nested increment", r)
	}
	for _, ns := range []string{"bad", "plain"} {
		r := req("get", "x")
		r.ID = automaton.RequestID{Client: 9044, Seq: 1}
		if res := do(t, n, ns, r); !res.IsErr() || !strings.Contains(res.Err, "nested call") {
			t.Errorf("%s: call answered %v, want a refusal", ns, res)
		}
	}
}

// TestRetryable: a nested call is sent again (automaton.RetryableAnswer) for the answers whose kind
// retries, and for no other (before typed errors "ERR timeout ..." was
// matched by prefix, so BLPOP's "ERR timeout is negative" counted as one).
func TestRetryable(t *testing.T) {
	for msg, want := range map[string]bool{
		"TRYAGAIN paxos: request c:1 not done within 2s":                    true,
		"MOVED 12 127.0.0.1:7001":                                           true,
		"CLUSTERDOWN Hash slot 12 not served":                               true,
		"LOADING the dataset is loading":                                    true,
		"ERR timeout is negative":                                           false,
		"WRONGTYPE Operation against a key holding the wrong kind of value": false,
		"value is not an integer or out of range":                           false,
		"TRYAGAIN": false, // no message: not a code
	} {
		if got := automaton.RetryableAnswer(msg); got != want {
			t.Errorf("RetryableAnswer(%q) = %v, want %v", msg, got, want)
		}
	}
}
