package nemesis

import (
	"math"
	"testing"

	"github.com/synod-dev/synod/check"
	"github.com/synod-dev/synod/history"
)

// TestUnobserved: a write of unknown outcome no read returned is left out
// of the check and the verdict stays; one a read returned is kept, so the
// violation it shows is still found.
func TestUnobserved(t *testing.T) {
	set := func(p int, v string, call, ret int64, out history.Outcome) history.Op {
		return history.Op{Process: p, Namespace: "default", Kind: "set", Key: "k", Args: []string{v}, Call: call, Return: ret, Outcome: out, Result: history.Result{Type: "ok"}}
	}
	get := func(p int, v string, call, ret int64) history.Op {
		return history.Op{Process: p, Namespace: "default", Kind: "get", Key: "k", Call: call, Return: ret, Outcome: history.OK, Result: history.Result{Type: "bytes", Bytes: v}}
	}
	verdict := func(h *history.History) string {
		r, err := check.Linearizable(h, check.Options{IgnoreDelCount: true})
		if err != nil {
			t.Fatal(err)
		}
		return r.Result
	}
	inf := int64(math.MaxInt64)
	// b's outcome is unknown and nobody read it: dropped, still ok.
	h := &history.History{Ops: []history.Op{
		set(1, "a", 0, 10, history.OK), set(2, "b", 5, inf, history.Unknown), get(3, "a", 20, 30), get(1, "a", 40, 50),
	}}
	p, n := unobserved(h)
	if n != 1 || len(p.Ops) != 3 || verdict(h) != check.Ok || verdict(p) != check.Ok {
		t.Fatalf("unread unknown write: dropped %d, verdicts %s -> %s", n, verdict(h), verdict(p))
	}
	// b was read, then a again: illegal; b must stay for the checker to see it.
	h = &history.History{Ops: []history.Op{
		set(1, "a", 0, 10, history.OK), set(2, "b", 5, inf, history.Unknown), get(3, "b", 20, 30), get(1, "a", 40, 50),
	}}
	p, n = unobserved(h)
	if n != 0 || verdict(p) != check.Illegal {
		t.Fatalf("read unknown write: dropped %d, verdict %s, want none dropped and illegal", n, verdict(p))
	}
	// An acknowledged write nobody read is never dropped: its loss is a violation.
	h = &history.History{Ops: []history.Op{
		set(1, "a", 0, 10, history.OK), set(2, "b", 20, 30, history.OK), get(3, "a", 40, 50),
	}}
	if p, n = unobserved(h); n != 0 || verdict(p) != check.Illegal {
		t.Fatalf("acknowledged write: dropped %d, verdict %s", n, verdict(p))
	}
}
