package fastpaxos

import (
	"sort"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// dedupWindow is how many write results are kept per client.
const dedupWindow = 64

// session is one client's row in the deduplication table.
type session struct {
	floor uint64
	res   map[uint64]service.Result
	seqs  []uint64 // keys of res, ascending
}

// machine is the replicated state machine: the service state and the
// deduplication table, which every replica builds alike from the chosen
// instances. It is what makes execution exactly-once although Fast Paxos
// may choose one request in two instances (a resent request whose first
// votes were not lost after all): the second execution answers the first
// result and changes nothing.
type machine struct {
	svc     service.Service
	st      service.State
	clients map[uint64]*session
}

func newMachine(svc service.Service) *machine {
	return &machine{svc: svc, st: svc.NewState(), clients: map[uint64]*session{}}
}

// lookup returns the recorded result of an executed write.
func (m *machine) lookup(id automaton.RequestID) (service.Result, bool) {
	s := m.clients[id.Client]
	if s == nil {
		return service.Result{}, false
	}
	r, ok := s.res[id.Seq]
	return r, ok
}

// apply executes req (chosen at instance i) once. Reads are not recorded:
// running one again changes nothing.
func (m *machine) apply(req automaton.Request, i uint64) service.Result {
	if m.svc.IsRead(req.Op) {
		return m.st.Apply(req.Op)
	}
	s := m.clients[req.ID.Client]
	if s == nil {
		s = &session{res: map[uint64]service.Result{}}
		m.clients[req.ID.Client] = s
	}
	if r, ok := s.res[req.ID.Seq]; ok {
		return r
	}
	if req.ID.Seq < s.floor {
		return service.Errorf("ERR request %v is older than this client's deduplication window (%d writes); its outcome is unknown", req.ID, dedupWindow)
	}
	r := m.st.Apply(req.Op)
	s.res[req.ID.Seq] = r
	k := sort.Search(len(s.seqs), func(j int) bool { return s.seqs[j] > req.ID.Seq })
	s.seqs = append(s.seqs, 0)
	copy(s.seqs[k+1:], s.seqs[k:])
	s.seqs[k] = req.ID.Seq
	if len(s.seqs) > dedupWindow {
		old := s.seqs[0]
		s.seqs = s.seqs[1:]
		delete(s.res, old)
		s.floor = max(s.floor, old+1)
	}
	return r
}
