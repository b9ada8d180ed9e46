package pbpaxos

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Expiry (issue 17 item 2; the rules are service/kv_doc.go's "Expiry").
// The leader executes every request itself (the Grid Services thesis VI.A.2) and the
// replicas install its resulting state (a delta or the whole state carries
// the deadlines and the state's clock), so they agree on what expired
// whatever their clocks; with state=replay the leader's time is logged
// beside each request, as a nondeterministic service's environment is.
// The rest, the seed being silent on time, is decided as for Multi-Paxos
// (protocol/paxos/expiry.go): the leader's service.LeaderClock estimate
// (the max of every arrival time reaching it, directly, forwarded or in a
// relayed X-Paxos read, and its ticks; the bound is written there) stamps
// what it executes (on its tentative state) and the reads it
// serves; active expiry proposes service.ActiveExpire every expiry_period
// under a reserved client id, and the keys it removed are announced at the
// proposing node (announceExpired) for the gateway's "expired" keyspace
// events; the same clock assumption.
type expiry struct {
	clock    service.LeaderClock
	inflight automaton.RequestID
}

// expiryClient is the client id of active expiry requests.
const expiryClient uint64 = 0xe791_5e00_0ac7_1fe1

// expiryBatch bounds the keys one active expiry operation removes.
const expiryBatch = 512

// observeTime takes the time of a request that reached this node, directly
// or from another node (service.LeaderClock's max rule).
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
	id := automaton.RequestID{Client: expiryClient, Seq: a.exp.clock.NextSeq(a.next)}
	p := &pend{req: automaton.Request{ID: id, Op: service.ActiveExpire(expiryBatch)}}
	a.pending[id] = p
	a.exp.inflight = id
	a.lead(p)
}

// announceExpired reports the keys an active expiry request removed
// (service.ActiveExpire's result) with automaton.Announce, at the node that
// proposed it, once: the request is this node's own pend, answered once
// when applied (a leader that lost its leadership before then finishes it
// with an error, which names no keys). The gateway publishes them as
// Redis's "expired" keyspace events (gateway/notify.go).
func (a *PBPaxos) announceExpired(p *pend, res service.Result) {
	if res.Type != service.ResultArray || len(res.Elems) == 0 {
		return
	}
	a.Emit(automaton.Announce{Op: p.req.Op, Result: res})
}
