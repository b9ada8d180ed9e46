package eve

import "github.com/synod-dev/synod/service"

// The mixer (the Eve/Adam thesis §2.2.1): "The mixer examines each request to
// determine if it conflicts with any request already added to the next
// batch to execute. If the request does not conflict, it adds the request
// to the next batch to execute. If it does conflict, the mixer passes over
// the request. After a complete pass, the mixer releases the batch to be
// executed and after doing so, repeats this process on the requests that
// were left out of the batch on the previous pass."
//
// Two requests conflict when they share a key and one of them writes it
// (the service's conflict keys, service.ConflictKeysOf: "requests that
// modify the same state variables"). A request whose service declares no
// keys (a Counter, the Matchmaker) conflicts with every other: each such
// request is a parallel batch of its own, so execution is sequential. The
// mixer is deterministic: every replica splits a batch alike.

// conflictSet is the keys of the parallel batch being formed.
type conflictSet struct {
	written map[string]bool // key -> some request of the batch writes it
	all     bool            // the batch holds a request that conflicts with everything
	n       int
}

// conflicts reports whether a request with keys ks (known: whether the
// service declared them) conflicts with the batch so far.
func (c *conflictSet) conflicts(ks []service.Lock, known bool) bool {
	if c.n == 0 {
		return false
	}
	if c.all || !known {
		return true
	}
	for _, k := range ks {
		w, in := c.written[k.Key]
		if in && (w || k.Write) {
			return true
		}
	}
	return false
}

func (c *conflictSet) add(ks []service.Lock, known bool) {
	c.n++
	if !known {
		c.all = true
		return
	}
	for _, k := range ks {
		c.written[k.Key] = c.written[k.Key] || k.Write
	}
}

// mix splits requests 0..n-1 into parallel batches, in release order; keys
// gives a request's conflict keys and whether they are known.
func mix(n int, keys func(i int) ([]service.Lock, bool)) [][]int {
	pending := make([]int, n)
	for i := range pending {
		pending[i] = i
	}
	var out [][]int
	for len(pending) > 0 {
		c := conflictSet{written: map[string]bool{}}
		var batch, skipped []int
		for _, i := range pending { // one complete pass
			ks, known := keys(i)
			if c.conflicts(ks, known) {
				skipped = append(skipped, i) // "passes over the request"
				continue
			}
			c.add(ks, known)
			batch = append(batch, i)
		}
		out = append(out, batch) // release the batch
		pending = skipped        // repeat on the requests left out
	}
	return out
}
