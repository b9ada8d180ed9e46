package fastpaxos

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

// dedupWindow is how many write results are kept per client.
const dedupWindow = 64

// session is one client's row in the deduplication table (proto.Session;
// Fast Paxos never evicts a row, so Last stays 0).
type session = proto.Session[service.Result]

// machine is the replicated state machine: the service state and the
// deduplication table, which every replica builds alike from the chosen
// instances. It is what makes execution exactly-once although Fast Paxos
// may choose one request in two instances (a resent request whose first
// votes were not lost after all): the second execution answers the first
// result and changes nothing.
type machine struct {
	svc     service.Service
	st      service.State
	clients proto.Sessions[service.Result]
	// closed: the clients whose session ended (automaton.SessionEnd), by
	// id, with the instance it ended at; a later write under the id is
	// refused, never executed (as protocol/paxos's machine).
	closed map[uint64]uint64
}

func newMachine(svc service.Service) *machine {
	return &machine{svc: svc, st: svc.NewState(), clients: proto.Sessions[service.Result]{}}
}

// lookup returns the recorded result of an executed write.
func (m *machine) lookup(id automaton.RequestID) (service.Result, bool) {
	return m.clients.Lookup(id)
}

// apply executes req (chosen at instance i) once. Reads are not recorded:
// running one again changes nothing. Client sessions (package doc,
// "Client sessions"): a request's bound (Unanswered) drops its client's
// outcomes below it; SessionEnd removes the client's row and leaves a
// tombstone; a write the table forgot (below the bound, or older than the
// window) or of an ended session is refused, not executed.
func (m *machine) apply(req automaton.Request, i uint64) service.Result {
	if automaton.IsSessionEnd(req.Op) {
		delete(m.clients, req.ID.Client)
		if m.closed == nil {
			m.closed = map[uint64]uint64{}
		}
		if _, ok := m.closed[req.ID.Client]; !ok {
			m.closed[req.ID.Client] = i
		}
		return service.OK()
	}
	s := m.clients[req.ID.Client]
	if s != nil && req.Unanswered > 0 {
		s.ForgetBelow(min(req.Unanswered, req.ID.Seq)) // a request waits for itself
	}
	if m.svc.IsRead(req.Op) {
		return m.st.Apply(req.Op)
	}
	if s != nil {
		if r, ok := s.Get(req.ID.Seq); ok {
			return r
		}
	}
	if r, refused := m.refused(req); refused {
		return r
	}
	if s == nil {
		s, _ = m.clients.Row(req.ID.Client, dedupWindow)
	}
	r := m.st.Apply(req.Op)
	s.Record(req.ID.Seq, r, 0, dedupWindow)
	return r
}

// refused answers a write the table can no longer run (apply): one below
// what its client still waits for, or older than its window, or of a
// client whose session ended. A proposer answers such a request at once
// (OnRequest): the acceptors do not vote again for a request chosen
// before, so a retry would otherwise wait for its time limit.
func (m *machine) refused(req automaton.Request) (service.Result, bool) {
	if automaton.IsSessionEnd(req.Op) || m.svc.IsRead(req.Op) {
		return service.Result{}, false
	}
	s := m.clients[req.ID.Client]
	if s == nil {
		if _, gone := m.closed[req.ID.Client]; gone {
			return service.Errorf("ERR request %v: its client's session ended; it was not executed", req.ID), true
		}
		return service.Result{}, false
	}
	if _, ok := s.Get(req.ID.Seq); !ok && s.Forgotten(req.ID.Seq) {
		return service.Errorf("ERR request %v is below what its client still waits for, or older than its deduplication window (%d writes): its outcome is forgotten and it was not executed", req.ID, dedupWindow), true
	}
	return service.Result{}, false
}
