package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
)

// Interactive transactions over the Redis protocol (automaton/txn.go; seed
// 002 VI.A.4 gives their shape: each operation is answered before the
// commit).
//
//	SYNOD BEGIN    open a transaction on the connection (TxnBegin)
//	SYNOD COMMIT   commit it (TxnCommit): OK, or
//	               "-EXECABORT transaction aborted" when the protocol could not
//	               keep it (another transaction committed first, a failure)
//	SYNOD ABORT    discard it (TxnAbort)
//	SYNOD TXN      "none", or "open <id> in namespace <ns>"
//
// While a transaction is open every data command (GET, SET, INCR, ...,
// SYNOD OP) is one TxnOp step, answered at once with the operation's result
// as the transaction sees it. A multi-key command (MGET, DEL, EXISTS) runs
// one TxnOp per key, in order, one after the other (never concurrently, so
// the transaction's operations have one order). Other connections do not
// see the transaction's writes before its commit.
//
// Decisions (the seed is silent on these):
//
//   - BEGIN is refused, before anything reaches the node, when the
//     namespace's protocol has no interactive transactions
//     (automaton.ErrNoInteractive, naming the protocols that have them)
//     and the namespace is not sharded over a protocol with atomic groups
//     (a sharded namespace's node runs them: package node, itxn.go), and
//     when a transaction is already open: transactions do not nest.
//   - SYNOD NS is refused while a transaction is open: the transaction
//     belongs to the namespace it began in.
//   - The connection's transaction ends with any answer to COMMIT or ABORT,
//     error or timeout included: the gateway never retries a step, so after
//     an unknown commit outcome the client must find out by reading. A
//     COMMIT answered automaton.ErrNoSuchTxn (the node no longer holds the
//     transaction: evicted, or lost to a failure) is reported as EXECABORT,
//     since its writes took no effect.
//   - A connection that closes with a transaction open sends TxnAbort,
//     best-effort (bounded by abortOnCloseTimeout), so the node does not
//     hold its workspace until eviction.

// abortOnCloseTimeout bounds the best-effort TxnAbort of a closing
// connection's open transaction.
const abortOnCloseTimeout = time.Second

// txnConn is a connection's open transaction; only the connection's
// goroutine touches it.
type txnConn struct {
	open bool
	id   automaton.RequestID // the TxnBegin request's ID: names the transaction
	ns   string
}

func init() {
	synodHelp = append(synodHelp,
		"SYNOD BEGIN -- Open an interactive transaction (protocols that have them, e.g. unreplicated, and sharded namespaces).",
		"SYNOD COMMIT -- Commit the open transaction: OK, or EXECABORT when it was aborted (nothing applied).",
		"SYNOD ABORT -- Discard the open transaction.",
		"SYNOD TXN -- Show whether a transaction is open.",
	)
}

// txnStep returns the step a data operation carries: TxnOp of the open
// transaction, or nil when none is open.
func (c *conn) txnStep() *automaton.TxnStep {
	if !c.txn.open {
		return nil
	}
	return &automaton.TxnStep{Txn: c.txn.id, Action: automaton.TxnOp}
}

// InteractiveTransactions reports whether namespace ns serves interactive
// transactions: its protocol has them, or it is sharded over a protocol
// with atomic groups (its nodes run them: package node, itxn.go).
func InteractiveTransactions(ns config.Namespace) bool {
	t := automaton.TransactionsOf(ns.Protocol)
	return t.Interactive || len(ns.Shards) > 0 && t.Atomic
}

// interactiveProtocols names the registered protocols with interactive
// transactions.
func interactiveProtocols() string {
	var have []string
	for _, n := range automaton.Names() {
		if automaton.TransactionsOf(n).Interactive {
			have = append(have, n)
		}
	}
	if len(have) == 0 {
		return "no registered protocol has them"
	}
	return "protocols with them: " + strings.Join(have, ", ")
}

// txnCommand runs the transaction subcommands of SYNOD; it returns false
// for any other subcommand.
func (c *conn) txnCommand(sub string, args [][]byte) bool {
	switch sub {
	case "begin", "commit", "abort", "txn":
	default:
		return false
	}
	if len(args) != 2 {
		c.writeError(arityErr("synod|" + sub))
		return true
	}
	switch sub {
	case "begin":
		c.onBegin()
	case "commit":
		c.onCommit()
	case "abort":
		c.onAbort()
	case "txn":
		if !c.txn.open {
			c.w.WriteBulkString("none")
		} else {
			c.w.WriteBulkString(fmt.Sprintf("open %v in namespace %s", c.txn.id, c.txn.ns))
		}
	}
	return true
}

// onBegin opens a transaction (TxnBegin) in the connection's namespace.
func (c *conn) onBegin() {
	if c.txn.open {
		c.writeError("ERR a transaction is already open on this connection (SYNOD COMMIT or SYNOD ABORT it first); transactions do not nest")
		return
	}
	c.mu.Lock()
	ns, svc := c.ns, c.svc
	c.mu.Unlock()
	if svc == nil {
		c.writeError("ERR this node serves no namespace")
		return
	}
	if !InteractiveTransactions(ns) {
		c.writeError(withCode(fmt.Sprintf(automaton.ErrNoInteractive, ns.Protocol)) + " (" + interactiveProtocols() + ")")
		return
	}
	id := automaton.RequestID{Client: c.client, Seq: c.nextSeq()}
	res := c.submit(ns.Name, automaton.Request{ID: id, Txn: &automaton.TxnStep{Txn: id, Action: automaton.TxnBegin}})
	if res.Type == service.ResultOK {
		c.txn = txnConn{open: true, id: id, ns: ns.Name}
	}
	c.writeResult(res)
}

// onCommit commits the open transaction (TxnCommit) and ends it locally
// whatever the answer.
func (c *conn) onCommit() {
	if !c.txn.open {
		c.writeError("ERR SYNOD COMMIT without SYNOD BEGIN")
		return
	}
	t := c.txn
	c.txn = txnConn{}
	res := c.submit(t.ns, automaton.Request{ID: automaton.RequestID{Client: c.client, Seq: c.nextSeq()},
		Txn: &automaton.TxnStep{Txn: t.id, Action: automaton.TxnCommit}})
	if res.Type == service.ResultErr && strings.HasPrefix(res.Err, automaton.ErrNoSuchTxn) {
		res = errResult("%s (the node no longer held it: a failure or eviction aborted it)", automaton.ErrTxnAborted)
	}
	c.writeResult(res)
}

// onAbort discards the open transaction (TxnAbort).
func (c *conn) onAbort() {
	if !c.txn.open {
		c.writeError("ERR SYNOD ABORT without SYNOD BEGIN")
		return
	}
	t := c.txn
	c.txn = txnConn{}
	c.writeResult(c.submit(t.ns, automaton.Request{ID: automaton.RequestID{Client: c.client, Seq: c.nextSeq()},
		Txn: &automaton.TxnStep{Txn: t.id, Action: automaton.TxnAbort}}))
}

// refuseInTxn answers and returns true when a transaction is open, for
// commands that must not run inside one.
func (c *conn) refuseInTxn(what string) bool {
	if !c.txn.open {
		return false
	}
	c.writeError(fmt.Sprintf("ERR %s is not allowed while a transaction is open (SYNOD COMMIT or SYNOD ABORT it first)", what))
	return true
}

// abortOnClose sends TxnAbort for a transaction left open by a closing
// connection. Its outcome is ignored: the node also evicts old
// transactions.
func (c *conn) abortOnClose() {
	if !c.txn.open {
		return
	}
	t := c.txn
	c.txn = txnConn{}
	ctx, cancel := context.WithTimeout(context.Background(), min(abortOnCloseTimeout, c.s.opts.RequestTimeout))
	defer cancel()
	_, err := c.s.b.Do(ctx, t.ns, automaton.Request{ID: automaton.RequestID{Client: c.client, Seq: c.nextSeq()},
		Txn: &automaton.TxnStep{Txn: t.id, Action: automaton.TxnAbort}})
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		c.s.log.Debug("aborting a closed connection's transaction failed", "id", c.id, "txn", t.id.String(), "err", err)
	}
}
