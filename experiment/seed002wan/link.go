// Package seed002wan is the userspace WAN link of seed 002's live cells
// (the Grid Services thesis, chapters V and VI): a TCP relay in front of a
// node's port that delivers every chunk after a one-way delay, so that
// real nodes on loopback see the seed's wide-area latencies. This machine
// has no sch_netem, and nemesis's relay (nemesis/relay.go) parses peer
// transport frames only and needs network namespaces; this relay carries
// any TCP stream (client ports, gRPC, the peer transport) byte for byte.
package seed002wan

import (
	"io"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// Link is a TCP relay to one target: every chunk read in either direction
// is delivered after a one-way delay drawn from its Delay, in order, so a
// chunk never overtakes the previous one (TCP's own order; the delays of a
// burst are therefore not independent).
type Link struct {
	ln     net.Listener
	target string
	delay  func(r *rand.Rand) time.Duration
	mu     sync.Mutex
	rng    *rand.Rand
	conns  []net.Conn
	wg     sync.WaitGroup
}

// Pareto is a one-way delay drawn from Pareto(alpha, b ms), capped at
// 1000 b (as the simulator caps), the seed's chapter V model.
func Pareto(alpha, bMs float64) func(*rand.Rand) time.Duration {
	return func(r *rand.Rand) time.Duration {
		ms := min(bMs/math.Pow(1-r.Float64(), 1/alpha), 1000*bMs)
		return time.Duration(ms * float64(time.Millisecond))
	}
}

// Fixed is a constant one-way delay (the seed's chapter VI round trips,
// whose 99% intervals are a fraction of a millisecond wide).
func Fixed(d time.Duration) func(*rand.Rand) time.Duration {
	return func(*rand.Rand) time.Duration { return d }
}

// New starts a link on 127.0.0.1 (a free port) to target; seed seeds its
// delays.
func New(target string, delay func(*rand.Rand) time.Duration, seed uint64) (*Link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	w := &Link{ln: ln, target: target, delay: delay, rng: rand.New(rand.NewPCG(seed, 12))}
	w.wg.Add(1)
	go w.accept()
	return w, nil
}

// Addr is the address to dial instead of the target.
func (w *Link) Addr() string { return w.ln.Addr().String() }

func (w *Link) next() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.delay(w.rng)
}

func (w *Link) accept() {
	defer w.wg.Done()
	for {
		in, err := w.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", w.target)
		if err != nil {
			in.Close()
			continue
		}
		w.mu.Lock()
		w.conns = append(w.conns, in, out)
		w.mu.Unlock()
		w.wg.Add(2)
		go w.pump(in, out)
		go w.pump(out, in)
	}
}

type chunk struct {
	at   time.Time
	data []byte
}

// pump copies src to dst, each chunk delayed, in order.
func (w *Link) pump(src, dst net.Conn) {
	defer w.wg.Done()
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			time.Sleep(time.Until(c.at))
			if _, err := dst.Write(c.data); err != nil {
				break
			}
		}
		dst.Close()
		for range q {
		}
	}()
	var last time.Time
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			at := time.Now().Add(w.next())
			if at.Before(last) {
				at = last
			}
			last = at
			q <- chunk{at, append([]byte(nil), buf[:n]...)}
		}
		if err != nil {
			if err != io.EOF {
				src.Close()
			}
			break
		}
	}
	close(q)
	<-done
}

// Close stops the relay and every connection it carries, and waits.
func (w *Link) Close() {
	w.ln.Close()
	w.mu.Lock()
	for _, c := range w.conns {
		c.Close()
	}
	w.mu.Unlock()
	w.wg.Wait()
}
