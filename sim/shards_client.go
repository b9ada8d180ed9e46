package sim

import (
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
)

// Clients, the migration driver and the fault injector of the sharded
// world (shards.go describes them).

const (
	shMaxTries     = 10  // attempts of one request id in one group
	shMaxRedirects = 100 // MOVED, ASK and TRYAGAIN answers to one operation
	shTimeout      = time.Second
)

type shClient struct {
	idx   int
	id    uint64
	plain bool
	cache *shard.Map // the client's copy of the slot map

	busy      bool
	op        service.Op
	pending   *history.Pending
	ops       int
	seq       uint64 // the request id's sequence number in the current group
	group     int
	asking    bool
	attempt   int // every send and every answer bumps it: stale timeouts are ignored
	tries     int // sends of the current id
	redirects int
	fwd       bool // the current attempt went through a forwarding machine
	start     time.Duration
}

func (w *shWorld) onClientNext(c *shClient) {
	if c.busy || w.stopping || w.issued >= w.cfg.Ops {
		return
	}
	kinds := []string{"get", "get", "get", "get", "set", "set", "set", "set", "del"}
	op := service.Op{Kind: kinds[w.rngClient.Intn(len(kinds))], Key: "k" + strconv.Itoa(w.rngClient.Intn(w.cfg.Keys))}
	if phase, hot := w.hotPhase(); hot && w.rngClient.Float64() < w.cfg.Hot {
		// The hot spot of this phase: HotKeys consecutive key names.
		op.Key = "k" + strconv.Itoa((phase*w.cfg.HotKeys+w.rngClient.Intn(w.cfg.HotKeys))%w.cfg.Keys)
	}
	c.ops++
	if op.Kind == "set" {
		op.Args = [][]byte{[]byte("c" + strconv.Itoa(c.idx) + "-" + strconv.Itoa(c.ops))}
	}
	c.op, c.busy, c.redirects, c.start = op, true, 0, w.now
	c.pending = w.rec.Invoke(c.idx, Namespace, op, "")
	w.issued++
	w.busyClients++
	c.group, c.asking = c.cache.Group(op.Key), false
	w.newSeries(c)
	w.sendAttempt(c)
	if w.issued >= w.cfg.Ops {
		w.stopIssuing()
	}
}

func (w *shWorld) newSeries(c *shClient) {
	c.seq++
	c.tries = 0
}

// request is the atomic group a node makes of the client's operation
// (node/slotmap.go guarded): the slot's guard, the operation, and for a
// write the dirty mark.
func (c *shClient) request(svc service.Service) automaton.Request {
	sl := shard.KeySlot(c.op.Key)
	mode := shard.ModeRead
	write := !svc.IsRead(c.op)
	if write {
		mode = shard.ModeWrite
	}
	if c.asking {
		mode = shard.ModeAsking
	}
	ops := []service.Op{shKV(service.GuardKind, shard.StateKey(sl), "slot", mode), cloneOp(c.op)}
	if write {
		ops = append(ops, shKV("slotdirty", c.op.Key))
	}
	return automaton.Request{ID: automaton.RequestID{Client: c.id, Seq: c.seq}, Ops: ops}
}

func shKV(kind, key string, args ...string) service.Op {
	op := service.Op{Kind: kind, Key: key}
	for _, a := range args {
		op.Args = append(op.Args, []byte(a))
	}
	return op
}

func (w *shWorld) sendAttempt(c *shClient) {
	if c.tries >= shMaxTries {
		w.tracef("client %d gives up on %v (unknown outcome)", c.idx, c.op)
		c.pending.Unknown()
		w.stats.Unknown++
		w.finishOp(c)
		return
	}
	if c.tries > 0 {
		w.stats.Retries++
	}
	c.tries++
	c.attempt++
	g := w.groups[c.group]
	req := c.request(w.kv)
	if w.cfg.NewGroups > 0 && c.tries == 1 && !c.asking {
		// The node's own map check (node/shard.go refuseUnowned), before
		// the group: a node whose map names another owner answers MOVED
		// (here with the newest map). Only on a series' first send, so
		// no earlier attempt of the id can be in the group's log (the
		// refusal bypasses the group's deduplication). Modelled in worlds
		// with new groups only (session 45), so that the published seeds
		// of the others keep their schedules.
		if own := w.placeMap.Group(c.op.Key); own != c.group && own >= 0 {
			resp := automaton.Response{ID: req.ID, Results: []service.Result{service.GuardFailure(fmt.Sprintf("slot %s %s", shard.RefuseMoved, w.groups[own].name)), {}}}
			w.after(w.clientLat.Sample(w.rngNet), &shEvent{kind: shClientResp, client: c.idx, resp: resp})
			w.after(shTimeout, &shEvent{kind: shClientTimeout, client: c.idx, attempt: c.attempt})
			return
		}
	}
	if c.plain {
		var live []*shMachine
		for _, m := range w.machines {
			if m.up {
				live = append(live, m)
			}
		}
		if len(live) > 0 {
			m := live[w.rngClient.Intn(len(live))]
			c.fwd = w.replicaOn(m, g.idx) == nil
			kind := shClientReq
			if c.fwd {
				kind = shForward
			}
			w.after(w.clientLat.Sample(w.rngNet), &shEvent{kind: kind, mach: m.idx, group: g.idx, inc: m.inc, client: c.idx, req: req, fwd: -1})
		}
	} else {
		c.fwd = false
		if r := w.pickReplica(g, w.rngClient, c.tries == 1); r != nil {
			w.after(w.clientLat.Sample(w.rngNet), &shEvent{kind: shClientReq, mach: r.m.idx, group: g.idx, inc: r.m.inc, client: c.idx, req: req, fwd: -1})
		}
	}
	w.after(shTimeout, &shEvent{kind: shClientTimeout, client: c.idx, attempt: c.attempt})
}

func (w *shWorld) onClientTimeout(e *shEvent) {
	c := w.clients[e.client]
	if !c.busy || e.attempt != c.attempt {
		return
	}
	w.tracef("client %d: %v timed out in %s", c.idx, c.op, w.groups[c.group].name)
	w.sendAttempt(c) // the same id: the group's deduplication answers a copy
}

func (w *shWorld) onClientResend(e *shEvent) {
	c := w.clients[e.client]
	if c.busy && e.attempt == c.attempt {
		w.sendAttempt(c)
	}
}

// respond takes a replica's answer to a client or to the driver.
func (w *shWorld) respond(r *shReplica, resp automaton.Response) {
	if p := w.placer; p != nil && resp.ID.Client == p.id {
		w.after(w.clientLat.Sample(w.rngNet), &shEvent{kind: shPlaceAnswer, resp: resp})
		return
	}
	if p := w.pg; p != nil && resp.ID.Client == p.id {
		w.after(0, &shEvent{kind: shPlaceCallAnswer, resp: resp})
		return
	}
	if c := w.calls[resp.ID.Client]; c != nil {
		w.after(w.clientLat.Sample(w.rngNet), &shEvent{kind: shCallResp, resp: resp})
		return
	}
	if c := w.chg; c != nil && resp.ID.Client == c.id {
		w.after(w.clientLat.Sample(w.rngNet), &shEvent{kind: shChangeEv, gen: c.gen, resp: resp})
		return
	}
	if d := w.drv; d != nil && resp.ID.Client == d.id {
		w.after(w.clientLat.Sample(w.rngNet), &shEvent{kind: shDriverEv, gen: d.gen, resp: resp, attempt: 1})
		return
	}
	c := w.byID[resp.ID.Client]
	if c == nil {
		return // a dead driver's answer
	}
	// The group's leader as the answering replica names it (a node
	// gossips it and names it first in CLUSTER SLOTS and MOVED), else the
	// replica that answered.
	r.g.hint = r.g.index(r.m.id)
	if lr, ok := r.a.(automaton.LeaderReporter); ok {
		if i := r.g.index(lr.Leader()); i >= 0 {
			r.g.hint = i
		}
	}
	d := w.clientLat.Sample(w.rngNet)
	if c.fwd {
		d += w.lat.Sample(w.rngNet)
	}
	w.after(d, &shEvent{kind: shClientResp, client: c.idx, resp: resp})
}

func (w *shWorld) onClientResp(e *shEvent) {
	c := w.clients[e.client]
	resp := e.resp
	if !c.busy || resp.ID.Seq != c.seq {
		return // late: an earlier id's, or an answered one's
	}
	c.attempt++
	if resp.Result.IsErr() || len(resp.Results) < 2 {
		// The group could not run it now (no leader, ...): again, same id.
		w.after(10*time.Millisecond, &shEvent{kind: shClientResend, client: c.idx, attempt: c.attempt})
		return
	}
	if g := resp.Results[0]; service.IsGuardFailure(g) {
		w.redirect(c, g.Err)
		return
	}
	res := resp.Results[1]
	c.pending.Complete(res)
	w.stats.Completed++
	w.done = append(w.done, OpDone{At: w.now, Latency: w.now - c.start})
	if w.warmedUp {
		w.measured++
		w.lastReply = w.now
	}
	w.finishOp(c)
}

// redirect follows a refused guard as a cluster client follows the
// node's answer: MOVED, ASK, TRYAGAIN. The refusal is the first outcome
// of the id in that group's log, so no attempt of it was applied: the
// next attempt gets a new id.
func (w *shWorld) redirect(c *shClient, text string) {
	f := strings.Fields(text) // GUARDFAILED slot <refusal> <peer>
	ref, peer := "", "-"
	if len(f) >= 4 {
		ref, peer = f[2], f[3]
	}
	from := c.group
	c.redirects++
	if c.redirects > shMaxRedirects {
		c.pending.Fail(service.Errorf("TRYAGAIN %s", text))
		w.finishOp(c)
		return
	}
	pg := -1
	if strings.HasPrefix(peer, "s") {
		if n, err := strconv.Atoi(peer[1:]); err == nil && n < len(w.groups) {
			pg = n
		}
	}
	w.newSeries(c)
	delay := time.Duration(0)
	switch ref {
	case shard.RefuseAsk:
		w.stats.Asked++
		c.group, c.asking = pg, true
	case shard.RefuseMoved:
		w.stats.Moved++
		// Reload the map (a CLUSTER SLOTS round trip), then its owner.
		c.cache = w.placeMap
		delay = 2 * w.clientLat.Sample(w.rngNet)
		c.group, c.asking = c.cache.Group(c.op.Key), false
		if c.group == from && pg >= 0 {
			c.group = pg // the map has not flipped yet: the group named
		}
	default: // TRYAGAIN: frozen, or a transaction's lock
		w.stats.TryAgain++
		c.asking = false
		delay = 5*time.Millisecond + time.Duration(w.rngClient.Int63n(int64(20*time.Millisecond)))
	}
	if c.group < 0 {
		c.group = c.cache.Group(c.op.Key)
	}
	c.attempt++
	w.after(delay, &shEvent{kind: shClientResend, client: c.idx, attempt: c.attempt})
}

func (w *shWorld) finishOp(c *shClient) {
	c.busy = false
	c.attempt++
	w.busyClients--
	d := w.think.Sample(w.rngClient)
	if _, hot := w.hotPhase(); w.cfg.Hot > 0 && !hot {
		d *= quietThink
	}
	w.after(d, &shEvent{kind: shClientNext, client: c.idx})
}

// quietThink: in a quiet phase clients think this many times longer.
const quietThink = 5

// hotPhase is the workload's phase (ShardsConfig.Hot): phases of
// HotPhase alternate between hot (a share Hot of the operations on this
// phase's hot keys) and quiet (uniform keys, clients thinking quietThink
// times longer): the load moves, rises and falls, so groups turn hot
// (splits) and cold (merges).
func (w *shWorld) hotPhase() (int, bool) {
	if w.cfg.Hot == 0 {
		return 0, false
	}
	p := int(w.now / w.cfg.HotPhase)
	return p / 2, p%2 == 0
}

// pickReplica picks the machine a request to group g goes to: a live
// replica drawn from rng (nil when none is up), or, when useHint (a first
// try) and the group's last known leader is up, that leader. The draw is
// made whenever a replica is up, so the hint does not change the
// schedule's random stream.
func (w *shWorld) pickReplica(g *shGroup, rng *rand.Rand, useHint bool) *shReplica {
	var live []*shReplica
	for _, r := range g.reps {
		if r.m.up {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return nil
	}
	r := live[rng.Intn(len(live))]
	if h := g.hint; useHint && h >= 0 && g.reps[h].m.up {
		r = g.reps[h]
	}
	return r
}
