package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// Clients that send to every replica (automaton.FanoutProtocol; the Grid Services thesis
// chapters V and VI).
//
// For a namespace whose protocol wants it (Namespace.client_fanout: Fast
// Paxos, whose clients are proposers; PB-Paxos, whose clients send to all
// replicas of which only the leader replies), GRPC sends each request, with
// Request.fanout set and one (client id, seq), to every address at once.
// Silent answers ("not mine to answer") are ignored; the first other answer
// is the request's, and the rest are dropped.
//
// A round that ends without an answer (every node silent, failed or timed
// out, or answered TRYAGAIN) is repeated, with the same (client id, seq),
// under the package's retry rules: always for a read, for a write only when
// the namespace declares idempotent_retry, else the write's outcome is
// unknown (unless no node can have received it). Before repeating, the
// client waits for a leader-change notification when the protocol has a
// leader, or a short pause (fanoutPause, doubling), so that a round that
// found a leader gone is not repeated before one is elected. At most
// fanoutRounds rounds run. Options.NoFanout turns fan-out off (one node
// then proposes or forwards for the client, as for redis-cli).

const (
	fanoutRounds = 4
	fanoutPause  = 50 * time.Millisecond
)

// sendFanout runs req on a client_fanout namespace.
func (c *GRPC) sendFanout(ctx context.Context, req *synodpb.Request, what reqName, p nsProps) (*synodpb.Response, service.Result, error) {
	if c.opts.NoFanout {
		return c.sendOne(ctx, req, what, p, -1, c.attempt)
	}
	var changed <-chan struct{}
	if p.hasLeader && !c.opts.NoLeaderWatch {
		_, changed = c.leader(p.name).target()
	}
	req.Fanout = true
	maySent := false
	var errs []error
	pause := fanoutPause
	for round := 1; ; round++ {
		resp, res, sent, rerrs, err := c.fanoutRound(ctx, req, what)
		if err != nil || resp != nil {
			return resp, res, err
		}
		maySent = maySent || sent
		errs = append(errs, rerrs...)
		if !p.read && !p.idempotent && maySent {
			return nil, service.Result{}, c.giveUp(what, false, true, fmt.Errorf("no node answered the fanout: %w", errors.Join(rerrs...)))
		}
		if round == fanoutRounds {
			return nil, service.Result{}, c.giveUp(what, p.read, maySent, fmt.Errorf("no node answered in %d fanout rounds: %w", round, errors.Join(errs...)))
		}
		t := time.NewTimer(pause)
		select {
		case <-changed:
			if p.hasLeader {
				_, changed = c.leader(p.name).target()
			}
		case <-t.C:
		case <-ctx.Done():
		case <-c.life.Done():
			t.Stop()
			return nil, service.Result{}, ErrClosed
		}
		t.Stop()
		if cerr := ctxDone(ctx); cerr != nil {
			return nil, service.Result{}, c.giveUp(what, p.read, maySent, fmt.Errorf("%w (last errors: %w)", cerr, errors.Join(rerrs...)))
		}
		pause *= 2
	}
}

// fanoutRound sends req to every address and returns the first answer that
// is not silent and not TRYAGAIN (resp non-nil), or a definite refusal
// (err), or else whether any attempt may have reached a node and each
// attempt's failure.
func (c *GRPC) fanoutRound(ctx context.Context, req *synodpb.Request, what reqName) (*synodpb.Response, service.Result, bool, []error, error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan attemptResult, len(c.conns))
	for i, g := range c.conns {
		go func() {
			resp, res, sent, err := c.attempt(rctx, g, req)
			results <- attemptResult{i, resp, res, sent, err}
		}()
	}
	sent := false
	var errs []error
	for range c.conns {
		r := <-results
		g := c.conns[r.idx]
		sent = sent || r.sent
		switch {
		case r.err != nil && definite(status.Code(r.err)):
			return nil, service.Result{}, sent, nil, fmt.Errorf("client: %s at %s: %w", what, g.addr, r.err)
		case r.err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", g.addr, r.err))
		case r.resp.GetSilent():
			errs = append(errs, fmt.Errorf("%s: silent", g.addr))
		case r.res.Type == service.ResultErr && replyError(r.res.Err).Kind == synoderr.TryAgain:
			errs = append(errs, fmt.Errorf("%s: %w", g.addr, replyError(r.res.Err)))
		default:
			c.prefer(r.idx)
			return r.resp, r.res, true, nil, nil
		}
	}
	return nil, service.Result{}, sent, errs, nil
}
