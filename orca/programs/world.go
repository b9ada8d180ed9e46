package programs

import (
	"bytes"
	"container/heap"
	"fmt"
	"math/rand"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/service"
)

// Net is the world's cost model: the network (a shared-medium Ethernet
// by default, Ethernet10) and each node's processor. Every figure the
// programs and experiments print comes from these numbers, never from the
// clock of the machine running the simulation.
type Net struct {
	// Latency is the fixed one-way cost of a message (propagation plus the
	// sending and receiving stacks' fixed work).
	Latency time.Duration
	// PerByte is the transmission time of one byte (10 Mbit/s: 800 ns).
	PerByte time.Duration
	// MsgCPU is the receiving node's processor time per peer message, and
	// OpCPU per request a local process makes. A protocol step interrupts
	// the node's computation: the running Compute is stretched by it.
	MsgCPU, OpCPU time.Duration
	// Multicast: sends of identical bytes in one step go out as one frame
	// (Ethernet multicast, the Orca paper §4.1's FLIP). Off, every send is its own
	// frame on the sender's link, as in Synod's point-to-point transport.
	Multicast bool
	// Fsync is the time a Persist takes before the outputs after it are
	// released (automaton durability rule). 0: records are kept, not synced.
	Fsync time.Duration
}

// Ethernet10 is the default model: a 10 Mbit/s Ethernet like the paper's
// (the Orca paper §5: "10 MC68030 CPUs connected by a 10 Mbit/sec Ethernet"),
// 1 ms fixed cost per message, 0.5 ms of processor time per message
// received, 20 µs per local operation; no hardware multicast; no fsync.
var Ethernet10 = Net{Latency: time.Millisecond, PerByte: 800 * time.Nanosecond,
	MsgCPU: 500 * time.Microsecond, OpCPU: 20 * time.Microsecond}

// String states the model beside every figure.
func (n Net) String() string {
	mc := "point-to-point sends"
	if n.Multicast {
		mc = "hardware multicast"
	}
	fs := "fsync off (records kept, not synced)"
	if n.Fsync > 0 {
		fs = "fsync " + n.Fsync.String()
	}
	return fmt.Sprintf("simulated: latency %v + %v/byte, cpu %v/msg %v/request, %s, %s",
		n.Latency, n.PerByte, n.MsgCPU, n.OpCPU, mc, fs)
}

// Stats counts a world's communication.
type Stats struct {
	Sends    int // point-to-point messages (Send outputs)
	Frames   int // transmissions on the wire (Sends, or fewer with Multicast)
	Bytes    int // bytes of every Send
	Steps    int // automaton steps
	Requests int // operations processes made (reads and writes)
	Persists int
}

func (s Stats) String() string {
	return fmt.Sprintf("sends=%d frames=%d bytes=%d requests=%d steps=%d persists=%d",
		s.Sends, s.Frames, s.Bytes, s.Requests, s.Steps, s.Persists)
}

// World runs a runtime's automata (orca-bcast or orca-primary, any
// registered protocol over the orca service) on n simulated nodes in
// virtual time, with processes on the nodes sharing the objects through
// Proc.Do. It is a small discrete-event simulator: sim.Run drives clients
// from a random operation mix, while a parallel program's processes choose
// each operation from the previous answers, so they need this driver.
// Everything is deterministic for a seed.
type World struct {
	Net   Net
	Stats Stats

	ids   []automaton.NodeID
	nodes []*wnode
	q     evq
	seq   uint64
	now   time.Duration
	procs []*Proc
	byCl  map[uint64]*Proc
	park  chan struct{}
	err   error
}

type wnode struct {
	a         automaton.Automaton
	disk      map[string][]byte
	protoFree time.Duration // the processor's protocol queue is free from
	linkFree  time.Duration // the sender's link is free from
	timers    map[automaton.TimerID]uint64
	compute   []*Proc // processes computing here, in FIFO order
}

// NewWorld creates n nodes running protocol over a fresh orca service.
func NewWorld(protocol string, n int, params map[string]string, net Net, seed int64) (*World, error) {
	p, err := automaton.LookupAny(protocol)
	if err != nil {
		return nil, err
	}
	w := &World{Net: net, byCl: map[uint64]*Proc{}, park: make(chan struct{})}
	for i := 0; i < n; i++ {
		w.ids = append(w.ids, automaton.NodeID(fmt.Sprintf("n%d", i+1)))
	}
	svc := &orca.Service{Types: orca.Builtin}
	for i := range w.ids {
		a, err := p.New(automaton.Config{Self: w.ids[i], Nodes: w.ids, Namespace: "orca", Service: svc,
			Params: params, Rand: rand.New(rand.NewSource(seed*1000 + int64(i)))})
		if err != nil {
			return nil, err
		}
		w.nodes = append(w.nodes, &wnode{a: a, disk: map[string][]byte{}, timers: map[automaton.TimerID]uint64{}})
	}
	for i := range w.nodes {
		w.step(i, automaton.Start{Records: map[string][]byte{}}, 0)
	}
	return w, nil
}

// Nodes is the number of nodes.
func (w *World) Nodes() int { return len(w.nodes) }

// Now is the virtual time.
func (w *World) Now() time.Duration { return w.now }

// Proc is one process of a parallel program, on one node (the Orca paper §2,
// Figure 1: processes on a processor share its copy of every object).
// Its methods block the process in virtual time; only one process runs
// at a time, so a program is deterministic.
type Proc struct {
	w      *World
	name   string
	node   int
	client uint64
	seq    uint64
	resume chan service.Result
	state  string // what it waits for, for deadlock reports
	done   bool
	start  func(*Proc)
	// compute
	end   time.Duration
	token uint64
}

// Node is the index of the process's node (0-based).
func (p *Proc) Node() int { return p.node }

// Now is the virtual time.
func (p *Proc) Now() time.Duration { return p.w.now }

// Spawn starts process name on node at the current virtual time.
func (w *World) Spawn(node int, name string, f func(p *Proc)) {
	p := &Proc{w: w, name: name, node: node, client: uint64(len(w.procs) + 1), resume: make(chan service.Result), start: f, state: "starting"}
	w.procs = append(w.procs, p)
	w.byCl[p.client] = p
	w.at(w.now, func() { w.run(p, service.Result{}) })
}

// Do applies op to the shared objects through the process's node and
// blocks until it is answered (a guarded operation until its guard holds).
func (p *Proc) Do(op service.Op) service.Result {
	w := p.w
	p.seq++
	p.state = "waiting for " + op.String()
	req := automaton.Request{ID: automaton.RequestID{Client: p.client, Seq: p.seq}, Op: op}
	w.Stats.Requests++
	node := p.node
	w.at(w.now, func() { w.step(node, automaton.ClientRequest{Req: req}, w.Net.OpCPU) })
	return p.block()
}

// Must is Do that turns an error result into a panic, which Run reports.
func (p *Proc) Must(op service.Op) service.Result {
	r := p.Do(op)
	if r.IsErr() {
		panic(fmt.Sprintf("%s: %v: %s", p.name, op, r.Err))
	}
	return r
}

// Compute occupies the node's processor for d (the program's own work).
// Processes on one node compute one after another; protocol steps on the
// node interrupt and stretch the computation.
func (p *Proc) Compute(d time.Duration) {
	if d <= 0 {
		return
	}
	w, n := p.w, p.w.nodes[p.node]
	start := w.now
	if k := len(n.compute); k > 0 {
		start = n.compute[k-1].end
	}
	p.end = start + d
	n.compute = append(n.compute, p)
	p.state = "computing"
	w.armCompute(p)
	p.block()
}

func (w *World) armCompute(p *Proc) {
	w.seq++
	p.token = w.seq
	tok := p.token
	w.at(p.end, func() {
		if p.token != tok {
			return
		}
		n := w.nodes[p.node]
		n.compute = n.compute[1:]
		w.run(p, service.Result{})
	})
}

// block parks the process until the engine resumes it.
func (p *Proc) block() service.Result {
	p.w.park <- struct{}{}
	return <-p.resume
}

// run resumes p (or starts it) and waits until it blocks or ends.
func (w *World) run(p *Proc, r service.Result) {
	if p.done {
		return
	}
	if p.start != nil {
		f := p.start
		p.start = nil
		go func() {
			defer func() {
				if x := recover(); x != nil && w.err == nil {
					w.err = fmt.Errorf("%s panicked: %v", p.name, x)
				}
				p.done, p.state = true, "done"
				w.park <- struct{}{}
			}()
			<-p.resume
			f(p)
		}()
	}
	p.state = "running"
	p.resume <- r
	<-w.park
}

// Run processes events until every process has ended. It fails when the
// processes are stuck (nothing left to happen), when limit virtual time
// passes, or when a process panicked.
func (w *World) Run(limit time.Duration) error {
	for w.err == nil {
		if w.allDone() {
			return nil
		}
		if w.q.Len() == 0 {
			return fmt.Errorf("programs: processes blocked with nothing left to happen: %s", w.blocked())
		}
		e := heap.Pop(&w.q).(*event)
		if e.at > limit {
			return fmt.Errorf("programs: virtual time limit %v passed: %s", limit, w.blocked())
		}
		w.now = e.at
		e.f()
	}
	return w.err
}

func (w *World) allDone() bool {
	for _, p := range w.procs {
		if !p.done {
			return false
		}
	}
	return true
}

func (w *World) blocked() string {
	var s []string
	for _, p := range w.procs {
		if !p.done {
			s = append(s, p.name+": "+p.state)
		}
	}
	return strings.Join(s, "; ")
}

// step hands in to node i's automaton when its processor is free, and
// releases the outputs after cost (and after an fsync for those that
// follow a Persist).
func (w *World) step(i int, in automaton.Input, cost time.Duration) {
	n := w.nodes[i]
	start := max(w.now, n.protoFree)
	n.protoFree = start + cost
	w.interrupt(i, cost)
	outs := n.a.Step(in)
	w.Stats.Steps++
	rel := start + cost
	sent := map[string]bool{}
	for _, o := range outs {
		switch o := o.(type) {
		case automaton.Persist:
			w.Stats.Persists++
			if o.Delete {
				delete(n.disk, o.Key)
			} else {
				n.disk[o.Key] = append([]byte(nil), o.Value...)
			}
			rel += w.Net.Fsync
		case automaton.Send:
			w.send(i, o, rel, sent)
		case automaton.Respond:
			p := w.byCl[o.Resp.ID.Client]
			if p == nil || o.Resp.ID.Seq != p.seq || o.Resp.Silent {
				continue
			}
			res, seq := o.Resp.Result, p.seq
			w.at(rel, func() {
				if p.seq == seq && strings.HasPrefix(p.state, "waiting") {
					w.run(p, res)
				}
			})
		case automaton.SetTimer:
			w.seq++
			tok := w.seq
			n.timers[o.ID] = tok
			id := o.ID
			w.at(rel+o.After, func() {
				if n.timers[id] == tok {
					delete(n.timers, id)
					w.step(i, automaton.TimerFired{ID: id}, 0)
				}
			})
		case automaton.CancelTimer:
			delete(n.timers, o.ID)
		default:
			w.err = fmt.Errorf("programs: output %T is not supported", o)
		}
	}
}

// send puts a message on the sender's link. With Multicast, bytes already
// framed in this step travel in the same frame.
func (w *World) send(from int, s automaton.Send, rel time.Duration, sent map[string]bool) {
	n := w.nodes[from]
	w.Stats.Sends++
	w.Stats.Bytes += len(s.Msg)
	to := -1
	for k, id := range w.ids {
		if id == s.To {
			to = k
		}
	}
	if to < 0 {
		return
	}
	key := string(s.Msg)
	var arrive time.Duration
	if w.Net.Multicast && sent[key] {
		arrive = max(rel, n.linkFree) + w.Net.Latency // same frame: already on the wire
	} else {
		sent[key] = true
		w.Stats.Frames++
		dep := max(rel, n.linkFree)
		n.linkFree = dep + time.Duration(len(s.Msg))*w.Net.PerByte
		arrive = n.linkFree + w.Net.Latency
	}
	msg := bytes.Clone(s.Msg)
	self := w.ids[from]
	w.at(arrive, func() { w.step(to, automaton.PeerMessage{From: self, Msg: msg}, w.Net.MsgCPU) })
}

// interrupt stretches the computations on node i by a protocol step's cost.
func (w *World) interrupt(i int, cost time.Duration) {
	if cost <= 0 {
		return
	}
	for _, p := range w.nodes[i].compute {
		p.end += cost
		w.armCompute(p)
	}
}

type event struct {
	at  time.Duration
	seq uint64
	f   func()
}

type evq []*event

func (q evq) Len() int { return len(q) }
func (q evq) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q evq) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *evq) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *evq) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

func (w *World) at(t time.Duration, f func()) {
	w.seq++
	heap.Push(&w.q, &event{at: t, seq: w.seq, f: f})
}

// ID is node i's identity (n1, n2, …).
func (w *World) ID(i int) automaton.NodeID { return w.ids[i] }

// Settle lets the protocols finish what is in flight (acknowledgements,
// unlocks, state messages) with no process running: it handles events
// until none is left, or fails when limit virtual time passes. A
// micro-benchmark settles between phases so that one measurement does not
// pay for the previous one's tail.
func (w *World) Settle(limit time.Duration) error {
	for w.err == nil && w.q.Len() > 0 {
		e := heap.Pop(&w.q).(*event)
		if e.at > limit {
			return fmt.Errorf("programs: virtual time limit %v passed while settling", limit)
		}
		w.now = e.at
		e.f()
	}
	return w.err
}

// Phase runs f as one process on node, then lets the world settle: the
// step-by-step driver of a micro-benchmark (set up copies, then time one
// operation). It fails when the process fails or limit passes.
func (w *World) Phase(node int, name string, f func(p *Proc), limit time.Duration) error {
	w.Spawn(node, name, f)
	if err := w.Run(limit); err != nil {
		return err
	}
	return w.Settle(limit)
}
