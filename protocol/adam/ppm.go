package adam

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/eve"
	"github.com/synod-dev/synod/service"
)

// The Parallel Pipeline Manager and its Parallel Group Managers (the Eve/Adam thesis
// §5.2.1-§5.2.2), at the primary. The seed's threads are the primary's
// plan of who runs what: a batch's requests are assigned to G groups of k
// threads, group-major round-robin; one group at a time is active and
// computes; each of its threads runs its requests' steps up to the wall
// (its next nested call, or the end of its work) and sets its yield bit;
// the last one to yield wakes the PPM, which makes the group's wall a slot
// of eve's engine (execute, checkpoint, token, verifiers) and passes the
// pipeline to the next group, while the calls of the wall's group are out.
// A group whose threads wait for answers keeps the pipeline until they
// arrive (the thread "check[s] their group's turn" and then waits for its
// call). Scheduling is pure: it runs when the previous slot was applied
// (eve's engine: one slot in flight) and when an answer arrives
// (EffectDone). The replicas need none of it: a slot carries its steps.
//
// The four strategies are configurations of it (package doc): naive one
// group of one thread on one core, walls one group of k threads, spm
// `threads` groups of one thread on one core, ppm G groups of k threads.

type ppm struct {
	groups, threads int // G, k
	batchMax        int
	prog            service.NestedProgram // which requests call the callee

	epoch   uint64 // the epoch it plans for (a new primary plans afresh)
	primary bool
	inBatch bool
	active  int    // the active group
	yield   []bool // the yield bit-array, one bit per thread, group-major
	swapped []bool // per group: swapped off the pipeline at least once this batch
	// assigned holds, per thread, the batch's requests it has not begun.
	assigned [][]eve.Entry
}

func newPPM(groups, threads, batchMax int) *ppm {
	p := &ppm{groups: groups, threads: threads, batchMax: batchMax}
	p.reset()
	return p
}

func (p *ppm) n() int { return p.groups * p.threads }

func (p *ppm) reset() {
	p.inBatch, p.active = false, 0
	p.yield = make([]bool, p.n())
	p.swapped = make([]bool, p.groups)
	p.assigned = make([][]eve.Entry, p.n())
}

// next is the engine's NextBatch: the active group's wall, or nothing (the
// group waits for an answer, or there is no work).
func (p *ppm) next(a *eve.Eve, x *ext, queue []eve.Entry) (take, rest []eve.Entry) {
	if e := a.Epoch(); e != p.epoch || !p.primary {
		p.epoch, p.primary = e, true
		p.reset() // requests assigned by an earlier plan come back from their origins
	}
	st, _ := committed(a)
	if st == nil {
		return nil, queue
	}
	// The threads' suspended requests, from the committed state (a new
	// primary resumes what an earlier one began).
	waiting := make([][]*service.Cont, p.n())
	busy := map[automaton.RequestID]bool{}
	for _, c := range st.Conts() {
		t := decodeTag(c.Tag).thread % p.n()
		waiting[t] = append(waiting[t], c)
		busy[requestOf(c.ID)] = true
	}
	for _, l := range p.assigned {
		for _, en := range l {
			busy[en.Req.ID] = true
		}
	}
	for _, en := range queue {
		if !busy[en.Req.ID] && !a.Seen(en.Req.ID) { // answered requests stay queued until here
			rest = append(rest, en)
			busy[en.Req.ID] = true
		}
	}
	for range 2 {
		if !p.inBatch {
			rest = p.startBatch(rest, waiting)
			if !p.inBatch {
				return nil, rest
			}
		}
		for range p.groups {
			g := p.active
			entries, blocked := p.pgm(g, x, waiting)
			if blocked {
				return nil, rest // the active group waits for its answers
			}
			p.hitWall(g)
			if len(entries) > 0 {
				return entries, rest
			}
		}
		p.inBatch = false // every thread finished: the batch ends
	}
	return nil, rest
}

// startBatch assigns up to batchMax queued requests to the threads,
// group-major round-robin (§5.2.1: one request to each thread of group 0,
// then of group 1, ..., then a second round).
func (p *ppm) startBatch(queue []eve.Entry, waiting [][]*service.Cont) []eve.Entry {
	n := min(len(queue), p.batchMax)
	pending := false
	for _, w := range waiting {
		pending = pending || len(w) > 0
	}
	if n == 0 && !pending {
		return queue
	}
	p.reset()
	p.inBatch = true
	for i, en := range queue[:n] {
		p.assigned[i%p.n()] = append(p.assigned[i%p.n()], en)
	}
	return append([]eve.Entry(nil), queue[n:]...)
}

// pgm is group g's Parallel Group Manager: each of its threads resumes its
// suspended request with the call's answer, then runs the local step of
// its next request, up to the wall. blocked: an answer is missing.
func (p *ppm) pgm(g int, x *ext, waiting [][]*service.Cont) (entries []eve.Entry, blocked bool) {
	for t := g * p.threads; t < (g+1)*p.threads; t++ {
		for _, c := range waiting[t] {
			ans, ok := x.answers[c.ID]
			if !ok {
				return nil, true
			}
			entries = append(entries, eve.Entry{
				Req: automaton.Request{ID: requestOf(c.ID), Env: c.Env,
					Op: service.Op{Kind: service.NestedResume, Key: c.Key, Args: [][]byte{[]byte(c.ID), service.EncodeResultBytes(ans)}}},
				Origin: decodeTag(c.Tag).origin})
		}
	}
	for t := g * p.threads; t < (g+1)*p.threads; t++ {
		if len(p.assigned[t]) == 0 {
			continue
		}
		en := p.assigned[t][0]
		p.assigned[t] = p.assigned[t][1:]
		entries = append(entries, begin(p.prog, en, t))
	}
	return entries, false
}

// begin is a request's first step: a request of the program (the
// default's plain SET) becomes nested.begin (it will call the callee); any
// other operation runs whole.
func begin(prog service.NestedProgram, en eve.Entry, thread int) eve.Entry {
	op := en.Req.Op
	if prog == nil {
		prog = service.Trail
	}
	if !prog.Nested(op) || len(en.Req.Ops) > 0 {
		return en
	}
	req := en.Req
	req.Op = service.Op{Kind: service.NestedBegin, Key: op.Key,
		Args: [][]byte{prog.Encode(op), []byte(contID(req.ID)), tag{thread: thread, origin: en.Origin}.encode()}}
	return eve.Entry{Req: req, Origin: en.Origin}
}

// hitWall: every thread of group g has yielded (it is at its nested call
// or done); the last one wakes the PPM, which moves the pipeline to the
// next group. Only the PPM clears yield bits, and only those of a group
// that has been swapped off the pipeline at least once (§5.2.1: a group
// that never ran keeps its bits clear, so the machine never idles with
// every bit set).
func (p *ppm) hitWall(g int) {
	for t := g * p.threads; t < (g+1)*p.threads; t++ {
		p.yield[t] = true
	}
	p.swapped[g] = true
	p.active = (g + 1) % p.groups
	if p.swapped[p.active] {
		for t := p.active * p.threads; t < (p.active+1)*p.threads; t++ {
			p.yield[t] = false
		}
	}
}
