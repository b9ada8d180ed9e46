package node

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
	"github.com/synod-dev/synod/shard/txn"
)

// The pair counts reach the placement's decision (placer_pairs.go;
// session 49): two nodes route requests spanning s0+s2 and s1+s2, append
// their pair counts to their load reports, and the leader's rates are
// the summed increments per second, smoothed; the group counts parse as
// before; a node whose count went down (restarted) counts its count; and
// shard.Decide then merges the coldest group into the one it shares the
// most with (TestDecideMergePrefersPairs has the decision's cases).
// Before session 49 the reports carried no pairs and PlaceInput.Pairs was
// never set.
func TestPairRatesFromReports(t *testing.T) {
	mk := func() *shardedNS {
		return &shardedNS{svc: service.KV{}, groups: []config.Group{{}, {}, {}}, ops: make([]atomic.Uint64, 3), sl: new(slotLoad), cross: newCrossCounts(3)}
	}
	set := func(k string) service.Op { return service.Op{Kind: "set", Key: k, Args: [][]byte{[]byte("v")}} }
	span := func(s *shardedNS, g, h, times int) {
		for range times {
			s.countCross([]txn.Part{{Group: g, Ops: []service.Op{set("a")}}, {Group: h, Ops: []service.Op{set("b")}}}, nil)
		}
	}
	n1, n2 := mk(), mk()
	if r := n1.crossReport(); r != "" {
		t.Fatalf("report with no pairs %q", r)
	}
	report := func() []service.Result {
		var out []service.Result
		for _, x := range []struct {
			id string
			s  *shardedNS
		}{{"n1", n1}, {"n2", n2}} {
			v := "7 8 9" + x.s.crossReport()
			out = append(out, service.Result{Bytes: []byte(x.id)}, service.Result{Bytes: []byte(v)})
		}
		return out
	}
	var r pairRates
	t0 := time.Unix(1000, 0)
	span(n1, 0, 2, 3)
	cur, pairs := parseLoad(report(), 3)
	if got := r.update(pairs, t0, 3); got != nil {
		t.Fatalf("rates after one read: %v", got)
	}
	if len(cur["n1"]) != 3 || cur["n1"][2] != 9 {
		t.Fatalf("group counts %v", cur)
	}
	span(n1, 0, 2, 10)
	span(n2, 2, 0, 6)
	span(n2, 1, 2, 4)
	if got := n2.crossReport(); got != " x0+2:6 x1+2:4" {
		t.Fatalf("n2's report %q", got)
	}
	_, pairs = parseLoad(report(), 3)
	rates := r.update(pairs, t0.Add(2*time.Second), 3)
	// Increments 10 + 6 on s0+s2 and 4 on s1+s2 over 2 s, half weight.
	in := shard.PlaceInput{Groups: make([]shard.GroupReport, 3), Pairs: rates}
	if a, b, c := in.Pair(0, 2), in.Pair(2, 1), in.Pair(0, 1); a != 4 || b != 1 || c != 0 {
		t.Fatalf("pair rates s0+s2 %v, s1+s2 %v, s0+s1 %v; want 4, 1, 0", a, b, c)
	}
	// n2 restarted: its counts start again.
	n2 = mk()
	span(n2, 0, 2, 2)
	_, pairs = parseLoad(report(), 3)
	rates = r.update(pairs, t0.Add(3*time.Second), 3)
	if got := rates[0*3+2]; got != 0.5*2+0.5*4 {
		t.Fatalf("s0+s2 after n2's restart %v, want 3", got)
	}
}
