package node

import (
	"context"
	"sync"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Client sessions of a sharded namespace (protocol/paxos "Client
// sessions"; session 51).
//
// A client's requests reach the groups their keys hash to, so its id has a
// row in the deduplication table of every group it wrote to. Its session
// end (automaton.SessionEnd: the RESP gateway's when a connection closes,
// a gRPC Request's end_session) names no key: routed like a keyed request
// it reached the one group owning the slot of SessionEnd's placeholder key,
// and the client's rows in the other groups stayed for good. It now goes
// to every group of the namespace with a node (keyGroups), each ending the
// session through its own log, here or forwarded; as the node's own
// request (internal) it skips the ownership check and the slot guards, which
// would refuse it in every group but one. A group where the client has no
// row keeps a tombstone (bounded by the protocol's dedup_clients). The
// answer is OK once every group has answered OK, else the first failure:
// the caller (endSessions) only logs it.

// endSessionSharded ends req's client's session (req.Op is SessionEnd) in
// every group of sharded namespace s.
func (n *Node) endSessionSharded(ctx context.Context, s *shardedNS, req automaton.Request) (automaton.Response, error) {
	gs := n.keyGroups(s) // shardks.go
	rs := make([]service.Result, len(gs))
	errs := make([]error, len(gs))
	ctx = internalCtx(ctx)
	var wg sync.WaitGroup
	for i, gi := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := s.group(gi) // its incarnated name (groups.go)
			var resp automaton.Response
			if n.serves(g.Namespace.Name) {
				resp, errs[i] = n.do(ctx, g.Namespace.Name, req)
			} else {
				resp, errs[i] = n.forward(ctx, s, g, req)
			}
			rs[i] = resp.Result
		}()
	}
	wg.Wait()
	out := automaton.Response{ID: req.ID, Result: service.OK()}
	for i := range gs {
		if errs[i] != nil {
			return out, errs[i]
		}
		if rs[i].IsErr() {
			out.Result = rs[i]
			return out, nil
		}
	}
	return out, nil
}
