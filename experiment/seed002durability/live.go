package seed002durability

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	synodclient "github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/durability/examples/matchmaker"
	"github.com/synod-dev/synod/durability/pgserver"
	"github.com/synod-dev/synod/durability/sqlstore"
	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/experiment/seed002pb"
)

// The live bed: a real pbdurable cluster of `synod node` processes on
// loopback (experiment.Env.Up, stopped by PID), its database shared by
// every node (protocol/pbdurable doc: durability_dsn), clients through
// package client sending to the primary.

const (
	liveNodes   = 3
	liveProto   = "pbdurable"
	liveNodeDur = config.Memory // the nodes' own records (pbd/booted only); the mechanisms under test keep the state
	liveCheck   = "1s"          // pbdurable rate_checking (default 250ms)
)

// pgShare is one private PostgreSQL server for a run's cells: started by
// the first cell that needs it, a fresh database per cell (CreateDB), and
// stopped by PID after the last such cell (left counts them down, set by
// Cells) or when the run is interrupted.
type pgShare struct {
	mu   sync.Mutex
	srv  *pgserver.Server
	left int // cells still to use it
	n    int // databases created
}

// expect sets how many cells will use the server.
func (p *pgShare) expect(n int) {
	p.mu.Lock()
	p.left = n
	p.mu.Unlock()
}

// db returns a fresh database's DSN and the function the cell calls when
// done with it.
func (p *pgShare) db(ctx context.Context, env *experiment.Env) (string, func(), error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	done := func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.left--; p.left <= 0 {
			p.stopLocked()
		}
	}
	if p.srv == nil {
		srv, err := pgserver.StartIn(env.Work)
		if errors.Is(err, pgserver.ErrNotInstalled) {
			return "", done, experiment.Unavailable("%v", err)
		}
		if err != nil {
			return "", done, err
		}
		env.Logf("private PostgreSQL 127.0.0.1:%d in %s", srv.Port, srv.Dir)
		p.srv = srv
		context.AfterFunc(ctx, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.stopLocked()
		})
	}
	p.n++
	dsn, err := p.srv.CreateDB(fmt.Sprintf("cell%d", p.n))
	return dsn, done, err
}

func (p *pgShare) stopLocked() {
	if p.srv != nil {
		p.srv.Stop()
		p.srv = nil
	}
}

// liveDB prepares a cell's database, shared by every node of the cluster:
// a SQLite file in the run's scratch directory or a fresh database on the
// run's private PostgreSQL server, with state fsync on or off. It returns
// the cluster's database parameters and a stop function.
func liveDB(ctx context.Context, env *experiment.Env, pg *pgShare, db, fsync string) (map[string]string, func(), error) {
	sync := strconv.FormatBool(fsync == "on")
	switch db {
	case "-", "":
		return map[string]string{}, func() {}, nil
	case "sqlite":
		dir, err := os.MkdirTemp(env.Work, "sqlite-")
		if err != nil {
			return nil, nil, err
		}
		return map[string]string{
				sqlstore.ParamDriver: sqlstore.SQLite,
				sqlstore.ParamDSN:    filepath.Join(dir, "durability.db"),
				sqlstore.ParamSync:   sync,
			}, func() {
				os.RemoveAll(dir)
			}, nil
	case "postgres":
		dsn, done, err := pg.db(ctx, env)
		if err != nil {
			done()
			return nil, nil, err
		}
		return map[string]string{
			sqlstore.ParamDriver: sqlstore.Postgres,
			sqlstore.ParamDSN:    dsn,
			sqlstore.ParamSync:   sync,
		}, done, nil
	}
	return nil, nil, fmt.Errorf("unknown database %q (sqlite or postgres)", db)
}

// liveCluster starts the cell's cluster: three nodes under the mapping,
// or, for the original service, one node whose only object is
// reconstructible (the same Counter code and runtime path, nothing kept).
// The returned stop function stops the cluster and the database.
func liveCluster(ctx context.Context, env *experiment.Env, pg *pgShare, name, service, mapping, db, fsync string) (*cluster.Cluster, func(), error) {
	params, stopDB, err := liveDB(ctx, env, pg, db, fsync)
	if err != nil {
		return nil, nil, err
	}
	nodes := liveNodes
	if mapping == "original" {
		nodes, mapping = 1, originalMapping(service)
	}
	params["mapping"] = mapping
	// No failures are injected (as in the seed's runs): a longer failure
	// detector period keeps a loaded machine from a false fail-over mid-cell.
	params["rate_checking"] = liveCheck
	c, err := env.Up(name, cluster.UpOptions{Nodes: nodes, Protocol: liveProto, Service: service, Durability: liveNodeDur, Params: params})
	if err != nil {
		stopDB()
		return nil, nil, err
	}
	stop := func() {
		if err := env.Down(c); err != nil {
			env.Logf("%v", err)
		}
		stopDB()
	}
	if _, err := experiment.WaitLeader(context.Background(), c, 20*time.Second); err != nil {
		stop()
		return nil, nil, err
	}
	return c, stop, nil
}

// liveClient is one client connection pool of its own, sending to the
// primary (PreferLeader), as the seed's clients called the service.
func liveClient(ctx context.Context, c *cluster.Cluster) (*synodclient.Client, error) {
	cl, err := synodclient.New(c.ClientAddrs(), synodclient.Options{Timeout: 10 * time.Second, PoolSize: 1})
	if err != nil {
		return nil, err
	}
	if _, err := cl.PreferLeader(ctx); err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

// runLiveCounter is one Counter cell on a cluster: every client first
// adds once (connections made, not measured), then `total` adds split
// over the clients, each waiting for its answer before the next; the
// counter must end at exactly the number of adds answered.
func runLiveCounter(ctx context.Context, env *experiment.Env, pg *pgShare, c experiment.Cell, total int) (experiment.Outcome, error) {
	clients, _ := strconv.Atoi(c.Get("clients"))
	cfg, db := c.Get("config"), c.Get("db")
	cl, stop, err := liveCluster(ctx, env, pg, "counter-"+cfg+"-"+db+"-"+c.Get("fsync")+"-c"+c.Get("clients"), "counter", cfg, db, c.Get("fsync"))
	if err != nil {
		return experiment.Outcome{}, err
	}
	defer stop()
	cls := make([]*synodclient.Client, clients)
	for i := range cls {
		if cls[i], err = liveClient(ctx, cl); err != nil {
			return experiment.Outcome{}, err
		}
		defer cls[i].Close()
		if _, err := cls[i].IncrBy(ctx, "counter", 1); err != nil {
			return experiment.Outcome{}, fmt.Errorf("warm-up add: %w", err)
		}
	}
	per := total / clients
	if per < 1 {
		per = 1
	}
	lat := make([][]float64, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	t0, err := clusterTimes(ctx, cl)
	if err != nil {
		return experiment.Outcome{}, err
	}
	start := time.Now()
	for i := range cls {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for k := 0; k < per && ctx.Err() == nil; k++ {
				t0 := time.Now()
				if _, err := cls[i].IncrBy(ctx, "counter", 1); err != nil {
					errs[i] = err
					return
				}
				lat[i] = append(lat[i], float64(time.Since(t0).Microseconds())/1000)
			}
		}(i)
	}
	wg.Wait()
	el := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return experiment.Outcome{}, err
	}
	t1, err := clusterTimes(ctx, cl)
	if err != nil {
		return experiment.Outcome{}, err
	}
	var all []float64
	for _, l := range lat {
		all = append(all, l...)
	}
	v, found, err := cls[0].Get(ctx, "counter")
	if err != nil || !found {
		return experiment.Outcome{}, fmt.Errorf("reading the counter: found %v, %v", found, err)
	}
	if want := strconv.Itoa(len(all) + clients); string(v) != want {
		return experiment.Outcome{}, fmt.Errorf("the counter reads %s after %s answered adds", v, want)
	}
	mean, ci := meanCI(all)
	met := map[string]float64{mLatency: mean, mCI: ci, mThrough: float64(len(all)) / el.Seconds()}
	if in, db, ok := t1.since(t0); ok {
		met[mInNode], met[mDBCommit], met[mOutside] = in, db, mean-in
	}
	return experiment.Outcome{
		Metrics: met,
		Labels:  map[string]string{"state fsync": fsyncLabel(c), "adds": strconv.Itoa(len(all)), "runs on": liveLabel("counter", cfg), "load": loadAvg()},
	}, nil
}

// originalMapping is the mapping of the original service on one node:
// every object kept nowhere. The Counter's is reconstructible (its only
// object); the Matchmaker's reconstructible keeps the accounts in the
// database, so it has its own, original.
func originalMapping(service string) string {
	if service == matchmaker.ServiceName {
		return "original"
	}
	return "reconstructible"
}

// liveLabel says what ran a live cell.
func liveLabel(service, cfg string) string {
	if cfg == "original" {
		return "1 synod node, pbdurable " + originalMapping(service)
	}
	return fmt.Sprintf("%d synod nodes, pbdurable %s", liveNodes, cfg)
}

// fsyncLabel states the database's state fsync beside a figure, or that
// the configuration has no database.
func fsyncLabel(c experiment.Cell) string {
	if c.Get("db") == "-" {
		return "- (no database)"
	}
	return c.Get("fsync")
}

// livePostgresCells counts the live cells on PostgreSQL.
func livePostgresCells(cells []experiment.Cell) int {
	n := 0
	for _, c := range cells {
		if c.Get("bed") != bedProcess && c.Get("db") == "postgres" {
			n++
		}
	}
	return n
}

// runLiveMatchmaker is one Matchmaker cell on a cluster of the service
// gridmatchmaker (durability/examples/matchmaker): one client advertises
// enough machines, then mmLoad's four clients submit; the machines left
// must be exactly those advertised minus the jobs answered.
func runLiveMatchmaker(ctx context.Context, env *experiment.Env, pg *pgShare, c experiment.Cell, fsync string, rounds int, lo, hi time.Duration) (lat []float64, inNode, dbCommit float64, err error) {
	cfg, db := c.Get("config"), c.Get("db")
	name := fmt.Sprintf("mm-%s-%s-%s", cfg, db, strings.ReplaceAll(c.Get("interval"), "-", "to"))
	cl, stop, err := liveCluster(ctx, env, pg, name, matchmaker.ServiceName, cfg, db, fsync)
	if err != nil {
		return nil, 0, 0, err
	}
	defer stop()
	adv, err := liveClient(ctx, cl)
	if err != nil {
		return nil, 0, 0, err
	}
	defer adv.Close()
	for i := 0; i < machinesNeeded(rounds); i++ {
		if _, err := adv.Do(ctx, "SYNOD", "OP", "advertise", fmt.Sprintf("m%d", i), "2000", "1024"); err != nil {
			return nil, 0, 0, fmt.Errorf("advertise: %w", err)
		}
	}
	cls := make([]*synodclient.Client, mClients)
	for i := range cls {
		if cls[i], err = liveClient(ctx, cl); err != nil {
			return nil, 0, 0, err
		}
		defer cls[i].Close()
	}
	t0, err := clusterTimes(ctx, cl)
	if err != nil {
		return nil, 0, 0, err
	}
	lat, err = mmLoad(ctx, rounds, lo, hi, func(i int) (bool, error) {
		rep, err := cls[i].Do(ctx, "SYNOD", "OP", "submit", fmt.Sprintf("c%d", i), "1000", "512")
		return err == nil && !rep.IsNull(), err
	})
	if err != nil {
		return nil, 0, 0, err
	}
	t1, err := clusterTimes(ctx, cl)
	if err != nil {
		return nil, 0, 0, err
	}
	inNode, dbCommit = math.NaN(), math.NaN()
	if in, db, ok := t1.since(t0); ok {
		inNode, dbCommit = in, db
	}
	left, err := adv.Do(ctx, "SYNOD", "OP", "available")
	if err != nil {
		return nil, 0, 0, err
	}
	if n, want := left.Int, int64(machinesNeeded(rounds)-len(lat)); n != want {
		return nil, 0, 0, fmt.Errorf("%d machines available after %d advertised and %d jobs placed (reply %s)", n, machinesNeeded(rounds), len(lat), left)
	}
	return lat, inNode, dbCommit, nil
}

// nodeTimes are the sums over a cluster's nodes of two histograms: every
// client request's time inside its node (synod_request_duration_seconds:
// request submitted to response released; for pbdurable the execution, the
// backup's acknowledgement and the database transaction) and the database
// transactions' (pbdurable's durability.sql effects, timed by the runtime
// around the executor: synod_effect_duration_seconds).
type nodeTimes struct{ reqSum, reqCount, dbSum float64 }

// sqlEffect selects pbdurable's database effects (durability/doc.go).
const sqlEffect = `kind="durability.sql"`

func clusterTimes(ctx context.Context, c *cluster.Cluster) (nodeTimes, error) {
	var t nodeTimes
	for _, n := range c.Nodes {
		s, k, err := seed002pb.RequestDuration(ctx, n.Metrics)
		if err != nil {
			return t, err
		}
		db, _, _, err := seed002pb.HistogramSum(ctx, n.Metrics, "synod_effect_duration_seconds", `namespace="default"`, sqlEffect)
		if err != nil {
			return t, err
		}
		t.reqSum, t.reqCount, t.dbSum = t.reqSum+s, t.reqCount+k, t.dbSum+db
	}
	return t, nil
}

// since is the mean time per client request inside the nodes between t0
// and t, and the database transactions' share of it, in ms (ok false when
// no request was counted).
func (t nodeTimes) since(t0 nodeTimes) (inNode, dbCommit float64, ok bool) {
	n := t.reqCount - t0.reqCount
	if n <= 0 {
		return 0, 0, false
	}
	return (t.reqSum - t0.reqSum) / n * 1000, (t.dbSum - t0.dbSum) / n * 1000, true
}

// loadAvg is the machine's one-minute load average ("" where unknown),
// printed beside each live figure: the machine is shared.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
