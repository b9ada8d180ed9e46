package pbdurable

import (
	"github.com/synod-dev/synod/durability"
)

// All-or-nothing across mechanisms (the Grid Services thesis IV.C, "the changes of an
// atomic action are applied to all state objects or to none"; package
// doc): a presumed-abort two-phase commit whose log is the database.
//
//   - Prepare: a request's update buffer goes to every backup, which
//     holds it (prepared) and acknowledges.
//   - Commit: once every member acknowledged it, the request's database
//     transaction runs, and records the request's index in the table
//     pbd_commit in the same transaction: the decision.
//   - The primary answers, and its commit index (heartbeats, updates)
//     tells the backups to apply the prepared buffers up to it.
//   - A new primary reads pbd_commit with the recovery queries: the
//     prepared buffers up to the recorded index are applied, the later
//     ones with a database transaction (and everything after them) are
//     discarded: presumed abort.
//
// Requests without a database transaction need no decision: a backup
// applies their buffer once every earlier one is applied. Since session
// 45 there are none under two mechanisms: a request that touches only
// replicated objects gets a transaction of its decision alone (primary.go
// execute), so that the commit index covers every answered write
// (takeover.go shortOfCommit).

// commitObject names the protocol's own table in statements and queries.
const commitObject = "pbd_commit"

var commitTable = durability.Stmt{Object: commitObject,
	SQL: "CREATE TABLE IF NOT EXISTS pbd_commit (id INTEGER PRIMARY KEY, idx BIGINT NOT NULL)"}

const (
	commitReset  = "INSERT INTO pbd_commit (id, idx) VALUES (1, 0) ON CONFLICT (id) DO UPDATE SET idx = 0"
	commitEnsure = "INSERT INTO pbd_commit (id, idx) VALUES (1, 0) ON CONFLICT (id) DO NOTHING"
	commitRecord = "UPDATE pbd_commit SET idx = ? WHERE id = 1"
	commitQuery  = "SELECT idx FROM pbd_commit WHERE id = 1"
)

// twoMechanisms reports whether a request may touch a replicated and a
// database object: only then is a decision recorded.
func (a *PBD) twoMechanisms() bool {
	s := a.svc.set()
	return s.Has(durability.Replicated) && s.Has(durability.Database)
}

// recoveryQueries are the objects' recovery queries and, last, the
// commit index's.
func (a *PBD) recoveryQueries() []durability.Query {
	qs := a.svc.set().Recover().Queries
	if a.twoMechanisms() {
		qs = append(qs, durability.Query{Object: commitObject, SQL: commitQuery})
	}
	return qs
}

// commitDecision is the statement that records request index i's commit
// inside its transaction.
func commitDecision(i uint64) durability.Stmt {
	return durability.Stmt{Object: commitObject, SQL: commitRecord, Args: []durability.Value{int64(i)}}
}

// applyPrepared applies the prepared buffers, in index order, that the
// commit index c decided (i <= c) or that need no decision (no database
// transaction); it stops at the first one still undecided. The broken
// variant noprepare applies every buffer that arrived.
func (a *PBD) applyPrepared(c uint64) {
	for {
		p, ok := a.held[a.applied+1]
		if !ok || (p.db && a.applied+1 > c && !a.proto.noPrepare) {
			return
		}
		delete(a.held, a.applied+1)
		a.applied++
		if p.db {
			a.dbApplied = a.applied
		}
		_ = a.svc.set().Apply(p.ups)
	}
}

// decide is a new primary's recovery of its prepared buffers (presumed
// abort): apply what the database's commit index c decided, discard the
// rest; its index continues from the last applied update.
func (a *PBD) decide(c uint64) {
	a.applyPrepared(c)
	a.held = map[uint64]prepared{}
	a.index, a.commit = a.applied, a.applied
	a.recovered = &recovery{dbCommit: c}
}
