package grpcserver

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// Client sessions over gRPC (api/synod.proto Request.unanswered,
// Request.end_session, Namespace.sessions; protocol/paxos "Client
// sessions"; session 51).
//
// The RESP gateway numbers its connections' requests itself and so knows
// each client id's lowest unanswered request and when the id is gone
// (gateway/sessions.go). A gRPC client picks its own (client_id, seq) and
// may retry at any node, so only it knows them: it tells the first in
// Request.unanswered (handed to the protocol as automaton.Request.Unanswered)
// and the second by a Do request with end_session (automaton.SessionEnd
// under its client_id, ordered through the namespace's log; every group
// of a sharded namespace: node/shardsession.go). A request without them
// is served as before: the protocol keeps the client's last 64 outcomes,
// and the row stays until the table's bound evicts it.
//
// Decisions: unanswered needs a client_id of the caller's (with client_id
// 0 the node picks a fresh id, whose row holds the one request anyway)
// and may not exceed seq (the request itself is unanswered); both refusals
// are INVALID_ARGUMENT. end_session needs client_id and seq and carries
// nothing else; it needs the user's access to the namespace, not a
// command permission (it changes no key); a namespace whose protocol keeps
// no sessions refuses it (FAILED_PRECONDITION, as an atomic group where
// the protocol has none: Namespace.sessions tells); only Do takes it.

// sessionFields checks in's session fields, unanswered or end_session
// (one is set), for request req identified as id.
func sessionFields(in *synodpb.Request, id automaton.RequestID, req *automaton.Request) error {
	if in.GetEndSession() {
		return refusal(synoderr.Invalid, "%s", "end_session is a request of its own, through Do (not a pipelined call)")
	}
	u := in.GetUnanswered()
	switch {
	case in.GetClientId() == 0:
		return refusal(synoderr.Invalid, "%s", "unanswered needs the request's client_id (and a pipelined call carries none)")
	case u > id.Seq:
		return refusal(synoderr.Invalid, "unanswered %d exceeds seq %d: the request itself is unanswered", u, id.Seq)
	}
	req.Unanswered = u
	return nil
}

// endSession is Do's request in, with end_session set, on namespace ns:
// automaton.SessionEnd under in's client id.
func (s *Server) endSession(ctx context.Context, ns config.Namespace, in *synodpb.Request) (automaton.Request, error) {
	switch {
	case in.GetClientId() == 0 || in.GetSeq() == 0:
		return automaton.Request{}, refusal(synoderr.Invalid, "%s", "end_session needs client_id and seq: it ends that client's session")
	case in.GetOp() != nil || len(in.GetOps()) > 0 || in.GetTxn() != nil || len(in.GetOptions()) > 0 ||
		in.GetOpId() != "" || len(in.GetPrev()) > 0 || in.GetStrict() || in.GetFanout() || in.GetUnanswered() != 0:
		return automaton.Request{}, refusal(synoderr.Invalid, "%s", "end_session carries nothing but namespace, client_id and seq")
	}
	if err := s.mayAccess(ctx, ns.Name); err != nil {
		return automaton.Request{}, err
	}
	if !automaton.SupportsSessions(ns.Protocol) {
		return automaton.Request{}, refusal(synoderr.Unsupported, "namespace %q: protocol %s keeps no client sessions (Namespace.sessions)", ns.Name, ns.Protocol)
	}
	return automaton.Request{ID: automaton.RequestID{Client: in.GetClientId(), Seq: in.GetSeq()}, Op: automaton.SessionEnd(), Checked: true}, nil
}

// The Pipeline stream's own identities (pipeline.go "Identity": the
// stream's client id and its lanes', chosen by the server as the RESP
// gateway chooses a connection's; session 52) are bounded and ended as the
// RESP gateway's are (gateway/sessions.go):
//
//   - each has at most one request in flight (the executor runs one batch
//     or one call alone at a time, a lone call holds the executor's role
//     until it is answered, a lane is held for its call), so each request
//     tells its own seq as its lowest unanswered (Unanswered): the
//     protocol keeps one outcome per id, not the window of 64;
//   - when the stream ends, its ids that sent a request which may write
//     (a read enters no table) end their sessions (automaton.SessionEnd,
//     ordered through the log) in every namespace the stream used whose
//     protocol keeps sessions, best effort, bounded by a second, on a
//     goroutine of their own: the stream's status does not wait for them.
//
// A named message's identity is the caller's (PipelineRequest.client_id):
// neither applies to it (it has no bound field of its own).

// noteOwn notes a request of the stream's own client id (or, with l, of
// lane l's) in namespace ns: the namespace among those the stream used,
// and whether the id may have written. Called by the executor (or the
// receiver holding its role, submitLone).
func (p *pipe) noteOwn(ns config.Namespace, req automaton.Request, l *pipeLane) {
	if !slices.ContainsFunc(p.usedNS, func(u config.Namespace) bool { return u.Name == ns.Name }) {
		p.usedNS = append(p.usedNS, ns)
	}
	wrote := &p.wrote
	if l != nil {
		wrote = &l.wrote
	}
	if !*wrote && mayWrite(p.s.svcs[ns.Name], req) {
		*wrote = true
	}
}

// mayWrite reports whether req under svc may enter a protocol's
// deduplication table: everything but reads (an unknown service: yes).
func mayWrite(svc service.Service, req automaton.Request) bool {
	if svc == nil {
		return true
	}
	if len(req.Ops) == 0 {
		return !svc.IsRead(req.Op)
	}
	return slices.ContainsFunc(req.Ops, func(o service.Op) bool { return !svc.IsRead(o) })
}

// endSessions ends the sessions of the stream's own ids that may have
// written, once Pipeline's goroutines are done (the executor's state is
// final and every lane is back), on a goroutine of its own.
func (p *pipe) endSessions() {
	var ids []automaton.RequestID
	if p.seq > 0 && p.wrote {
		ids = append(ids, automaton.RequestID{Client: p.client, Seq: p.seq + 1})
	}
	for len(p.lanes) > 0 {
		if l := <-p.lanes; l.seq > 0 && l.wrote {
			ids = append(ids, automaton.RequestID{Client: l.client, Seq: l.seq + 1})
		}
	}
	var nss []string
	for _, ns := range p.usedNS {
		if automaton.SupportsSessions(ns.Protocol) {
			nss = append(nss, ns.Name)
		}
	}
	if len(ids) == 0 || len(nss) == 0 {
		return
	}
	s := p.s
	go func() {
		ctx, cancel := context.WithTimeout(s.ctx, min(endSessionsTimeout, s.opts.RequestTimeout))
		defer cancel()
		var wg sync.WaitGroup
		for _, ns := range nss {
			for _, id := range ids {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s.b.Do(ctx, ns, automaton.Request{ID: id, Op: automaton.SessionEnd(), Checked: true}) // best effort: a row left stays bounded
				}()
			}
		}
		wg.Wait()
	}()
}

// endSessionsTimeout bounds a stream's endSessions (the RESP gateway's
// abortOnCloseTimeout).
const endSessionsTimeout = time.Second
