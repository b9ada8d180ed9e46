package client

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/synod-dev/synod/api/synodpb"
)

// Client sessions (api/synod.proto Request.unanswered and end_session,
// Namespace.sessions; protocol/paxos "Client sessions"; session 51).
//
// Each lane (lanes.go) has one request in flight at a time, so the lowest
// unanswered request under a lane's client id is the request itself:
// where the namespace keeps sessions, send sets Request.unanswered to the
// request's seq (a retry carries the same pair), and the namespace keeps
// one outcome per lane instead of its last 64. A request given up with its
// outcome unknown is below the lane's next request's bound: a late copy
// of it is refused, not executed (never twice).
//
// Close ends the sessions: for every idle lane, in each namespace with
// sessions it wrote to, a Do with end_session under the lane's client id,
// all at once, bounded by the client's timeout and endSessionTimeout,
// before the connections close; answers are ignored (a session left open
// stays in the namespace's table, bounded there, as before). A lane that
// only read has no row to end; a lane still in flight at Close keeps its
// row. A client of an earlier release sends neither field: its rows keep
// the window of 64 and stay until the table's bound evicts them.

// endSessionTimeout bounds Close's wait for the session ends.
const endSessionTimeout = 2 * time.Second

// session sets req's unanswered bound (req goes out on lane l to
// namespace ns, which keeps sessions) and notes a write (!read) to ns.
func (l *lane) session(req *synodpb.Request, ns string, read bool) {
	req.Unanswered = req.Seq
	if !read && !slices.Contains(l.wrote, ns) {
		l.wrote = append(l.wrote, ns)
	}
}

// endSessions ends the sessions of the idle lanes that wrote (Close).
func (c *GRPC) endSessions() {
	c.lanes.mu.Lock()
	idle := c.lanes.free
	c.lanes.free = nil // a send racing Close takes a fresh lane, not these
	c.lanes.mu.Unlock()
	var ends []*synodpb.Request
	for _, l := range idle {
		for _, ns := range l.wrote {
			r := &synodpb.Request{Namespace: ns, ClientId: l.client, Seq: l.seq + 1, EndSession: true}
			if l.own {
				r.ClientId, r.Seq = c.client, c.seq.Add(1)
			}
			ends = append(ends, r)
		}
	}
	if len(ends) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(c.opts.Timeout, endSessionTimeout))
	defer cancel()
	var wg sync.WaitGroup
	for _, r := range ends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A session end is idempotent: retried at the next address.
			c.sendOne(ctx, r, reqName{text: "ending the client's session"}, nsProps{name: r.Namespace, idempotent: true}, -1, c.attempt)
		}()
	}
	wg.Wait()
}
