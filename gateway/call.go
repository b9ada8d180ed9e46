package gateway

import (
	"fmt"
	"strconv"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// SYNOD CALL: a nested request from another Synod cluster (automaton/call.go;
// the Eve/Adam thesis §3, Adam: the callee "just has to treat Adam replicas
// as clients that might make repeated requests with the same sequence
// numbers").
//
//	SYNOD CALL client seq kind [key [arg ...]]
//
// submits one operation of the connection's namespace as the nested request
// (client, seq): automaton.Request.Nested set, the id the caller chose
// (every replica of the calling namespace, and every re-issue after a
// rollback or a restart, sends the same id). The namespace's protocol must
// serve nested requests (automaton.ServesNested: it orders the request,
// reads included, and answers every copy of the id alike from its
// deduplication table); otherwise the command is refused and nothing runs.
//
// The reply is a bulk string: the operation's result in Synod's own
// encoding (service.EncodeResultBytes), so that the caller receives the
// answer exactly as a caller in the callee's own cluster would, error
// results included (a TRYAGAIN result means "not now": the caller re-sends
// the same id). An error reply means the command was refused before the
// request reached the protocol (arity, a bad id, ACL, a namespace that does
// not serve nested requests).
//
// The caller side is node/remote.go.

func init() {
	synodHelp = append(synodHelp,
		"SYNOD CALL client seq kind [key [arg ...]] -- Run one operation as the nested request (client, seq) of another cluster's namespace; the reply is the encoded result (docs/NESTED.md).")
}

func (c *conn) callCommand(sub string, args [][]byte) bool {
	if sub != "call" {
		return false
	}
	if len(args) < 5 {
		c.writeError(arityErr("synod|call"))
		return true
	}
	if c.refuseInTxn("SYNOD CALL") {
		return true
	}
	client, err1 := strconv.ParseUint(string(args[2]), 10, 64)
	seq, err2 := strconv.ParseUint(string(args[3]), 10, 64)
	if err1 != nil || err2 != nil || client == 0 {
		c.writeError("ERR SYNOD CALL: client and seq must be unsigned integers, client not 0")
		return true
	}
	c.mu.Lock()
	ns, svc := c.ns, c.svc
	c.mu.Unlock()
	if svc == nil {
		c.writeError("ERR this node serves no namespace")
		return true
	}
	if !automaton.ServesNested(ns.Protocol) {
		why := ""
		if r := automaton.NestedRefusal(ns.Protocol); r != "" {
			why = ": " + r
		}
		c.writeError(fmt.Sprintf("ERR namespace '%s' runs %s, which does not serve nested requests%s", ns.Name, ns.Protocol, why))
		return true
	}
	op := synodOp(args[2:])
	if err := svc.Validate(op); err != nil {
		c.w.WriteBulk(service.EncodeResultBytes(errResult("%s", withCode(err.Error()))))
		return true
	}
	res := c.submit(ns.Name, automaton.Request{ID: automaton.RequestID{Client: client, Seq: seq}, Op: op, Nested: true, Checked: true})
	c.w.WriteBulk(service.EncodeResultBytes(res))
	return true
}
