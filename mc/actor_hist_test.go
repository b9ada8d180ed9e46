package mc

import (
	"math/rand"
	"testing"

	"github.com/synod-dev/synod/check"
	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
)

// TestActorHistoryMatchesPorcupine: the actor models' linearizability
// check (Stateright's LinearizabilityTester form, actor_hist.go) gives
// package check's (Porcupine's) verdict on random register histories of
// 2-3 clients (puts then a get each, the last operation possibly in
// flight, gets returning any of the values or nil), both verdicts
// occurring.
func TestActorHistoryMatchesPorcupine(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	counts := map[bool]int{}
	for iter := 0; iter < 3000; iter++ {
		clients, ops := 2+rng.Intn(2), 2+rng.Intn(2)
		// each client's timeline: invoke, return, invoke, ...; the
		// last event may be missing (in flight) or the client may stop.
		events := make([]int, clients) // events left per client
		for k := range events {
			events[k] = 2*ops - rng.Intn(3)
		}
		hist := make([]ahop, clients*ops)
		var h history.History
		pos := make([]int, clients) // events done per client
		idx := make([]int, clients) // index of the client's op in h.Ops
		for t := int64(1); ; t++ {
			var live []int
			for k := range events {
				if pos[k] < events[k] {
					live = append(live, k)
				}
			}
			if len(live) == 0 {
				break
			}
			k := live[rng.Intn(len(live))]
			j := pos[k] / 2
			o := &hist[k*ops+j]
			if pos[k]%2 == 0 { // invoke
				o.state = 1
				for c := 0; c < clients; c++ {
					if c != k {
						n := 0
						for i := 0; i < ops; i++ {
							if hist[c*ops+i].state == 2 {
								n++
							}
						}
						o.before[c] = uint8(n)
					}
				}
				op := history.Op{Process: k, Kind: "get", Key: "x", Call: t, Outcome: history.Unknown}
				if j < ops-1 {
					o.write, o.val = true, 'A'+byte(rng.Intn(3))
					op.Kind, op.Args = "set", []string{string([]byte{o.val})}
				}
				idx[k] = len(h.Ops)
				h.Ops = append(h.Ops, op)
			} else { // return
				o.state = 2
				op := &h.Ops[idx[k]]
				op.Return, op.Outcome = t, history.OK
				if o.write {
					op.Result = history.FromResult(service.OK())
				} else if v := rng.Intn(4); v > 0 {
					o.ret = 'A' + byte(v-1)
					op.Result = history.FromResult(service.Bytes([]byte{o.ret}))
				} else {
					op.Result = history.FromResult(service.Nil())
				}
			}
			pos[k]++
		}
		rep, err := check.Linearizable(&h, check.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, want := linearizable(hist, clients, ops), rep.Result == check.Ok
		if got != want {
			t.Fatalf("history %d: actor check says %v, Porcupine %v (%s):\n%+v\n%+v", iter, got, want, rep.Detail, h.Ops, hist)
		}
		counts[got]++
	}
	if counts[true] == 0 || counts[false] == 0 {
		t.Fatalf("verdicts %v: both should occur", counts)
	}
	t.Logf("verdicts: %d linearizable, %d not", counts[true], counts[false])
}
