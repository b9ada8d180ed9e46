package sqlstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/durability"
)

// EffectKind is the Effect kind of the database proxies' work: a protocol
// that runs a durable service emits one Effect per request whose payload
// is a *Payload (the request's statements, BEGIN..COMMIT, and any recovery
// queries), and releases the request's answer only after its EffectDone.
const EffectKind = "durability.sql"

// Namespace parameters the executor reads (a protocol that uses it must
// accept them).
const (
	ParamDriver = "durability_driver" // sqlite (default) or pgx
	ParamDSN    = "durability_dsn"    // default: <data dir>/durability-<namespace>.db
	ParamSync   = "durability_sync"   // true (default) or false: state fsync
)

// Payload is one effect: Stmts in one transaction, then Queries.
type Payload struct {
	Stmts   []durability.Stmt
	Queries []durability.Query
}

// Result answers a Payload: the rows of each query, in order.
type Result struct {
	Rows [][][]durability.Value
	// Took is the wall time the database took (live) or the modelled cost
	// (simulation: SimCost per statement and query).
	Took time.Duration
}

// Cost implements automaton.CostedResult: the simulator delivers the
// answer after the modelled database round trip.
func (r Result) Cost() time.Duration { return r.Took }

// SimCost is the virtual time one statement or query costs in simulation.
var SimCost = 2 * time.Millisecond

func init() {
	automaton.RegisterExecutor(EffectKind, newExecutor)
}

type executor struct {
	st  *Store
	sim bool
	db  *simDB // simulation: the shared database this executor holds (nil once closed)
}

// simDBs are the simulator's databases: an in-memory SQLite database per
// (run, namespace) that outlives node crashes (it is another machine),
// keyed by automaton.ExecEnv.Run so that runs in one process (parallel
// seeds) never share one. There is no end-of-run signal, so the databases
// of the oldest runs are dropped once more than keepSimRuns runs have made
// one (far more than the simulator's parallel workers). A dropped database
// is closed when its last executor closes: the model checker makes a run
// per effect it carries out, on several workers at once, so a run's
// database may be dropped while its executor is still using it.
var (
	simMu    sync.Mutex
	simDBs   = map[string]*simDB{}
	simOrder []string // keys in creation order
)

// simDB is one simulated database and the executors holding it.
type simDB struct {
	st      *Store
	users   int
	dropped bool
}

// release closes db once it is dropped and no executor holds it. Called
// under simMu.
func (db *simDB) release() {
	if db.dropped && db.users == 0 {
		db.st.Close()
	}
}

const keepSimRuns = 64

// ResetSim drops the simulator's databases.
func ResetSim() {
	simMu.Lock()
	defer simMu.Unlock()
	for k, db := range simDBs {
		db.dropped = true
		db.release()
		delete(simDBs, k)
	}
	simOrder = nil
}

func newExecutor(env automaton.ExecEnv) (automaton.Executor, error) {
	cfg := Config{Driver: env.Params[ParamDriver], DSN: env.Params[ParamDSN], Sync: true}
	if v := env.Params[ParamSync]; v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", ParamSync, err)
		}
		cfg.Sync = b
	}
	if env.Simulated {
		simMu.Lock()
		defer simMu.Unlock()
		key := env.Run + "\x00" + env.Namespace
		db := simDBs[key]
		if db == nil {
			st, err := Open(Config{Driver: SQLite, DSN: ":memory:"})
			if err != nil {
				return nil, err
			}
			db = &simDB{st: st}
			simDBs[key] = db
			simOrder = append(simOrder, key)
			for len(simOrder) > keepSimRuns {
				if old := simDBs[simOrder[0]]; old != nil {
					old.dropped = true
					old.release()
					delete(simDBs, simOrder[0])
				}
				simOrder = simOrder[1:]
			}
		}
		db.users++
		return &executor{st: db.st, sim: true, db: db}, nil
	}
	if cfg.DSN == "" {
		if env.DataDir == "" {
			return nil, fmt.Errorf("%s: no data directory and no %s", EffectKind, ParamDSN)
		}
		// The node's data directory may not exist yet (a memory-durability
		// node keeps nothing else there).
		if err := os.MkdirAll(env.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("%s: %v", EffectKind, err)
		}
		cfg.DSN = filepath.Join(env.DataDir, "durability-"+env.Namespace+".db")
	} else if (cfg.Driver == "" || cfg.Driver == SQLite) && cfg.DSN != ":memory:" {
		// A shared file (cluster.Up's DIR/data/durability-<ns>.db) may be
		// opened before any node made the directory.
		if err := os.MkdirAll(filepath.Dir(cfg.DSN), 0o755); err != nil {
			return nil, fmt.Errorf("%s: %v", EffectKind, err)
		}
	}
	st, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	return &executor{st: st}, nil
}

// Execute runs the payload's statements in one transaction, then its
// queries.
func (x *executor) Execute(payload any) (any, error) {
	p, ok := payload.(*Payload)
	if !ok {
		return nil, fmt.Errorf("%s: payload %T, want *sqlstore.Payload", EffectKind, payload)
	}
	start := time.Now()
	ctx := context.Background()
	if err := x.st.Exec(ctx, p.Stmts); err != nil {
		return nil, err
	}
	var res Result
	for _, q := range p.Queries {
		rows, err := x.st.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		res.Rows = append(res.Rows, rows)
	}
	if x.sim {
		res.Took = time.Duration(len(p.Stmts)+len(p.Queries)) * SimCost
	} else {
		res.Took = time.Since(start)
	}
	return res, nil
}

// Close closes a live database (the simulator's outlive the node).
func (x *executor) Close() error {
	if x.sim {
		simMu.Lock()
		defer simMu.Unlock()
		if x.db != nil {
			x.db.users--
			x.db.release()
			x.db = nil
		}
		return nil
	}
	return x.st.Close()
}

// SharedParams returns params for a namespace of nodes nodes running
// protocol, with durability_dsn set to one SQLite file under dataDir,
// durability-<namespace>.db, that every node shares, when the protocol
// reads the executor's parameters (its defaults name ParamDSN) and params
// name no database. Tools that start every node on one machine (cluster
// up, the nemesis) use it; the cluster file's validation refuses a
// per-node file (protocol/pbdurable, CheckDeployment). It returns params
// itself otherwise.
func SharedParams(protocol, namespace string, params map[string]string, dataDir string, nodes int) map[string]string {
	if nodes < 2 || params[ParamDSN] != "" {
		return params
	}
	if _, ok := automaton.DefaultParams(protocol)[ParamDSN]; !ok {
		return params
	}
	out := map[string]string{}
	for k, v := range params {
		out[k] = v
	}
	out[ParamDSN] = filepath.Join(dataDir, "durability-"+namespace+".db")
	return out
}
