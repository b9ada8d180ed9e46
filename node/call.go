package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
)

// Nested requests (automaton/call.go; the Eve/Adam thesis §3, Adam) in the live
// runtime. A node hosting namespace A carries out A's Effect of kind
// automaton.CallKind by submitting Call.Req to namespace Call.Namespace
// through the path a client request takes on this node (Node.Do): every
// node hosts every namespace of its cluster, so the callee is always local
// and its protocol forwards to its leader as for any client. The call is
// retried with the same RequestID after each attempt that times out
// (callAttempt) or gets an error answer (TRYAGAIN, not leader), until one
// answers or the node stops (a live node's incarnation ends with its
// process). A namespace this cluster does not have, or one whose protocol
// is not automaton.ServesNested, is refused with EffectDone.Err. A
// Call.Namespace of the form CLUSTER/NS names namespace NS of a remote
// cluster of the cluster file (remote.go): the call goes over its Redis
// protocol, and a cluster that answers no attempt within its timeout gets
// the call answered EffectDone.Err.

// callAttempt bounds one attempt of a nested call; callBackoff separates
// attempts after an error answer.
const (
	callAttempt = 2 * time.Second
	callBackoff = 20 * time.Millisecond
)

// callTarget checks that namespace ns of this node can serve nested
// requests.
func (n *Node) callTarget(ns string) error {
	l := n.loop(ns)
	if l == nil {
		return fmt.Errorf("nested call: no namespace %q in this cluster (it serves %s; a namespace of another cluster is named CLUSTER/NAMESPACE, CLUSTER listed under remotes)", ns, n.nsNames())
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
	remote, rns := config.SplitCallee(c.Namespace)
	var rc *remoteCluster
	if err == nil && remote != "" {
		if rc = l.n.remotes[remote]; rc == nil {
			err = fmt.Errorf("nested call to %s: the cluster file lists no remote cluster %q", c.Namespace, remote)
		}
	} else if err == nil {
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
		if rc != nil {
			resp, err, ok := rc.call(l.n.stopping, rns, req)
			if ok {
				l.push(event{in: automaton.EffectDone{ID: o.ID, Result: resp, Err: err}})
			}
			return
		}
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
		case err == nil && !automaton.RetryableAnswer(resp.Result.Err):
			return resp, true // the callee's own answer (an error it would give every copy)
		}
		select {
		case <-n.stopping:
			return resp, false
		case <-time.After(callBackoff):
		}
	}
}
