package pbdurable

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/synod-dev/synod/durability"
	"github.com/synod-dev/synod/durability/examples/counter"
	"github.com/synod-dev/synod/service"
)

// durable is a service whose state objects sit behind durability proxies
// (seed 002 IV.C.4, the rewired service): exec runs one update request as
// one atomic action (startA..commitA on every proxy) and returns the work
// its mechanisms need.
type durable interface {
	set() *durability.Set
	// exec runs a write; the Work holds the statements and the shipped
	// update buffer of this request.
	// A nondeterministic service reads env (the request's Env).
	exec(op service.Op, env service.Env) (service.Result, durability.Work, error)
	// read answers a read from the objects (no proxy work).
	read(op service.Op) service.Result
	// snapshot and install carry the replicated objects to a new backup.
	snapshot() ([]byte, error)
	install(b []byte) error
	// fresh is the work the first primary of a fresh cluster does: init,
	// then the empty objects written (so that the database holds this
	// cluster's state, not a previous one's).
	fresh() (durability.Work, error)
}

// newDurable builds the durable form of svc under the mapping named m.
func newDurable(svc service.Service, m string) (durable, error) {
	if svc.Name() == "counter" {
		return newCounter(m)
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

// counterSvc is Synod's counter service (read, add n) on seed 002's
// Counter (IV.D.1) behind its generated proxy.
type counterSvc struct {
	d *counter.DurableService
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
	return &counterSvc{d: d}, nil
}

func (c *counterSvc) set() *durability.Set { return c.d.Set }

// exec: "add n" is the seed's Add generalised to n (GetValue, SetValue),
// bracketed by startA and commitA on every proxy.
func (c *counterSvc) exec(op service.Op, _ service.Env) (service.Result, durability.Work, error) {
	n, err := strconv.ParseInt(string(op.Args[0]), 10, 64)
	if err != nil {
		return service.Errorf("value is not an integer or out of range"), durability.Work{}, nil
	}
	c.d.Set.StartA()
	v := c.d.Service.Counter.GetValue() + n
	c.d.Service.Counter.SetValue(v)
	w, err := c.d.Set.CommitA()
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
	w := c.d.Set.Init()
	c.d.Set.StartA()
	c.d.Service.Counter.SetValue(0)
	x, err := c.d.Set.CommitA()
	w.Merge(x)
	return w, err
}

// generic is any deterministic Synod service as one state object, State,
// whose one update method is Put(state): the service's state after the
// request (the seed's "in the extreme a full application checkpoint",
// III.A). Its mappings are written here in the mapping language.
type generic struct {
	svc  service.Service
	st   service.State
	set_ *durability.Set
	// bills is the Matchmaker's second object, Billing (matchmaker.go);
	// nil for other services.
	bills *bills
}

var genericInfo = durability.ObjectInfo{
	Name:    "State",
	Updates: []durability.MethodInfo{{Name: "Put", Params: []durability.Param{{Name: "state", Kind: durability.KindBytes}}}},
}

// genericMappings are the generic object's mappings, by name.
var genericMappings = map[string]string{
	"pb":              "service: generic\nobjects:" + mmStatePB,
	"db":              "service: generic\nobjects:" + mmStateDB,
	"reconstructible": "service: generic\nobjects:\n  State:\n    mechanism: reconstructible\n",
}

func newGeneric(svc service.Service, m string) (*generic, error) {
	mappings, infos := genericMappings, []durability.ObjectInfo{genericInfo}
	g := &generic{svc: svc, st: svc.NewState()}
	if svc.Name() == "matchmaker" {
		mappings, infos = matchmakerMappings, append(infos, billingInfo)
		g.bills = &bills{}
	}
	src, ok := mappings[m]
	if !ok {
		return nil, fmt.Errorf("mapping %q: no such mapping for %s (%v)", m, svc.Name(), slices.Sorted(maps.Keys(mappings)))
	}
	mp, err := durability.ParseMapping([]byte(src))
	if err != nil {
		return nil, err
	}
	if err := mp.Validate(infos); err != nil {
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
	proxies := []durability.Proxy{p}
	if g.bills != nil {
		bp, err := durability.NewProxy(billingInfo, mp.Objects["Billing"], g.bills.hooks())
		if err != nil {
			return nil, err
		}
		proxies = append(proxies, bp)
	}
	g.set_ = durability.NewSet(proxies...)
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

func (g *generic) exec(op service.Op, env service.Env) (service.Result, durability.Work, error) {
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
	if job, machine, ok := allocation(op, res); ok && g.bills != nil {
		g.set_.Proxy("Billing").Invoke("Charge", []durability.Value{job, machine}, func() { g.bills.charge(job, machine) })
	}
	w, err := g.set_.CommitA()
	return res, w, err
}

func (g *generic) read(op service.Op) service.Result { return g.st.Apply(op) }

// genericSnap carries the replicated objects to a new backup: State's
// snapshot and, for the Matchmaker, Billing.
type genericSnap struct {
	State   []byte
	Billing *bills `json:",omitempty"`
}

func (g *generic) snapshot() ([]byte, error) {
	return json.Marshal(genericSnap{State: g.st.Snapshot(), Billing: g.bills})
}

func (g *generic) install(b []byte) error {
	var s genericSnap
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if g.bills != nil && s.Billing != nil {
		*g.bills = *s.Billing
	}
	return g.load(s.State)
}

func (g *generic) fresh() (durability.Work, error) {
	w := g.set_.Init()
	g.set_.StartA()
	g.set_.Proxy("State").Invoke("Put", []durability.Value{g.st.Snapshot()}, func() {})
	x, err := g.set_.CommitA()
	w.Merge(x)
	return w, err
}
