package eve

import (
	"sort"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Decisions at the execution replicas (the Eve/Adam thesis §2.2.3): commit; commit
// plus an incremental state transfer for a replica that did not reach the
// committed state; roll back and re-execute sequentially with a new
// primary. Replies leave only here, after the decision.

// onDecide learns a slot's decision (every role).
func (a *Eve) onDecide(from automaton.NodeID, d *decision) {
	if a.ver != nil {
		a.ver.learn(d, from != a.cfg.Self)
	}
	a.learnEpoch(d.Epoch)
	r := a.ex
	if r == nil || d.Slot <= r.applied {
		return
	}
	if d.Slot > r.applied+1 {
		a.startFetch(d) // missed decisions: catch up by state transfer
		return
	}
	a.applyDecision(d)
}

// applyDecision applies the decision for slot applied+1.
func (a *Eve) applyDecision(d *decision) {
	r := a.ex
	x := r.cur
	if x != nil && x.b.Slot != d.Slot {
		x = nil
	}
	switch d.Kind {
	case decNoop:
		a.stats.Noops++
		r.cur = nil
		a.applySlot(d, r.st, nil, nil, nil)
	case decRollback:
		if x != nil && x.seq {
			return // re-executing already
		}
		a.stats.Rollbacks++
		a.execute(d.Batch, true, d)
	case decCommit:
		switch {
		case x != nil && !x.seq && x.digest == d.Claim.Batch && !x.done:
			r.waitDec = d // our run of the committed batch is still going
		case x != nil && x.done && !x.seq && (x.tok.claim() == d.Claim || a.proto.ownState):
			a.stats.Commits++
			a.applySlot(d, x.spec, x.b, x.res, x.skip)
		default:
			// Outvoted or missing: repair from a replica that reached
			// the committed state.
			a.startFetch(d)
		}
	}
}

// applySlot makes st the committed state after slot d.Slot and answers the
// slot's requests.
func (a *Eve) applySlot(d *decision, st service.State, b *batch, res []service.Result, skip []bool) {
	r := a.ex
	if d.Epoch != r.epoch {
		r.queue, r.queued = nil, map[automaton.RequestID]bool{} // no longer the primary's
	}
	r.cur, r.waitDec, r.fetching = nil, nil, false
	r.st, r.applied, r.epoch = st, d.Slot, d.Epoch
	r.hash = service.StateHash(st)
	r.end = endHash(r.hash, res)
	r.lastOwn = nil
	if b != nil {
		r.lastOwn = d
	}
	if b != nil {
		for i, en := range b.Entries {
			if !skip[i] && !a.deferred(res[i]) {
				r.dups[en.Req.ID.Client] = dupEntry{seq: en.Req.ID.Seq, res: res[i]}
			}
		}
	}
	a.persistReplica()
	if b != nil {
		for i, en := range b.Entries {
			var out service.Result
			if skip[i] {
				var ok bool
				if out, ok = r.answered(en.Req.ID); !ok {
					continue // an older request of a client that moved on
				}
			} else if out = res[i]; a.deferred(out) {
				continue // the request goes on in a later slot
			}
			if en.Origin == a.cfg.Self || !a.isExecSet[en.Origin] && a.primaryOf(b.Epoch) == a.cfg.Self {
				a.replyTo(en.Origin, en.Req.ID, out, d.Slot)
			}
		}
	}
	a.answerFromTable()
	if a.ext != nil {
		a.ext.Applied(a)
	}
	a.afterApply()
}

// deferred reports a result that answers no client yet (Ext.Deferred).
func (a *Eve) deferred(res service.Result) bool {
	return a.ext != nil && a.ext.Deferred(res)
}

// afterApply starts what waited on the slot: the next batch seen early,
// the primary's next batch, requests waiting at the origin.
func (a *Eve) afterApply() {
	r := a.ex
	for s := range r.ahead {
		if s <= r.applied {
			delete(r.ahead, s)
		}
	}
	r.aheadTicks = 0
	if b := r.ahead[r.applied+1]; b != nil {
		delete(r.ahead, b.Slot)
		a.onBatch(b)
	}
	a.reforward()
	a.cutBatch()
}

// startFetch asks a replica that holds the decided state for a transfer;
// the candidates are those whose tokens matched, else every replica.
func (a *Eve) startFetch(d *decision) {
	r := a.ex
	var from []automaton.NodeID
	if d != nil && d.Kind == decCommit {
		for _, t := range d.Tokens {
			if t.Replica != a.cfg.Self {
				from = append(from, t.Replica)
			}
		}
	}
	for _, n := range a.execs {
		if n != a.cfg.Self {
			from = append(from, n)
		}
	}
	if len(from) == 0 {
		return
	}
	r.cur, r.waitDec = nil, nil
	r.fetching, r.fetchFrom, r.fetchTicks = true, from, 0
	a.sendFetch()
}

func (a *Eve) sendFetch() {
	r := a.ex
	m := &message{Kind: kindFetch, Slot: r.applied}
	if s, ok := r.st.(*service.ShardedState); ok {
		m.Roots = s.ShardRoots()
	}
	a.send(r.fetchFrom[r.fetchTicks%len(r.fetchFrom)], m)
}

// onFetch answers a replica behind this one with the shards that differ
// from its roots (the Merkle diff), or a snapshot.
func (a *Eve) onFetch(from automaton.NodeID, m *message) {
	r := a.ex
	if r == nil || r.applied <= m.Slot {
		return
	}
	t := &message{Kind: kindTransfer, Slot: r.applied, Epoch: r.epoch, Hash: r.hash, Dups: r.encodeDups()}
	if s, ok := r.st.(*service.ShardedState); ok && len(m.Roots) == s.Shards() {
		diff := s.DiffShards(m.Roots)
		a.stats.ShardsSent += len(diff)
		t.State = s.ExportShards(diff)
	} else {
		t.State, t.Full = r.st.Snapshot(), true
	}
	a.send(from, t)
}

// onTransfer installs a transfer when it brings this replica forward and
// its state hashes to what the sender announced.
func (a *Eve) onTransfer(from automaton.NodeID, m *message) {
	r := a.ex
	if r == nil || m.Slot <= r.applied {
		return
	}
	var st service.State
	if m.Full {
		st = a.stateSvc.NewState()
		if st.Restore(m.State) != nil {
			return
		}
	} else {
		s, ok := r.st.(*service.ShardedState)
		if !ok {
			return
		}
		c := s.Checkpoint()
		if c.ImportShards(m.State) != nil {
			return
		}
		st = c
	}
	dups, err := decodeDups(m.Dups)
	if err != nil || service.StateHash(st) != m.Hash {
		return // stale roots or a bad sender: the next tick asks again
	}
	r.fetching = false
	r.dups = dups
	a.stats.Transfers++
	a.applySlot(&decision{Slot: m.Slot, Epoch: m.Epoch}, st, nil, nil, nil)
}

// replicaTick retransmits the token of an undecided run and fetches.
func (a *Eve) replicaTick() {
	r := a.ex
	if r.fetching || r.cur == nil {
		// Idle: report the applied slot (a lost Decide comes back).
		a.sendAll(a.vers, &message{Kind: kindComplain, OK: true, Slot: r.applied, Epoch: r.epoch})
	}
	switch {
	case r.fetching:
		r.fetchTicks++
		a.sendFetch()
	case r.cur != nil && r.cur.done && !r.cur.seq:
		a.sendAll(a.vers, &message{Kind: kindToken, Token: r.cur.tok})
		if a.isPrimary() && r.cur.b.Epoch == r.epoch {
			a.sendAll(a.batchTargets(), &message{Kind: kindBatch, Batch: r.cur.b}) // lost batches
		}
	case len(r.ahead) > 0:
		if r.aheadTicks++; r.aheadTicks >= 2 {
			a.startFetch(nil) // batches for later slots: decisions were lost
		}
	}
}

func (r *replica) encodeDups() []byte {
	cs := make([]uint64, 0, len(r.dups))
	for c := range r.dups {
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i] < cs[j] })
	var e wire.Encoder
	e.Uvarint(uint64(len(cs)))
	for _, c := range cs {
		e.Uvarint(c)
		e.Uvarint(r.dups[c].seq)
		service.EncodeResult(&e, r.dups[c].res)
	}
	return e.B
}

func decodeDups(b []byte) (map[uint64]dupEntry, error) {
	d := wire.NewDecoder(b)
	n := d.Count(1<<30, 3)
	m := make(map[uint64]dupEntry, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		c := d.Uvarint()
		m[c] = dupEntry{seq: d.Uvarint(), res: service.DecodeResult(d)}
	}
	return m, d.Done()
}
