package automaton

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/synod-dev/synod/internal/registry"
	"github.com/synod-dev/synod/service"
)

// The protocol registry and the capabilities a protocol declares.
//
// A protocol is one package plus one line in protocol/all. Its init calls
// Register (or RegisterBroken for a deliberately broken variant), and the
// type it registers implements Protocol and any of the optional interfaces
// below. Runtimes, the simulator, the checkers, the gateway, the cluster
// tooling and the experiments ask the registry what a protocol can do; none
// of them names a protocol.

// DefaultProtocol replicates a namespace whose cluster file names no
// protocol, and is the simulator's and `cluster up`'s default.
const DefaultProtocol = "abd"

var (
	known  = registry.New[Protocol]("protocol")
	broken = registry.New[Protocol]("broken protocol variant")
	// brokenOf maps a broken variant to the protocol it breaks.
	brokenOf = map[string]string{}
)

// Register makes a protocol available by name; call it from the protocol
// package's init.
func Register(p Protocol) {
	if _, err := broken.Lookup(p.Name()); err == nil {
		panic(fmt.Sprintf("protocol %q registered as broken and as real", p.Name()))
	}
	known.Register(p.Name(), p)
}

// RegisterBroken registers a deliberately broken variant of the protocol
// named of. Broken variants exist to show that a checker or an invariant
// catches them: the simulator and the conformance suite run them, a live
// cluster refuses them unless its file sets allow_broken, and they are not
// offered as known protocols.
func RegisterBroken(of string, p Protocol) {
	if _, err := known.Lookup(p.Name()); err == nil {
		panic(fmt.Sprintf("protocol %q registered as real and as broken", p.Name()))
	}
	broken.Register(p.Name(), p)
	brokenOf[p.Name()] = of
}

// Lookup returns a registered protocol that is not a broken variant. Its
// error lists the known protocols and never the broken variants.
func Lookup(name string) (Protocol, error) {
	p, err := known.Lookup(name)
	if err != nil && IsBroken(name) {
		return nil, fmt.Errorf("protocol %q is a deliberately broken variant (of %s), kept to show that checkers catch it; set allow_broken: true to run it", name, brokenOf[name])
	}
	return p, err
}

// LookupAny returns a registered protocol or broken variant (the
// simulator's and the checkers' view of the registry).
//
// It is on the request path (the runtime looks protocols up per request),
// so a name that is not a broken variant goes straight to the registry of
// real protocols: broken.Lookup's miss would format an error listing every
// variant (a quarter of a node's CPU under load, issue 18's profile).
func LookupAny(name string) (Protocol, error) {
	if _, ok := brokenOf[name]; ok {
		return broken.Lookup(name)
	}
	return known.Lookup(name)
}

// Names lists the registered protocols, sorted, broken variants excluded.
func Names() []string { return known.Names() }

// BrokenNames lists the broken variants, sorted.
func BrokenNames() []string { return broken.Names() }

// IsBroken reports whether name is a registered broken variant.
func IsBroken(name string) bool {
	_, ok := brokenOf[name]
	return ok
}

// BrokenOf returns the protocol a broken variant breaks ("" for others).
func BrokenOf(name string) string { return brokenOf[name] }

// DescribeBroken lists the broken variants as "name (breaks X): doc" lines
// for help texts; the doc comes from Describer when the variant has one.
func DescribeBroken() string {
	var b strings.Builder
	for _, n := range BrokenNames() {
		c, _ := capsOf(n)
		fmt.Fprintf(&b, "  %s (of %s)", n, brokenOf[n])
		if c.Doc != "" {
			fmt.Fprintf(&b, ": %s", c.Doc)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Describer gives a one-line description of a protocol or broken variant
// (for a broken variant: what it breaks and what catches it).
type Describer interface {
	Describe() string
}

// --- consistency and checking ---

// Consistency names the guarantee a protocol's histories are checked against.
type Consistency string

const (
	// Linearizable: every operation takes effect at one instant between its
	// invocation and its response (Herlihy and Wing).
	Linearizable Consistency = "linearizable"
	// Sequential: one total order that respects each client's program order
	// (Lamport), without real-time order across clients.
	Sequential Consistency = "sequential"
	// EventuallySerializable: the ESDS thesis's ESDS guarantee (prev constraints,
	// strict answers agree with the eventual total order, convergence).
	EventuallySerializable Consistency = "eventually-serializable"
)

// Request options of the EventuallySerializable model (the ESDS thesis chapter 3):
// a protocol promising it declares options with these names and meanings,
// which its checker and the simulator's workload read: the operation's
// unique id (a string), the ids of operations that must be ordered before it
// (a list), and whether its answer must wait until its place in the final
// order is fixed (a bool).
const (
	OptOpID   = "opid"
	OptPrev   = "prev"
	OptStrict = "strict"
)

// ConsistencyModel is implemented by protocols whose guarantee is not
// linearizability; protocols that do not implement it are Linearizable.
type ConsistencyModel interface {
	Consistency() Consistency
}

// ConsistencyOf returns the named protocol's guarantee.
func ConsistencyOf(name string) (Consistency, error) {
	c, err := capsOf(name)
	if err != nil {
		return "", err
	}
	return c.Consistency, nil
}

// RegisterProtocol is implemented by protocols that replicate one register per
// key rather than a state machine (ABD, the blocking lock protocol). Such a
// protocol cannot answer DEL with a linearizable count of removed keys, so
// checkers do not hold that reply to linearizability.
type RegisterProtocol interface {
	RegisterSemantics() bool
}

// HasRegisterSemantics reports whether the named protocol is registered and
// replicates registers.
func HasRegisterSemantics(name string) bool {
	c, err := capsOf(name)
	return err == nil && c.RegisterSemantics
}

// StickyClientsProtocol is implemented by protocols whose guarantee holds
// only for clients that keep talking to one replica (sequential
// consistency with local reads); the simulator then pins each client to a
// node.
type StickyClientsProtocol interface {
	StickyClients() bool
}

// NeedsStickyClients reports whether the named protocol asks for sticky
// clients (explicitly, or by promising Sequential consistency).
func NeedsStickyClients(name string) bool {
	c, err := capsOf(name)
	return err == nil && c.StickyClients
}

// --- membership ---

// MembershipChanger is implemented by protocols that change their
// membership at run time through MemberAdd/MemberRemove requests.
type MembershipChanger interface {
	SupportsMembership() bool
}

// SupportsMembership reports whether the named protocol changes its
// membership at run time.
func SupportsMembership(name string) bool {
	c, err := capsOf(name)
	return err == nil && c.Membership
}

// SupportsSessions reports whether the named protocol reads
// Request.Unanswered and takes SessionEnd requests (Capabilities.Sessions).
func SupportsSessions(name string) bool {
	c, err := capsOf(name)
	return err == nil && c.Sessions
}

// --- parameters ---

// ParamDefaulter is implemented by protocols with namespace parameters: the
// parameters they accept with their default values, as a cluster file would
// spell them. Experiments report them beside their figures.
type ParamDefaulter interface {
	DefaultParams() map[string]string
}

// DefaultParams returns the named protocol's parameters with their
// defaults (nil when it declares none).
func DefaultParams(name string) map[string]string {
	c, _ := capsOf(name)
	return maps.Clone(c.Params)
}

// --- nondeterministic services ---

// NondeterminismSupport is implemented by protocols that keep replicas
// identical under a nondeterministic service (service.Nondeterministic):
// they replicate the resulting state, or the environment one replica chose
// (env.go). A protocol that does not implement it is refused such a service
// at configuration time.
type NondeterminismSupport interface {
	SupportsNondeterminism() bool
}

// CheckService refuses a service the named protocol would let replicas
// diverge on. Runtimes call it before creating automata.
func CheckService(protocol string, svc interface{ Name() string }) error {
	nd, ok := svc.(interface{ Nondeterministic() bool })
	if !ok || !nd.Nondeterministic() {
		return nil
	}
	c, err := capsOf(protocol)
	if err != nil {
		return err
	}
	if c.Nondeterminism {
		return nil
	}
	return fmt.Errorf("protocol %s cannot replicate the nondeterministic service %s: its replicas would apply operations independently and diverge; use a protocol that replicates the chosen environment or the resulting state (%s)",
		protocol, svc.Name(), strings.Join(namesWith(func(c Capabilities) bool { return c.Nondeterminism }), ", "))
}

func namesWith(f func(Capabilities) bool) []string {
	var out []string
	for _, n := range known.Names() {
		c, _ := capsOf(n)
		if f(c) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// --- conformance ---

// Scenario is a simulation the conformance suite (package conformance) runs
// for a protocol, in the words of `synod-lab sim`.
type Scenario struct {
	// Name says what the scenario exercises ("membership", "catches the
	// skipped phase 1 values").
	Name string
	// Args are `synod-lab sim` flags, without --protocol and --seeds.
	Args []string
	// Seeds is a seed list as --seeds takes it. For a broken variant, pin
	// seeds known to catch it so that the suite stays short; the suite
	// fails if none of them does any more.
	Seeds string
	// ExpectViolation marks a scenario that runs a real protocol outside
	// the failure model it declares (FaultAssumer): primary-backup under
	// partitions or long pauses. Like a broken variant's scenario, at
	// least one of its seeds must fail; the suite prints the failure as
	// the evidence that the assumption is needed.
	ExpectViolation bool
}

// ScenarioDeclarer is implemented by protocols that ask for simulations of
// their own. A real protocol's scenarios must pass, besides the suite's
// standard ones (faults, and groups or membership changes when the protocol
// declares them). A broken variant's scenarios say how it is caught: at
// least one seed of at least one scenario must fail (a checker, an invariant
// or a liveness bound). A broken variant without scenarios is run in the
// standard scenario over more seeds.
type ScenarioDeclarer interface {
	Scenarios() []Scenario
}

// ScenariosOf returns the named protocol's own scenarios.
func ScenariosOf(name string) []Scenario {
	c, _ := capsOf(name)
	return slices.Clone(c.Scenarios)
}

// --- failure model ---

// FaultAssumer is implemented by protocols that are safe only under a
// failure model narrower than the simulator's "all". Primary-backup (seed
// 002, chapter III) assumes a perfect failure detector: crash-stop nodes
// and messages delayed by less than the heartbeat timeout; a partition or a
// long pause makes a backup promote itself while the primary still serves
// (split brain). SafeFaults returns the simulator fault kinds (sim
// FaultKinds: crash, partition, loss, dup, pause, slow, reorder) under which
// the protocol promises its consistency model; the conformance suite's
// standard scenarios inject only those. Say in the package doc why each
// missing kind breaks the protocol, and declare an ExpectViolation scenario
// that shows it.
type FaultAssumer interface {
	SafeFaults() []string
}

// SafeFaultsOf returns the --faults value under which the named protocol
// is safe: "all" unless it declares FaultAssumer.
func SafeFaultsOf(name string) string {
	c, err := capsOf(name)
	if err != nil {
		return "all"
	}
	if c.SafeFaults != nil {
		var k []string
		for _, kind := range c.SafeFaults {
			if kind != PowerLoss { // not a --faults kind (wholecluster.go)
				k = append(k, kind)
			}
		}
		if len(k) > 0 {
			return strings.Join(k, ",")
		}
		return "none"
	}
	return "all"
}

// --- clients that send to every replica ---

// FanoutProtocol is implemented by protocols whose clients send each request
// to every replica themselves: Fast Paxos's clients are proposers that send
// straight to the acceptors (the Grid Services thesis, chapter V), and PB-Paxos's clients
// send to all replicas, of which only the leader replies (chapter VI.A.1).
// A client that fans out marks the request Request.Fanout and sends the same
// RequestID to every node; each node's automaton plays its own part (accept,
// learn, confirm) and answers with a real Response or with a Silent one
// (Response.Silent: "not mine to answer; wait for another replica"), so
// that runtimes can release the request. The client takes the first
// non-silent answer. A client that reaches one node (redis-cli) sends an
// ordinary request, and that node acts as the proposer for it.
type FanoutProtocol interface {
	ClientFanout() bool
}

// ClientFanoutOf reports whether the named protocol wants clients to fan out.
func ClientFanoutOf(name string) bool {
	c, err := capsOf(name)
	return err == nil && c.ClientFanout
}

// BatchStepper is implemented by protocols whose automata accept
// ClientBatch inputs (automaton.go). The batch decision is the runtime's:
// the node steps the client requests of one pass over its inbox as one
// ClientBatch, the simulator those that reach a node within
// sim.Config.BatchWindow; a protocol only handles the batch it is given.
type BatchStepper interface {
	StepsClientBatches() bool
}

// StepsClientBatches reports whether the named protocol accepts
// ClientBatch inputs.
func StepsClientBatches(name string) bool {
	p, err := LookupAny(name)
	if err != nil {
		return false
	}
	b, ok := p.(BatchStepper)
	return ok && b.StepsClientBatches()
}

// KeyRunOrderer is implemented by batch-stepping protocols whose
// ClientBatch applies its linearizable requests on one key in batch
// order, as serial execution would (ABD's key runs, protocol/abd
// batch.go): stronger than ClientBatch's contract, under which same-key
// requests of a batch are concurrent. A runtime may then hand a
// connection's pipelined same-key commands to the loop as one ordered
// batch instead of one after the other (gateway/pipeline.go).
type KeyRunOrderer interface {
	OrdersKeyRuns() bool
}

// OrdersKeyRuns reports whether the named protocol applies a client
// batch's linearizable same-key requests in batch order.
func OrdersKeyRuns(name string) bool {
	p, err := LookupAny(name)
	if err != nil {
		return false
	}
	o, ok := p.(KeyRunOrderer)
	return ok && o.OrdersKeyRuns() && StepsClientBatches(name)
}

// DeploymentChecker is implemented by protocols that can tell, from the
// cluster file alone, that a namespace's deployment cannot keep its
// promise (issue 29: "a configuration that cannot be durable is refused
// at start with the reason"). Configuration validation
// (config.Cluster.Validate) calls it with the namespace's service,
// parameters, node count and durability mode (config.Fsync, config.Memory).
type DeploymentChecker interface {
	CheckDeployment(svc service.Service, params map[string]string, nodes int, durability string) error
}

// CheckDeployment asks protocol name whether the deployment can keep its
// promise; nil when the protocol does not say.
func CheckDeployment(name string, svc service.Service, params map[string]string, nodes int, durability string) error {
	c, err := capsOf(name)
	if err != nil || c.Deployment == nil {
		return nil
	}
	return c.Deployment(svc, params, nodes, durability)
}
