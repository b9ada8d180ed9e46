package seed000frontends

import (
	"container/heap"
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/esds"
	"github.com/synod-dev/synod/service"
)

// setup is one run: replicas, front-end-only nodes (0: the front ends are
// the replicas' own), the front-end policy, the load, and an optional crash.
type setup struct {
	replicas, feOnly int
	send             string // 1, 2, all
	resend           string // off or a duration
	ops              int
	rate             float64       // operations per second, open loop
	crashAt          time.Duration // 0: no crash; else replica n1 dies then
	seed             int64
}

// result is what a run measured.
type result struct {
	lats       []time.Duration // answered operations
	unanswered int
	msgs       int      // every message sent (requests, responses, gossip)
	recv       []int    // messages received per replica
	handled    []uint64 // receive_{f,r}("request") per replica
	// Crash runs: the front end that used the dead replica (n<replicas+1>,
	// whose ring starts at n1), its operations submitted after the crash:
	// how many, how many answered, and their latencies.
	victimOps, victimAnswered int
	victimLats                []time.Duration
}

// The model: 0.5-1.5 ms links, a processor per node with a cost per input
// (300 us per peer message, 1 ms per client request), a 20 ms gossip
// interval, the Counter service with adds only, non-strict operations.
const (
	msgCost = 300 * time.Microsecond
	reqCost = time.Millisecond
	gossip  = "20ms"
	drain   = 2 * time.Second
)

type event struct {
	at   time.Duration
	seq  int
	node int
	in   automaton.Input
	gen  int // timers: the generation it was set in
	op   int // client requests: the operation's index
}

type queue []*event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// run drives the ESDS automata of one setup in virtual time: a small
// deterministic discrete-event simulation (the general simulator has no
// per-node counters and no crash of a chosen node at a chosen time).
func run(s setup) (*result, error) {
	n := s.replicas + s.feOnly
	nodes := make([]automaton.NodeID, n)
	var reps []string
	for i := range nodes {
		nodes[i] = automaton.NodeID("n" + strconv.Itoa(i+1))
		if i < s.replicas {
			reps = append(reps, string(nodes[i]))
		}
	}
	params := map[string]string{"send": s.send, "resend": s.resend, "gossip": gossip, "maxsends": "2"}
	if s.feOnly > 0 {
		params["replicas"] = joinComma(reps)
	}
	p, err := automaton.Lookup("esds")
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewSource(s.seed))
	auts := make([]*esds.ESDS, n)
	index := map[automaton.NodeID]int{}
	for i := range nodes {
		index[nodes[i]] = i
		a, err := p.New(automaton.Config{Self: nodes[i], Nodes: nodes, Namespace: "fe", Service: service.Counter{}, Params: params, Rand: rand.New(rand.NewSource(rng.Int63()))})
		if err != nil {
			return nil, err
		}
		auts[i] = a.(*esds.ESDS)
	}
	res := &result{recv: make([]int, s.replicas), handled: make([]uint64, s.replicas)}
	var q queue
	seq := 0
	push := func(e *event) { seq++; e.seq = seq; heap.Push(&q, e) }
	busy := make([]time.Duration, n)
	gens := make([]map[automaton.TimerID]int, n)
	up := make([]bool, n)
	for i := range gens {
		gens[i] = map[automaton.TimerID]int{}
		up[i] = true
	}
	// Front ends: every replica's (colocated) or the front-end-only nodes.
	var fes []int
	for i := range nodes {
		if (s.feOnly == 0) == (i < s.replicas) {
			fes = append(fes, i)
		}
	}
	victim := s.replicas // the first front-end-only node: its ring starts at n1
	submitted := make([]time.Duration, s.ops)
	reqOp := map[automaton.RequestID]int{}
	answered := make([]bool, s.ops)
	for i := range nodes {
		push(&event{at: 0, node: i, in: automaton.Start{}})
	}
	ivl := time.Duration(float64(time.Second) / s.rate)
	for i := 0; i < s.ops; i++ {
		at := time.Duration(i) * ivl
		id := automaton.RequestID{Client: uint64(i + 1), Seq: 1}
		reqOp[id] = i
		submitted[i] = at
		push(&event{at: at, node: fes[i%len(fes)], op: i, in: automaton.ClientRequest{Req: automaton.Request{ID: id, Op: service.Op{Kind: "add", Args: [][]byte{[]byte("1")}}}}})
	}
	end := time.Duration(s.ops)*ivl + drain
	crashed := false
	for q.Len() > 0 {
		e := heap.Pop(&q).(*event)
		if e.at > end {
			break
		}
		if s.crashAt > 0 && !crashed && e.at >= s.crashAt {
			crashed, up[0] = true, false
		}
		if !up[e.node] {
			continue
		}
		if tf, ok := e.in.(automaton.TimerFired); ok && gens[e.node][tf.ID] != e.gen {
			continue // reset or cancelled since
		}
		// The node's processor: an input waits until it is free.
		cost := time.Duration(0)
		switch e.in.(type) {
		case automaton.PeerMessage:
			cost = msgCost
			if e.node < s.replicas {
				res.recv[e.node]++
			}
		case automaton.ClientRequest:
			cost = reqCost
		}
		now := max(e.at, busy[e.node]) + cost
		busy[e.node] = now
		for _, o := range auts[e.node].Step(e.in) {
			switch o := o.(type) {
			case automaton.Send:
				res.msgs++
				lat := 500*time.Microsecond + time.Duration(rng.Int63n(int64(time.Millisecond)))
				push(&event{at: now + lat, node: index[o.To], in: automaton.PeerMessage{From: nodes[e.node], Msg: o.Msg}})
			case automaton.SetTimer:
				gens[e.node][o.ID]++
				push(&event{at: now + o.After, node: e.node, gen: gens[e.node][o.ID], in: automaton.TimerFired{ID: o.ID}})
			case automaton.CancelTimer:
				gens[e.node][o.ID]++
			case automaton.Respond:
				i, ok := reqOp[o.Resp.ID]
				if !ok || answered[i] {
					continue
				}
				answered[i] = true
				res.lats = append(res.lats, now-submitted[i])
				if s.crashAt > 0 && e.node == victim && submitted[i] >= s.crashAt {
					res.victimAnswered++
					res.victimLats = append(res.victimLats, now-submitted[i])
				}
			}
		}
	}
	for i := 0; i < s.ops; i++ {
		if !answered[i] {
			res.unanswered++
		}
		if s.crashAt > 0 && fes[i%len(fes)] == victim && submitted[i] >= s.crashAt {
			res.victimOps++
		}
	}
	for i := 0; i < s.replicas; i++ {
		res.handled[i] = auts[i].ReplicaRequests()
	}
	slices.Sort(res.lats)
	if s.crashAt > 0 && s.feOnly == 0 {
		return nil, fmt.Errorf("crash runs need front-end-only nodes")
	}
	return res, nil
}

func joinComma(l []string) string {
	out := ""
	for i, s := range l {
		if i > 0 {
			out += ","
		}
		out += s
	}
	return out
}
