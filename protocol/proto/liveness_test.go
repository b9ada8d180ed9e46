package proto

import (
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
)

func TestTicks(t *testing.T) {
	for _, c := range []struct {
		d, tick time.Duration
		want    int
	}{{0, 10, 1}, {1, 10, 1}, {10, 10, 1}, {11, 10, 2}, {100, 10, 10}, {101, 10, 11}} {
		if got := Ticks(c.d, c.tick); got != c.want {
			t.Errorf("Ticks(%v, %v) = %d, want %d", c.d, c.tick, got, c.want)
		}
	}
}

// The delay is the timeout plus one draw below timeout << min(failures, 3),
// the same draw the protocols made before sharing it.
func TestElectionDelay(t *testing.T) {
	const et = 100 * time.Millisecond
	for failures, spread := range []time.Duration{et, 2 * et, 4 * et, 8 * et, 8 * et} {
		a, b := rand.New(rand.NewSource(int64(failures))), rand.New(rand.NewSource(int64(failures)))
		for i := 0; i < 50; i++ {
			d := ElectionDelay(et, failures, a)
			if want := et + time.Duration(b.Int63n(int64(spread))); d != want {
				t.Fatalf("failures %d: %v, want %v", failures, d, want)
			}
		}
	}
}

func TestExpired(t *testing.T) {
	type pend struct{ age, other int }
	id := func(c uint64) automaton.RequestID { return automaton.RequestID{Client: c, Seq: 1} }
	pending := map[automaton.RequestID]*pend{id(3): {age: 2}, id(1): {age: 2}, id(2): {age: 0}}
	got := Expired(pending, 2, func(p *pend) int { p.age++; p.other++; return p.age })
	if want := []automaton.RequestID{id(1), id(3)}; !slices.Equal(got, want) {
		t.Errorf("expired %v, want %v", got, want)
	}
	for k, p := range pending {
		if p.other != 1 {
			t.Errorf("%v aged %d times, want once", k, p.other)
		}
	}
}
