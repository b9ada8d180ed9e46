package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/synoderr"
)

// Nested requests (automaton/call.go; seed 003 §3, Adam) in the live
// runtime. A node hosting namespace A carries out A's Effect of kind
// automaton.CallKind by submitting Call.Req to namespace Call.Namespace
// through the path a client request takes on this node (Node.Do): every
// node hosts every namespace of its cluster, so the callee is always local
// and its protocol forwards to its leader as for any client. The call is
// retried with the same RequestID after each attempt that times out
// (callAttempt) or gets an error answer (TRYAGAIN, not leader), until one
// answers or the node stops (a live node's incarnation ends with its
// process). A namespace this cluster does not have, or one whose protocol
// is not automaton.ServesNested, is refused with EffectDone.Err. Calls to
// another Synod cluster are not done: Call.Namespace names a namespace of
// this cluster.

// callAttempt bounds one attempt of a nested call; callBackoff separates
// attempts after an error answer.
const (
	callAttempt = 2 * time.Second
	callBackoff = 20 * time.Millisecond
)

// callTarget checks that namespace ns of this node can serve nested
// requests.
func (n *Node) callTarget(ns string) error {
	l := n.loops[ns]
	if l == nil {
		return fmt.Errorf("nested call: no namespace %q in this cluster (it serves %s; calls to other clusters are not supported)", ns, n.nsNames())
	}
	if !automaton.ServesNested(l.ns.Protocol) {
		return fmt.Errorf("nested call: namespace %q runs %s, which does not serve nested requests", ns, l.ns.Protocol)
	}
	return nil
}

// runCall starts a released CallKind Effect. Called with l.rmu held.
func (l *nsLoop) runCall(o automaton.Effect) {
	var c automaton.Call
	var err error
	switch p := o.Payload.(type) {
	case automaton.Call:
		c = p
	case *automaton.Call:
		c = *p
	default:
		err = fmt.Errorf("nested call: payload %T, want automaton.Call", o.Payload)
	}
	if err == nil {
		err = l.n.callTarget(c.Namespace)
	}
	l.eff.wg.Add(1)
	go func() {
		defer l.eff.wg.Done()
		if err != nil {
			l.push(event{in: automaton.EffectDone{ID: o.ID, Err: err}})
			return
		}
		req := c.Req
		req.Nested = true
		if resp, ok := l.n.call(c.Namespace, req); ok {
			l.push(event{in: automaton.EffectDone{ID: o.ID, Result: resp}})
		}
	}()
}

// call submits req to namespace ns until it is answered (ok) or the node
// stops (not ok: the answer is lost with the incarnation).
func (n *Node) call(ns string, req automaton.Request) (automaton.Response, bool) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), callAttempt)
		resp, err := n.Do(ctx, ns, req)
		cancel()
		switch {
		case errors.Is(err, gateway.ErrShuttingDown):
			return resp, false
		case err == nil && !resp.Result.IsErr():
			return resp, true
		case err == nil && !retryable(resp.Result.Err):
			return resp, true // the callee's own answer (an error it would give every copy)
		}
		select {
		case <-n.stopping:
			return resp, false
		case <-time.After(callBackoff):
		}
	}
}

// retryable reports whether an error answer means "not now" (a leader
// change, a timeout inside the protocol, a slot served elsewhere or by no
// one) rather than the operation's outcome: its kind retries
// (synoderr.Kind.Retry: TRYAGAIN, MOVED, CLUSTERDOWN, and LOADING, which
// reads as TRYAGAIN).
func retryable(msg string) bool { return synoderr.Parse(msg).Kind.Retry() }
