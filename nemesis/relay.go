package nemesis

import (
	"bufio"
	"container/heap"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/synod-dev/synod/transport"
)

// LinkFaults are the message faults a relay applies to the frames of its
// link. The zero value forwards every frame at once.
type LinkFaults struct {
	Delay   time.Duration // added to every frame; frames stay in order
	Jitter  time.Duration // plus uniform [0, Jitter); frames stay in order
	Loss    float64       // probability a frame is dropped
	Dup     float64       // probability a frame is sent twice
	Reorder time.Duration // each frame held uniform [0, Reorder) on its own: frames overtake each other
}

// relay carries one link i->j: node i dials it, it dials node j. The
// dialer's handshake and proof pass unchanged; afterwards it reads the
// transport's frames (4-byte length, payload) one by one and applies the
// link's faults to whole frames, so that a dropped, duplicated or
// reordered frame is a lost, duplicated or reordered protocol message,
// never a corrupted stream.
type relay struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	faults LinkFaults
	rng    *rand.Rand
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
	stats  *relayStats
}

type relayStats struct {
	mu                                   sync.Mutex
	frames, dropped, duplicated, delayed int64
}

// snapshot copies the counters.
func (st *relayStats) snapshot() relayStats {
	st.mu.Lock()
	defer st.mu.Unlock()
	return relayStats{frames: st.frames, dropped: st.dropped, duplicated: st.duplicated, delayed: st.delayed}
}

func newRelay(listen, target string, seed uint64, st *relayStats) (*relay, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	r := &relay{ln: ln, target: target, rng: rand.New(rand.NewPCG(seed, 7)), conns: map[net.Conn]bool{}, stats: st}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

func (r *relay) set(f LinkFaults) {
	r.mu.Lock()
	r.faults = f
	r.mu.Unlock()
}

func (r *relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		c.Close()
		return false
	}
	r.conns[c] = true
	return true
}

func (r *relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		if !r.track(c) {
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.serve(c)
		}()
	}
}

func (r *relay) serve(in net.Conn) {
	defer in.Close()
	out, err := net.DialTimeout("tcp", r.target, 2*time.Second)
	if err != nil {
		return
	}
	if !r.track(out) {
		return
	}
	defer out.Close()
	// Replies (handshake answers) flow back unchanged; the acceptor sends
	// nothing else.
	go func() {
		io.Copy(in, out)
		in.Close()
		out.Close()
	}()
	br := bufio.NewReaderSize(in, 64<<10)
	h, err := transport.ReadHandshake(br)
	if err != nil {
		return
	}
	proof := make([]byte, transport.NonceSize)
	if _, err := out.Write(transport.AppendHandshake(nil, h)); err != nil {
		return
	}
	if _, err := io.ReadFull(br, proof); err != nil {
		return
	}
	if _, err := out.Write(proof); err != nil {
		return
	}
	w := newFrameWriter(out)
	defer w.close()
	for {
		p, err := transport.ReadFrame(br, transport.DefaultMaxFrame)
		if err != nil {
			return
		}
		frame := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(p)), uint32(len(p)))
		frame = append(frame, p...)
		r.forward(w, frame)
	}
}

// forward applies the link's current faults to one frame.
func (r *relay) forward(w *frameWriter, frame []byte) {
	r.mu.Lock()
	f := r.faults
	drop := f.Loss > 0 && r.rng.Float64() < f.Loss
	dup := f.Dup > 0 && r.rng.Float64() < f.Dup
	var d, d2 time.Duration
	if f.Jitter > 0 {
		d = time.Duration(r.rng.Int64N(int64(f.Jitter)))
	}
	if f.Reorder > 0 {
		d2 = time.Duration(r.rng.Int64N(int64(f.Reorder)))
	}
	r.mu.Unlock()
	st := r.stats
	st.mu.Lock()
	st.frames++
	if drop {
		st.dropped++
	}
	if dup && !drop {
		st.duplicated++
	}
	if f.Delay+d+d2 > 0 {
		st.delayed++
	}
	st.mu.Unlock()
	if drop {
		return
	}
	n := 1
	if dup {
		n = 2
	}
	for range n {
		w.send(frame, f.Delay+d, d2)
	}
}

// resetConns closes every connection of the relay: both nodes see the
// stream break (a connection reset) and the dialer reconnects.
func (r *relay) resetConns() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		c.Close()
		delete(r.conns, c)
	}
}

func (r *relay) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.ln.Close()
	r.resetConns()
	r.wg.Wait()
}

// frameWriter writes frames at their release times. An in-order delay
// releases a frame no earlier than the frame before it; a reorder delay is
// added after that ordering, so frames may overtake each other.
type frameWriter struct {
	dst     io.Writer
	mu      sync.Mutex
	q       frameHeap
	seq     int64
	lastRel time.Time
	wake    chan struct{}
	done    chan struct{}
}

type pending struct {
	at    time.Time
	seq   int64
	frame []byte
}

type frameHeap []pending

func (h frameHeap) Len() int { return len(h) }
func (h frameHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h frameHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *frameHeap) Push(x any)   { *h = append(*h, x.(pending)) }
func (h *frameHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newFrameWriter(dst io.Writer) *frameWriter {
	w := &frameWriter{dst: dst, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go w.run()
	return w
}

func (w *frameWriter) send(frame []byte, inOrder, reorder time.Duration) {
	now := time.Now()
	w.mu.Lock()
	at := now.Add(inOrder)
	if at.Before(w.lastRel) {
		at = w.lastRel
	}
	w.lastRel = at
	w.seq++
	heap.Push(&w.q, pending{at: at.Add(reorder), seq: w.seq, frame: frame})
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *frameWriter) close() { close(w.done) }

func (w *frameWriter) run() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		w.mu.Lock()
		var due []byte
		wait := time.Hour
		if len(w.q) > 0 {
			if d := time.Until(w.q[0].at); d <= 0 {
				due = heap.Pop(&w.q).(pending).frame
			} else {
				wait = d
			}
		}
		w.mu.Unlock()
		if due != nil {
			if _, err := w.dst.Write(due); err != nil {
				return
			}
			continue
		}
		t.Reset(wait)
		select {
		case <-w.done:
			return
		case <-w.wake:
		case <-t.C:
		}
	}
}
