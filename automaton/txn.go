package automaton

import (
	"fmt"

	"github.com/synod-dev/synod/service"
)

// Transactions and multi-operation requests.
//
// Two shapes reach a protocol:
//
//   - An atomic group: one Request whose Ops hold several operations. They
//     take effect together, in order, all or none, and nothing else is
//     ordered between them. This is Redis's MULTI/EXEC and any per-request
//     atomicity a client asks for. The Response carries one result per
//     operation.
//   - An interactive transaction, the shape of the Grid Services thesis chapter VI.A.4's
//     T-Paxos: a client begins a transaction, sends its operations one
//     request at a time and sees each answer before sending the next, then
//     commits or aborts. Each step is a Request whose Txn names the
//     transaction (the RequestID of its TxnBegin step) and the action. A
//     committed transaction is serializable with every other committed
//     transaction and single operation; an aborted one has no effect and
//     its reads promise nothing. A commit may itself answer with an abort
//     (ErrTxnAborted) when the protocol could not keep the transaction
//     (the Grid Services thesis VI.A.4: a leader change during the transaction).
//
// A protocol declares which shapes it honours (TxnSupporter). The edges
// (gateway, simulator, node) refuse a shape the protocol lacks before the
// request reaches it, with ErrNoAtomic or ErrNoInteractive, so nothing is
// applied; protocols refuse them too, for requests that arrive otherwise.

// TxnAction is a step of an interactive transaction.
type TxnAction uint8

const (
	// TxnBegin opens a transaction; its RequestID names the transaction.
	TxnBegin TxnAction = iota + 1
	// TxnOp runs Request.Op inside the transaction.
	TxnOp
	// TxnCommit makes the transaction's effects visible, all together.
	TxnCommit
	// TxnAbort discards the transaction.
	TxnAbort
)

var txnActionNames = map[TxnAction]string{TxnBegin: "begin", TxnOp: "op", TxnCommit: "commit", TxnAbort: "abort"}

func (a TxnAction) String() string {
	if n, ok := txnActionNames[a]; ok {
		return n
	}
	return fmt.Sprintf("TxnAction(%d)", uint8(a))
}

// TxnStep places a request in an interactive transaction.
type TxnStep struct {
	// Txn is the RequestID of the transaction's TxnBegin request.
	Txn    RequestID
	Action TxnAction
}

// TxnSupport says which transaction shapes a protocol honours.
type TxnSupport struct {
	// Atomic: Request.Ops groups are applied atomically.
	Atomic bool
	// Interactive: TxnStep requests are served.
	Interactive bool
}

// TxnSupporter is implemented by protocols that honour transactions.
type TxnSupporter interface {
	Transactions() TxnSupport
}

// TransactionsOf returns the named protocol's transaction support.
func TransactionsOf(protocol string) TxnSupport {
	c, _ := capsOf(protocol)
	return c.Transactions
}

// Errors for transaction shapes a protocol does not honour. They start with
// a Redis error code so RESP clients see them as errors of that kind.
const (
	ErrNoAtomic      = "ERR this namespace's protocol (%s) cannot apply a group of operations atomically; nothing was applied"
	ErrNoInteractive = "ERR this namespace's protocol (%s) has no interactive transactions; nothing was applied"
	// ErrTxnAborted answers a commit whose transaction the protocol aborted.
	ErrTxnAborted = "EXECABORT transaction aborted"
	// ErrNoSuchTxn answers a step of a transaction the serving node does
	// not hold (never begun, already ended, or lost to a failure).
	ErrNoSuchTxn = "ERR no such transaction (it ended, or a failure aborted it)"
)

// RefuseUnsupported returns the error result for a request whose
// transaction shape protocol does not honour, or ok=false when it does.
func RefuseUnsupported(protocol string, req Request) (service.Result, bool) {
	sup := TransactionsOf(protocol)
	if len(req.Ops) > 0 && !sup.Atomic {
		return service.Errorf(ErrNoAtomic, protocol), true
	}
	if req.Txn != nil && !sup.Interactive {
		return service.Errorf(ErrNoInteractive, protocol), true
	}
	return service.Result{}, false
}

// ValidateRequest checks every operation of req against svc and the
// transaction step's shape.
func ValidateRequest(svc service.Service, req Request) error {
	if len(req.Ops) > 0 {
		if req.Txn != nil {
			return fmt.Errorf("a request is an atomic group or a transaction step, not both")
		}
		for i, op := range req.Ops {
			if err := svc.Validate(op); err != nil {
				return fmt.Errorf("operation %d of the group: %w", i+1, err)
			}
		}
		return nil
	}
	if req.Txn != nil {
		switch req.Txn.Action {
		case TxnBegin, TxnCommit, TxnAbort:
			return nil
		case TxnOp:
		default:
			return fmt.Errorf("bad transaction action %v", req.Txn.Action)
		}
	}
	return svc.Validate(req.Op)
}

// IsReadRequest reports whether every operation of req only reads.
func IsReadRequest(svc service.Service, req Request) bool {
	if len(req.Ops) > 0 {
		for _, op := range req.Ops {
			if !svc.IsRead(op) {
				return false
			}
		}
		return true
	}
	if req.Txn != nil && req.Txn.Action != TxnOp {
		return false
	}
	return svc.IsRead(req.Op)
}

// ApplyGroup applies an atomic group to st in order and returns each
// result. A state machine protocol calls it when it executes the group's
// log entry: nothing can interleave with a single Apply sequence.
//
// A group may begin with guards (service.GuardKind: Redis's WATCH checked
// inside EXEC's step). When one of the leading guards fails, ApplyGroup
// stops there: the failed guard's result is its error, every other
// operation's result is Nil, and nothing of the group has changed the state
// (guards only read). A guard after an operation that is not a guard is an
// ordinary operation: its failure stops nothing.
func ApplyGroup(st service.State, ops []service.Op, env service.Env) []service.Result {
	out := make([]service.Result, len(ops))
	guards := true
	for i, op := range ops {
		out[i] = service.ApplyEnv(st, op, env.For(i))
		if !guards {
			continue
		}
		if op.Kind != service.GuardKind {
			guards = false
			continue
		}
		if service.IsGuardFailure(out[i]) {
			for j := range out {
				if j != i {
					out[j] = service.Nil()
				}
			}
			return out
		}
	}
	return out
}

// GroupAborted reports whether ApplyGroup stopped a group at a failed
// guard, and at which operation.
func GroupAborted(ops []service.Op, results []service.Result) (int, bool) {
	for i, op := range ops {
		if op.Kind != service.GuardKind || i >= len(results) {
			return 0, false
		}
		if service.IsGuardFailure(results[i]) {
			return i, true
		}
	}
	return 0, false
}
