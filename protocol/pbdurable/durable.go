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
	a.emit(automaton.Persist{Key: recordView, Value: e.B})
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

// promoteAfter is how many silent check periods make the backup of rank
// r take over: 3r-2 (protocol/pb), and after a restart at least two more
// (a live primary's heartbeat comes first; the old primary of the view,
// rank 0, goes first in a whole-cluster restart).
func (a *PBD) promoteAfter(rank int) int {
	n := 3*rank - 2
	if a.restarted {
		n = max(n, 0) + 2
	}
	return n
}

// CheckDeployment implements automaton.DeploymentChecker: a namespace of
// several nodes whose mapping keeps objects in the database must name one
// database every node uses. Without durability_dsn each node would open
// its own SQLite file in its data directory, and a new primary would
// recover from its own file: every write the old primary acknowledged
// would be lost at a fail-over.
func (p protocol) CheckDeployment(svc service.Service, prm map[string]string, nodes int, _ string) error {
	if nodes < 2 || prm[sqlstore.ParamDSN] != "" {
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
	if !d.set().Has(durability.Database) {
		return nil
	}
	return fmt.Errorf("%s: mapping %q keeps state in the database, and without %s each of the %d nodes would use its own SQLite file (<data dir>/durability-<namespace>.db): a new primary would recover from its own file and lose every write the old one acknowledged. Set %s to one database all nodes share (a SQLite file on one machine, or PostgreSQL with %s: pgx)",
		p.name, m, sqlstore.ParamDSN, nodes, sqlstore.ParamDSN, sqlstore.ParamDriver)
}
