package automaton

import "github.com/synod-dev/synod/synoderr"

// Nested requests: a namespace calling another namespace (the Eve/Adam thesis §3,
// Adam: "replicated services calling replicated services").
//
// An automaton of namespace A calls namespace B with an Effect of kind
// CallKind whose payload is a Call. The runtime carries it out as a client
// of B would: it sends Call.Req to B's replicas and retries with the same
// RequestID, on timeouts and lost connections, until one answers; the answer
// comes back as EffectDone{Result: Response}. EffectDone.Err is set only
// when the runtime cannot carry the call at all (B does not exist, B's
// protocol does not serve nested requests); a call is never abandoned while
// the caller's incarnation lives, however long B takes. The usual effect
// rules hold (effect.go): the call leaves after the Persists emitted before
// it are durable, and a crash of the caller loses the answer (B may still
// execute the request; the restarted caller re-issues it with the same id).
//
// Identity and exactly-once (the Eve/Adam thesis §3: the remote service "just has to
// treat Adam replicas as clients that might make repeated requests with the
// same sequence numbers" and answers repeats "from a cache"): the caller
// chooses Req.ID deterministically (every replica of A computes the same id
// for the same nested request, and a request re-issued after a rollback
// keeps its id), and sets Req.Nested. The replicas of A each send the call,
// at different times; B must answer every copy with the same Response and
// execute the request at most once. Reads included: a nested read is
// ordered like a write and its answer cached, since replicas of A that
// read different values would diverge. A protocol that can keep this
// promise implements NestedCallee; the runtimes refuse calls to a
// namespace whose protocol does not.
//
// One client id may have several nested requests outstanding at once
// (Adam's threads), within the callee's deduplication window.

// CallKind is the Effect kind of a nested request.
const CallKind = "synod.call"

// Call is a CallKind Effect's payload: Req, to namespace Namespace.
type Call struct {
	Namespace string
	Req       Request
}

// NestedCallee is implemented by protocols that serve nested requests
// (Request.Nested): every copy of one request id answered alike, reads
// included, and executed at most once, for as long as the id is within
// DedupWindow requests of the client's newest.
type NestedCallee interface {
	// DedupWindow is how many requests per client id the protocol answers
	// from its cache.
	DedupWindow() int
}

// ServesNested reports whether protocol name serves nested requests.
func ServesNested(name string) bool {
	c, err := capsOf(name)
	return err == nil && c.NestedWindow > 0
}

// NestedRefusal returns why protocol name does not serve nested requests,
// as it declares (Capabilities.NestedRefusal); empty when it serves them
// or gives no reason.
func NestedRefusal(name string) string {
	c, err := capsOf(name)
	if err != nil || c.NestedWindow > 0 {
		return ""
	}
	return c.NestedRefusal
}

// Caller is implemented by protocols whose namespaces call other
// namespaces (Adam). Callees lists the namespaces a namespace with these
// parameters calls. Configuration validation (config.Cluster.Validate)
// refuses a cluster file in which a callee is not a namespace of the
// cluster or runs a protocol that does not serve nested requests: a
// namespace never starts to answer its clients while its calls are bound
// to fail.
type Caller interface {
	Callees(params map[string]string) []string
}

// Callees returns the namespaces a namespace of protocol name with params
// calls (nil when the protocol calls none).
func Callees(name string, params map[string]string) []string {
	c, err := capsOf(name)
	if err != nil || c.Callees == nil {
		return nil
	}
	return c.Callees(params)
}

// RetryableAnswer reports whether an error answer to a nested call means
// "not now" (a leader change, a timeout inside the protocol, a node
// starting or shutting down, a slot served elsewhere or by no one) rather
// than the callee's answer to the request: its kind retries
// (synoderr.Kind.Retry: TRYAGAIN, MOVED, CLUSTERDOWN, and LOADING, which
// reads as TRYAGAIN). Both runtimes (node/call.go, sim/callee.go) re-send
// the call, same id, after a retryable answer and hand any other error
// answer back to the caller as the call's outcome: it is what the callee
// answers every copy of the id (its deduplication table holds it, or the
// request was refused before it was ordered).
func RetryableAnswer(msg string) bool { return synoderr.Parse(msg).Kind.Retry() }
