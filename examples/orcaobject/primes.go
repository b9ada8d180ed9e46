package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/synod-dev/synod/synod"
)

// Primes is a parallel program over shared objects: it counts the primes
// below Limit. Worker 0 is also the producer: it puts every range of Chunk
// numbers into the bucket "work" and closes it; every worker takes ranges
// with the guarded get (blocking while the bucket is empty and open),
// counts their primes (Compute: the processor time the count costs) and
// adds them to the int "total"; Finish checks the total against a
// sequential count.
const (
	Limit = 20000
	Chunk = 1000
	// PerNumber is the modelled processor time of testing one number.
	PerNumber = 20 * time.Microsecond
)

var Primes = synod.Program{
	Name: "primes",
	Doc:  "count the primes below 20000 with a shared bucket of ranges",
	Setup: func(p synod.Process) error {
		p.Must(synod.NewObject("bucket", "work", []byte(strconv.Itoa(Limit/Chunk))))
		p.Must(synod.NewObject("int", "total"))
		return nil
	},
	Worker: func(p synod.Process, i, n int) error {
		if i == 0 {
			for lo := 0; lo < Limit; lo += Chunk {
				p.Must(synod.CallObject("bucket", "work", "put", []byte(strconv.Itoa(lo))))
			}
			p.Must(synod.CallObject("bucket", "work", "close"))
		}
		for {
			r := p.Must(synod.CallObject("bucket", "work", "get"))
			if r.Type == synod.Nil().Type {
				return nil
			}
			lo, err := strconv.Atoi(string(r.Bytes))
			if err != nil {
				return fmt.Errorf("worker %d: bad range %q", i, r.Bytes)
			}
			c := countPrimes(lo, lo+Chunk)
			p.Compute(Chunk * PerNumber)
			p.Must(synod.CallObject("int", "total", "inc", []byte(strconv.Itoa(c))))
		}
	},
	Finish: func(p synod.Process, n int) (string, error) {
		got := p.Must(synod.CallObject("int", "total", "value")).Int
		want := countPrimes(0, Limit)
		if got != int64(want) {
			return "", fmt.Errorf("total %d primes below %d, the sequential count is %d", got, Limit, want)
		}
		return fmt.Sprintf("%d primes below %d (the sequential count)", got, Limit), nil
	},
}

func countPrimes(lo, hi int) int {
	c := 0
	for x := max(lo, 2); x < hi; x++ {
		prime := true
		for d := 2; d*d <= x; d++ {
			if x%d == 0 {
				prime = false
				break
			}
		}
		if prime {
			c++
		}
	}
	return c
}
