package sim

import (
	"fmt"
	"strings"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/synoderr"
)

// Client-driven operations (Config.ClientDriven, --client-driven).
//
// Protocols whose clients can coordinate (automaton.ClientCoordinator:
// the ABD report's ABD client, whose servers never talk to each other) are run
// here with every simulated client playing the coordinator itself: per
// operation the protocol's Coordination says what each phase sends; the
// client sends it to every node over its client links (client latency; a
// node that is down or restarts before the request arrives drops it, a
// paused node holds it), feeds each answer back, and starts the next phase
// when the coordination says the phase is over (a majority, for ABD). A
// phase that times out (Config.RequestTimeout) is sent again, with fresh
// request ids, to the nodes that have not answered it; answers to earlier
// attempts of the same phase still count. Retrying is safe for every
// operation, writes included: the coordination's phases are idempotent (an
// ABD store of one tag installs one value however often it arrives), so
// unlike node-coordinated writes (retryOrGiveUp) a client-driven write is
// retried, and recorded as of unknown outcome only after MaxAttempts
// attempts of one phase, or at the end of the drain.
//
// The operation is recorded in the history once, as any other client's,
// and checked for linearizability. Groups, interactive transactions,
// nested requests and sticky clients have no client-driven form.

// checkClientDriven refuses Configs the client-driven mode cannot run.
func checkClientDriven(cfg Config) error {
	if !cfg.ClientDriven {
		return nil
	}
	if _, ok := automaton.CoordinatorOf(cfg.Protocol); !ok {
		return fmt.Errorf("--client-driven: protocol %s has no client-side coordinator (automaton.ClientCoordinator)", cfg.Protocol)
	}
	var bad []string
	if cfg.Groups > 0 {
		bad = append(bad, "--groups")
	}
	if cfg.Txns > 0 {
		bad = append(bad, "--txns")
	}
	if cfg.Nested {
		bad = append(bad, "--nested")
	}
	if cfg.Callee != nil {
		bad = append(bad, "--callee-protocol")
	}
	if len(cfg.Membership) > 0 {
		bad = append(bad, "--membership")
	}
	if len(bad) > 0 {
		return fmt.Errorf("--client-driven runs single operations against a fixed membership: not with %s", strings.Join(bad, ", "))
	}
	return nil
}

// startCoordination makes c the coordinator of its new operation.
func (s *simulator) startCoordination(c *client) bool {
	cc, ok := automaton.CoordinatorOf(s.cfg.Protocol)
	if !ok {
		s.fail("client %d: protocol %s has no client-side coordinator", c.idx, s.cfg.Protocol)
		return false
	}
	co, err := cc.Coordinate(c.req.Op, c.id, c.seq, len(s.nodes))
	if err != nil {
		s.fail("client %d: %v", c.idx, err)
		return false
	}
	c.coord = co
	c.phaseFirst = c.seq
	c.answered = make([]bool, len(s.nodes))
	return true
}

// sendPhase sends the current phase, as request c.seq, to every node that
// has not answered it (the ABD report §3.1.2: the client asks every server).
func (s *simulator) sendPhase(c *client) {
	if c.attempt > 0 {
		s.stats.Retries++
	}
	c.attempt++
	c.node = -1
	ph := c.coord.Phase()
	req := automaton.Request{ID: automaton.RequestID{Client: c.id, Seq: c.seq}, Op: ph.Op}
	req.Opts.Ext = cloneExt(ph.Ext)
	c.req = req
	s.tracef("client %d: %s phase %v %v, attempt %d", c.idx, ph.Name, req.ID, ph.Op, c.attempt)
	for k := range s.nodes {
		if c.answered[k] {
			continue
		}
		s.after(s.clientLat.Sample(s.rngNet), &event{kind: evClientReq, node: k, inc: s.nodes[k].inc, client: c.idx, req: cloneRequest(req)})
	}
	s.after(s.cfg.RequestTimeout, &event{kind: evClientTimeout, client: c.idx, opSeq: c.seq, attempt: c.attempt})
}

// retryPhase sends the current phase again after a timeout, with a fresh
// request id, or gives the operation up after MaxAttempts.
func (s *simulator) retryPhase(c *client) {
	if c.attempt >= s.cfg.MaxAttempts {
		s.giveUp(c)
		return
	}
	c.seq++
	s.sendPhase(c)
}

// onPhaseResp feeds a node's answer to the coordination.
func (s *simulator) onPhaseResp(c *client, e *event) {
	id := e.resp.ID
	if !c.busy || id.Client != c.id || id.Seq < c.phaseFirst || id.Seq > c.seq {
		s.stats.LateReplies++
		return
	}
	res := e.resp.Result
	if res.IsErr() {
		s.stats.ErrorReplies++
		if res.AsError().Kind != synoderr.TryAgain {
			s.fail("client %d: %s answered %s phase %v with %s", c.idx, s.ids[e.node], c.coord.Phase().Name, id, res.Err)
			return
		}
		s.tracef("client %d: %s: %s (the phase's timeout retries it)", c.idx, s.ids[e.node], res.Err)
		return
	}
	if c.answered[e.node] {
		s.stats.LateReplies++
		return
	}
	c.answered[e.node] = true
	advanced, err := c.coord.Answer(e.node, res)
	if err != nil {
		s.fail("client %d: %v", c.idx, err)
		return
	}
	s.tracef("client %d: %s answered %v: %v", c.idx, s.ids[e.node], id, res)
	if !advanced {
		return
	}
	if !c.coord.Done() {
		c.seq++
		c.phaseFirst = c.seq
		c.attempt = 0
		c.answered = make([]bool, len(s.nodes))
		s.sendPhase(c)
		return
	}
	out := c.coord.Result()
	s.tracef("client %d: operation done -> %v", c.idx, out)
	s.digestClient(c, 'C', &out)
	c.pending.Complete(out)
	s.finishOp(c)
}

// cloneExt copies request options.
func cloneExt(ext map[string][]string) map[string][]string {
	if ext == nil {
		return nil
	}
	out := make(map[string][]string, len(ext))
	for k, v := range ext {
		out[k] = append([]string(nil), v...)
	}
	return out
}
