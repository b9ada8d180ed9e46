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
}

func newMachine(svc service.Service) *machine {
	return &machine{svc: svc, st: svc.NewState(), clients: proto.Sessions[service.Result]{}}
}

// lookup returns the recorded result of an executed write.
func (m *machine) lookup(id automaton.RequestID) (service.Result, bool) {
	return m.clients.Lookup(id)
}

// apply executes req (chosen at instance i) once. Reads are not recorded:
// running one again changes nothing.
func (m *machine) apply(req automaton.Request, i uint64) service.Result {
	if m.svc.IsRead(req.Op) {
		return m.st.Apply(req.Op)
	}
	s, _ := m.clients.Row(req.ID.Client, dedupWindow)
	if r, ok := s.Get(req.ID.Seq); ok {
		return r
	}
	if s.Forgotten(req.ID.Seq) {
		return service.Errorf("ERR request %v is older than this client's deduplication window (%d writes); its outcome is unknown", req.ID, dedupWindow)
	}
	r := m.st.Apply(req.Op)
	s.Record(req.ID.Seq, r, 0, dedupWindow)
	return r
}
