package esds

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// The front end (the ESDS thesis Fig. 4.1, §4.2.4): wait_f and rept_f, request_c,
// send_{f,r}("request", x) under the send policy with per-replica send
// counters, receive_{r,f}("response", x, v) and response_c(x, v).
//
// The send policy (the seed leaves it open, §4.2.4, and lists the
// trade-offs): parameter send = 1, 2 or all replicas per operation, taken
// around the ring of replica ids starting at the front end's own replica
// (which it reaches without a network hop), or, on a node without a replica
// (parameter replicas, frontend_only.go), at the replica firstReplica picks. Parameter resend (off by
// default) sends a still-waiting operation, every resend interval, to the
// next replica in the ring whose send counter is below maxsends; the local
// replica is never sent to twice (a local submission is not lost, and it is
// forgotten only with the front end itself at a crash).

// feOp is one operation in wait_f: the descriptor, the client requests
// waiting for it (a retry at this front end joins), and sent[i], how many
// times it was sent to replica i.
type feOp struct {
	x      entry
	reqs   []automaton.RequestID
	sent   []uint8
	cursor int // the last replica sent to
	age    int // gossip ticks since the last send
	waited int // gossip ticks since request_c (prev deadline)
	// req0 and sent0 back reqs and sent in the common case (one request,
	// at most 8 nodes): one allocation per operation instead of three.
	req0  [1]automaton.RequestID
	sent0 [8]uint8
}

// requestC is request_c(x) (Fig. 4.1): wait_f ∪= {x}, then the first sends.
func (a *ESDS) requestC(id automaton.RequestID, x entry) {
	if f := a.wait[x.ID]; f != nil {
		f.reqs = append(f.reqs, id)
		return
	}
	start := a.firstReplica()
	var f *feOp
	if start == a.self && !a.feOnly && a.ops[x.ID] == nil && !(a.readsLocal && a.svc.IsRead(x.Op)) {
		// The first send is to this node's replica, which does not have
		// x yet and will receive it (a write, or a read it orders): the
		// front end's operation and the replica's in one allocation
		// (replicaRequest takes spareOp), not two per put.
		p := &feAndOp{}
		f, a.spareOp = &p.f, &p.o
	} else {
		f = new(feOp)
	}
	f.x, f.cursor = x, start
	f.req0[0] = id
	f.reqs = f.req0[:1:1]
	if n := len(a.cfg.Nodes); n <= len(f.sent0) {
		f.sent = f.sent0[:n:n]
	} else {
		f.sent = make([]uint8, n)
	}
	a.wait[x.ID] = f
	n := a.sendN
	if n <= 0 || n > len(a.cfg.Nodes) {
		n = len(a.cfg.Nodes)
	}
	for k, j := 0, start; k < len(a.cfg.Nodes) && n > 0; k, j = k+1, (j+1)%len(a.cfg.Nodes) {
		if a.removed&(1<<j) != 0 || !a.isReplica(j) {
			continue
		}
		a.sendRequest(f, j)
		n--
	}
	a.spareOp = nil // not taken (a read answered locally, a replica removed): dropped
}

// feAndOp is a front end's operation and its own replica's, allocated
// together (requestC): the replica's outlives the front end's (it is kept
// until collected), so the pair is, a few hundred bytes per operation not
// yet collected.
type feAndOp struct {
	f feOp
	o op
}

// sendRequest is send_{f,r}("request", x): to the local replica directly
// (receive_{f,r}), to another over the network.
func (a *ESDS) sendRequest(f *feOp, j int) {
	f.sent[j]++
	f.cursor, f.age = j, 0
	a.feSends++
	if j == a.self {
		a.replicaRequest(a.self, f.x)
		return
	}
	m := message{Kind: kindRequest, Inc: a.inc, Entries: []entry{f.x}}
	a.send(j, m.marshal())
}

// resendWaiting runs at every gossip tick: an operation waiting resend
// ticks since its last send goes to the next replica in the ring whose
// counter is below maxsends (the local one only once).
func (a *ESDS) resendWaiting() {
	if a.resendTicks <= 0 {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(a.wait)) {
		f := a.wait[id]
		if f.age++; f.age < a.resendTicks {
			continue
		}
		f.age = 0
		for k, j := 0, f.cursor; k < len(a.cfg.Nodes); k++ {
			j = (j + 1) % len(a.cfg.Nodes)
			if a.removed&(1<<j) != 0 || !a.isReplica(j) || int(f.sent[j]) >= a.maxSends || (j == a.self && f.sent[j] > 0) {
				continue
			}
			a.sendRequest(f, j)
			break
		}
	}
}

// expirePrevWaits bounds the wait for prev (the ESDS thesis §4.2.2 leaves it
// unbounded: do_it waits until every id in x.prev is done, and an id that
// is never submitted, or a cycle, waits for ever). At every gossip tick an
// operation with a prev set that has waited prev_timeout, and whose prev
// ids are not all done at this node's replica (on a node without one: any
// such operation still waiting), is answered an error naming the missing
// ids, and leaves wait_f. Its outcome is unknown to the client: the
// replicas keep it received, and do it if the ids arrive later.
func (a *ESDS) expirePrevWaits() {
	if a.prevTicks <= 0 {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(a.wait)) {
		f := a.wait[id]
		if len(f.x.Prev) == 0 {
			continue
		}
		if f.waited++; f.waited < a.prevTicks {
			continue
		}
		missing := a.missingPrev(f.x.Prev)
		if len(missing) == 0 && !a.feOnly {
			continue // done or waiting for stability: not a prev wait
		}
		if a.feOnly {
			missing = f.x.Prev
		}
		res := service.Errorf("ERR esds: operation %q waited %v for prev ids not done at %s: %s (never submitted, or a cycle); its outcome is unknown: it is done if they arrive",
			id, time.Duration(a.prevTicks)*a.gossipIvl, a.cfg.Self, strings.Join(missing, " "))
		for _, r := range f.reqs {
			a.Respond(r, res)
		}
		delete(a.wait, id)
	}
}

// missingPrev returns the ids of prev not done (nor collected, nor a read
// answered locally) at this node's replica.
func (a *ESDS) missingPrev(prev []string) []string {
	var out []string
	for _, p := range prev {
		if a.gcd.has(p) || a.reads.has(p) {
			continue
		}
		if q := a.ops[p]; q == nil || !q.label.Set {
			out = append(out, p)
		}
	}
	return out
}

// prevCycle reports a prev id of x from which the prev sets of operations
// received here lead back to x itself: x could never be done (nor any
// operation of the cycle). Ids not received here end the walk.
func (a *ESDS) prevCycle(x entry) (string, bool) {
	seen := map[string]bool{}
	var reaches func(id string) bool
	reaches = func(id string) bool {
		if id == x.ID {
			return true
		}
		if seen[id] || len(seen) > 4*MaxPrevIDs {
			return false
		}
		seen[id] = true
		q := a.ops[id]
		if q == nil || q.label.Set {
			return false // unknown here, or done (its prev were done first)
		}
		for _, p := range q.prev {
			if reaches(p) {
				return true
			}
		}
		return false
	}
	for _, p := range x.Prev {
		if reaches(p) {
			return p, true
		}
	}
	return "", false
}

// receiveResponse is receive_{r,f}("response", x, v) (Fig. 4.1): kept in
// rept_f only while x is waiting; then response_c(x, v) is enabled and
// taken at once, in the same step.
//
// rept_f is therefore empty between steps, and is not stored: the value
// received is the first (response_c answers with it every client request
// waiting for x; x leaves wait_f and, with it, every value of x would
// leave rept_f). A map entry and a one-value list per put were written
// and deleted here in the same step before (issue 28, session 50).
func (a *ESDS) receiveResponse(id string, v service.Result) {
	f := a.wait[id]
	if f == nil {
		return // no longer waiting: ignored
	}
	for _, r := range f.reqs {
		a.Respond(r, v)
	}
	delete(a.wait, id)
}

// replicaRequest is the replica's receive_{f,r}("request", x) (Figs. 4.2,
// 4.5) from front end fe (this node's or another's): pending_r ∪= {x} with
// fe to answer, rcvd_r ∪= {x}. An operation already collected here is
// answered at once from the value cache.
func (a *ESDS) replicaRequest(fe int, x entry) {
	a.replicaReqs++
	if a.localRead(fe, x) {
		return
	}
	if a.ops[x.ID] == nil && a.gcd.has(x.ID) {
		res, ok := a.keptResult(x.ID)
		if !ok {
			res = service.Errorf("ERR operation %q is stable and its value is no longer kept", x.ID)
		}
		a.sendResponse(fe, x.ID, res)
		return
	}
	if a.ops[x.ID] == nil {
		o := a.spareOp
		if a.spareOp = nil; o == nil {
			o = new(op)
		}
		*o = op{id: x.ID, rkey: x.rkey, prev: append([]string(nil), x.Prev...), strict: x.Strict, sop: x.Op}
		a.receive(o)
	}
	a.pending[x.ID] |= 1 << fe
}

// localRead answers a non-strict read at once from this replica's view,
// under reads=local (package doc, "Local reads"): the value is val_r of the
// read placed after every operation done here (readValue), exactly what
// do_it followed by send_{r,f}("response") would answer in this step, but
// the read is given no label, no record and no gossip: it changes no value
// any operation sees. Its precondition is do_it's on prev (Fig. 4.2: x.prev
// ⊆ done_r[r].id); a read whose prev ids are not all done here is received
// and ordered as before (so is a strict read, one already received here,
// and every read of the unoptimised variant or values=recompute). The id
// is kept in reads, so that a later operation naming it in prev is done
// here without waiting for it. It reports whether it answered.
func (a *ESDS) localRead(fe int, x entry) bool {
	if !a.readsLocal || x.Strict || a.unopt || a.recompute || a.ops[x.ID] != nil || !a.svc.IsRead(x.Op) {
		return false
	}
	if !a.proto.readNoPrev && len(a.missingPrev(x.Prev)) > 0 {
		return false
	}
	v := a.readValue(x.Op)
	a.reads.add(x.ID)
	a.localReads++
	a.sendResponse(fe, x.ID, v)
	return true
}

// AnswersReadsLocally reports whether this node answers non-strict reads
// without ordering them (reads=local): checkers must then accept such
// reads outside the eventual order (check.ESDSOptions.LocalReads).
func (a *ESDS) AnswersReadsLocally() bool { return a.readsLocal }

// sendResponse is send_{r,f}("response", x, v) to front end fe.
func (a *ESDS) sendResponse(fe int, id string, v service.Result) {
	if fe == a.self {
		a.receiveResponse(id, v)
		return
	}
	m := message{Kind: kindResponse, Inc: a.inc, Entries: []entry{{ID: id, Flags: flagGone}}, Value: v}
	a.send(fe, m.marshal())
}

// SendCounts returns, for each waiting operation, how many times this front
// end sent it to each replica (by position): the seed's per-replica send
// counters (§4.2.4). FrontEndSends is the total of sends so far.
func (a *ESDS) SendCounts() map[string][]int {
	out := map[string][]int{}
	for id, f := range a.wait {
		c := make([]int, len(f.sent))
		for i, n := range f.sent {
			c[i] = int(n)
		}
		out[id] = c
	}
	return out
}

// FrontEndSends is the number of send_{f,r}("request") actions this front
// end has taken since it started (local submissions included).
func (a *ESDS) FrontEndSends() uint64 { return a.feSends }

// ReplicaRequests is the number of receive_{f,r}("request", x) actions this
// replica has taken since it started (from its own front end and others'):
// the operations it handled for front ends, duplicates included.
func (a *ESDS) ReplicaRequests() uint64 { return a.replicaReqs }
