package seed002fastsim

import (
	"io"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// wanLink is a userspace TCP relay that puts a client behind a WAN-like
// link to one node (this machine has no sch_netem, and nemesis's relay
// parses peer-transport frames only): every chunk read in either direction
// is delivered after a one-way delay drawn from Pareto(alpha, b) (capped at
// 1000 b, as the simulator caps), in order, so a chunk never overtakes the
// previous one (TCP's own order; the delays of a burst are therefore not
// independent, unlike the model's messages).
type wanLink struct {
	ln       net.Listener
	target   string
	alpha, b float64 // Pareto shape and scale (ms)
	mu       sync.Mutex
	rng      *rand.Rand
	conns    []net.Conn
	wg       sync.WaitGroup
}

func newWANLink(target string, alpha, bMs float64, seed uint64) (*wanLink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	w := &wanLink{ln: ln, target: target, alpha: alpha, b: bMs, rng: rand.New(rand.NewPCG(seed, 12))}
	w.wg.Add(1)
	go w.accept()
	return w, nil
}

func (w *wanLink) addr() string { return w.ln.Addr().String() }

func (w *wanLink) delay() time.Duration {
	w.mu.Lock()
	u := w.rng.Float64()
	w.mu.Unlock()
	ms := min(w.b/math.Pow(1-u, 1/w.alpha), 1000*w.b)
	return time.Duration(ms * float64(time.Millisecond))
}

func (w *wanLink) accept() {
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
func (w *wanLink) pump(src, dst net.Conn) {
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
			at := time.Now().Add(w.delay())
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

// close stops the relay and every connection it carries, and waits.
func (w *wanLink) close() {
	w.ln.Close()
	w.mu.Lock()
	for _, c := range w.conns {
		c.Close()
	}
	w.mu.Unlock()
	w.wg.Wait()
}
