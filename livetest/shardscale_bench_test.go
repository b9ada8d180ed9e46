package livetest

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
)

// BenchmarkShardScale compares a 3-node unsharded paxos cluster (synod
// cluster up --nodes 3 --protocol paxos) with a 9-node cluster holding 3
// paxos shards of the same namespace (synod cluster up --nodes 9 --shards
// 3), one after the other on this machine, under the same closed-loop load:
// WORKERS goroutines (a list: each size runs in turn on each cluster;
// 192 gives each of the 3 shard leaders the 64 the unsharded leader gets
// at 64), each SETting fresh keys (a value of VALUE bytes)
// through one shared go-redis client (a ClusterClient on the sharded
// cluster, which routes each key to its shard's leader; a plain client at
// the leader on the unsharded one, which has no cluster support), for
// SECONDS per cluster. It prints, per cluster: writes/s,
// p50/p99, the CPU the node processes used per acknowledged write (their
// utime+stime from /proc/PID/stat, summed) and the client's, the data
// each node holds (keys: DBSIZE on the unsharded cluster; on the sharded
// one, where DBSIZE answers for the whole namespace at every node, the
// acknowledged keys of the node's shard;
// bytes: the node's data directory on disk) and the totals, with the load
// average. Each cluster is stopped (by PID, cluster.Down) before the next
// starts.
//
// All processes share this machine's cores, so the 9-node cluster cannot
// be faster in wall throughput here: it runs three times the replicas on
// the same CPUs. CPU per write is the figure that carries over to one
// machine per node.
//
// SYNOD_SCALE_PROFILE=DIR also saves each node's CPU profile, taken over
// half of the last run, as DIR/3n-nK.pprof and DIR/9n-nK.pprof.
//
//	SYNOD_SCALE_SECONDS=10 SYNOD_SCALE_WORKERS=64 SYNOD_SCALE_VALUE=100 SYNOD_SCALE_DURABILITY=fsync go test -run '^$' -bench ShardScale -benchtime 1x ./livetest
func BenchmarkShardScale(b *testing.B) {
	secs := envInt("SYNOD_SCALE_SECONDS", 10)
	var workers []int // the closed loop's sizes, each run on each cluster
	for _, f := range strings.Split(cmp.Or(os.Getenv("SYNOD_SCALE_WORKERS"), "64,192"), ",") {
		if n, err := strconv.Atoi(f); err == nil && n > 0 {
			workers = append(workers, n)
		}
	}
	valSize := envInt("SYNOD_SCALE_VALUE", 100)
	dur := os.Getenv("SYNOD_SCALE_DURABILITY")
	if dur == "" {
		dur = "fsync"
	}
	for i := 0; i < b.N; i++ {
		fmt.Printf("shard scale: paxos, kv, %s, %v closed-loop workers (one go-redis client: ClusterClient when sharded, plain at the leader when not), SET of %d-byte values to fresh keys, %ds per run; /proc/loadavg %s\n",
			dur, workers, valSize, secs, loadavg())
		for _, shape := range []struct{ nodes, shards int }{{3, 0}, {9, 3}} {
			benchShardScale(b, shape.nodes, shape.shards, time.Duration(secs)*time.Second, workers, valSize, dur)
		}
	}
}

func benchShardScale(b *testing.B, nodes, shards int, d time.Duration, workerRuns []int, valSize int, durability string) {
	pool := slices.Max(workerRuns)
	c, err := cluster.Up(cluster.UpOptions{Dir: b.TempDir(), Binary: synodBin, DieWithParent: true, Nodes: nodes, Shards: shards,
		Protocol: "paxos", Service: "kv", Durability: durability})
	if err != nil {
		b.Fatalf("cluster.Up: %v", err)
	}
	defer func() {
		if _, err := cluster.Down(c.Dir, true); err != nil {
			b.Errorf("cluster.Down: %v", err)
		}
	}()
	addrs := c.ClientAddrs()
	ns := c.Config.Namespaces[0]
	ctx := context.Background()
	val := strings.Repeat("v", valSize)
	// The sharded cluster: a ClusterClient, which sends each key to its
	// shard's leader (CLUSTER SLOTS). The unsharded one has no cluster
	// support (CLUSTER SLOTS is refused): a plain client at the leader that
	// SYNOD LEADER names (a follower would forward, one hop more).
	var cc redis.Cmdable
	if shards > 0 {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16, ReadTimeout: 10 * time.Second,
			WriteTimeout: 10 * time.Second, PoolSize: pool})
		defer c.Close()
		cc = c
	} else {
		c := redis.NewClient(&redis.Options{Addr: addrs[0], ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, PoolSize: pool})
		defer c.Close()
		cc = c
	}
	// Warm up: every shard elects its leader and the client loads its slot table.
	warm := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		ok := 0
		var last error
		for j := 0; j < 32; j++ {
			if last = cc.Set(ctx, fmt.Sprintf("warm-%d-%d", i, j), val, 0).Err(); last == nil {
				ok++
			}
		}
		if ok == 32 {
			break
		}
		if time.Now().After(warm) {
			b.Fatalf("%d-node cluster: writes still failing after 30 s: %v", nodes, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if shards == 0 {
		rep, err := cc.(*redis.Client).Do(ctx, "SYNOD", "LEADER").StringSlice()
		if err != nil || len(rep) != 2 {
			b.Fatalf("SYNOD LEADER: %v %v", rep, err)
		}
		c := redis.NewClient(&redis.Options{Addr: rep[1], ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, PoolSize: pool})
		defer c.Close()
		cc = c
	}

	// What the idle processes burn (timers, heartbeats), for reading the
	// CPU per write below.
	idle0 := nodesCPU(b, c)
	time.Sleep(3 * time.Second)
	fmt.Printf("  %d nodes idle: %.3f cores (/proc/PID/stat over 3 s)\n", nodes, (nodesCPU(b, c)-idle0).Seconds()/3)
	var keys []string
	shape := fmt.Sprintf("%d nodes, unsharded (1 group of 3)", nodes)
	if shards > 0 {
		shape = fmt.Sprintf("%d nodes, %d shards of %d", nodes, shards, len(ns.Shards[0].Nodes))
	}
	for run, workers := range workerRuns {
		var mu sync.Mutex
		var lat []time.Duration
		errs := 0
		cpu0, ru0, frames0 := nodesCPU(b, c), selfCPU(), nodesMetric(c, "synod_wal_frames_total")
		load0 := loadavg()
		end := time.Now().Add(d)
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []time.Duration
				var myKeys []string
				bad := 0
				for i := 0; time.Now().Before(end); i++ {
					k := fmt.Sprintf("r%d:w%d:%d", run, w, i)
					t0 := time.Now()
					if err := cc.Set(ctx, k, val, 0).Err(); err != nil {
						bad++
						continue
					}
					mine = append(mine, time.Since(t0))
					myKeys = append(myKeys, k)
				}
				mu.Lock()
				lat = append(lat, mine...)
				keys = append(keys, myKeys...)
				errs += bad
				mu.Unlock()
			}()
		}
		if prof := os.Getenv("SYNOD_SCALE_PROFILE"); prof != "" && run == len(workerRuns)-1 {
			profileNodes(b, c, prof, fmt.Sprintf("%dn", nodes), d/2)
		}
		wg.Wait()
		cpu1, ru1, frames1 := nodesCPU(b, c), selfCPU(), nodesMetric(c, "synod_wal_frames_total")
		load1 := loadavg()
		slices.Sort(lat)
		q := func(f float64) time.Duration {
			if len(lat) == 0 {
				return 0
			}
			return lat[min(len(lat)-1, int(f*float64(len(lat))))].Round(10 * time.Microsecond)
		}
		n := len(lat)
		perWrite := func(t time.Duration) time.Duration {
			if n == 0 {
				return 0
			}
			return (t / time.Duration(n)).Round(time.Microsecond)
		}
		fmt.Printf("  %s, %d workers: %.0f writes/s, p50 %v, p99 %v, %d errors; CPU per write: nodes %v, client %v (nodes used %.2f cores); WAL frames (each a write and an fdatasync) per write %.3f, all nodes; /proc/loadavg before %s, after %s\n",
			shape, workers, float64(n)/d.Seconds(), q(0.5), q(0.99), errs, perWrite(cpu1-cpu0), perWrite(ru1-ru0), (cpu1-cpu0).Seconds()/d.Seconds(), (frames1-frames0)/float64(max(n, 1)), load0, load1)

	}

	// The data each node holds: the acknowledged keys of its group (every
	// key when unsharded; DBSIZE checks that count there, and answers for
	// the whole namespace in a sharded one), their bytes (key + value), and its data
	// directory on disk (the WAL, in preallocated segments of about 4 MB).
	perNode := make(map[string][2]int64)
	slots := config.SlotMap(ns)
	for _, k := range keys {
		g, members := 0, c.Nodes
		if shards > 0 {
			g = slots.Group(k)
		}
		for _, nd := range members {
			if shards == 0 || slices.Contains(ns.Shards[g].Nodes, nd.ID) {
				v := perNode[nd.ID]
				perNode[nd.ID] = [2]int64{v[0] + 1, v[1] + int64(len(k)+valSize)}
			}
		}
	}
	var totalKeys, totalBytes, totalDisk int64
	var line []string
	for _, nd := range c.Nodes {
		v := perNode[nd.ID]
		if shards == 0 {
			pc := redis.NewClient(&redis.Options{Addr: nd.Client})
			n, err := pc.DBSize(ctx).Result()
			pc.Close()
			if err != nil || n < v[0] {
				b.Fatalf("DBSIZE at %s: %d (%v), %d keys acknowledged", nd.ID, n, err, v[0])
			}
		}
		disk := dirBytes(filepath.Join(c.Dir, cluster.DataDir, nd.ID))
		totalKeys += v[0]
		totalBytes += v[1]
		totalDisk += disk
		line = append(line, fmt.Sprintf("%s %d keys %.1f MB (disk %.1f MB)", nd.ID, v[0], float64(v[1])/1e6, float64(disk)/1e6))
	}
	fmt.Printf("    data: %s; total %d key copies, %.1f MB (disk %.1f MB); %d distinct keys, %.1f MB\n",
		strings.Join(line, ", "), totalKeys, float64(totalBytes)/1e6, float64(totalDisk)/1e6, len(keys), float64(keyBytes(keys, valSize))/1e6)
}

// profileNodes saves a CPU profile of every node of c, taken over the same
// span t from its metrics port (/debug/pprof/profile), as
// dir/PREFIX-nK.pprof (go tool pprof -top to read).
func profileNodes(b *testing.B, c *cluster.Cluster, dir, prefix string, t time.Duration) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, nd := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", nd.Metrics, int(t.Seconds())))
			if err != nil {
				b.Errorf("profile %s: %v", nd.ID, err)
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, prefix+"-"+nd.ID+".pprof"), body, 0o644)
			}
			if err != nil {
				b.Errorf("profile %s: %v", nd.ID, err)
			}
		}()
	}
	wg.Wait()
}

// nodesMetric sums the samples of one metric (every label set) over the
// nodes' /metrics; a node that does not answer counts 0.
func nodesMetric(c *cluster.Cluster, name string) float64 {
	var sum float64
	for _, nd := range c.Nodes {
		resp, err := http.Get("http://" + nd.Metrics + "/metrics")
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, l := range strings.Split(string(body), "\n") {
			if rest, ok := strings.CutPrefix(l, name); ok && (rest[:1] == " " || rest[:1] == "{") {
				f := strings.Fields(l)
				if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
					sum += v
				}
			}
		}
	}
	return sum
}

// nodesCPU sums the user and system CPU time of c's node processes
// (/proc/PID/stat fields 14 and 15, in clock ticks of 1/100 s on Linux).
func nodesCPU(b *testing.B, c *cluster.Cluster) time.Duration {
	var ticks int64
	for _, nd := range c.Nodes {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", nd.PID))
		if err != nil {
			b.Fatalf("%s (pid %d): %v", nd.ID, nd.PID, err)
		}
		// The command name (field 2) may hold spaces: fields after its ')'.
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += ut + st
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// dirBytes is the size of the regular files under dir.
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if fi, err := e.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func keyBytes(keys []string, valSize int) int64 {
	var n int64
	for _, k := range keys {
		n += int64(len(k) + valSize)
	}
	return n
}
