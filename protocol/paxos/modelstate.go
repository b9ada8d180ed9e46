package paxos

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"unsafe"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

// The model checker's fast path (automaton.ModelStater, issue 20 item 4):
// Multi-Paxos encodes and copies its state by hand instead of mc's
// reflective walk, as protocol/abd/modelstate.go does. mc's
// TestFastPathMatchesReflective checks that both paths visit the same
// states and transitions and find the same counterexample, for paxos and
// the broken variants mc catches. A field added to Paxos (or to slot,
// flight, pend, session, machine, learner, expiry) must be added here too.
//
// Deliberately not encoded, and shared (not copied) by CloneModel:
//   - proto, cfg, prm, self, boot, sm.svc, sm.maxClients: the constants
//     of a run, the same in every state of a node (boot is an immutable
//     *conf, as every conf is: "a conf value is never modified once
//     built", membership.go). cfg.Rand aside: a copy draws from its own
//     source (automaton.ModelRand, seeded by the node's index), not the
//     parent's, which the other worker may be copying or stepping at the
//     same moment (the election delay's draw; the model's timers ignore
//     durations).
//   - index: derived from nodes (index[nodes[h]] == h); copied, not
//     encoded.
//   - rec: the Recorder of parameter observe, shared by every replica of
//     a run (nil in the models).
//   - out: the step's outputs, reset at every Step.
//   - slot.cmds: the leader's decoded copy of slot.val (proposeAt), derived
//     from val, which is encoded; shared by the copies (never changed once
//     set, only dropped). Two states that differ only in it behave alike.
//
// Encoded by content but shared by CloneModel, being replaced rather than
// changed in place: every *conf (sm.conf, p1Confs, flight.conf,
// changes[].conf), the messages of promises (kept as received), slot and
// entry values ([]byte), requests' operations and results; and the state
// machine (sm: the service state, the sessions, parts), copied only when
// the copy first changes it (machine.owner, ownMachine): most steps
// (promises, accepts, heartbeats) execute nothing, and the copy by
// Snapshot and Restore was about half of CloneModel's time.
//
// The service state is encoded by its Snapshot (service.State), which
// covers what its operations read (KV: entries, version, clock, WATCH
// versions); its transfer bookkeeping (journal, tombstone queue, Merkle
// tree), which the reflective walk also hashes, paxos never uses (no
// Delta, StateHash or ranges). It is copied by Snapshot and Restore into
// a new state rather than by KVState.Clone, which writes to the state it
// copies (tokens, shared flags): mc clones one parent on both workers at
// once, so a copy must only read its source.
//
// service.LeaderClock's fields are unexported; leaderClockFields mirrors
// them, and init checks the mirror against the real type by reflection
// (a changed LeaderClock panics at start-up rather than encoding wrong).

var _ automaton.ModelStater = (*Paxos)(nil)

// leaderClockFields mirrors service.LeaderClock's layout.
type leaderClockFields struct {
	now   int64
	ticks int
	seq   uint64
	base  int64
}

func init() {
	want := reflect.TypeOf(leaderClockFields{})
	got := reflect.TypeOf(service.LeaderClock{})
	ok := got.Size() == want.Size() && got.NumField() == want.NumField()
	for i := 0; ok && i < got.NumField(); i++ {
		g, w := got.Field(i), want.Field(i)
		ok = g.Name == w.Name && g.Type == w.Type && g.Offset == w.Offset
	}
	if !ok {
		panic(fmt.Sprintf("paxos: modelstate.go's mirror of service.LeaderClock is stale (%v vs %v)", got, want))
	}
}

func appendLeaderClock(b []byte, c *service.LeaderClock) []byte {
	f := (*leaderClockFields)(unsafe.Pointer(c))
	b = automaton.AppendModelUint(b, uint64(f.now))
	b = automaton.AppendModelUint(b, uint64(f.ticks))
	b = automaton.AppendModelUint(b, f.seq)
	return automaton.AppendModelUint(b, uint64(f.base))
}

// AppendModelState implements automaton.ModelStater.
func (a *Paxos) AppendModelState(b []byte, rename func(automaton.RequestID) automaton.RequestID) []byte {
	u := automaton.AppendModelUint
	b = automaton.AppendModelSlice(b, a.nodes, appendNodeID)
	b = appendSorted(b, a.nums, cmp.Compare[automaton.NodeID], func(b []byte, k automaton.NodeID, v uint32) []byte {
		return u(appendNodeID(b, k), uint64(v))
	})
	b = appendSorted(b, a.book, cmp.Compare[automaton.NodeID], func(b []byte, k automaton.NodeID, v member) []byte {
		return appendMember(appendNodeID(b, k), v)
	})
	b = automaton.AppendModelString(b, a.lastMembers)

	// Acceptor.
	b = appendBallot(b, a.promised)
	b = appendSorted(b, a.log, cmp.Compare[uint64], func(b []byte, i uint64, s *slot) []byte {
		b = automaton.AppendModelBool(u(b, i), s != nil)
		if s == nil {
			return b
		}
		return automaton.AppendModelBool(automaton.AppendModelBytes(appendBallot(b, s.bal), s.val), s.chosen)
	})
	b = u(u(b, a.logStart), a.maxInst)

	// Learner and state machine.
	b = u(u(u(u(b, a.chosenUpTo), a.executed), a.snapIndex), uint64(a.sinceSnap))
	b = u(u(b, uint64(a.sinceBytes)), uint64(a.snapLen))
	b = u(b, a.savedC)
	b = a.sm.appendModelState(b, rename)

	// Election.
	b = u(b, uint64(a.role))
	b = appendBallot(b, a.ballot)
	b = automaton.AppendModelBool(b, a.leaderAlive)
	b = u(u(u(b, uint64(a.aliveLeader)), uint64(a.leaderHint)), a.maxRound)
	b = appendSorted(b, a.promises, cmp.Compare[int], func(b []byte, h int, m *message) []byte {
		b = automaton.AppendModelBool(u(b, uint64(h)), m != nil)
		if m == nil {
			return b
		}
		return appendMessage(b, m, rename)
	})
	b = automaton.AppendModelSlice(b, a.p1Confs, appendConf)
	b = u(u(b, uint64(a.p1Ticks)), uint64(a.failures))

	// Leader.
	b = automaton.AppendModelBool(b, a.ready)
	b = u(b, a.next)
	b = appendSorted(b, a.inflight, cmp.Compare[uint64], func(b []byte, i uint64, f *flight) []byte {
		b = automaton.AppendModelBool(u(b, i), f != nil)
		if f == nil {
			return b
		}
		b = automaton.AppendModelSlice(b, []uint64(f.acks), automaton.AppendModelUint)
		return u(appendConf(b, f.conf), f.sent)
	})
	b = automaton.AppendModelSlice(b, a.ownChosen, func(b []byte, o ownChoice) []byte {
		return automaton.AppendModelSlice(u(b, o.i), []uint64(o.f.acks), automaton.AppendModelUint)
	})
	b = appendIDs(b, a.queue, rename)
	b = u(u(b, a.tick), a.hbRound)
	b = appendIntMap(b, a.ackRound)
	b = appendIntMap(b, a.acked)
	b = u(u(u(b, a.quorumRound), a.quorumTick), a.leaseFired)
	b = automaton.AppendModelSlice(b, a.leaseRounds, automaton.AppendModelUint)
	b = u(u(b, a.allRound[0]), a.allRound[1])
	b = appendByID(b, a.inLog, rename, func(b []byte, i uint64) []byte { return u(b, i) })
	b = automaton.AppendModelSlice(b, a.ownUnsaved, automaton.AppendModelUint)
	b = automaton.AppendModelSlice(b, a.changes, func(b []byte, c pendingChange) []byte { return appendConf(u(b, c.at), c.conf) })
	b = appendSorted(b, a.learners, cmp.Compare[automaton.NodeID], func(b []byte, id automaton.NodeID, l *learner) []byte {
		b = automaton.AppendModelBool(appendNodeID(b, id), l != nil)
		if l == nil {
			return b
		}
		b = u(automaton.AppendModelString(automaton.AppendModelString(b, l.peer), l.client), l.commit)
		return automaton.AppendModelBool(b, l.heard)
	})

	// Requests.
	appendPend := func(b []byte, p *pend) []byte {
		b = automaton.AppendModelBool(b, p != nil)
		if p == nil {
			return b
		}
		b = automaton.AppendModelRequest(b, &p.req, rename)
		b = automaton.AppendModelBool(b, p.local)
		b = automaton.AppendModelSlice(b, p.remote, func(b []byte, h int) []byte { return u(b, uint64(h)) })
		b = u(u(u(u(b, uint64(p.state)), uint64(p.age)), uint64(p.fwdAge)), uint64(p.fwdTo))
		b = u(u(b, p.readIndex), p.round)
		if p.state == pSettling { // (other states encode as before)
			b = automaton.AppendModelString(u(b, p.heldAt), p.held.res.String())
			b = automaton.AppendModelSlice(b, []uint64(p.knowers), automaton.AppendModelUint)
		}
		return b
	}
	b = appendByID(b, a.pending, rename, appendPend)
	b = appendByID(b, a.reads, rename, appendPend)
	b = appendIDs(b, a.fwdQ, rename)
	b = u(b, uint64(a.fwdHint))

	// Catch-up and expiry.
	b = u(u(u(u(b, uint64(a.catchupFrom)), uint64(a.catchupTicks)), a.behindTo), uint64(a.behindPeer))
	b = appendLeaderClock(b, &a.exp.clock)
	return automaton.AppendModelID(b, a.exp.inflight, rename)
}

// appendModelState encodes the replicated state machine.
func (m *machine) appendModelState(b []byte, rename func(automaton.RequestID) automaton.RequestID) []byte {
	b = automaton.AppendModelBool(b, m != nil)
	if m == nil {
		return b
	}
	b = automaton.AppendModelBool(b, m.st != nil)
	if m.st != nil {
		b = automaton.AppendModelBytes(b, m.st.Snapshot())
	}
	b = appendSorted(b, m.clients, cmp.Compare[uint64], func(b []byte, c uint64, s *session) []byte {
		b = automaton.AppendModelBool(automaton.AppendModelUint(b, c), s != nil)
		if s == nil {
			return b
		}
		b = automaton.AppendModelUint(automaton.AppendModelUint(b, s.Floor), s.Last)
		b = appendSorted(b, s.Res, cmp.Compare[uint64], func(b []byte, seq uint64, o outcome) []byte {
			return appendOutcome(automaton.AppendModelUint(b, seq), o)
		})
		return automaton.AppendModelSlice(b, s.Seqs, automaton.AppendModelUint)
	})
	b = appendConf(b, m.conf)
	b = appendSorted(b, m.closed, cmp.Compare[uint64], func(b []byte, c uint64, at uint64) []byte {
		return automaton.AppendModelUint(automaton.AppendModelUint(b, c), at)
	})
	return appendByID(b, m.parts, rename, func(b []byte, rs []service.Result) []byte {
		return automaton.AppendModelSlice(b, rs, automaton.AppendModelResult)
	})
}

// CloneModel implements automaton.ModelStater: a deep copy of the mutable
// parts; the immutable ones (listed above) are shared.
func (a *Paxos) CloneModel() automaton.Automaton {
	c := *a
	c.Out = nil
	c.cfg.Rand = automaton.ModelRand(uint64(a.self) + 1)
	c.index = maps.Clone(a.index)
	c.nodes = slices.Clone(a.nodes)
	c.nums = maps.Clone(a.nums)
	c.book = maps.Clone(a.book)
	c.log = cloneValues(a.log)
	c.sm = a.sm // shared until c changes it (ownMachine)
	c.tok = new(ownerToken)
	c.promises = maps.Clone(a.promises)
	c.p1Confs = slices.Clone(a.p1Confs)
	c.inflight = make(map[uint64]*flight, len(a.inflight))
	for i, f := range a.inflight {
		x := *f
		x.acks = slices.Clone(f.acks)
		c.inflight[i] = &x
	}
	c.ownChosen = slices.Clone(a.ownChosen)
	for k, o := range c.ownChosen {
		x := *o.f
		x.acks = slices.Clone(o.f.acks)
		c.ownChosen[k].f = &x
	}
	c.queue = slices.Clone(a.queue)
	c.ackRound = maps.Clone(a.ackRound)
	c.leaseRounds = slices.Clone(a.leaseRounds)
	c.acked = maps.Clone(a.acked)
	c.inLog = maps.Clone(a.inLog)
	c.ownUnsaved = slices.Clone(a.ownUnsaved)
	c.changes = slices.Clone(a.changes)
	c.learners = cloneValues(a.learners)
	// reads holds (some of) pending's entries: the copies keep the sharing.
	c.pending = make(map[automaton.RequestID]*pend, len(a.pending))
	for id, p := range a.pending {
		c.pending[id] = p.clone()
	}
	c.reads = make(map[automaton.RequestID]*pend, len(a.reads))
	for id, p := range a.reads {
		if q := a.pending[id]; q == p && p != nil {
			c.reads[id] = c.pending[id]
		} else {
			c.reads[id] = p.clone()
		}
	}
	c.fwdQ = slices.Clone(a.fwdQ)
	c.settling = slices.Clone(a.settling)
	return &c
}

func (p *pend) clone() *pend {
	if p == nil {
		return nil
	}
	x := *p
	x.remote = slices.Clone(p.remote)
	x.knowers = slices.Clone(p.knowers)
	return &x
}

// cloneModel copies the state machine; the service state by Snapshot and
// Restore (see above).
func (m *machine) cloneModel() *machine {
	if m == nil {
		return nil
	}
	c := *m
	if m.st != nil {
		c.st = m.svc.NewState()
		if err := c.st.Restore(m.st.Snapshot()); err != nil {
			panic(fmt.Sprintf("paxos: copying the service state: %v", err))
		}
	}
	c.clients = make(proto.Sessions[outcome], len(m.clients))
	for id, s := range m.clients {
		if s == nil {
			c.clients[id] = nil
			continue
		}
		x := *s
		x.Res = maps.Clone(s.Res)
		x.Seqs = slices.Clone(s.Seqs)
		c.clients[id] = &x
	}
	c.closed = maps.Clone(m.closed)
	if m.parts != nil {
		c.parts = make(map[automaton.RequestID][]service.Result, len(m.parts))
		for id, rs := range m.parts {
			c.parts[id] = slices.Clone(rs)
		}
	}
	return &c
}

func appendNodeID(b []byte, id automaton.NodeID) []byte {
	return automaton.AppendModelString(b, string(id))
}

func appendBallot(b []byte, x Ballot) []byte {
	return automaton.AppendModelUint(automaton.AppendModelUint(b, x.Round), uint64(x.Node))
}

func appendMember(b []byte, m member) []byte {
	b = automaton.AppendModelUint(appendNodeID(b, m.ID), uint64(m.Num))
	return automaton.AppendModelString(automaton.AppendModelString(b, m.Peer), m.Client)
}

func appendConf(b []byte, c *conf) []byte {
	b = automaton.AppendModelBool(b, c != nil)
	if c == nil {
		return b
	}
	b = automaton.AppendModelSlice(b, c.members, appendMember)
	return automaton.AppendModelUint(automaton.AppendModelUint(b, uint64(c.nextNum)), c.epoch)
}

func appendOutcome(b []byte, o outcome) []byte {
	b = automaton.AppendModelResult(b, o.res)
	return automaton.AppendModelSlice(b, o.results, automaton.AppendModelResult)
}

// appendMessage encodes every field of a message (as the reflective walk
// does, not only those its kind uses).
func appendMessage(b []byte, m *message, rename func(automaton.RequestID) automaton.RequestID) []byte {
	u := automaton.AppendModelUint
	b = append(b, m.Kind)
	b = automaton.AppendModelBool(appendBallot(b, m.Ballot), m.OK)
	b = appendBallot(b, m.Promised)
	b = u(u(u(u(b, m.From), m.To), m.Commit), m.Round)
	b = automaton.AppendModelSlice(b, m.Entries, func(b []byte, e entry) []byte {
		b = appendBallot(u(b, e.I), e.Ballot)
		return automaton.AppendModelBytes(automaton.AppendModelBool(b, e.Chosen), e.Value)
	})
	b = automaton.AppendModelSlice(b, m.Acks, automaton.AppendModelUint)
	b = automaton.AppendModelBytes(u(b, m.Index), m.Data)
	b = automaton.AppendModelRequest(b, &m.Req, rename)
	b = automaton.AppendModelResult(b, m.Result)
	return automaton.AppendModelSlice(b, m.Results, automaton.AppendModelResult)
}

func appendIDs(b []byte, ids []automaton.RequestID, rename func(automaton.RequestID) automaton.RequestID) []byte {
	return automaton.AppendModelSlice(b, ids, func(b []byte, id automaton.RequestID) []byte {
		return automaton.AppendModelID(b, id, rename)
	})
}

func appendIntMap(b []byte, m map[int]uint64) []byte {
	return appendSorted(b, m, cmp.Compare[int], func(b []byte, k int, v uint64) []byte {
		return automaton.AppendModelUint(automaton.AppendModelUint(b, uint64(k)), v)
	})
}

// appendSorted encodes a map: whether it is nil, its size, and its entries
// in key order.
func appendSorted[K comparable, V any](b []byte, m map[K]V, order func(K, K) int, f func([]byte, K, V) []byte) []byte {
	if m == nil {
		return append(b, 0xfe)
	}
	b = automaton.AppendModelUint(append(b, 0xff), uint64(len(m)))
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, order)
	for _, k := range ks {
		b = f(b, k, m[k])
	}
	return b
}

// appendByID encodes a map keyed by request ids, in the order of their
// renamings (the client renaming of symmetry reduction).
func appendByID[V any](b []byte, m map[automaton.RequestID]V, rename func(automaton.RequestID) automaton.RequestID, f func([]byte, V) []byte) []byte {
	if m == nil {
		return append(b, 0xfe)
	}
	ps := automaton.ModelRenamedKeys(m, rename)
	b = automaton.AppendModelUint(append(b, 0xff), uint64(len(ps)))
	for _, p := range ps {
		b = f(automaton.AppendModelID(b, p.Renamed, nil), m[p.ID])
	}
	return b
}

// cloneValues copies a map of pointers and the values they point to.
func cloneValues[K comparable, V any](m map[K]*V) map[K]*V {
	if m == nil {
		return nil
	}
	c := make(map[K]*V, len(m))
	for k, v := range m {
		if v != nil {
			x := *v
			v = &x
		}
		c[k] = v
	}
	return c
}

// The invariant checker's fast path (automaton.ModelCheckerStater): its
// memory is part of the model's state. A reference to an incarnation that
// is up encodes as its node's index; one to a crashed node's last
// incarnation (kept by nodes, tentChosen and tentPrefix until that node's
// next incarnation steps, or the crash retracts it) encodes as that
// automaton's node and whole state, as the reflective walk hashes it, so both
// paths tell the same states apart also under crashes (abd's checker
// merges them instead: mc/doc.go, "Fingerprints and copies").

var _ automaton.ModelCheckerStater = (*invariantChecker)(nil)

// AppendModelState implements automaton.ModelCheckerStater.
func (c *invariantChecker) AppendModelState(b []byte, ref func(automaton.Automaton) int, rename func(automaton.RequestID) automaton.RequestID) []byte {
	u := automaton.AppendModelUint
	appendRef := func(b []byte, a *Paxos) []byte {
		if a == nil {
			return append(b, 0xfe)
		}
		if i := ref(a); i >= 0 {
			return u(append(b, 0xfd), uint64(i))
		}
		return a.AppendModelState(appendNodeID(append(b, 0xfc), a.cfg.Self), rename)
	}
	instMap := func(b []byte, m map[uint64]uint64) []byte {
		return appendSorted(b, m, cmp.Compare[uint64], func(b []byte, i, d uint64) []byte { return u(u(b, i), d) })
	}
	tentMap := func(b []byte, t tentative) []byte {
		return appendSorted(b, t.of, cmp.Compare[uint64], func(b []byte, i uint64, a *Paxos) []byte { return appendRef(u(b, i), a) })
	}
	b = instMap(b, c.chosen)
	b = instMap(b, c.prefix)
	b = tentMap(b, c.tentChosen)
	b = tentMap(b, c.tentPrefix)
	b = appendSorted(b, c.incarnation, cmp.Compare[automaton.NodeID], func(b []byte, id automaton.NodeID, a *Paxos) []byte {
		return appendRef(appendNodeID(b, id), a)
	})
	b = appendSorted(b, c.leaders, ballotOrder, func(b []byte, x Ballot, id automaton.NodeID) []byte {
		return appendNodeID(appendBallot(b, x), id)
	})
	b = appendSorted(b, c.witness, cmp.Compare[automaton.NodeID], func(b []byte, id automaton.NodeID, x Ballot) []byte {
		return appendBallot(appendNodeID(b, id), x)
	})
	return appendSorted(b, c.nodes, cmp.Compare[automaton.NodeID], func(b []byte, id automaton.NodeID, r *replicaCheck) []byte {
		b = automaton.AppendModelBool(appendNodeID(b, id), r != nil)
		if r == nil {
			return b
		}
		b = appendBallot(appendRef(b, r.a), r.promised)
		b = u(u(u(b, r.chosenTo), r.execTo), r.chain)
		b = appendBallot(automaton.AppendModelBool(b, r.chainOK), r.seenBallot)
		return u(u(u(u(b, uint64(r.seenRole)), uint64(r.seenPromises)), uint64(r.seenAcked)), uint64(r.seenRounds))
	})
}

// remapRefs copies a map of references to automata, each replaced by to's.
func remapRefs[K comparable](m map[K]*Paxos, to func(*Paxos) *Paxos) map[K]*Paxos {
	if m == nil {
		return nil
	}
	n := make(map[K]*Paxos, len(m))
	for k, a := range m {
		n[k] = to(a)
	}
	return n
}

func ballotOrder(x, y Ballot) int {
	return cmp.Or(cmp.Compare(x.Round, y.Round), cmp.Compare(x.Node, y.Node))
}

// CloneChecker implements automaton.ModelCheckerStater: every map is
// copied (Check and Crashed change them in place), references to automata
// go where remap sends them.
func (c *invariantChecker) CloneChecker(remap func(automaton.Automaton) automaton.Automaton) automaton.InvariantChecker {
	to := func(a *Paxos) *Paxos {
		if a == nil {
			return nil
		}
		return remap(a).(*Paxos)
	}
	n := &invariantChecker{
		chosen:      maps.Clone(c.chosen),
		prefix:      maps.Clone(c.prefix),
		tentChosen:  tentative{of: remapRefs(c.tentChosen.of, to)},
		tentPrefix:  tentative{of: remapRefs(c.tentPrefix.of, to)},
		incarnation: remapRefs(c.incarnation, to),
		leaders:     maps.Clone(c.leaders),
		witness:     maps.Clone(c.witness),
	}
	if c.nodes != nil {
		n.nodes = make(map[automaton.NodeID]*replicaCheck, len(c.nodes))
		for id, r := range c.nodes {
			if r != nil {
				x := *r
				x.a = to(r.a)
				r = &x
			}
			n.nodes[id] = r
		}
	}
	return n
}
