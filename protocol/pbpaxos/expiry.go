package pbpaxos

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Expiry (issue 17 item 2; the rules are service/kv_doc.go's "Expiry").
// The leader executes every request itself (seed 002 VI.A.2) and the
// replicas install its resulting state (a delta or the whole state carries
// the deadlines and the state's clock), so they agree on what expired
// whatever their clocks. What is left to decide, the seed being silent on
// time, is the same as for Multi-Paxos (protocol/paxos/expiry.go):
//
//   - The leader's time is its service.LeaderClock estimate (its own
//     requests' arrival times, advanced by ticks, never behind the state it
//     executes on). With state=replay it is logged beside each request
//     (the environment, as for a nondeterministic service), and every
//     replica replays with it.
//   - Reads the leader serves (X-Paxos and log reads) evaluate expiry at
//     the estimate; a follower's local read at its own arrival time.
//   - Active expiry: every expiry_period (in heartbeats) the leader
//     proposes service.ActiveExpire(expiryBatch) like a client write when a
//     deadline of its tentative state has passed, one at a time, under the
//     reserved client id expiryClient with a sequence number at least the
//     next instance (the duplicate table refuses a request older than its
//     client's latest). Nobody is answered.
//   - Clock assumption: as for Multi-Paxos, skew moves the moment a key
//     expires, never the agreement; reads stay linearizable while the skew
//     between successive leaders stays below an election's duration.
type expiry struct {
	clock    service.LeaderClock
	seq      uint64
	inflight automaton.RequestID
}

// expiryClient is the client id of active expiry requests.
const expiryClient uint64 = 0xe791_5e00_0ac7_1fe1

// expiryBatch bounds the keys one active expiry operation removes.
const expiryBatch = 512

// observeTime takes the time of a request that reached this node directly.
func (a *PBPaxos) observeTime(env service.Env) { a.exp.clock.Observe(env) }

// execState is the state the leader executes on: its tentative state when
// it has one.
func (a *PBPaxos) execState() service.State {
	if a.tent != nil {
		return a.tent.st
	}
	return a.sm.st
}

// logEnv is the environment req executes with at the leader (and, with
// state=replay, at every replica).
func (a *PBPaxos) logEnv(req automaton.Request) service.Env {
	return a.exp.clock.Stamp(a.cfg.Service, a.execState(), req.Env)
}

// readEnv is the environment of a read served from this replica's state.
func (a *PBPaxos) readEnv(req automaton.Request) service.Env {
	if a.role != leader {
		return req.Env
	}
	return a.logEnv(req)
}

// expiryTick runs at every heartbeat tick (see the type's comment).
func (a *PBPaxos) expiryTick() {
	if !service.UsesTime(a.cfg.Service) {
		return
	}
	period := a.exp.clock.Tick(a.prm.heartbeat, a.ticksOf(a.prm.expiryPeriod))
	if !period || a.role != leader || !a.ready || a.pending[a.exp.inflight] != nil || !a.exp.clock.Due(a.execState()) {
		return
	}
	a.exp.seq = max(a.exp.seq+1, a.next)
	id := automaton.RequestID{Client: expiryClient, Seq: a.exp.seq}
	p := &pend{req: automaton.Request{ID: id, Op: service.ActiveExpire(expiryBatch)}}
	a.pending[id] = p
	a.exp.inflight = id
	a.lead(p)
}
