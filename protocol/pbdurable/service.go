package pbdurable

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/durability"
	"github.com/synod-dev/synod/durability/examples/counter"
	"github.com/synod-dev/synod/durability/examples/matchmaker"
	"github.com/synod-dev/synod/service"
)

// durable is a service whose state objects sit behind durability proxies
// (the Grid Services thesis IV.C.4, the rewired service): exec runs one update request as
// one atomic action (startA..commitA on every proxy) and returns the work
// its mechanisms need.
type durable interface {
	set() *durability.Set
	// exec runs a write, and records its answer in Replies; the Work
	// holds the statements and the shipped update buffer of this request.
	// A nondeterministic service reads env (the request's Env).
	exec(id automaton.RequestID, op service.Op, env service.Env) (service.Result, durability.Work, error)
	// replies is the protocol's Replies object (replies.go).
	replies() *replies
	// read answers a read from the objects (no proxy work).
	read(op service.Op) service.Result
	// snapshot and install carry the replicated objects to a new backup.
	snapshot() ([]byte, error)
	install(b []byte) error
	// fresh is what the first primary of a fresh cluster writes after
	// init (PBD.onStart): the empty objects, so that the database holds
	// this cluster's state, not a previous one's.
	fresh() (durability.Work, error)
}

// newDurable builds the durable form of svc under the mapping named m.
func newDurable(svc service.Service, m string) (durable, error) {
	switch svc.Name() {
	case "counter":
		return newCounter(m)
	case matchmaker.ServiceName:
		return newGrid(m)
	}
	return newGeneric(svc, m)
}

func counterMapping(m string) (*durability.Mapping, error) {
	b, err := counter.Mappings.ReadFile(m + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("mapping %q: no such Counter mapping (pb, db, reconstructible)", m)
	}
	return durability.ParseMapping(b)
}

// counterSvc is Synod's counter service (read, add n) on the Grid Services thesis's
// Counter (IV.D.1) behind its generated proxy.
type counterSvc struct {
	d   *counter.DurableService
	s   *durability.Set // d's proxies and Replies
	rep *replies
}

func newCounter(m string) (*counterSvc, error) {
	mp, err := counterMapping(m)
	if err != nil {
		return nil, err
	}
	d, err := counter.NewDurableService(mp)
	if err != nil {
		return nil, err
	}
	s, rep, err := withReplies(d.Set)
	return &counterSvc{d: d, s: s, rep: rep}, err
}

// withReplies is the generated set's proxies and Replies, beside them
// with the mechanism repliesMechanism chooses.
func withReplies(gen *durability.Set) (*durability.Set, *replies, error) {
	rep, rp, err := newReplies(repliesMechanism(gen))
	if err != nil {
		return nil, nil, err
	}
	return durability.NewSet(append(gen.Proxies(), rp)...), rep, nil
}

func (c *counterSvc) set() *durability.Set { return c.s }
func (c *counterSvc) replies() *replies    { return c.rep }

// exec: "add n" is the seed's Add generalised to n (GetValue, SetValue),
// bracketed by startA and commitA on every proxy.
func (c *counterSvc) exec(id automaton.RequestID, op service.Op, _ service.Env) (service.Result, durability.Work, error) {
	n, err := strconv.ParseInt(string(op.Args[0]), 10, 64)
	if err != nil {
		return service.Errorf("value is not an integer or out of range"), durability.Work{}, nil
	}
	c.s.StartA()
	v := c.d.Service.Counter.GetValue() + n
	c.d.Service.Counter.SetValue(v)
	c.rep.record(c.s, id, service.Int(v))
	w, err := c.s.CommitA()
	return service.Int(v), w, err
}

func (c *counterSvc) read(service.Op) service.Result { return service.Int(c.d.Service.Get()) }

func (c *counterSvc) snapshot() ([]byte, error) {
	return json.Marshal(c.d.Service.Counter.(*counter.CounterProxy).Object())
}

func (c *counterSvc) install(b []byte) error {
	return json.Unmarshal(b, c.d.Service.Counter.(*counter.CounterProxy).Object())
}

func (c *counterSvc) fresh() (durability.Work, error) {
	c.s.StartA()
	c.d.Service.Counter.SetValue(0)
	return c.s.CommitA()
}

// grid is the Grid Services thesis's Matchmaker (IV.D.2, durability/examples/matchmaker:
// service gridmatchmaker) behind its generated proxies: MachineQueue and
// AccountSet, each with the mechanism the mapping file chooses (pb,
// pbdb, db, reconstructible, original: matchmaker.Mappings). The service code is
// the seed's, unchanged (matchmaker.Call on the rewired Service).
type grid struct {
	d   *matchmaker.DurableService
	s   *durability.Set // d's proxies and Replies
	rep *replies
}

func newGrid(m string) (*grid, error) {
	b, err := matchmaker.Mappings.ReadFile(m + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("mapping %q: no such Matchmaker mapping (pb, pbdb, db, reconstructible, original)", m)
	}
	mp, err := durability.ParseMapping(b)
	if err != nil {
		return nil, err
	}
	d, err := matchmaker.NewDurableService(mp)
	if err != nil {
		return nil, err
	}
	s, rep, err := withReplies(d.Set)
	return &grid{d: d, s: s, rep: rep}, err
}

func (g *grid) set() *durability.Set { return g.s }
func (g *grid) replies() *replies    { return g.rep }

// exec: MachineAdvertise or JobSubmit as one atomic action (startA ..
// commitA on both proxies, as the generated DurableService methods do).
func (g *grid) exec(id automaton.RequestID, op service.Op, _ service.Env) (service.Result, durability.Work, error) {
	g.s.StartA()
	res := matchmaker.Call(g.d.Service, op)
	g.rep.record(g.s, id, res)
	w, err := g.s.CommitA()
	return res, w, err
}

func (g *grid) read(op service.Op) service.Result { return matchmaker.Call(g.d.Service, op) }

type gridSnap struct {
	Queue    *matchmaker.MachineQueue
	Accounts *matchmaker.AccountSet
}

func (g *grid) objects() gridSnap {
	return gridSnap{g.d.Service.Queue.(*matchmaker.MachineQueueProxy).Object(), g.d.Service.Accounts.(*matchmaker.AccountSetProxy).Object()}
}

func (g *grid) snapshot() ([]byte, error) { return json.Marshal(g.objects()) }

func (g *grid) install(b []byte) error {
	o := g.objects()
	*o.Queue, *o.Accounts = matchmaker.MachineQueue{}, matchmaker.AccountSet{}
	return json.Unmarshal(b, &o)
}

// fresh: nothing to write (PBD.onStart empties every table).
func (g *grid) fresh() (durability.Work, error) { return durability.Work{}, nil }

// generic is any other deterministic Synod service as one state object,
// State, whose one update method is Put(state): the service's state after
// the request (the seed's "in the extreme a full application checkpoint",
// III.A). Its mappings are written here in the mapping language.
type generic struct {
	svc  service.Service
	st   service.State
	set_ *durability.Set
	rep  *replies
}

var genericInfo = durability.ObjectInfo{
	Name:    "State",
	Updates: []durability.MethodInfo{{Name: "Put", Params: []durability.Param{{Name: "state", Kind: durability.KindBytes}}}},
}

// The State object's mappings.
const (
	statePB = `
  State:
    mechanism: replicated
    methods:
      Put: repeat
`
	stateDB = `
  State:
    mechanism: database
    init:
      - CREATE TABLE IF NOT EXISTS synod_state (id INTEGER PRIMARY KEY, state BYTEA NOT NULL)
    recover:
      - query: SELECT state FROM synod_state WHERE id = 1
        call: Put
    methods:
      Put:
        sql: INSERT INTO synod_state (id, state) VALUES (1, :state) ON CONFLICT (id) DO UPDATE SET state = excluded.state
`
)

// genericMappings are the generic service's mappings, by name: State
// and Replies (replies.go). pbdb keeps the answers, like the seed's
// accounts, in the database and the state in the backups: the mapping of
// a simulated service whose writes touch both mechanisms (commit.go).
var genericMappings = map[string]string{
	"pb":              "service: generic\nobjects:" + statePB + repliesMappings[durability.Replicated],
	"pbdb":            "service: generic\nobjects:" + statePB + repliesMappings[durability.Database],
	"db":              "service: generic\nobjects:" + stateDB + repliesMappings[durability.Database],
	"reconstructible": "service: generic\nobjects:\n  State:\n    mechanism: reconstructible\n" + repliesMappings[durability.Reconstructible],
}

func newGeneric(svc service.Service, m string) (*generic, error) {
	g := &generic{svc: svc, st: svc.NewState()}
	src, ok := genericMappings[m]
	if !ok {
		return nil, fmt.Errorf("mapping %q: no such mapping for %s (%v)", m, svc.Name(), slices.Sorted(maps.Keys(genericMappings)))
	}
	mp, err := durability.ParseMapping([]byte(src))
	if err != nil {
		return nil, err
	}
	if err := mp.Validate([]durability.ObjectInfo{genericInfo, repliesInfo}); err != nil {
		return nil, err
	}
	p, err := durability.NewProxy(genericInfo, mp.Objects["State"], durability.Hooks{
		Replay: func(method string, args []durability.Value) error {
			if method != "Put" || len(args) != 1 {
				return fmt.Errorf("State has no update method %s/%d", method, len(args))
			}
			b, err := durability.AsBytes(args[0])
			if err != nil {
				return err
			}
			return g.load(b)
		},
		Reset: func() { g.st = svc.NewState() },
		Save:  func() ([]byte, error) { return g.st.Snapshot(), nil },
		Load:  g.load,
	})
	if err != nil {
		return nil, err
	}
	rep, rp, err := newRepliesFrom(mp.Objects["Replies"])
	if err != nil {
		return nil, err
	}
	g.set_, g.rep = durability.NewSet(p, rp), rep
	return g, nil
}

func (g *generic) load(b []byte) error {
	st := g.svc.NewState()
	if err := st.Restore(b); err != nil {
		return err
	}
	g.st = st
	return nil
}

func (g *generic) set() *durability.Set { return g.set_ }
func (g *generic) replies() *replies    { return g.rep }

func (g *generic) exec(id automaton.RequestID, op service.Op, env service.Env) (service.Result, durability.Work, error) {
	g.set_.StartA()
	var res service.Result
	// Put's argument is the state after the request: the call fills the
	// recorded argument in once it has run. Only the primary executes, so
	// a nondeterministic service's choice (env) reaches the backups and
	// the database as its result.
	args := []durability.Value{nil}
	g.set_.Proxy("State").Invoke("Put", args, func() {
		res = service.ApplyEnv(g.st, op, env)
		args[0] = g.st.Snapshot()
	})
	g.rep.record(g.set_, id, res)
	w, err := g.set_.CommitA()
	return res, w, err
}

func (g *generic) read(op service.Op) service.Result { return g.st.Apply(op) }

func (g *generic) snapshot() ([]byte, error) { return g.st.Snapshot(), nil }

func (g *generic) install(b []byte) error { return g.load(b) }

func (g *generic) fresh() (durability.Work, error) {
	g.set_.StartA()
	g.set_.Proxy("State").Invoke("Put", []durability.Value{g.st.Snapshot()}, func() {})
	return g.set_.CommitA()
}
