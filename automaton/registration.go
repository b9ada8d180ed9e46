package automaton

import (
	"maps"
	"slices"
	"sync"

	"github.com/synod-dev/synod/service"
)

// Capabilities is everything a protocol (or a broken variant) states about
// itself, in one value (issue 32 item 1). Callers ask CapabilitiesOf and
// read fields instead of probing the optional interfaces of capability.go
// one by one; the helpers there (ConsistencyOf, SafeFaultsOf, ...) read it
// too.
//
// A protocol states it in one of two ways, or both:
//   - it embeds Capabilities in its registered value and fills the fields:
//     the embedded value gives it Name and IdempotentRetry, and New is
//     all it writes besides (docs/ADDING_A_PROTOCOL.md);
//   - it implements the optional interfaces (Describer, ConsistencyModel,
//     ...), which suit a value computed per variant. A method the
//     registered value has wins over the embedded field it fills.
type Capabilities struct {
	// Protocol is the registered name; Doc the one-line description
	// (Describer: for a broken variant, what it breaks and what catches it).
	Protocol string
	Doc      string
	// Idempotent: a write retried under the same RequestID at another node
	// takes effect at most once (Protocol.IdempotentRetry).
	Idempotent bool
	// Consistency is the guarantee its histories are checked against;
	// empty means Linearizable (ConsistencyModel).
	Consistency Consistency
	// RegisterSemantics: one register per key (RegisterProtocol).
	RegisterSemantics bool
	// StickyClients: clients must stay on one replica
	// (StickyClientsProtocol); Sequential consistency implies it.
	StickyClients bool
	// Membership: MemberAdd/MemberRemove at run time (MembershipChanger).
	Membership bool
	// Nondeterminism: replicas stay identical under a nondeterministic
	// service (NondeterminismSupport).
	Nondeterminism bool
	// ClientFanout: clients send each request to every replica
	// (FanoutProtocol).
	ClientFanout bool
	// Params are the namespace parameters with their defaults
	// (ParamDefaulter).
	Params map[string]string
	// Options are the request options (OptionDeclarer).
	Options []OptionSpec
	// Transactions: the transaction shapes honoured (TxnSupporter).
	Transactions TxnSupport
	// Scenarios: the conformance suite's own simulations
	// (ScenarioDeclarer).
	Scenarios []Scenario
	// SafeFaults: the fault kinds under which the protocol is safe; nil
	// means all (FaultAssumer).
	SafeFaults []string
	// NestedWindow > 0: serves nested requests, answering that many per
	// client from its cache (NestedCallee).
	NestedWindow int
	// Sessions: the protocol reads Request.Unanswered and takes a
	// SessionEnd request (session.go): its table of outcomes forgets what
	// no client can ask for again, deterministically on every replica.
	Sessions bool
	// NestedRefusal, for a protocol that does not serve nested requests
	// (NestedWindow 0): why, in one sentence; configuration validation
	// gives it when a cluster file names such a namespace as a callee.
	NestedRefusal string
	// StandardCallee: the callee flags of the standard scenarios
	// (CalleeNeeder).
	StandardCallee []string

	// Computed capabilities (nil: none).
	Model       func() ModelConfig                                                                      // ModelDeclarer
	Invariants  func() ([]string, InvariantChecker)                                                     // InvariantStater
	Deployment  func(svc service.Service, params map[string]string, nodes int, durability string) error // DeploymentChecker
	Callees     func(params map[string]string) []string                                                 // Caller
	Coordinator ClientCoordinator                                                                       // ClientCoordinator
}

// Name implements Protocol for a registered value that embeds Capabilities.
func (c Capabilities) Name() string { return c.Protocol }

// IdempotentRetry implements Protocol for a registered value that embeds
// Capabilities.
func (c Capabilities) IdempotentRetry() bool { return c.Idempotent }

// Declared returns the value itself: the registry reads a protocol's
// embedded Capabilities through it.
func (c Capabilities) Declared() Capabilities { return c }

// CapabilityDeclarer is implemented by registered values that embed
// Capabilities.
type CapabilityDeclarer interface {
	Declared() Capabilities
}

// CapabilitiesOf returns the capabilities of a registered protocol or
// broken variant. Its slices and maps are the caller's to change.
func CapabilitiesOf(name string) (Capabilities, error) {
	c, err := capsOf(name)
	if err != nil {
		return c, err
	}
	c.Params = maps.Clone(c.Params)
	c.Options = slices.Clone(c.Options)
	c.Scenarios = slices.Clone(c.Scenarios)
	c.SafeFaults = slices.Clone(c.SafeFaults)
	c.StandardCallee = slices.Clone(c.StandardCallee)
	return c, nil
}

// capsCache holds each registered name's Capabilities, read once: the
// registry does not change after init, and some helpers are on the request
// path (TransactionsOf, RequestOptions).
var capsCache sync.Map // name -> Capabilities

// capsOf is CapabilitiesOf without the copies, for the helpers here, which
// never hand out the shared slices and maps.
func capsOf(name string) (Capabilities, error) {
	if c, ok := capsCache.Load(name); ok {
		return c.(Capabilities), nil
	}
	p, err := LookupAny(name)
	if err != nil {
		return Capabilities{}, err
	}
	c := Caps(p)
	capsCache.Store(name, c)
	return c, nil
}

// Caps returns p's capabilities: the value it embeds, with what its
// optional interfaces state on top.
func Caps(p Protocol) Capabilities {
	var c Capabilities
	if d, ok := p.(CapabilityDeclarer); ok {
		c = d.Declared()
	}
	c.Protocol = p.Name()
	c.Idempotent = p.IdempotentRetry()
	if d, ok := p.(Describer); ok {
		c.Doc = d.Describe()
	}
	if m, ok := p.(ConsistencyModel); ok {
		c.Consistency = m.Consistency()
	}
	if c.Consistency == "" {
		c.Consistency = Linearizable
	}
	if r, ok := p.(RegisterProtocol); ok {
		c.RegisterSemantics = r.RegisterSemantics()
	}
	if s, ok := p.(StickyClientsProtocol); ok {
		c.StickyClients = s.StickyClients()
	} else if c.Consistency == Sequential {
		c.StickyClients = true
	}
	if m, ok := p.(MembershipChanger); ok {
		c.Membership = m.SupportsMembership()
	}
	if n, ok := p.(NondeterminismSupport); ok {
		c.Nondeterminism = n.SupportsNondeterminism()
	}
	if f, ok := p.(FanoutProtocol); ok {
		c.ClientFanout = f.ClientFanout()
	}
	if d, ok := p.(ParamDefaulter); ok {
		c.Params = d.DefaultParams()
	}
	if d, ok := p.(OptionDeclarer); ok {
		c.Options = d.RequestOptions()
	}
	if t, ok := p.(TxnSupporter); ok {
		c.Transactions = t.Transactions()
	}
	if d, ok := p.(ScenarioDeclarer); ok {
		c.Scenarios = d.Scenarios()
	}
	if f, ok := p.(FaultAssumer); ok {
		c.SafeFaults = f.SafeFaults()
		if c.SafeFaults == nil {
			c.SafeFaults = []string{} // declared: safe under none
		}
	}
	if n, ok := p.(NestedCallee); ok {
		c.NestedWindow = max(n.DedupWindow(), 1)
	}
	if n, ok := p.(CalleeNeeder); ok {
		c.StandardCallee = n.StandardCallee()
	}
	if m, ok := p.(ModelDeclarer); ok {
		c.Model = m.Model
	}
	if s, ok := p.(InvariantStater); ok {
		c.Invariants = s.Invariants
	}
	if d, ok := p.(DeploymentChecker); ok {
		c.Deployment = d.CheckDeployment
	}
	if k, ok := p.(Caller); ok {
		c.Callees = k.Callees
	}
	if k, ok := p.(ClientCoordinator); ok {
		c.Coordinator = k
	}
	return c
}
