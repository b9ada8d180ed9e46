package sim

import (
	"container/heap"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/check"
	"github.com/synod-dev/synod/service"
)

// ESDS support (the ESDS thesis): services other than kv, ESDS request options,
// quiescence and final orders.
//
// For a protocol whose automaton.ConsistencyOf is EventuallySerializable, each
// client operation gets an OpID ("<client id as 16 hex digits>-<seq>", the
// form ESDS derives and the gateway assigns), is strict with probability
// Config.StrictFrac, and with probability Config.PrevProb names in its prev
// set one earlier operation that completed: the client's own last completed
// one, or (half the time) a random operation completed by any client. After
// the last operation, once every fault is healed, the run continues for up to
// Config.SettleTime of virtual time so that gossip quiesces, checking every
// 100ms whether every replica reports the same final order; then each
// replica's FinalOrder is collected and check.ESDS judges the history.
//
// Automata expose their final order through this optional interface (see
// package protocol/esds); RecordOrder, if present, is called before Start so
// that the order stays complete across garbage collection and restarts.
type finalOrderer interface{ FinalOrder() []string }

// replicaReporter is implemented by automata that may hold no replica (an
// ESDS node that runs only a front end): those are left out of the final
// orders.
type replicaReporter interface{ IsReplica() bool }
type orderRecorder interface{ RecordOrder() }

// localReader is implemented by automata that may answer non-strict reads
// without ordering them (protocol/esds, reads=local): the checker then
// accepts such reads outside the order (check.ESDSOptions.LocalReads).
type localReader interface{ AnswersReadsLocally() bool }

// DefaultSettleTime bounds the quiescence phase of ESDS runs.
const DefaultSettleTime = 10 * time.Second

// serviceMixes are the operation kinds the simulated clients draw, per service,
// and the default mix.
var serviceMixes = map[string]serviceMix{
	"kv":      {[]string{"get", "set", "del", "exists"}, DefaultMix},
	"counter": {[]string{"read", "add"}, "read:1,add:2"},
	"string":  {[]string{"read", "append"}, "read:1,append:2"},
	GridMatchmakerService: {[]string{"advertise", "submit", "balance", "available"},
		"advertise:3,submit:3,balance:2,available:1"}, // gridmatchmaker.go
}

// esdsMode reports whether the protocol is checked as eventually serializable.
func esdsMode(protocol string) bool {
	c, err := automaton.ConsistencyOf(protocol)
	return err == nil && c == automaton.EventuallySerializable
}

// serviceMix is a service's operation kinds and default mix.
type serviceMix struct {
	kinds []string
	def   string
}

// mixOf returns a service's operation kinds and default mix: the table
// above, or what a user's service declares (service.Simulated).
func mixOf(name string) (serviceMix, bool) {
	if m, ok := serviceMixes[name]; ok {
		return m, true
	}
	var m serviceMix
	svc, err := service.Lookup(name)
	if err != nil {
		return m, false
	}
	sim, ok := svc.(service.Simulated)
	if !ok {
		return m, false
	}
	m.def = sim.SimMix()
	if m.def == "" { // e.g. an orca namespace whose types declare no TypeSim
		return m, false
	}
	for _, part := range strings.Split(m.def, ",") {
		k, _, _ := strings.Cut(strings.TrimSpace(part), ":")
		m.kinds = append(m.kinds, k)
	}
	return m, true
}

// mixKinds is mixOf's kinds (nil: the service cannot be simulated).
func mixKinds(name string) []string {
	m, _ := mixOf(name)
	return m.kinds
}

// userService reports whether the namespace runs a user's service driven
// through service.Simulated (not one with a generator of its own here).
func (s *simulator) userService() bool {
	_, sim := s.svc.(service.Simulated)
	_, builtin := serviceMixes[s.cfg.Service]
	return sim && !builtin
}

// genServiceOp draws an operation of a non-kv service.
func (s *simulator) genServiceOp(c *client, kind string) service.Op {
	if sim, ok := s.svc.(service.Simulated); ok {
		if _, builtin := serviceMixes[s.cfg.Service]; !builtin {
			return sim.SimOp(kind, s.rngClient, s.cfg.Keys, c.idx, c.ops)
		}
	}
	if s.cfg.Service == MatchmakerService {
		return s.genMatchmakerOp(c, kind)
	}
	if s.cfg.Service == GridMatchmakerService {
		return s.genGridMatchmakerOp(c, kind)
	}
	switch kind {
	case "add":
		return service.Op{Kind: "add", Args: [][]byte{[]byte(strconv.Itoa(1 + s.rngClient.Intn(9)))}}
	case "append":
		return service.Op{Kind: "append", Args: [][]byte{[]byte(fmt.Sprintf("<%d.%d>", c.idx, c.ops))}}
	}
	return service.Op{Kind: kind}
}

// drawESDSOptions draws the eventually-serializable request options of the
// client's next request (automaton.OptStrict, automaton.OptPrev); the op id
// is the protocol's assigned one (automaton.OptOpID's Assign).
func (s *simulator) drawESDSOptions(c *client) {
	if s.cfg.StrictFrac > 0 && s.rngClient.Float64() < s.cfg.StrictFrac {
		c.req.Opts.Set(automaton.OptStrict, automaton.BoolOption(true))
	}
	if s.cfg.PrevProb > 0 && s.rngClient.Float64() < s.cfg.PrevProb {
		if c.lastDone != "" && s.rngClient.Intn(2) == 0 {
			c.req.Opts.Set(automaton.OptPrev, []string{c.lastDone})
		} else if len(s.completedIDs) > 0 {
			c.req.Opts.Set(automaton.OptPrev, []string{s.completedIDs[s.rngClient.Intn(len(s.completedIDs))]})
		}
	}
}

// noteCompleted remembers an operation that completed, for later prev sets.
func (s *simulator) noteCompleted(c *client) {
	id := c.req.Opts.String(automaton.OptOpID)
	if !s.esds || id == "" {
		return
	}
	c.lastDone = id
	s.completedIDs = append(s.completedIDs, id)
}

// settle runs the quiescence phase and returns every replica's final order.
func (s *simulator) settle() (map[string][]string, error) {
	end := s.now + s.cfg.SettleTime
	next := s.now
	for s.err == nil && s.invErr == "" {
		if s.now >= next {
			next = s.now + 100*time.Millisecond
			if orders, ok := s.finalOrders(); ok && converged(orders) {
				return orders, nil
			}
		}
		if s.now >= end || len(s.q) == 0 {
			break
		}
		e := popEvent(&s.q)
		s.now = e.at
		s.stats.Events++
		if s.stats.Events > s.cfg.MaxEvents {
			s.fail("more than %d events while settling", s.cfg.MaxEvents)
			break
		}
		s.handle(e)
	}
	if s.err != nil {
		return nil, s.err
	}
	orders, ok := s.finalOrders()
	if !ok {
		return nil, fmt.Errorf("sim seed %d: protocol %s does not expose FinalOrder", s.cfg.Seed, s.cfg.Protocol)
	}
	return orders, nil // not converged: the checker says so
}

func (s *simulator) finalOrders() (map[string][]string, bool) {
	out := map[string][]string{}
	for _, n := range s.nodes {
		if !n.up || n.a == nil {
			continue
		}
		if r, ok := n.a.(replicaReporter); ok && !r.IsReplica() {
			continue
		}
		f, ok := n.a.(finalOrderer)
		if !ok {
			return nil, false
		}
		out[string(n.id)] = f.FinalOrder()
	}
	return out, len(out) > 0
}

func converged(orders map[string][]string) bool {
	var first []string
	names := make([]string, 0, len(orders))
	for n := range orders {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		if i == 0 {
			first = orders[n]
		} else if !reflect.DeepEqual(first, orders[n]) {
			return false
		}
	}
	return true
}

// checkESDS settles the run and judges it with check.ESDS.
func (s *simulator) checkESDS(res *Result) error {
	orders, err := s.settle()
	if err != nil {
		return err
	}
	var opt check.ESDSOptions
	for _, n := range s.nodes {
		if lr, ok := n.a.(localReader); ok && lr.AnswersReadsLocally() {
			opt.LocalReads = true
		}
	}
	rep, err := check.ESDSWith(res.History, orders, s.svc, opt)
	if err != nil {
		return fmt.Errorf("sim seed %d: checking the history: %w", s.cfg.Seed, err)
	}
	res.ESDS = rep
	res.Violation = !rep.Ok
	return nil
}

func popEvent(q *eventQueue) *event { return heap.Pop(q).(*event) }
