package proto

import (
	"math/rand"
	"time"

	"github.com/synod-dev/synod/automaton"
)

// Liveness pieces shared by leader-based protocols that count time in
// heartbeat ticks (protocol/paxos, protocol/pbpaxos): the randomised
// election delay, durations in ticks, and the ageing of pending requests.
// Each is the exact code both protocols had, so that using it moves no
// simulation digest (the same draws from Config.Rand, in the same order).

// ElectionDelay is a randomised election timer: timeout plus a random part
// of up to timeout << min(failures, 3), so that candidates that keep
// failing spread out. It draws once from rnd (Config.Rand).
func ElectionDelay(timeout time.Duration, failures int, rnd *rand.Rand) time.Duration {
	spread := timeout << uint(min(failures, 3))
	return timeout + time.Duration(rnd.Int63n(int64(spread)))
}

// Ticks is d in ticks of length tick, rounded up, at least one.
func Ticks(d, tick time.Duration) int {
	return max(1, int((d+tick-1)/tick))
}

// Expired ages every pending request by one tick (age does it and returns
// the request's new age) and returns, in RequestID order, the ids whose
// age passed limit. The order is the map's for ageing (each request's own
// counters) and sorted for the answers, so the outputs are deterministic.
func Expired[P any](pending map[automaton.RequestID]P, limit int, age func(P) int) []automaton.RequestID {
	var out []automaton.RequestID
	for id, p := range pending {
		if age(p) > limit {
			out = append(out, id)
		}
	}
	automaton.SortRequestIDs(out)
	return out
}
