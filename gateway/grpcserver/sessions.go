package grpcserver

import (
	"context"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
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
