package gateway

import (
	"context"
	"sync"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
)

// Client sessions (protocol/paxos package doc, "Client sessions";
// automaton/session.go). A protocol that keeps a table of outcomes per
// client id (automaton.SupportsSessions) is told two things by the
// gateway:
//
//   - the lowest request of a client id still unanswered
//     (automaton.Request.Unanswered): every client id the gateway uses
//     has at most one request in flight (lane, commands.go), so it is the
//     request's own sequence number, set where the request is made
//     (runID, runOrdered, pipeline.go, plan.go, replyfn.go, script.go);
//     nested requests (call.go) do not set it: other caller replicas send
//     copies of their ids;
//   - that a client id is gone: when a connection closes, its client ids
//     that sent a request which may write (mayWrite: a write or a group
//     that writes) end their sessions in the
//     namespaces the connection used, by a SessionEnd request each,
//     ordered through the namespace's log (endSessions), so that every
//     replica forgets them at the same point instead of keeping their
//     outcomes for good. A client id that only read has no row to forget
//     (a protocol records writes only: protocol/paxos machine.apply), so
//     a connection that only read ends nothing: its close costs no write
//     to the log (session 51; before, every id that sent anything cost
//     one write and, with fsync, one fdatasync).
//
// Which ids wrote is noted where the id is chosen, on the goroutine that
// chooses it: the connection's own id (ownWrote) where its requests are
// made (runID, runGroup, replyAsync), a lane's (lane.wrote) beside its
// seq (runAll, runOrdered, batchAsync, pipeline).

// mayWrite reports whether a request of op (of ops, when a group) under
// svc may enter a protocol's deduplication table: everything but reads
// (an unknown service: yes).
func mayWrite(svc service.Service, op service.Op, ops []service.Op) bool {
	if svc == nil {
		return true
	}
	if len(ops) == 0 {
		return !svc.IsRead(op)
	}
	for _, o := range ops {
		if !svc.IsRead(o) {
			return true
		}
	}
	return false
}

// noteOwn notes that the connection's own client id sent a request of op
// (ops: a group) that may write.
func (c *conn) noteOwn(svc service.Service, op service.Op, ops []service.Op) {
	if !c.ownWrote.Load() && mayWrite(svc, op, ops) {
		c.ownWrote.Store(true)
	}
}

// note notes that lane l's client id sent a request of op (ops: a group)
// that may write; called beside l.seq's increment, by the goroutine that
// takes the lane.
func (l *lane) note(svc service.Service, op service.Op, ops []service.Op) {
	if !l.wrote && mayWrite(svc, op, ops) {
		l.wrote = true
	}
}

// noteNamespace remembers ns among the namespaces the connection used
// (endSessions ends its sessions there).
func (c *conn) noteNamespace(ns config.Namespace) {
	for _, u := range c.usedNS {
		if u.Name == ns.Name {
			return
		}
	}
	c.usedNS = append(c.usedNS, ns)
}

// endSessions ends the sessions of the connection's client ids that sent
// a request that may write, in every namespace it used whose protocol
// keeps sessions, and
// waits (at most abortOnCloseTimeout) for the answers, which it ignores:
// a session left open stays in the table, bounded by the protocol's limit,
// as before sessions ended.
func (c *conn) endSessions() {
	c.mu.Lock()
	c.noteNamespace(c.ns)
	nss := c.usedNS
	c.mu.Unlock()
	var ids []automaton.RequestID
	if c.seq > 0 && c.ownWrote.Load() {
		ids = append(ids, automaton.RequestID{Client: c.client, Seq: c.seq + 1})
	}
	for _, l := range c.lanes {
		if l.seq > 0 && l.wrote {
			ids = append(ids, automaton.RequestID{Client: l.client, Seq: l.seq + 1})
		}
	}
	for len(c.pl.free) > 0 { // endPipeline ran: every lane is back
		if l := <-c.pl.free; l.seq > 0 && l.wrote {
			ids = append(ids, automaton.RequestID{Client: l.client, Seq: l.seq + 1})
		}
	}
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(c.s.ctx, min(abortOnCloseTimeout, c.s.opts.RequestTimeout))
	defer cancel()
	var wg sync.WaitGroup
	for _, ns := range nss {
		if !automaton.SupportsSessions(ns.Protocol) {
			continue
		}
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := c.s.b.Do(ctx, ns.Name, automaton.Request{ID: id, Op: automaton.SessionEnd(), Checked: true})
				if err != nil {
					c.s.log.Debug("ending a closed connection's session failed", "id", c.id, "client", id.String(), "ns", ns.Name, "err", err)
				}
			}()
		}
	}
	wg.Wait()
}
