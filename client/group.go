package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/synod-dev/synod/resp"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// Atomic groups (issue 17 item 4): Redis's MULTI/EXEC as one call.
//
// Client.Group sends MULTI, the commands and EXEC together on one pooled
// connection; GRPC.Group sends the operations as one atomic group
// (DoGroup on the client's namespace). Either way the commands take effect
// together, in order, all or none, on a namespace whose protocol applies
// groups atomically, and nothing of them is applied on any other (MULTI is
// refused there, naming the protocols that can).

// ErrGroupAborted is returned by Client.Group when the transaction was
// discarded before anything was applied: a command could not be queued
// (unknown command, wrong arity: Redis's EXECABORT) or the namespace
// refused MULTI. The error wraps the first refusal.
var ErrGroupAborted = errors.New("client: the group was not applied")

// groupForbidden are the commands a group may not hold: the transaction's
// own, and those changing the connection (changesState).
var groupForbidden = map[string]bool{"MULTI": true, "EXEC": true, "DISCARD": true, "WATCH": true, "UNWATCH": true}

// Group runs cmds as one Redis transaction (MULTI, cmds..., EXEC, pipelined
// on one connection) and returns one reply per command: a command's own
// runtime error (WRONGTYPE, not an integer) is its reply, with Kind
// resp.Error, and the others were applied, as in Redis. It returns an error
// wrapping ErrGroupAborted when nothing was applied because the namespace
// refused MULTI or a command could not be queued; failures and retries
// follow Do's rules, the group counting as a read only when every command
// reads (a write group whose connection broke after EXEC was sent, or that
// TRYAGAIN answered, wraps ErrUnknownOutcome).
func (c *Client) Group(ctx context.Context, cmds ...[]string) ([]Reply, error) {
	if len(cmds) == 0 {
		return nil, errors.New("client: a group needs at least one command")
	}
	all := make([][][]byte, 0, len(cmds)+2)
	all = append(all, [][]byte{[]byte("MULTI")})
	read := true
	for _, cmd := range cmds {
		if len(cmd) == 0 {
			return nil, errors.New("client: empty command in a group")
		}
		b := make([][]byte, len(cmd))
		for i, a := range cmd {
			b[i] = []byte(a)
		}
		name := strings.ToUpper(cmd[0])
		if groupForbidden[name] || changesState(b) {
			return nil, fmt.Errorf("client: %s cannot be part of a group", name)
		}
		read = read && isRead(b)
		all = append(all, b)
	}
	all = append(all, [][]byte{[]byte("EXEC")})

	c.mu.Lock()
	start, closed := c.cur, c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	var errs []error
	for i := range c.pools {
		idx := (start + i) % len(c.pools)
		p := c.pools[idx]
		reps, sent, err := c.pipeline(ctx, p, all)
		if err != nil {
			var setup *Error
			if errors.As(err, &setup) {
				return nil, fmt.Errorf("client: preparing a connection to %s: %w", p.addr, err)
			}
			if sent && !read {
				return nil, fmt.Errorf("client: group at %s: connection failed after EXEC was sent (%v): %w", p.addr, err, ErrUnknownOutcome)
			}
			if ctxErr := ctxDone(ctx); ctxErr != nil {
				return nil, fmt.Errorf("client: group: %w (last error: %v)", ctxErr, err)
			}
			errs = append(errs, fmt.Errorf("%s: %w", p.addr, err))
			continue
		}
		out, err := groupResult(reps, cmds, read)
		var e *Error
		if errors.As(err, &e) && e.Kind == synoderr.TryAgain && read {
			errs = append(errs, fmt.Errorf("%s: %w", p.addr, e))
			continue
		}
		c.prefer(idx)
		return out, err
	}
	return nil, fmt.Errorf("client: group failed at every address: %w", errors.Join(errs...))
}

// groupResult reads the replies to MULTI, cmds..., EXEC.
func groupResult(reps []Reply, cmds [][]string, read bool) ([]Reply, error) {
	if m := reps[0]; m.Kind == resp.Error {
		return nil, fmt.Errorf("%w: MULTI: %w", ErrGroupAborted, replyError(string(m.Str)))
	}
	for i, r := range reps[1 : len(reps)-1] {
		if r.Kind == resp.Error {
			return nil, fmt.Errorf("%w: %s: %w", ErrGroupAborted, strings.ToUpper(cmds[i][0]), replyError(string(r.Str)))
		}
	}
	exec := reps[len(reps)-1]
	switch {
	case exec.Kind == resp.Error:
		e := replyError(string(exec.Str))
		if e.Kind == synoderr.TryAgain && !read {
			e.unknown = true
		}
		return nil, e
	case exec.IsNull():
		return nil, fmt.Errorf("%w: EXEC answered null (a watched key changed)", ErrGroupAborted)
	case len(exec.Elems) != len(cmds):
		return nil, fmt.Errorf("client: EXEC answered %d replies to %d commands", len(exec.Elems), len(cmds))
	}
	return exec.Elems, nil
}

// Group runs ops as one atomic group on the client's namespace
// (Options.Namespace) with its default options: DoGroup(ctx, "", ops,
// OpOptions{}). Op builds an operation.
func (c *GRPC) Group(ctx context.Context, ops ...service.Op) ([]service.Result, error) {
	return c.DoGroup(ctx, "", ops, OpOptions{})
}

// Op is the service operation kind on key with args (the KV operations are
// listed in service/kv_doc.go: Op("set", "k", "v"), Op("incr", "n", "1")).
func Op(kind, key string, args ...string) service.Op {
	op := service.Op{Kind: kind, Key: key}
	for _, a := range args {
		op.Args = append(op.Args, []byte(a))
	}
	return op
}
