package mc

// The history of an actor-semantics model (actor.go) in the form of
// Stateright's LinearizabilityTester (stateright 0.31, src/semantics/
// linearizability.rs), so that two states are one exactly when Stateright
// finds them equal: for each client (Stateright's thread), its operations
// in order, each with the number of operations every other client had
// completed when it was invoked (the tester's "last completed" map, which
// is all of real-time order a linearizability check needs), and, once
// returned, its result. The interleaving of returns between two
// invocations is not part of it (Synod's general checker keeps the whole
// sequence of invocations and returns: it distinguishes more states).

// maxActorClients bounds the clients of an actor model (the per-operation
// counts are a fixed array).
const maxActorClients = 8

// ahop is one operation of one client.
type ahop struct {
	state  uint8 // 0 not invoked, 1 in flight, 2 returned
	write  bool
	val    byte // the written value
	ret    byte // a read's result (0: the initial value, nil)
	before [maxActorClients]uint8
}

// actorHistHash hashes the history (every client's operations in order).
func actorHistHash(h []ahop) uint64 {
	x := uint64(0x5bd1e995)
	for i := range h {
		o := &h[i]
		v := uint64(o.state) | uint64(o.val)<<8 | uint64(o.ret)<<16
		if o.write {
			v |= 1 << 24
		}
		x = comb(x, v)
		var b uint64
		for j, c := range o.before {
			b |= uint64(c) << (8 * j)
		}
		x = comb(x, b)
	}
	return x
}

// linearizable reports whether the history of clients operations each
// (ops per client) has a linearization against a register whose initial
// value is 0, as LinearizabilityTester.serialized_history().is_some():
// every returned operation is placed, in each client's order, after every
// operation that had returned before it was invoked, each read returning
// the value last written before it; an operation in flight may be placed
// (taking effect) or left out.
func linearizable(h []ahop, clients, ops int) bool {
	var next [maxActorClients]int
	return linFrom(h, clients, ops, &next, 0)
}

func linFrom(h []ahop, clients, ops int, next *[maxActorClients]int, val byte) bool {
	done := true
	for k := 0; k < clients; k++ {
		if next[k] < ops && h[k*ops+next[k]].state == 2 {
			done = false
			break
		}
	}
	if done {
		return true
	}
	for k := 0; k < clients; k++ {
		j := next[k]
		if j >= ops {
			continue
		}
		o := &h[k*ops+j]
		if o.state == 0 {
			continue
		}
		ok := true
		for c := 0; c < clients; c++ {
			if c != k && next[c] < int(o.before[c]) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		nv := val
		if o.write {
			nv = o.val
		} else if o.state == 2 && o.ret != val {
			continue
		}
		next[k]++
		r := linFrom(h, clients, ops, next, nv)
		next[k]--
		if r {
			return true
		}
	}
	return false
}

// comb mixes v into the hash x (splitmix64's finaliser over x^v).
func comb(x, v uint64) uint64 {
	x ^= v + 0x9e3779b97f4a7c15 + (x << 6) + (x >> 2)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
