package paxos

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Expiry (issue 17 item 2; the rules are service/kv_doc.go's "Expiry"):
// for a service whose operations read the time (service.UsesTime: KV's
// deadlines), the leader chooses the time and it goes into the log entry
// beside the command, so every replica applies the same time and agrees on
// what expired. The seeds are silent on time; the decisions:
//
//   - Whose clock. The leader's estimate (service.LeaderClock): the latest
//     Env.Time of the requests that reached it, directly or forwarded by
//     a follower (the follower's clock read on arrival), advanced by one
//     heartbeat at every tick, never behind the state's clock. So a
//     request is stamped no earlier than its arrival at the node the
//     client reached, whichever node leads (a new leader no client talks
//     to directly included), and no later than the fastest node's clock:
//     a follower whose clock is ε fast moves deadlines by up to ε, the
//     skew assumption below. (Before issue 34, a follower's time entered
//     only while the leader had none, and a leader reached only through
//     followers fell ~19 s behind under load on pbpaxos, which shares
//     this clock.)
//   - Reads at the leader (quorum and lease reads) evaluate expiry at the
//     same estimate; a follower's local read at its own arrival time.
//   - Active expiry. Every expiry_period (rounded up to heartbeats) the
//     leader looks at the earliest deadline of its executed state; when
//     its estimate has passed it, it proposes the internal operation
//     service.ActiveExpire(expiryBatch) through the log like a client
//     write, one at a time, under the reserved client id expiryClient with
//     a sequence number that grows with the log (at least the instance the
//     leader would propose next), so the deduplication table never
//     mistakes one for another. No client is answered; the keys it
//     removed are announced at the proposing node (automaton.Announce,
//     announceExpired), whose gateway turns them into Redis's "expired"
//     keyspace events for every node (gateway/notify.go). Keys past their
//     deadline are already invisible to every operation the leader
//     stamps, so active expiry reclaims memory and makes followers' local
//     reads and INFO keyspace agree; a namespace without deadlines gets no
//     extra log entries.
//   - Clock assumption. A key expires when the leader's estimate passes its
//     deadline; skew between nodes moves that moment, never the agreement
//     (the time is in the log, and the state's clock never goes back, so a
//     slower new leader does not resurrect a key a write saw expired). A
//     read served by an old leader with a faster clock may see a key
//     expired that a slower new leader's next write still sees: expiry is
//     linearizable while the skew between successive leaders stays below
//     the time an election takes (the lease reads' assumption too).
type expiry struct {
	clock    service.LeaderClock
	inflight automaton.RequestID
}

// expiryClient is the client id of active expiry requests (clients draw
// theirs at random from 2^64).
const expiryClient uint64 = 0xe791_5e00_0ac7_1fe0

// expiryBatch bounds the keys one active expiry operation removes.
const expiryBatch = 512

// observeTime takes the time of a request that reached this node, directly
// or from another node (service.LeaderClock's max rule).
func (a *Paxos) observeTime(env service.Env) { a.exp.clock.Observe(env) }

// logEnv is the environment the leader logs beside req's command: the
// request's own for a nondeterministic service, the leader's time for one
// that reads the time.
func (a *Paxos) logEnv(req automaton.Request) service.Env {
	return a.exp.clock.Stamp(a.cfg.Service, a.sm.st, req.Env)
}

// readEnv is the environment of a read served from this replica's state:
// at the leader, its time.
func (a *Paxos) readEnv(req automaton.Request) service.Env {
	if a.role != leader {
		return req.Env
	}
	return a.logEnv(req)
}

// expiryTick runs at every heartbeat tick: it advances the estimate and,
// at the leader every expiry_period, proposes active expiry when a
// deadline has passed.
func (a *Paxos) expiryTick() {
	if !service.UsesTime(a.cfg.Service) {
		return
	}
	period := a.exp.clock.Tick(a.prm.Heartbeat, a.ticksOf(a.prm.ExpiryPeriod))
	if !period || a.role != leader || !a.ready || a.pending[a.exp.inflight] != nil || !a.exp.clock.Due(a.sm.st) {
		return
	}
	id := automaton.RequestID{Client: expiryClient, Seq: a.exp.clock.NextSeq(a.next)}
	p := &pend{req: automaton.Request{ID: id, Op: service.ActiveExpire(expiryBatch)}, fwdTo: -1}
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
func (a *Paxos) announceExpired(p *pend, res service.Result) {
	if res.Type != service.ResultArray || len(res.Elems) == 0 {
		return
	}
	a.Emit(automaton.Announce{Op: p.req.Op, Result: res})
}
