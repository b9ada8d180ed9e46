package pbdurable

import (
	"fmt"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/durability"
	"github.com/synod-dev/synod/durability/sqlstore"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

// Durability of the protocol itself (issue 29; package doc, "Whole-cluster
// restarts" and "Fencing"): the durable view record, the view table the
// database checks, and the refusal of deployments that cannot be durable.

// paramUnsafeTakeOver was the opt-in to mapping pbdb on several nodes
// with fsync, refused by session 44 for its take-overs; since session 45
// pbdb's take-overs keep all-or-nothing (package doc, "Take-overs from a
// live primary") and the parameter is accepted and ignored, so that
// cluster files that set it still start.
const paramUnsafeTakeOver = "unsafe_takeover"

// recordView is the node's durable view (proto.Ballot encoding), written
// before anything that rests on it is sent.
const recordView = "pbd/view"

// viewObject names the view table in statements and queries.
const viewObject = "pbd_view"

var viewTable = durability.Stmt{Object: viewObject,
	SQL: "CREATE TABLE IF NOT EXISTS pbd_view (id INTEGER PRIMARY KEY, v BIGINT NOT NULL)"}

const (
	viewEnsure = "INSERT INTO pbd_view (id, v) VALUES (1, 0) ON CONFLICT (id) DO NOTHING"
	viewClaim  = "UPDATE pbd_view SET v = ? WHERE id = 1"
	viewFence  = "UPDATE pbd_view SET v = ? WHERE id = 1 AND v <= ?"
)

// viewNumber is the view as the database stores it: the round, then the
// primary's position (proto.Ballot order).
func viewNumber(v proto.Ballot) int64 { return int64(v.Round<<12 | uint64(v.Node)) }

// fence is the first statement of every transaction of the primary of
// view v: it changes no row (and the store refuses the transaction,
// durability.ErrFenced) when the database has seen a later view, and
// otherwise records v as the latest. A deposed primary's write is refused
// by the database itself.
func fence(v proto.Ballot) durability.Stmt {
	n := viewNumber(v)
	return durability.Stmt{Object: viewObject, SQL: viewFence, Args: []durability.Value{n, n}, Fence: true}
}

// hasDatabase reports whether the mapping keeps any object in the
// database (then the view table fences its transactions).
func (a *PBD) hasDatabase() bool { return a.svc.set().Has(durability.Database) }

// fenced prepends the view check to a transaction's statements.
func (a *PBD) fenced(stmts []durability.Stmt) []durability.Stmt {
	if len(stmts) == 0 {
		return stmts
	}
	return append([]durability.Stmt{fence(a.view)}, stmts...)
}

// saveView persists the view; the outputs emitted after it wait for it.
func (a *PBD) saveView() {
	e := proto.Header{Protocol: "pbdurable", Version: 1}.Record(16)
	a.view.Encode(&e)
	a.Emit(automaton.Persist{Key: recordView, Value: e.B})
}

func decodeView(b []byte) (proto.Ballot, error) {
	d, err := proto.Header{Protocol: "pbdurable", Version: 1}.OpenRecord(b, "view")
	if err != nil {
		return proto.Ballot{}, err
	}
	v := proto.DecodeBallot(d, 1<<12)
	return v, d.Done()
}

// restartDurable begins an incarnation of a node whose mapping keeps no
// replicated object: everything it served is in the database (or
// reconstructible), so it is a synced backup of its durable view at once,
// and its failure detector may make it take over (package doc,
// "Whole-cluster restarts"). It reports whether it did.
func (a *PBD) restartDurable(in automaton.Start) bool {
	b, ok := in.Records[recordView]
	if !ok || a.svc.set().Has(durability.Replicated) {
		return false
	}
	v, err := decodeView(b)
	if err != nil {
		panic(fmt.Sprintf("pbdurable: corrupt view record: %v", err))
	}
	a.view, a.synced, a.restarted = v, true, true
	a.svc.set().SetRole(durability.Backup)
	return true
}

// promoteAfter is how many consecutive silent check periods make the
// backup of rank r take over: suspect_checks for the senior (rank 1), 3
// more per rank after it (protocol/pb's spacing). A node restarted as a
// backup of its durable view (mappings without replicated objects) waits
// 3r periods, at least that: two for the old primary of the view (rank
// 0, first in a whole-cluster restart, where no primary lives: waiting
// longer there only keeps the service down), and a live primary's
// heartbeat comes well within them. Package doc, "Failure detection".
func (a *PBD) promoteAfter(rank int) int {
	n := a.suspectChecks + 3*(rank-1)
	if a.restarted {
		if rank == 0 {
			return 2
		}
		n = max(n, 3*rank)
	}
	return n
}

// CheckDeployment implements automaton.DeploymentChecker: a namespace of
// several nodes whose mapping keeps objects in the database must name one
// database every node uses. Without durability_dsn each node would open
// its own SQLite file in its data directory, and a new primary would
// recover from its own file: every write the old primary acknowledged
// would be lost at a fail-over.
//
// A mapping with replicated and database objects (pbdb) was also refused
// with durability fsync on several nodes until session 45 (its
// take-overs broke all-or-nothing); it is accepted now.
func (p protocol) CheckDeployment(svc service.Service, prm map[string]string, nodes int, dur string) error {
	if nodes < 2 {
		return nil
	}
	m := prm["mapping"]
	if m == "" {
		m = params.Defaults()["mapping"]
	}
	d, err := newDurable(svc, m)
	if err != nil {
		return nil // New reports it
	}
	s := d.set()
	if prm[sqlstore.ParamDSN] != "" || !s.Has(durability.Database) {
		return nil
	}
	return fmt.Errorf("%s: mapping %q keeps state in the database, and without %s each of the %d nodes would use its own SQLite file (<data dir>/durability-<namespace>.db): a new primary would recover from its own file and lose every write the old one acknowledged. Set %s to one database all nodes share (a SQLite file on one machine, or PostgreSQL with %s: pgx)",
		p.Protocol, m, sqlstore.ParamDSN, nodes, sqlstore.ParamDSN, sqlstore.ParamDriver)
}

// Replicated objects that survive the loss of every node (package doc,
// "Restarts, and the whole service lost"). The primary keeps them
// durable: an image of the replicated objects when it becomes ready
// (recordSnap, and recordStateView naming its view), then the update
// buffer of every request it executes (bufferPrefix + index), persisted
// before the buffer is shipped and so before any answer; a new image
// replaces the buffers every snapEvery requests, when no request's
// transaction is undecided (the image holds only decided changes).
const (
	recordSnap      = "pbd/snap"
	recordStateView = "pbd/statev"
	bufferPrefix    = "pbd/u/"
	snapEvery       = 256
)

func bufferKey(i uint64) string { return fmt.Sprintf("%s%016x", bufferPrefix, i) }

// report is a restarted node's durable view and the view of its durable
// state (zero: it holds none).
type report struct{ view, stateView proto.Ballot }

// persistState writes the image of the replicated objects at index and
// deletes the buffers it covers.
func (a *PBD) persistState() {
	if !a.svc.set().Has(durability.Replicated) {
		return
	}
	img := a.snapshot()
	a.Emit(automaton.Persist{Key: recordSnap, Value: msg{kind: kindState, view: a.view, index: a.index, state: img}.encodeAs(recordHeader)})
	for i := a.snapAt + 1; i <= a.persistedTo; i++ {
		a.Emit(automaton.Persist{Key: bufferKey(i), Delete: true})
	}
	if a.twoMechanisms() {
		a.snapImg, a.own = img, map[uint64]prepared{}
	}
	a.snapAt, a.persistedTo = a.index, a.index
	if a.stateView != a.view {
		a.stateView = a.view
		e := proto.Header{Protocol: "pbdurable", Version: 1}.Record(16)
		a.view.Encode(&e)
		a.Emit(automaton.Persist{Key: recordStateView, Value: e.B})
	}
}

// persistBuffer makes an executed request's update buffer durable.
func (a *PBD) persistBuffer(p *pending) {
	a.Emit(automaton.Persist{Key: bufferKey(p.ship), Value: msg{kind: kindUpdate, view: a.view, index: p.ship, db: len(p.stmts) > 0, ups: p.ups}.encodeAs(recordHeader)})
	a.persistedTo = p.ship
	if a.own != nil {
		a.own[p.ship] = prepared{ups: p.ups, db: len(p.stmts) > 0}
	}
}

// compact replaces the buffers by an image once snapEvery accumulated
// and none is undecided.
func (a *PBD) compact() {
	if a.primary && a.index-a.snapAt >= snapEvery && a.stateClear() {
		a.persistState()
	}
}

// restartReplicated begins an incarnation of a node whose mapping has
// replicated objects and that has a durable view: it loads its durable
// state (if it was a primary), tells every node its views, and waits,
// recovering, for a live primary (whose heartbeat makes it join) or for
// every node's report (elect).
func (a *PBD) restartReplicated(in automaton.Start) bool {
	b, ok := in.Records[recordView]
	if !ok || !a.svc.set().Has(durability.Replicated) {
		return false
	}
	v, err := decodeView(b)
	if err != nil {
		panic(fmt.Sprintf("pbdurable: corrupt view record: %v", err))
	}
	a.view = v
	a.svc.set().SetRole(durability.Backup)
	if sv, ok := in.Records[recordStateView]; ok {
		if a.stateView, err = decodeView(sv); err != nil {
			panic(fmt.Sprintf("pbdurable: corrupt state view record: %v", err))
		}
		a.loadState(in.Records)
		a.memView = a.stateView
	}
	a.recovering = true
	a.reports = map[automaton.NodeID]report{a.cfg.Self: {view: a.view, stateView: a.stateView}}
	a.sendReports(true)
	return true
}

// loadState installs the image and holds the buffers after it, in order,
// as prepared: a take-over's recovery decides them (commit.go).
func (a *PBD) loadState(recs map[string][]byte) {
	m, err := decodeAs(recordHeader, recs[recordSnap])
	if err != nil || m.kind != kindState {
		panic(fmt.Sprintf("pbdurable: corrupt state image: %v", err))
	}
	if err := a.install(m.state); err != nil {
		panic(fmt.Sprintf("pbdurable: state image does not install: %v", err))
	}
	a.index, a.applied, a.commit = m.index, m.index, m.index
	a.snapAt, a.persistedTo = m.index, m.index
	for i := m.index + 1; ; i++ {
		b, ok := recs[bufferKey(i)]
		if !ok {
			break
		}
		u, err := decodeAs(recordHeader, b)
		if err != nil || u.kind != kindUpdate {
			panic(fmt.Sprintf("pbdurable: corrupt update buffer %d: %v", i, err))
		}
		a.held[i] = prepared{ups: u.ups, db: u.db}
		a.index, a.persistedTo = i, i
	}
}

func (a *PBD) sendReports(ask bool) {
	for _, n := range a.cfg.Nodes {
		if n != a.cfg.Self {
			a.send(n, msg{kind: kindReport, view: a.view, stateView: a.stateView, db: ask})
		}
	}
}

// onReport: a restarted node's views. A primary answers with a
// heartbeat (the node joins it); a recovering node notes them, answers
// with its own when asked, and tries the election.
func (a *PBD) onReport(from automaton.NodeID, m msg) {
	switch {
	case a.primary:
		a.send(from, msg{kind: kindHeartbeat, view: a.view, index: a.index, commit: a.commit})
	case !a.recovering && !a.synced && a.collects():
		// A node waiting for a state that no primary sends (its primary
		// stopped before it was ready) joins the restarted node's
		// election, as if it had restarted too.
		a.recovering = true
		a.reports = map[automaton.NodeID]report{a.cfg.Self: {view: a.view, stateView: a.stateView}}
		fallthrough
	case a.recovering:
		a.reports[from] = report{view: m.view, stateView: m.stateView}
		if m.db {
			a.send(from, msg{kind: kindReport, view: a.view, stateView: a.stateView})
		}
		a.elect()
	}
}

// elect is the restarted service's choice (package doc): once every node
// reported, the node whose durable state is of the latest view takes
// over, above every reported view. Its state holds every acknowledged
// write: the primary of that view wrote its image when it became ready,
// before it answered anything, and the buffer of every request it
// executed since; a later view whose primary has no durable state never
// answered. Only the chosen node acts.
func (a *PBD) elect() {
	defer func() {
		if !a.recovering {
		}
	}()
	if len(a.reports) < len(a.cfg.Nodes) {
		return
	}
	var best report
	var round uint64
	for _, r := range a.reports {
		if best.stateView.Less(r.stateView) {
			best = r
		}
		round = max(round, r.view.Round)
	}
	if best.stateView.IsZero() || best.stateView != a.stateView || a.reports[a.cfg.Self] != best {
		return
	}
	a.recovering, a.reports, a.synced = false, nil, true
	a.view = proto.Ballot{Round: round, Node: a.view.Node}
	a.takeOver()
}

// leaveRecovery: a live primary answered; the node joins it.
func (a *PBD) leaveRecovery() {
	a.recovering, a.reports = false, nil
	if !a.collects() {
		a.held = map[uint64]prepared{}
	}
	// Otherwise the loaded buffers stay held: the node's promise reports
	// them (takeover.go) until a state replaces them.
}
