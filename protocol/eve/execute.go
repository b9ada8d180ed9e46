package eve

import (
	"crypto/sha256"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// The execution replica: the primary's batching, speculative execution of
// a batch and the token it sends (the Eve/Adam thesis §2.2.2 and §2.2.3).

// replica is an execution replica's state.
type replica struct {
	applied uint64        // slots decided and applied
	epoch   uint64        // the epoch after slot applied
	st      service.State // the committed state after slot applied
	hash    [32]byte      // its state hash (the next token's start hash)
	end     [32]byte      // the end hash of slot applied as this replica reached it (invariant)
	lastOwn *decision     // the decision of slot applied when applied from this replica's own run
	dups    map[uint64]dupEntry

	// Primary.
	queue    []entry
	queued   map[automaton.RequestID]bool
	proposed uint64 // the slot of the last batch this primary sent

	// Execution of slot applied+1.
	cur     *execution
	ahead   map[uint64]*batch // batches for later slots, kept until their turn
	waitDec *decision         // a decision for cur that arrived before cur finished

	// State transfer (commit.go).
	fetching   bool
	fetchFrom  []automaton.NodeID
	fetchTicks int
	aheadTicks int
}

// dupEntry is the duplicate table's memory of a client's last request.
type dupEntry struct {
	seq uint64
	res service.Result
}

// execution is one speculative (or sequential) run of a batch.
type execution struct {
	b      *batch
	digest [32]byte
	id     uint64 // effect id (stale results are ignored)
	skip   []bool // duplicates, answered from the table
	done   bool
	spec   service.State
	res    []service.Result
	tok    token
	seq    bool // a rollback's sequential re-execution
	dec    *decision
}

// answered returns the answer the duplicate table holds for id.
func (r *replica) answered(id automaton.RequestID) (service.Result, bool) {
	d, ok := r.dups[id.Client]
	if ok && d.seq == id.Seq {
		return d.res, true
	}
	return service.Result{}, false
}

func (r *replica) seen(id automaton.RequestID) bool {
	d, ok := r.dups[id.Client]
	return ok && d.seq >= id.Seq
}

// skips marks the batch's requests the duplicate table (or an earlier
// entry of the batch) already holds: they are answered, not run.
func (r *replica) skips(b *batch) []bool {
	skip := make([]bool, len(b.Entries))
	seen := map[automaton.RequestID]bool{}
	for i, en := range b.Entries {
		skip[i] = r.seen(en.Req.ID) || seen[en.Req.ID]
		seen[en.Req.ID] = true
	}
	return skip
}

func (a *Eve) isPrimary() bool {
	return a.ex != nil && a.primaryOf(a.ex.epoch) == a.cfg.Self
}

// onForward queues a request at the primary (§2.2: "clients send requests
// to the current primary").
func (a *Eve) onForward(m *message) {
	r := a.ex
	if r == nil {
		return
	}
	if res, ok := r.answered(m.Req.ID); ok {
		a.replyTo(m.Origin, m.Req.ID, res, 0)
		return
	}
	if !a.isPrimary() || r.seen(m.Req.ID) || r.queued[m.Req.ID] {
		return
	}
	r.queued[m.Req.ID] = true
	r.queue = append(r.queue, entry{Req: m.Req, Origin: m.Origin})
	a.cutBatch()
}

// replyTo answers a request at its origin: here, or by a Reply message.
func (a *Eve) replyTo(origin automaton.NodeID, id automaton.RequestID, res service.Result, slot uint64) {
	if origin == a.cfg.Self {
		a.answer(id, res, slot)
		return
	}
	a.send(origin, &message{Kind: kindReply, ID: id, Result: res})
}

// cutBatch sends the next batch when this node is the primary, has
// requests and no batch of its own undecided: one batch in flight, so the
// verifiers settle each slot in one round (§2.2.3).
func (a *Eve) cutBatch() {
	r := a.ex
	if !a.isPrimary() || len(r.queue) == 0 && a.ext == nil || r.proposed > r.applied || r.fetching {
		return
	}
	var b *batch
	if a.ext != nil {
		take, rest := a.ext.NextBatch(a, r.queue)
		if len(take) == 0 {
			return
		}
		b = &batch{Slot: r.applied + 1, Epoch: r.epoch, Entries: take}
		r.queue = rest
		r.queued = map[automaton.RequestID]bool{}
		for _, en := range rest {
			r.queued[en.Req.ID] = true
		}
	} else {
		n := min(len(r.queue), a.batchMax)
		b = &batch{Slot: r.applied + 1, Epoch: r.epoch, Entries: append([]entry(nil), r.queue[:n]...)}
		r.queue = append(r.queue[:0:0], r.queue[n:]...)
		for _, en := range b.Entries {
			delete(r.queued, en.Req.ID)
		}
	}
	r.proposed = b.Slot
	a.sendAll(a.batchTargets(), &message{Kind: kindBatch, Batch: b})
}

// batchTargets are the execution replicas and the verifiers, each once.
func (a *Eve) batchTargets() []automaton.NodeID {
	out := append([]automaton.NodeID(nil), a.execs...)
	for _, v := range a.vers {
		if !a.isExecSet[v] {
			out = append(out, v)
		}
	}
	return out
}

// onBatch starts the speculative execution of a batch (§2.2.2) and gives
// it to the verifier role.
func (a *Eve) onBatch(b *batch) {
	if a.ver != nil {
		a.verBatch(b)
	}
	r := a.ex
	if r == nil || b.Slot <= r.applied {
		return
	}
	if b.Slot > r.applied+1 {
		if len(r.ahead) < 4 {
			r.ahead[b.Slot] = b
		}
		return
	}
	if b.Epoch != r.epoch || r.fetching {
		return
	}
	if r.cur != nil {
		// One run per slot: a second batch for the slot (a restarted
		// primary's) is not run here; the verifiers' rule settles it.
		return
	}
	a.execute(b, false, nil)
}

// execute runs b on a copy-on-write checkpoint of the committed state
// (speculative) or, for a rollback (seq), sequentially in batch order.
func (a *Eve) execute(b *batch, seq bool, dec *decision) {
	r := a.ex
	x := &execution{b: b, digest: b.digest(), seq: seq, dec: dec, id: a.nextEffect()}
	x.skip = r.skips(b)
	x.spec = a.checkpoint(r.st)
	r.cur = x
	job := &execJob{
		Slot: b.Slot, State: x.spec, Svc: a.confSvc, Entries: b.Entries, Skip: x.skip,
		Sequential: seq, Cores: a.cores, ExecCost: a.execCost, HashCost: a.hashCost, Cost: a.cost, WorkPerMs: a.workPerMs,
		Corrupt: a.corrupt && !seq,
	}
	a.startEffect(x.id, job)
}

// onExecuted receives an execution's results and end hash.
func (a *Eve) onExecuted(id uint64, res *execResult) {
	r := a.ex
	x := r.cur
	if r == nil || x == nil || x.id != id {
		return // a stale run: rolled back, transferred over, or of an earlier incarnation
	}
	x.done, x.res = true, res.Results
	if !x.seq {
		a.stats.ParallelBatches += res.Batches
		a.stats.Requests += len(x.b.Entries)
		a.stats.Executions++
		a.stats.ExecTime += res.Makespan
	}
	if x.seq {
		// Sequential re-execution needs no second verification: it is
		// deterministic (§2.2.3).
		a.applySlot(x.dec, x.spec, x.b, x.res, x.skip)
		return
	}
	x.tok = token{Slot: x.b.Slot, Epoch: x.b.Epoch, Batch: x.digest, Start: r.hash,
		End: endHash(res.Root, x.res), Replica: a.cfg.Self}
	x.tok.sign(a.macKey)
	// The speculative state is durable before its token leaves: a commit
	// of this claim must find a replica that can apply it after crashes.
	a.persistSpec(x)
	a.sendAll(a.vers, &message{Kind: kindToken, Token: x.tok})
	if a.ext != nil {
		a.ext.Executed(a, x.spec)
	}
	if a.proto.earlyReply {
		for i, en := range x.b.Entries {
			if en.Origin == a.cfg.Self && !x.skip[i] {
				a.answer(en.Req.ID, x.res[i], x.b.Slot)
			}
		}
	}
	if d := r.waitDec; d != nil && d.Slot == x.b.Slot {
		r.waitDec = nil
		a.applyDecision(d)
	}
}

// endHash is a token's end hash: the state root and the batch's results.
func endHash(root [32]byte, res []service.Result) [32]byte {
	e := wire.Encoder{B: append([]byte("eve-end\x00"), root[:]...)}
	for _, x := range res {
		service.EncodeResult(&e, x)
	}
	return sha256.Sum256(e.B)
}

// checkpoint returns a copy of st for speculative execution: copy-on-write
// for the sharded KV (service.ShardedState.Checkpoint), Clone or a
// snapshot otherwise.
func (a *Eve) checkpoint(st service.State) service.State {
	switch s := st.(type) {
	case *service.ShardedState:
		return s.Checkpoint()
	case interface{ Clone() service.State }:
		return s.Clone()
	}
	c := a.stateSvc.NewState()
	if err := c.Restore(st.Snapshot()); err != nil {
		panic("eve: a state does not restore its own snapshot: " + err.Error())
	}
	return c
}
