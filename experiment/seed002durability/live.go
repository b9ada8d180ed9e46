package seed002durability

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	synodclient "github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/durability/pgserver"
	"github.com/synod-dev/synod/durability/sqlstore"
	"github.com/synod-dev/synod/experiment"
)

// The live bed: a real pbdurable cluster of `synod node` processes on
// loopback (experiment.Env.Up, stopped by PID), its database shared by
// every node (protocol/pbdurable doc: durability_dsn), clients through
// package client sending to the primary.

const (
	liveNodes   = 3
	liveProto   = "pbdurable"
	liveNodeDur = config.Memory // the nodes' own records (pbd/booted only); the mechanisms under test keep the state
)

// liveDB prepares a cell's database, shared by every node of the cluster:
// a SQLite file in the run's scratch directory or a fresh private
// PostgreSQL server (durability/pgserver), with state fsync on or off.
// It returns the cluster's database parameters and a stop function.
func liveDB(env *experiment.Env, db, fsync string) (map[string]string, func(), error) {
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
		srv, err := pgserver.Start()
		if errors.Is(err, pgserver.ErrNotInstalled) {
			return nil, nil, experiment.Unavailable("%v", err)
		}
		if err != nil {
			return nil, nil, err
		}
		env.Logf("private PostgreSQL on 127.0.0.1:%d (%s)", srv.Port, srv.Dir)
		return map[string]string{
				sqlstore.ParamDriver: sqlstore.Postgres,
				sqlstore.ParamDSN:    srv.DSN(),
				sqlstore.ParamSync:   sync,
			}, func() {
				srv.Stop()
			}, nil
	}
	return nil, nil, fmt.Errorf("unknown database %q (sqlite or postgres)", db)
}

// liveCluster starts the cell's cluster: three nodes under the mapping,
// or, for the original service, one node whose only object is
// reconstructible (the same Counter code and runtime path, nothing kept).
// The returned stop function stops the cluster and the database.
func liveCluster(env *experiment.Env, name, service, mapping, db, fsync string) (*cluster.Cluster, func(), error) {
	params, stopDB, err := liveDB(env, db, fsync)
	if err != nil {
		return nil, nil, err
	}
	nodes := liveNodes
	if mapping == "original" {
		nodes, mapping = 1, "reconstructible"
	}
	params["mapping"] = mapping
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
func runLiveCounter(ctx context.Context, env *experiment.Env, c experiment.Cell, total int) (experiment.Outcome, error) {
	clients, _ := strconv.Atoi(c.Get("clients"))
	cfg, db := c.Get("config"), c.Get("db")
	cl, stop, err := liveCluster(env, "counter-"+cfg+"-"+db+"-"+c.Get("fsync")+"-c"+c.Get("clients"), "counter", cfg, db, c.Get("fsync"))
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
	return experiment.Outcome{
		Metrics: map[string]float64{mLatency: mean, mCI: ci, mThrough: float64(len(all)) / el.Seconds()},
		Labels:  map[string]string{"state fsync": fsyncLabel(c), "adds": strconv.Itoa(len(all)), "runs on": liveLabel(cfg)},
	}, nil
}

// liveLabel says what ran a live cell.
func liveLabel(cfg string) string {
	if cfg == "original" {
		return "1 synod node, pbdurable reconstructible"
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
