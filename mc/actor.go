package mc

import (
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Actor semantics (issue 32 item 6): a second search of this package that
// checks a protocol in the world of Stateright's ActorModel (stateright
// 0.31, src/actor/model.rs) with its register clients (src/actor/
// register.rs), so that Stateright's own examples written as Synod
// protocols (mc/stateright/srpaxos, mc/stateright/srregister) are checked
// by both tools on the same state space and their unique state counts can
// be compared exactly.
//
// The world, as Stateright's:
//   - Actors are the servers n1..nN (the protocol's automata, which must
//     implement automaton.ModelStater) and the clients c1..cC, numbered
//     as Stateright numbers them (servers 0..N-1, clients N..N+C-1).
//   - Client k (from 0, actor index i = N+k) sends at the start Put(i,
//     'A'+k) to server i mod N; on its put's answer it sends its next put
//     ('Z'-k) while it has made fewer than PutCount, then a Get, each to
//     server (i + operations so far) mod N; request ids are (i, the
//     operation's number from 1). A client ignores an answer it is not
//     waiting for. A put is a Synod request "set x v", a get "get x".
//   - Every message travels the network, client requests and answers
//     included: an unordered, non-duplicating, lossless multiset of
//     envelopes (src, dst, message). An action delivers one distinct
//     envelope (identical copies are one choice). A delivery that leaves
//     its recipient unchanged and emits nothing is no action at all, and
//     the envelope stays (Stateright's is_no_op: its actors leave a
//     message they ignore in the network). Unchanged is judged by the
//     recipient's encoding (AppendModelState), where Stateright asks
//     whether the actor wrote to its state; the two agree for actors that
//     write only when they change something.
//   - No timers, crashes, losses or durable records: an automaton that
//     emits SetTimer or Persist stops the check with an error.
//   - The history is Stateright's LinearizabilityTester (actor_hist.go):
//     an invocation is recorded when a client sends its request, a return
//     when its answer is delivered.
//
// Properties, as the examples declare them: always "linearizable" (the
// history has a linearization against a register whose initial value is
// the default, nil; judged when the history changes, verdicts cached by
// history); sometimes "value chosen" (a GetOk carrying a value other than
// the default is in flight).
//
// Search: breadth-first, level by level on all workers, or depth-first
// with a stack per worker and work stealing; a state is visited once,
// by its 64-bit fingerprint in a concurrent fingerprint set (fpset.go).
// A state's fingerprint combines the servers' encodings (each hashed once,
// when its server steps), the clients, the history and the network (a
// multiset sum of the envelopes' hashes, each hashed once when sent).
// Successors share every automaton but the stepped one (copied by
// CloneModel), and the history and clients unless a client stepped.

// ActorModel is a model in Stateright's actor semantics.
type ActorModel struct {
	// Protocol makes the servers' automata (Config.Self n1..nN).
	Protocol automaton.Protocol
	// Servers and Clients count the actors (Stateright's server_count
	// and client_count).
	Servers, Clients int
	// PutCount is the puts each client makes before its get
	// (Stateright's RegisterActor::Client put_count; 1 in its examples).
	PutCount int
}

// ActorOptions bound an actor-semantics search.
type ActorOptions struct {
	// DFS searches depth-first (Stateright's spawn_dfs); otherwise
	// breadth-first (spawn_bfs).
	DFS bool
	// Workers is the number of goroutines (0: GOMAXPROCS).
	Workers int
	// MaxStates stops the search after about this many unique states (0:
	// none).
	MaxStates int64
	// Timeout stops the search after this long (0: none).
	Timeout time.Duration
}

// ActorResult is the outcome of CheckActors.
type ActorResult struct {
	// States counts unique states (Stateright's unique_state_count),
	// Transitions the successors generated, visited or not.
	States, Transitions int64
	// Depth is the greatest depth reached (events from the start).
	Depth int
	// Complete: the search exhausted the model.
	Complete bool
	Elapsed  time.Duration
	// Violation is a path to a state whose history is not linearizable.
	Violation *ActorTrace
	// ValueChosen is a path to a state with a GetOk of a written value in
	// flight (nil: none found).
	ValueChosen *ActorTrace
	// Bytes is the fingerprint set's memory.
	Bytes int64
}

// StatesPerSecond is unique states over the elapsed time.
func (r *ActorResult) StatesPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.States) / r.Elapsed.Seconds()
}

// ActorTrace is a path of deliveries from the initial state.
type ActorTrace struct{ Events []string }

func (t *ActorTrace) String() string {
	var b strings.Builder
	for i, e := range t.Events {
		fmt.Fprintf(&b, "%3d. %s\n", i+1, e)
	}
	return b.String()
}

// ModelMessageDescriber is implemented by automata that describe their
// peer messages for the traces of actor-semantics models.
type ModelMessageDescriber interface {
	DescribeModelMessage(msg []byte) string
}

// Envelope kinds.
const (
	envPeer uint8 = iota
	envPut
	envGet
	envPutOk
	envGetOk
)

// aenv is one distinct envelope in flight and its multiplicity.
type aenv struct {
	src, dst int8
	kind     uint8
	val      byte   // Put's and GetOk's value (0: nil)
	seq      uint8  // client messages: the request's number
	data     []byte // peer message (never changed once sent)
	h        uint64
	n        int32
	// in is the input a delivery to a server steps it with, made once
	// when the envelope is sent (Step neither keeps nor changes it).
	in automaton.Input
}

func (e *aenv) same(o *aenv) bool {
	return e.h == o.h && e.src == o.src && e.dst == o.dst && e.kind == o.kind && e.val == o.val && e.seq == o.seq && string(e.data) == string(o.data)
}

type anode struct {
	a automaton.Automaton
	h uint64
}

type aclient struct {
	awaiting bool
	ops      uint8
}

type aworld struct {
	nodes   []anode
	clients []aclient
	net     []aenv
	netSum  uint64
	hist    []ahop
	histH   uint64
	fp      uint64
	depth   int32
	path    *apath
}

// apath is the delivery that led to a state, and its parent's path.
type apath struct {
	parent *apath
	env    aenv
}

type actorChecker struct {
	m       ActorModel
	opt     ActorOptions
	ids     []automaton.NodeID
	ops     int // operations per client
	seed    maphash.Seed
	visited fpSet
	lin     sync.Map // history hash -> bool
	trans   atomic.Int64
	depth   atomic.Int64
	stop    atomic.Bool
	found   atomic.Bool
	mu      sync.Mutex
	err     error
	viol    *apath
	chosen  *apath
	start   time.Time
}

// scratch is a worker's reusable buffer.
type scratch struct {
	buf   []byte
	envs  []aenv
	cls   []aclient
	hist  []ahop
	spare automaton.Automaton // a copy no state holds, reused (ModelCopier)
}

// CheckActors searches m in Stateright's actor semantics.
func CheckActors(m ActorModel, opt ActorOptions) (*ActorResult, error) {
	if m.Servers < 1 || m.Clients < 0 || m.Clients > maxActorClients || m.Servers+m.Clients > 127 || m.PutCount < 0 {
		return nil, fmt.Errorf("mc: actor model needs 1 or more servers and 0-%d clients", maxActorClients)
	}
	if opt.Workers <= 0 {
		opt.Workers = runtime.GOMAXPROCS(0)
	}
	c := &actorChecker{m: m, opt: opt, ops: m.PutCount + 1, seed: maphash.MakeSeed()}
	for i := 0; i < m.Servers; i++ {
		c.ids = append(c.ids, automaton.NodeID(fmt.Sprintf("n%d", i+1)))
	}
	w0, err := c.initial()
	if err != nil {
		return nil, err
	}
	defer raiseGC()()
	c.start = time.Now()
	c.visited.insert(w0.fp)
	c.judge(w0)
	complete := false
	if !c.stop.Load() {
		if opt.DFS {
			complete = c.dfs(w0)
		} else {
			complete = c.bfs(w0)
		}
	}
	res := &ActorResult{
		States: c.visited.len(), Transitions: c.trans.Load(), Depth: int(c.depth.Load()),
		Complete: complete && c.viol == nil && c.err == nil, Elapsed: time.Since(c.start),
		Bytes: c.visited.bytes(),
	}
	if c.err != nil {
		return res, c.err
	}
	if c.viol != nil {
		res.Violation = c.trace(c.viol)
	}
	if c.chosen != nil {
		res.ValueChosen = c.trace(c.chosen)
	}
	return res, nil
}

// initial builds the start state: every server started, every client's
// first request sent and invoked.
func (c *actorChecker) initial() (*aworld, error) {
	w := &aworld{
		nodes:   make([]anode, c.m.Servers),
		clients: make([]aclient, c.m.Clients),
		hist:    make([]ahop, c.m.Clients*c.ops),
	}
	var sc scratch
	for i := range w.nodes {
		a, err := c.m.Protocol.New(automaton.Config{Self: c.ids[i], Nodes: c.ids, Namespace: "model", Service: service.KV{}})
		if err != nil {
			return nil, err
		}
		if _, ok := a.(automaton.ModelStater); !ok {
			return nil, fmt.Errorf("mc: %s's automaton does not implement automaton.ModelStater", c.m.Protocol.Name())
		}
		outs := a.Step(automaton.Start{})
		if err := c.emit(w, i, outs); err != nil {
			return nil, err
		}
		w.nodes[i] = anode{a, c.nodeHash(a, &sc)}
	}
	for k := range w.clients {
		if c.m.PutCount > 0 {
			c.clientSend(w, k)
		}
	}
	w.histH = actorHistHash(w.hist)
	w.fp = c.fingerprint(w)
	w.path = &apath{}
	return w, nil
}

func (c *actorChecker) nodeHash(a automaton.Automaton, sc *scratch) uint64 {
	sc.buf = a.(automaton.ModelStater).AppendModelState(sc.buf[:0], nil)
	return maphash.Bytes(c.seed, sc.buf)
}

func (c *actorChecker) fingerprint(w *aworld) uint64 {
	x := comb(w.histH, w.netSum)
	for i := range w.nodes {
		x = comb(x, w.nodes[i].h)
	}
	return c.clientsHash(x, w.clients)
}

func (c *actorChecker) clientsHash(x uint64, cls []aclient) uint64 {
	for _, cl := range cls {
		v := uint64(cl.ops) << 1
		if cl.awaiting {
			v |= 1
		}
		x = comb(x, v)
	}
	return x
}

// seal fills in e's hash and, for a server, the input delivering it.
func (c *actorChecker) seal(e *aenv) {
	h := comb(uint64(e.kind)|uint64(uint8(e.src))<<8|uint64(uint8(e.dst))<<16|uint64(e.val)<<24|uint64(e.seq)<<32, 0)
	if e.data != nil {
		h = comb(h, maphash.Bytes(c.seed, e.data))
	}
	e.h, e.n = h, 1
	if int(e.dst) < c.m.Servers {
		e.in = c.input(e)
	}
}

// envMix is an envelope's term in the network's multiset sum.
func envMix(h uint64) uint64 { return comb(h, 0x1234567) }

// add puts a sealed envelope on w's network (w.net is w's own).
func (c *actorChecker) add(w *aworld, e aenv) {
	w.netSum += envMix(e.h)
	for i := range w.net {
		if w.net[i].same(&e) {
			w.net[i].n++
			return
		}
	}
	w.net = append(w.net, e)
}

// send seals e and adds it to w's network.
func (c *actorChecker) send(w *aworld, e aenv) {
	c.seal(&e)
	c.add(w, e)
}

// clientSend sends client k's next request and records its invocation
// (Stateright's RegisterActor::Client and record_msg_out).
func (c *actorChecker) clientSend(w *aworld, k int) {
	c.send(w, c.nextRequest(w.clients, w.hist, k))
}

// nextRequest makes client k's next request (unsealed), recording its
// invocation in hist and its progress in clients.
func (c *actorChecker) nextRequest(clients []aclient, hist []ahop, k int) aenv {
	cl := &clients[k]
	i := c.m.Servers + k
	e := aenv{src: int8(i), dst: int8((i + int(cl.ops)) % c.m.Servers), seq: cl.ops + 1}
	o := &hist[k*c.ops+int(cl.ops)]
	if int(cl.ops) < c.m.PutCount {
		e.kind = envPut
		if cl.ops == 0 {
			e.val = 'A' + byte(k)
		} else {
			e.val = 'Z' - byte(k)
		}
		o.write, o.val = true, e.val
	} else {
		e.kind = envGet
	}
	o.state = 1
	for j := range clients {
		if j != k {
			o.before[j] = uint8(c.completed(hist, j))
		}
	}
	cl.awaiting = true
	cl.ops++
	return e
}

// completed is the number of operations client k has had answered.
func (c *actorChecker) completed(hist []ahop, k int) int {
	n := 0
	for j := 0; j < c.ops; j++ {
		if hist[k*c.ops+j].state == 2 {
			n++
		}
	}
	return n
}

var errActorOutput = errors.New("mc: actor models have no timers or durable records")

// emit puts server i's outputs on w's network.
func (c *actorChecker) emit(w *aworld, i int, outs []automaton.Output) error {
	envs, err := c.envelopes(nil, i, outs)
	for _, e := range envs {
		c.add(w, e)
	}
	return err
}

// envelopes appends the sealed envelopes of server i's outputs to buf.
func (c *actorChecker) envelopes(buf []aenv, i int, outs []automaton.Output) ([]aenv, error) {
	for _, o := range outs {
		switch o := o.(type) {
		case automaton.Send:
			j := -1
			for x, id := range c.ids {
				if id == o.To {
					j = x
				}
			}
			if j < 0 || j == i {
				return buf, fmt.Errorf("mc: %s sends to %q", c.ids[i], o.To)
			}
			e := aenv{src: int8(i), dst: int8(j), kind: envPeer, data: o.Msg}
			c.seal(&e)
			buf = append(buf, e)
		case automaton.Respond:
			k := int(o.Resp.ID.Client) - c.m.Servers
			if k < 0 || k >= c.m.Clients {
				return buf, fmt.Errorf("mc: %s answers unknown request %v", c.ids[i], o.Resp.ID)
			}
			e := aenv{src: int8(i), dst: int8(c.m.Servers + k), seq: uint8(o.Resp.ID.Seq)}
			switch r := o.Resp.Result; r.Type {
			case service.ResultOK:
				e.kind = envPutOk
			case service.ResultNil:
				e.kind = envGetOk
			case service.ResultBytes:
				if len(r.Bytes) != 1 {
					return buf, fmt.Errorf("mc: %s answers %q: an actor model's values are one byte", c.ids[i], r.Bytes)
				}
				e.kind, e.val = envGetOk, r.Bytes[0]
			default:
				return buf, fmt.Errorf("mc: %s answers %v with %v", c.ids[i], o.Resp.ID, r)
			}
			c.seal(&e)
			buf = append(buf, e)
		default:
			return buf, fmt.Errorf("%w (%s emitted %T)", errActorOutput, c.ids[i], o)
		}
	}
	return buf, nil
}

// input is the Synod input of a delivery to a server.
func (c *actorChecker) input(e *aenv) automaton.Input {
	switch e.kind {
	case envPeer:
		return automaton.PeerMessage{From: c.ids[e.src], Msg: e.data}
	case envPut:
		return automaton.ClientRequest{Req: automaton.Request{
			ID: automaton.RequestID{Client: uint64(e.src), Seq: uint64(e.seq)},
			Op: service.Op{Kind: "set", Key: "x", Args: [][]byte{{e.val}}}}}
	default:
		return automaton.ClientRequest{Req: automaton.Request{
			ID: automaton.RequestID{Client: uint64(e.src), Seq: uint64(e.seq)},
			Op: service.Op{Kind: "get", Key: "x"}}}
	}
}

// ModelCopier is implemented by automata that copy themselves into an
// automaton of the same protocol the checker no longer needs (a spare),
// sparing an allocation per delivery: CopyModelTo makes dst (nil or a
// spare) a copy of the receiver, as CloneModel would, and returns it.
type ModelCopier interface {
	CopyModelTo(dst automaton.Automaton) automaton.Automaton
}

// successor delivers w's envelope x. It returns nil when that delivery is
// no action (the recipient ignores it) or leads to a state already
// visited; the new state otherwise.
func (c *actorChecker) successor(w *aworld, x int, sc *scratch) (*aworld, error) {
	e := &w.net[x]
	d := int(e.dst)
	if d >= c.m.Servers {
		return c.clientStep(w, x, sc)
	}
	var a automaton.Automaton
	if cp, ok := w.nodes[d].a.(ModelCopier); ok {
		a = cp.CopyModelTo(sc.spare)
	} else {
		a = w.nodes[d].a.(automaton.ModelStater).CloneModel()
	}
	sc.spare = nil
	outs := a.Step(e.in)
	h := c.nodeHash(a, sc)
	if len(outs) == 0 && h == w.nodes[d].h {
		sc.spare = a
		return nil, nil
	}
	c.trans.Add(1)
	var err error
	sc.envs, err = c.envelopes(sc.envs[:0], d, outs)
	if err != nil {
		return nil, err
	}
	sum := w.netSum - envMix(e.h)
	for i := range sc.envs {
		sum += envMix(sc.envs[i].h)
	}
	fp := comb(w.histH, sum)
	for i := range w.nodes {
		if i == d {
			fp = comb(fp, h)
		} else {
			fp = comb(fp, w.nodes[i].h)
		}
	}
	fp = c.clientsHash(fp, w.clients)
	if !c.visited.insert(fp) {
		sc.spare = a
		return nil, nil
	}
	nw := &aworld{clients: w.clients, hist: w.hist, histH: w.histH, netSum: w.netSum, depth: w.depth + 1, fp: fp}
	nw.nodes = make([]anode, len(w.nodes))
	copy(nw.nodes, w.nodes)
	nw.nodes[d] = anode{a, h}
	c.take(nw, w, x)
	for _, e := range sc.envs {
		c.add(nw, e)
	}
	return nw, nil
}

// clientStep delivers w's envelope x to its client (Stateright's
// RegisterActor::Client, and record_msg_in and record_msg_out). Like
// successor, it computes the fingerprint on scratch copies of the
// clients and the history and builds the state only when it is new.
func (c *actorChecker) clientStep(w *aworld, x int, sc *scratch) (*aworld, error) {
	e := &w.net[x]
	k := int(e.dst) - c.m.Servers
	cl := w.clients[k]
	if !cl.awaiting || e.seq != cl.ops || (e.kind != envPutOk && e.kind != envGetOk) {
		return nil, nil
	}
	c.trans.Add(1)
	sc.cls = append(sc.cls[:0], w.clients...)
	sc.hist = append(sc.hist[:0], w.hist...)
	o := &sc.hist[k*c.ops+int(cl.ops)-1]
	o.state, o.ret = 2, e.val
	sc.cls[k].awaiting = false
	sum := w.netSum - envMix(e.h)
	var req aenv
	if e.kind == envPutOk {
		req = c.nextRequest(sc.cls, sc.hist, k)
		c.seal(&req)
		sum += envMix(req.h)
	} else {
		sc.cls[k].ops++
	}
	histH := actorHistHash(sc.hist)
	fp := comb(histH, sum)
	for i := range w.nodes {
		fp = comb(fp, w.nodes[i].h)
	}
	fp = c.clientsHash(fp, sc.cls)
	if !c.visited.insert(fp) {
		return nil, nil
	}
	nw := &aworld{nodes: w.nodes, netSum: w.netSum, depth: w.depth + 1, histH: histH, fp: fp}
	nw.clients = append([]aclient(nil), sc.cls...)
	nw.hist = append([]ahop(nil), sc.hist...)
	c.take(nw, w, x)
	if req.kind != 0 {
		c.add(nw, req)
	}
	return nw, nil
}

// take copies w's network into nw without one copy of envelope x.
func (c *actorChecker) take(nw, w *aworld, x int) {
	nw.net = make([]aenv, 0, len(w.net)+4)
	for i := range w.net {
		if i == x {
			if w.net[i].n > 1 {
				e := w.net[i]
				e.n--
				nw.net = append(nw.net, e)
			}
			continue
		}
		nw.net = append(nw.net, w.net[i])
	}
	nw.netSum -= envMix(w.net[x].h)
}

// judge checks a new state's properties and reports whether the search
// goes on.
func (c *actorChecker) judge(w *aworld) {
	if !c.found.Load() {
		for i := range w.net {
			if w.net[i].kind == envGetOk && w.net[i].val != 0 {
				c.mu.Lock()
				if c.chosen == nil {
					c.chosen = c.pathOf(w)
					c.found.Store(true)
				}
				c.mu.Unlock()
				break
			}
		}
	}
	ok, cached := c.lin.Load(w.histH)
	if !cached {
		ok = linearizable(w.hist, c.m.Clients, c.ops)
		c.lin.Store(w.histH, ok)
	}
	if !ok.(bool) {
		c.mu.Lock()
		if c.viol == nil || int(w.depth) < pathLen(c.viol) {
			c.viol = c.pathOf(w)
		}
		c.mu.Unlock()
		c.stop.Store(true)
	}
}

func (c *actorChecker) pathOf(w *aworld) *apath { return w.path }

func pathLen(p *apath) int {
	n := 0
	for ; p != nil && p.parent != nil; p = p.parent {
		n++
	}
	return n
}

func (c *actorChecker) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	c.stop.Store(true)
}

// expand generates w's successors and calls visit with each new one.
func (c *actorChecker) expand(w *aworld, sc *scratch, visit func(*aworld)) {
	for x := range w.net {
		nw, err := c.successor(w, x, sc)
		if err != nil {
			c.fail(err)
			return
		}
		if nw == nil {
			continue
		}
		nw.path = &apath{parent: w.path, env: w.net[x]}
		for d := int64(nw.depth); ; {
			old := c.depth.Load()
			if d <= old || c.depth.CompareAndSwap(old, d) {
				break
			}
		}
		c.judge(nw)
		visit(nw)
	}
}

func (c *actorChecker) bounded() bool {
	if c.stop.Load() {
		return true
	}
	if c.opt.MaxStates > 0 && c.visited.len() >= c.opt.MaxStates {
		return true
	}
	return c.opt.Timeout > 0 && time.Since(c.start) >= c.opt.Timeout
}

// bfs searches level by level; it reports whether it exhausted the model.
func (c *actorChecker) bfs(w0 *aworld) bool {
	level := []*aworld{w0}
	for len(level) > 0 {
		var (
			next = make([][]*aworld, c.opt.Workers)
			pos  atomic.Int64
			wg   sync.WaitGroup
		)
		for t := 0; t < c.opt.Workers; t++ {
			wg.Add(1)
			go func(t int) {
				defer wg.Done()
				var sc scratch
				for !c.bounded() {
					lo := int(pos.Add(64)) - 64
					if lo >= len(level) {
						return
					}
					hi := min(lo+64, len(level))
					for _, w := range level[lo:hi] {
						c.expand(w, &sc, func(nw *aworld) { next[t] = append(next[t], nw) })
					}
				}
			}(t)
		}
		wg.Wait()
		if c.bounded() {
			return false
		}
		level = level[:0:0]
		for _, n := range next {
			level = append(level, n...)
		}
	}
	return true
}

// dfs searches depth-first with a stack per worker; an idle worker
// steals the older half of another's stack.
func (c *actorChecker) dfs(w0 *aworld) bool {
	type stack struct {
		mu    sync.Mutex
		items []*aworld
		_     [40]byte
	}
	stacks := make([]stack, c.opt.Workers)
	stacks[0].items = []*aworld{w0}
	var pending atomic.Int64 // states pushed and not yet expanded
	pending.Store(1)
	var wg sync.WaitGroup
	for t := 0; t < c.opt.Workers; t++ {
		wg.Add(1)
		go func(t int) {
			defer wg.Done()
			var sc scratch
			my := &stacks[t]
			var local []*aworld
			for {
				if c.bounded() {
					return
				}
				my.mu.Lock()
				var w *aworld
				if n := len(my.items); n > 0 {
					w = my.items[n-1]
					my.items = my.items[:n-1]
				}
				my.mu.Unlock()
				if w == nil {
					if pending.Load() == 0 {
						return
					}
					for v := range stacks {
						o := &stacks[v]
						if v == t {
							continue
						}
						o.mu.Lock()
						if n := len(o.items); n > 1 {
							h := n / 2
							stolen := append([]*aworld(nil), o.items[:h]...)
							o.items = append(o.items[:0], o.items[h:]...)
							o.mu.Unlock()
							my.mu.Lock()
							my.items = append(my.items, stolen...)
							my.mu.Unlock()
							break
						}
						o.mu.Unlock()
					}
					runtime.Gosched()
					continue
				}
				local = local[:0]
				c.expand(w, &sc, func(nw *aworld) { local = append(local, nw) })
				pending.Add(int64(len(local)))
				my.mu.Lock()
				for i := len(local) - 1; i >= 0; i-- {
					my.items = append(my.items, local[i])
				}
				my.mu.Unlock()
				pending.Add(-1)
			}
		}(t)
	}
	wg.Wait()
	return !c.bounded() && pending.Load() == 0
}

// trace describes a path's deliveries.
func (c *actorChecker) trace(p *apath) *ActorTrace {
	var evs []string
	for ; p != nil && p.parent != nil; p = p.parent {
		evs = append(evs, c.describe(&p.env))
	}
	for i, j := 0, len(evs)-1; i < j; i, j = i+1, j-1 {
		evs[i], evs[j] = evs[j], evs[i]
	}
	return &ActorTrace{Events: evs}
}

func (c *actorChecker) actorName(i int8) string {
	if int(i) < c.m.Servers {
		return string(c.ids[i])
	}
	return fmt.Sprintf("c%d", int(i)-c.m.Servers+1)
}

func (c *actorChecker) describe(e *aenv) string {
	from, to := c.actorName(e.src), c.actorName(e.dst)
	var what string
	switch e.kind {
	case envPeer:
		what = fmt.Sprintf("%x", e.data)
		if a, ok := c.describer(); ok {
			what = a.DescribeModelMessage(e.data)
		}
	case envPut:
		what = fmt.Sprintf("Put(%s/%d, %q)", from, e.seq, e.val)
	case envGet:
		what = fmt.Sprintf("Get(%s/%d)", from, e.seq)
	case envPutOk:
		what = fmt.Sprintf("PutOk(%s/%d)", to, e.seq)
	case envGetOk:
		v := "nil"
		if e.val != 0 {
			v = fmt.Sprintf("%q", e.val)
		}
		what = fmt.Sprintf("GetOk(%s/%d, %s)", to, e.seq, v)
	}
	return fmt.Sprintf("deliver %s -> %s: %s", from, to, what)
}

func (c *actorChecker) describer() (ModelMessageDescriber, bool) {
	a, err := c.m.Protocol.New(automaton.Config{Self: c.ids[0], Nodes: c.ids, Namespace: "model", Service: service.KV{}})
	if err != nil {
		return nil, false
	}
	d, ok := a.(ModelMessageDescriber)
	return d, ok
}
