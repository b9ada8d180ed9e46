package gateway

import (
	"context"
	"sync"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/protocol/eve"
	"github.com/synod-dev/synod/protocol/pbpaxos"
)

// counting is a Backend that records each request's number of operations.
type counting struct {
	*gatewaytest.AutomatonBackend
	mu   sync.Mutex
	reqs []int
}

func (b *counting) Do(ctx context.Context, ns string, req automaton.Request) (automaton.Response, error) {
	b.mu.Lock()
	n := len(req.Ops)
	if n == 0 {
		n = 1
	}
	b.reqs = append(b.reqs, n)
	b.mu.Unlock()
	return b.AutomatonBackend.Do(ctx, ns, req)
}

func (b *counting) take() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.reqs
	b.reqs = nil
	return r
}

// TestMultiKeyAtomicGroup: MGET, DEL, EXISTS and UNLINK over several keys
// are one request (an atomic group) on a protocol that applies groups, and
// one request per key on one that does not; MGET answers nil for a key of
// another type, as Redis does, either way.
func TestMultiKeyAtomicGroup(t *testing.T) {
	for _, tc := range []struct {
		proto string
		want  []int // operations per request of each command below
	}{
		{pbpaxos.Name, []int{3}},
		{eve.Name, []int{1, 1, 1}},
	} {
		t.Run(tc.proto, func(t *testing.T) {
			b := &counting{AutomatonBackend: gatewaytest.MustAutomaton(t, tc.proto, "kv")}
			_, addr := startServer(t, b, ServerOptions{})
			c := dial(t, addr)
			for _, s := range [][]string{{"SET", "a", "1"}, {"SADD", "s", "x"}} {
				if got := c.do(s...); got != "OK" && got != "(integer) 1" {
					t.Fatalf("%v: %s", s, got)
				}
			}
			b.take()
			for _, cmd := range []struct {
				args []string
				want string
			}{
				{[]string{"MGET", "a", "s", "nope"}, "1) \"1\"\n2) (nil)\n3) (nil)"},
				{[]string{"EXISTS", "a", "s", "nope"}, "(integer) 2"},
				{[]string{"DEL", "a", "s", "nope"}, "(integer) 2"},
			} {
				if got := c.do(cmd.args...); got != cmd.want {
					t.Errorf("%v: got %s, want %s", cmd.args, got, cmd.want)
				}
				if got := b.take(); len(got) != len(tc.want) || got[0] != tc.want[0] {
					t.Errorf("%v on %s: requests of %v operations, want %v", cmd.args, tc.proto, got, tc.want)
				}
			}
		})
	}
}
