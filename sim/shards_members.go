package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/release"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
	"github.com/synod-dev/synod/synoderr"
)

// Membership changes of the sharded world (issue 33 items 2 and 6;
// docs/SHARDING.md "Replacements, replica moves and leader moves in the
// simulation"). The placement leader (shards_place.go) carries out
// shard.Decide's replace, balance and leader decisions as node/replace.go
// does, one at a time and never beside a migration:
//
//   - replace (a member down longer than DeadAfter) and balance (a live
//     member's replica moved to the node hosting the fewest): the members
//     record names Y joining group G and X leaving; Y's machine starts an
//     empty replica of G (a paxos replica whose bootstrap configuration,
//     the parameter members, is G's first one); "add Y" goes to a replica
//     of G (retried at others under the same request id until answered),
//     and G's protocol makes Y a learner, catches it up (log ranges or a
//     snapshot: the state transfer) and logs the add; then "remove X" the
//     same way; then the record names the new members, X joins G's former
//     members and X's replica of G is gone (a removed member's replica is
//     stopped, as the one-group simulator stops a removed node; live, it
//     runs until its node restarts). Each step is idempotent: an add of a
//     member already in, a remove of one already out, count as done.
//   - leader: a leadership transfer (automaton.LeaderTransfer) sent to a
//     member of G; TRYAGAIN answers are retried a few times, then the
//     advice is dropped (it is decided again if it still holds).
//
// The change driver is the placement leader's: under the crash fault it
// dies like the migration driver, and a new one resumes the replacement
// from the members record (same X, same Y) after 50–300ms; a leadership
// transfer cut short is dropped.
//
// Faults: the dead fault (ShardFaultKinds "dead") takes a machine down
// for 2.5–4s, longer than the world's DeadAfter (SimPlaceParams, 1.2s),
// so its replicas are replaced; it comes back later, hosting what it
// still hosts (then replica balance moves replicas onto it). One machine
// is dead at a time, and none while a change runs. The nemesis's budget
// is the placement's promise: crashes, pauses and dead machines together
// never take more than (Replicas-1)/2 of the replicas a group's machines
// host.
//
// Invariants, checked as the run goes:
//
//   - Majority: the newest configuration of every group keeps a majority
//     of live members (machine up, not paused, replica running), checked
//     whenever a configuration changes, a replica is dropped, and a
//     machine crashes, pauses or dies (waived while machines are down from
//     a power loss, which takes every machine).
//   - One chain: no group is ever served by two configurations at once:
//     every configuration any replica of a group reports (its Members
//     output's voting members) is one the group went through, or the
//     newest one with one member added or removed (a change through the
//     log); a configuration two changes away from the newest is a second
//     configuration serving the group.
//   - Healed: after the faults heal and the drain ends, no change is under
//     way, and every group's newest configuration has exactly Replicas
//     members, the members record's, each hosting a replica.
//
// Broken variants (ShardsConfig.Broken), each shown caught
// (TestShardsMembersCatch*): member-remove-first removes the old member
// (and drops its replica) before the new one is added and caught up;
// member-no-remove adds the new member without removing the old one;
// member-bootstrap starts the new member's replica as a founding member
// of the new configuration instead of changing the group's through its
// log.

// memberVariants are the broken variants of membership changes.
var memberVariants = []string{"member-remove-first", "member-no-remove", "member-bootstrap"}

// DeadFor bounds how long the dead fault keeps a machine down.
var deadFor = [2]time.Duration{2500 * time.Millisecond, 4 * time.Second}

type shChange struct {
	d     shard.Decision
	g     *shGroup
	x, y  automaton.NodeID
	id    uint64
	gen   uint64
	steps []string
	step  int
	seq   uint64
	tries int // sends of the current step
	att   int // every send and every retry: stale timeouts are ignored
	wait  bool
}

// changeSteps are the steps of decision kind k under the world's variant.
func (w *shWorld) changeSteps(k shard.DecisionKind) []string {
	if k == shard.DecLeader {
		return []string{"transfer"}
	}
	switch w.cfg.Broken {
	case "member-remove-first":
		return []string{"remove", "drop", "join", "add", "record"}
	case "member-no-remove":
		return []string{"join", "add", "record"}
	case "member-bootstrap":
		return []string{"join", "record"}
	}
	return []string{"join", "add", "remove", "record"}
}

// membersOn: the world carries out membership decisions (its protocol
// changes its membership through its log).
func (w *shWorld) membersOn() bool { return automaton.SupportsMembership(w.cfg.Protocol) }

// startChange starts carrying out decision d.
func (w *shWorld) startChange(d shard.Decision) {
	g := w.groupAt(d.From)
	c := &shChange{d: d, g: g, x: automaton.NodeID(d.Node), y: automaton.NodeID(d.With), steps: w.changeSteps(d.Kind)}
	if d.Kind != shard.DecLeader {
		if w.placeMode() {
			c.steps = append([]string{"mark"}, c.steps...) // the record, through the placement log
		} else {
			g.joining, g.leaving = c.y, c.x // the members record, first
		}
	}
	w.runChange(c)
}

func (w *shWorld) runChange(c *shChange) {
	w.chgGen++
	c.gen = w.chgGen
	for c.id == 0 || w.byID[c.id] != nil {
		c.id = w.rngChg.Uint64()
	}
	w.chg = c
	w.tracef("membership: %s (steps %s)", c.d, strings.Join(c.steps, ","))
	w.changeNext(c)
}

// resumeChange: a new change driver resumes the replacement the members
// record shows under way (after the last one died).
func (w *shWorld) resumeChange() {
	if w.chg != nil || !w.placeReady() {
		return
	}
	for _, g := range w.allGroups() {
		if g.joining == "" {
			continue
		}
		k := shard.DecReplace
		d := shard.Decision{Kind: k, From: g.idx, To: g.idx, Node: string(g.leaving), With: string(g.joining), Reason: "resuming a replacement cut short"}
		w.runChange(&shChange{d: d, g: g, x: g.leaving, y: g.joining, steps: w.changeSteps(k)})
		return
	}
}

// changeNext does c's next step.
func (w *shWorld) changeNext(c *shChange) {
	if w.chg != c {
		return
	}
	if c.step >= len(c.steps) {
		w.chg = nil
		if w.placer != nil {
			w.placer.last = "" // decide afresh
		}
		return
	}
	g := c.g
	next := func() {
		c.step++
		w.after(time.Millisecond, &shEvent{kind: shChangeEv, gen: c.gen, attempt: -1})
	}
	switch c.steps[c.step] {
	case "join":
		if g.index(c.y) < 0 {
			w.addReplica(g, w.machineByID(c.y))
		}
		next()
	case "drop":
		w.dropReplica(g, c.x)
		next()
	case "mark":
		v := w.memView(g)
		w.writeMembers(g, v, v.members, c.y, c.x, v.former, func() {
			if w.chg == c {
				next()
			}
		})
	case "record":
		v := w.memView(g)
		rec := slices.DeleteFunc(slices.Clone(v.members), func(id automaton.NodeID) bool { return id == c.y || id == c.x && w.cfg.Broken != "member-no-remove" })
		former := slices.Clone(v.former)
		if w.cfg.Broken != "member-no-remove" && !slices.Contains(former, string(c.x)) {
			former = append(former, string(c.x))
		}
		w.writeMembers(g, v, append(rec, c.y), "", "", former, func() {
			if w.chg != c {
				return
			}
			if w.cfg.Broken != "member-no-remove" {
				w.dropReplica(g, c.x)
			}
			if c.d.Kind == shard.DecBalance {
				w.stats.Balanced++
			} else {
				w.stats.Replaced++
			}
			if g.place {
				w.stats.PlaceReplaced++
			}
			w.tracef("membership: %s members %v", g.name, g.members)
			next()
		})
	default: // add, remove, transfer: a request through the group
		c.seq++
		c.tries = 0
		w.changeSend(c)
	}
}

func (c *shChange) op() service.Op {
	switch c.steps[c.step] {
	case "add":
		return automaton.MemberAdd(c.y, "sim:"+string(c.y), "sim:"+string(c.y))
	case "remove":
		return automaton.MemberRemove(c.x)
	}
	return automaton.LeaderTransfer(c.y)
}

// changeSend sends c's request to a replica of its group (the last
// leader named on a first try), with a timeout.
func (w *shWorld) changeSend(c *shChange) {
	c.tries++
	c.att++
	c.wait = true
	if r := w.pickReplica(c.g, w.rngChg, c.tries == 1); r != nil {
		req := automaton.Request{ID: automaton.RequestID{Client: c.id, Seq: c.seq}, Op: c.op()}
		w.after(w.clientLat.Sample(w.rngNet), &shEvent{kind: shClientReq, mach: r.m.idx, group: c.g.idx, inc: r.m.inc, client: -1, req: req, fwd: -1})
	}
	w.after(500*time.Millisecond, &shEvent{kind: shChangeTimeout, gen: c.gen, attempt: c.att})
}

// onChange: the next step (attempt -1), an answer, or a timeout.
func (w *shWorld) onChange(e *shEvent) {
	c := w.chg
	if c == nil || e.gen != c.gen {
		return
	}
	switch {
	case e.attempt == -1:
		w.changeNext(c)
	case e.kind == shChangeTimeout:
		if c.wait && e.attempt == c.att {
			w.changeSend(c)
		}
	default:
		if !c.wait || e.resp.ID.Seq != c.seq {
			return
		}
		res := e.resp.Result
		step := c.steps[c.step]
		retry := res.IsErr() && res.AsError().Kind == synoderr.TryAgain
		done := !res.IsErr() ||
			step == "add" && strings.Contains(res.Err, "is already a member") && !retry ||
			step == "remove" && strings.Contains(res.Err, "is not a member (members") && !retry
		switch {
		case done:
			c.wait = false
			if step == "transfer" {
				w.stats.LeaderMoves++
			}
			w.tracef("membership: %s of %s done (%s)", step, c.g.name, res)
			c.step++
			w.changeNext(c)
		case step == "transfer" && (!retry || c.tries >= 5):
			c.wait = false
			w.tracef("membership: transfer in %s dropped: %s", c.g.name, res.Err)
			w.chg = nil
		case retry:
			c.att++ // the pending timeout is stale now
			w.after(20*time.Millisecond, &shEvent{kind: shChangeTimeout, gen: c.gen, attempt: c.att})
		default:
			w.fail("membership change %s of %s refused: %s", step, c.g.name, res.Err)
		}
	}
}

// killChange: the placement leader dies with its change driver (the crash
// fault); a new one resumes a replacement from the record.
func (w *shWorld) killChange() {
	if w.chg == nil {
		return
	}
	w.tracef("the change driver dies")
	w.stats.ChangeDeaths++
	w.chg = nil
	w.after(w.between(50*time.Millisecond, 300*time.Millisecond), &shEvent{kind: shChangeResume})
}

func (w *shWorld) machineByID(id automaton.NodeID) *shMachine {
	n, err := strconv.Atoi(strings.TrimPrefix(string(id), "m"))
	if err != nil || n < 1 || n > len(w.machines) {
		panic(fmt.Sprintf("sim: no machine %q", id))
	}
	return w.machines[n-1]
}

// addReplica starts an empty replica of g on m (a joining member).
func (w *shWorld) addReplica(g *shGroup, m *shMachine) {
	r := &shReplica{w: w, g: g, m: m, durable: map[string][]byte{}, taken: map[int]string{}, incarn: g.incarn}
	r.rel = release.New(release.Config{Self: m.id, Known: g.known})
	if w.cfg.Broken == "member-bootstrap" && !slices.Contains(g.boot, m.id) {
		// Broken: a founding member of the new configuration.
		r.fresh = append(slices.DeleteFunc(slices.Clone(g.members), func(id automaton.NodeID) bool { return id == g.leaving }), m.id)
	}
	g.ids = append(g.ids, m.id)
	g.reps = append(g.reps, r)
	if !g.known(m.id) {
		g.ever = append(g.ever, m.id)
	}
	g.hint = -1
	m.reps = append(m.reps, r)
	w.tracef("membership: %s starts a replica of %s", m.id, g.name)
	if m.up {
		w.boot(r)
	}
}

// dropReplica stops and forgets id's replica of g (a removed member's).
func (w *shWorld) dropReplica(g *shGroup, id automaton.NodeID) {
	i := g.index(id)
	if i < 0 {
		return
	}
	r := g.reps[i]
	g.ids = slices.Delete(g.ids, i, i+1)
	g.reps = slices.Delete(g.reps, i, i+1)
	g.hint = -1
	m := r.m
	m.reps = slices.DeleteFunc(m.reps, func(x *shReplica) bool { return x == r })
	if m.running == r {
		m.running, m.outs = nil, nil
	}
	r.rel.Crash()
	r.a, r.buf, r.timers = nil, nil, nil
	w.tracef("membership: %s's replica of %s stopped", id, g.name)
	w.checkMajority("dropping " + string(id) + "'s replica of " + g.name)
}

// bootConfig is the automaton configuration of replica r: the group's
// bootstrap members, and for a member added later the same bootstrap
// configuration as the paxos parameter members, itself added to the
// nodes (paxos doc, "Membership changes").
func (w *shWorld) bootConfig(r *shReplica) ([]automaton.NodeID, map[string]string) {
	g := r.g
	if r.stale {
		return slices.Clone(r.staleNodes), r.staleParams // an earlier incarnation's (shards_inc.go)
	}
	if r.fresh != nil {
		return slices.Clone(r.fresh), nil
	}
	if slices.Contains(g.boot, r.m.id) {
		return slices.Clone(g.boot), nil
	}
	ids := make([]string, len(g.boot))
	for i, id := range g.boot {
		ids[i] = string(id)
	}
	return append(slices.Clone(g.boot), r.m.id), map[string]string{"members": strings.Join(ids, ",")}
}

func sortedIDs(ids []automaton.NodeID) []automaton.NodeID {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// observeConf is the one-chain invariant, at every Members output of a
// replica: its voting members are a configuration of the group's chain
// at or after the replica's last one, or the newest one changed by one
// member (then the chain grows).
func (w *shWorld) observeConf(r *shReplica, o automaton.Members) {
	g := r.g
	if r.incarn != g.incarn {
		return // an earlier incarnation's replica: not of the group's chain (shards_inc.go)
	}
	var v []automaton.NodeID
	for _, m := range o.Members {
		if m.Voting {
			v = append(v, m.ID)
		}
	}
	slices.Sort(v)
	// A configuration may recur (a remove undoing an add): a replica moves
	// forward along the chain from where it last was (from the start after
	// a boot: it recovers whichever it had).
	for j := r.confAt; j < len(g.chain); j++ {
		if slices.Equal(g.chain[j], v) {
			r.confAt = j
			return
		}
	}
	last := g.chain[len(g.chain)-1]
	if d := confDistance(last, v); d != 1 {
		w.violation("group %s is served by two configurations: its replica on %s is in {%s}, %d changes from the group's newest {%s} (a configuration changes by one member at a time, through the log)", g.name, r.m.id, joinIDs(v), d, joinIDs(last))
		return
	}
	g.chain = append(g.chain, v)
	r.confAt = len(g.chain) - 1
	w.stats.Confs++
	w.tracef("membership: %s's configuration {%s} (reported by %s)", g.name, joinIDs(v), r.m.id)
	w.checkMajority("a configuration change of " + g.name)
}

func confDistance(a, b []automaton.NodeID) int {
	d := 0
	for _, x := range a {
		if !slices.Contains(b, x) {
			d++
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			d++
		}
	}
	return d
}

func joinIDs(ids []automaton.NodeID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = string(id)
	}
	return strings.Join(s, " ")
}

// checkMajority is the majority invariant (see above), after why.
func (w *shWorld) checkMajority(why string) {
	for _, m := range w.machines {
		if m.powered {
			return
		}
	}
	for _, g := range w.allGroups() {
		if len(g.chain) == 0 {
			continue // not created (NewGroups)
		}
		c := g.chain[len(g.chain)-1]
		live := 0
		for _, id := range c {
			if i := g.index(id); i >= 0 {
				if r := g.reps[i]; r.m.up && !r.m.paused && r.a != nil {
					live++
				}
			}
		}
		if live < automaton.Majority(len(c)) {
			w.violation("group %s keeps %d live members of its configuration {%s}, fewer than a majority, after %s (hosted: %s)", g.name, live, joinIDs(c), why, joinIDs(g.ids))
			return
		}
	}
}

// checkHealed is the healed invariant, at the end of a run.
func (w *shWorld) checkHealed() {
	if c := w.chg; c != nil {
		w.violation("membership change %s of %s did not end within %v of the final heal", c.steps[c.step], c.g.name, DefaultDrainTime)
		return
	}
	for _, g := range w.allGroups() {
		if len(g.chain) == 0 {
			if len(g.members) > 0 || len(g.reps) > 0 {
				w.violation("after the faults healed, group %s has members {%s} and replicas on {%s} but was never created", g.name, joinIDs(g.members), joinIDs(g.ids))
			}
			continue
		}
		c := g.chain[len(g.chain)-1]
		if n := w.want(g); len(c) != n || !slices.Equal(c, sortedIDs(g.members)) || len(g.reps) != n {
			w.violation("after the faults healed, group %s has configuration {%s} (%d members, want %d), members record {%s}, replicas on {%s}", g.name, joinIDs(c), len(c), n, joinIDs(g.members), joinIDs(g.ids))
			return
		}
	}
}

// deadFault takes a machine down for long (the dead fault).
func (w *shWorld) deadFault() {
	if w.chg != nil {
		return
	}
	var can []*shMachine
	for _, m := range w.machines {
		if m.deadUntil > w.now {
			return // one at a time
		}
		if m.up && !m.paused && w.mayTake(m) {
			can = append(can, m)
		}
	}
	if len(can) == 0 {
		return
	}
	m := can[w.rngFault.Intn(len(can))]
	w.stats.Dead++
	w.crash(m)
	w.stats.Crashes--
	d := w.between(deadFor[0], deadFor[1])
	m.deadUntil = w.now + d
	w.tracef("%s is dead for %v", m.id, d)
	w.after(d, &shEvent{kind: shRestart, mach: m.idx, inc: m.inc})
	w.checkMajority(string(m.id) + " dying")
}
