package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/bench"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/compare"
	"github.com/synod-dev/synod/internal/cli"
)

// costsOptions are `synod-lab costs`'s flags.
type costsOptions struct {
	protocols  []string
	clients    []int
	durability string // "fsync" or "memory"
	duration   time.Duration
	readRatio  float64
	dir        string // clusters and the fdatasync file
	profileDir string // "": no CPU profiles
	redis      bool   // also measure redis-server with the same driver
	params     map[string]string
	conns      bench.ConnSpec // the driver's connections (bench.ParseConnSpec)
	procs      int            // the nodes' GOMAXPROCS (cluster.UpOptions.Procs)
}

// costsReport is what --json writes.
type costsReport struct {
	Limits compare.Limits  `json:"limits"`
	Runs   []bench.CostRun `json:"runs"`
}

func init() {
	var (
		o                  costsOptions
		protocols, jsonOut string
		conns, procs       string
		memory             bool
	)
	cmd := &cobra.Command{
		Use:   "costs",
		Short: "Print the cost model: this machine's physical limits, and per node and per operation CPU, allocations, syscalls, fsyncs and messages of each protocol",
		Long: `Measure this machine's physical limits (loopback TCP round trip, 4 KiB append +
fdatasync in --dir's file system, a Go map's operations per second, one RESP SET
parse and +OK reply), then run each protocol on a fresh 3-node cluster for
--duration (after a second's warm-up) with the closed-loop driver, once per
--clients value, and print for every node (the leader named), for the nodes
together and for the driver (this process, which shares the cores) what one
client operation cost:

  CPU us/op   user+system CPU (/proc/PID/stat, as process_cpu_seconds_total)
  cores       CPU seconds per second
  allocs/op   heap objects allocated (go_memstats_mallocs_total)
  rd/op wr/op read and write system calls (/proc/PID/io syscr, syscw)
  msgs/op     peer messages sent (synod_peer_messages_sent_total)
  hand/op     hand-offs between goroutines on the request path
              (synod_handoffs_total): inputs passed to a namespace's loop
              (client requests, peer messages, timers), responses passed to
              the waiting client, batches to the committer, frames queued
              for a peer's writer (an inline write is none)
  fsync/s     fdatasyncs per second: WAL frames written (synod_wal_frames_total,
              one write + fdatasync each; synod_fsyncs_total without the WAL)
  ops/fsync   client operations per fdatasync of that node
  rec/fsync   records persisted per fdatasync (synod_persists_total: group commit)
  fsync/op    fdatasyncs per client operation
  cmt/fsync   storage commits per fdatasync (synod_wal_commits_total / frames:
              the namespaces' commits sharing one WAL write)

--redis runs redis-server (started and stopped by PID here: no persistence with
--memory, else appendonly yes and appendfsync always) with the same driver and
prints its row and the ratios. --profile DIR saves a CPU profile of each node
over the measured window (the node's /debug/pprof/profile) and prints each
node's hottest functions: their shares of the profile's samples, and those
shares of the node's CPU per operation (go tool pprof).
docs/COSTS.md explains the model and records runs.`,
		Example: `  synod-lab costs
  synod-lab costs --protocols paxos --clients 1,256 --read-ratio 0 --profile /tmp/prof
  synod-lab costs --protocols abd,esds --clients 64 --memory --redis --read-ratio 0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.protocols = nil
			for _, p := range strings.Split(protocols, ",") {
				p = strings.TrimSpace(p)
				if _, err := automaton.Lookup(p); err != nil {
					return fmt.Errorf("--protocols: %w", err)
				}
				o.protocols = append(o.protocols, p)
			}
			if o.readRatio < 0 || o.readRatio > 1 {
				return fmt.Errorf("--read-ratio %v: want 0 to 1", o.readRatio)
			}
			for _, c := range o.clients {
				if c < 1 {
					return fmt.Errorf("--clients %d: want at least 1", c)
				}
			}
			if o.duration <= 0 {
				return errors.New("--duration: want a positive duration")
			}
			spec, err := bench.ParseConnSpec(conns)
			if err != nil {
				return fmt.Errorf("--conns: %w", err)
			}
			o.conns = spec
			if o.procs, err = cluster.ParseProcs(procs); err != nil {
				return err
			}
			o.durability = "fsync"
			if memory {
				o.durability = "memory"
			}
			if o.redis {
				if _, err := os.Stat(compare.RedisBinary); err != nil {
					return fmt.Errorf("--redis: %s: %v (%s)", compare.RedisBinary, err, compare.RedisInstall)
				}
			}
			if o.dir == "" {
				d, err := os.MkdirTemp("", "synod-costs-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(d)
				o.dir = d
			}
			if o.profileDir != "" {
				if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
					return err
				}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, err := measureCosts(ctx, o, cmd.OutOrStdout(), os.Stderr)
			if rep != nil && jsonOut != "" {
				b, _ := json.MarshalIndent(rep, "", "  ")
				if werr := os.WriteFile(jsonOut, append(b, '\n'), 0o644); werr != nil {
					return werr
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&protocols, "protocols", "paxos,abd,esds,pbpaxos", "protocols to measure, comma-separated")
	f.IntSliceVar(&o.clients, "clients", []int{16}, "closed-loop clients per run; a list sweeps (1,16,256)")
	f.BoolVar(&memory, "memory", false, "run the nodes in memory mode (durability memory: no fsync) instead of fsync")
	f.DurationVar(&o.duration, "duration", 3*time.Second, "measured time per run (after 1s of warm-up)")
	f.Float64Var(&o.readRatio, "read-ratio", 0.5, "fraction of gets (linearizable where the protocol is); 0 measures puts")
	f.StringVar(&o.dir, "dir", "", "directory for the clusters and the fdatasync file (default a temporary directory, removed)")
	f.StringVar(&o.profileDir, "profile", "", "save a CPU profile of each node over the measured window in this directory and print the top functions per op")
	f.BoolVar(&o.redis, "redis", false, "also measure redis-server with the same driver (no persistence with --memory, else appendfsync always)")
	f.StringToStringVar(&o.params, "param", nil, "protocol parameters of the namespace, key=value[,key=value] (repeatable)")
	f.StringVar(&jsonOut, "json", "", "also write the figures as JSON to this file")
	f.StringVar(&procs, "procs", "go", "GOMAXPROCS of each node (all share this machine): go (Go's default), auto (ceil(cores / nodes)) or a count")
	f.StringVar(&conns, "conns", "per-client", "the driver's RESP connections: per-client, N shared, or pipeline:P (P clients pipelining on each)")
	cli.AddCommand(cmd)
}

// measureCosts measures the limits, then every protocol at every client
// count (and redis-server at each when asked), printing as it goes.
func measureCosts(ctx context.Context, o costsOptions, out, progress io.Writer) (*costsReport, error) {
	fmt.Fprintf(progress, "measuring this machine's limits in %s\n", o.dir)
	lim, err := compare.MeasureLimits(o.dir)
	if err != nil {
		return nil, err
	}
	rep := &costsReport{Limits: lim}
	printLimits(out, lim)
	for _, clients := range o.clients {
		var redis *bench.CostRun
		if o.redis {
			fmt.Fprintf(progress, "measuring redis-server (%s, %d clients, %v)\n", o.durability, clients, o.duration)
			r := measureRedis(ctx, o, clients)
			redis = &r
			rep.Runs = append(rep.Runs, r)
			r.Print(out)
			printBound(out, r, lim, nil)
		}
		for _, p := range o.protocols {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			fmt.Fprintf(progress, "measuring %s (3 nodes, %s, %d clients, %v)\n", p, o.durability, clients, o.duration)
			r := measureNodes(ctx, o, p, clients)
			rep.Runs = append(rep.Runs, r)
			if procsOf(o.procs) > 0 {
				// A co-location setting: said beside the figures it affects.
				fmt.Fprintf(out, "  (nodes ran GOMAXPROCS %d: --procs, not Go's default)\n", procsOf(o.procs))
			}
			r.Print(out)
			printBound(out, r, lim, redis)
		}
	}
	return rep, ctx.Err()
}

func printLimits(w io.Writer, l compare.Limits) {
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	fmt.Fprintf(w, "physical limits of this machine (medians; a shared machine makes them noisy)\n")
	fmt.Fprintf(w, "  loopback TCP round trip         %8.1f us\n", us(l.LoopbackRTT))
	fmt.Fprintf(w, "  4 KiB append + fdatasync        %8.1f us   (at most %.0f fsyncs/s in sequence)\n", us(l.Fdatasync), 1e9/float64(l.Fdatasync))
	fmt.Fprintf(w, "  Go map op (10k keys, get/set)   %8.3f us\n", 1e6/l.MapOpsPerSec)
	fmt.Fprintf(w, "  RESP SET parse + +OK reply      %8.3f us\n", us(l.RESPParseReply))
}

// printBound writes what bounds the run: the servers' and the driver's CPU
// per operation against the machine's cores, and against the limits and
// redis-server's own CPU per operation when measured.
func printBound(w io.Writer, r bench.CostRun, l compare.Limits, redis *bench.CostRun) {
	if r.Failed != "" || len(r.Procs) < 2 {
		return
	}
	srv := r.Procs[len(r.Procs)-2] // "servers", or the only server
	drv := r.Procs[len(r.Procs)-1]
	cores := runtime.NumCPU()
	both := srv.CPUUsPerOp + drv.CPUUsPerOp
	fmt.Fprintf(w, "  bound: servers %.1f + driver %.1f us CPU/op on %d cores: at most %.0f ops/s (ran %.0f, %.0f%% of it);",
		srv.CPUUsPerOp, drv.CPUUsPerOp, cores, float64(cores)*1e6/both, r.OpsPerS, 100*r.OpsPerS*both/(float64(cores)*1e6))
	fmt.Fprintf(w, " servers' CPU/op = %.0f RESP parse+reply, %.0f map ops\n",
		srv.CPUUsPerOp*1e3/float64(l.RESPParseReply), srv.CPUUsPerOp*l.MapOpsPerSec/1e6)
	if redis != nil && redis.Failed == "" && redis.OpsPerS > 0 && len(redis.Procs) > 0 {
		rs := redis.Procs[0]
		fmt.Fprintf(w, "  against redis-server (same driver, same run): ops/s %.2fx, servers' CPU/op %.1fx redis-server's (%.1f us), syscalls/op %.1fx\n",
			r.OpsPerS/redis.OpsPerS, srv.CPUUsPerOp/rs.CPUUsPerOp, rs.CPUUsPerOp,
			(srv.ReadsPerOp+srv.WritesPerOp)/(rs.ReadsPerOp+rs.WritesPerOp))
	}
}

// loadAvg returns /proc/loadavg's 1-minute figure.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

// driverConfig is the closed-loop driver of every run: 10,000 uniform keys,
// 100-byte values.
func driverConfig(o costsOptions, addrs []string, clients int) bench.Config {
	cfg := bench.DefaultConfig()
	cfg.Addrs = addrs
	cfg.Clients = clients
	cfg.Keys = 10000
	cfg.ReadRatio = o.readRatio
	cfg.Duration = time.Second
	return cfg
}

// withConns arranges the driver's RESP connections as --conns says: a
// shared connection is a pipelined one (bench.WithConns; a plain RESP
// connection serves one caller at a time).
func withConns(o costsOptions, cfg *bench.Config, ro bench.RedisOptions) error {
	if o.conns == bench.PerClient {
		return nil
	}
	f, err := bench.WithConns(o.conns, cfg.Clients, bench.PipelinedRedisFactory(ro), bench.PipelinedRedisFactory(ro))
	if err != nil {
		return err
	}
	cfg.NewTarget = f
	return nil
}

// sampler reads every process's counters: the servers' from /proc (and
// their /metrics, for nodes), the driver's (this process) from /proc and
// the Go runtime.
type sampler struct {
	pids    []int
	metrics []string // nodes' metrics addresses; nil for redis-server
}

// nodeMetricNames are the node counters a sample reads.
var nodeMetricNames = append(bench.NodeMetricNames[:len(bench.NodeMetricNames):len(bench.NodeMetricNames)], "synod_is_leader")

func (s sampler) sample(ctx context.Context, after bool) (servers []bench.ProcCounters, driver bench.ProcCounters, err error) {
	servers = make([]bench.ProcCounters, len(s.pids))
	// Before the run the /metrics scrapes come first, after it last: the
	// scrapes' own cost stays outside the /proc window.
	readMetrics := func() error {
		for i, addr := range s.metrics {
			m, err := scrapeNode(ctx, addr)
			if err != nil {
				return err
			}
			n := bench.NodeCounters(m) // the metrics' fields; /proc's are read apart
			servers[i].Mallocs, servers[i].Fsyncs, servers[i].Commits = n.Mallocs, n.Fsyncs, n.Commits
			servers[i].Persists, servers[i].PeerMsgs, servers[i].Handoffs = n.Persists, n.PeerMsgs, n.Handoffs
		}
		return nil
	}
	if !after {
		if err := readMetrics(); err != nil {
			return nil, driver, err
		}
	}
	for i, pid := range s.pids {
		p, err := bench.ReadProc(pid)
		if err != nil {
			return nil, driver, err
		}
		servers[i].CPUSeconds, servers[i].Syscr, servers[i].Syscw = p.CPUSeconds, p.Syscr, p.Syscw
	}
	if driver, err = bench.ReadProc(os.Getpid()); err != nil {
		return nil, driver, err
	}
	driver.Mallocs = bench.SelfMallocs()
	if after {
		if err := readMetrics(); err != nil {
			return nil, driver, err
		}
	}
	return servers, driver, nil
}

func scrapeNode(ctx context.Context, addr string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s metrics: %w", addr, err)
	}
	defer res.Body.Close()
	return compare.SumMetrics(res.Body, nodeMetricNames)
}

// failedRun is the table of a run that failed: its setting and the error.
func failedRun(o costsOptions, system string, clients int, err error) bench.CostRun {
	return bench.CostRun{System: system, Durability: o.durability, Clients: clients, ReadRatio: o.readRatio, Failed: err.Error()}
}

// measured runs the driver for o.duration between two samples and makes the
// run's table.
func measured(ctx context.Context, o costsOptions, cfg bench.Config, s sampler, system string, names []string, profile func() func(*bench.CostRun)) bench.CostRun {
	fail := func(err error) bench.CostRun { return failedRun(o, system, cfg.Clients, err) }
	if _, err := bench.Run(ctx, cfg, nil); err != nil { // warm-up: elections, connections
		return fail(fmt.Errorf("warm-up: %w", err))
	}
	load := loadAvg()
	before, db, err := s.sample(ctx, false)
	if err != nil {
		return fail(err)
	}
	var finish func(*bench.CostRun)
	if profile != nil {
		finish = profile()
	}
	cfg.Duration = o.duration
	rep, err := bench.Run(ctx, cfg, nil)
	if err != nil {
		return fail(err)
	}
	after, da, err := s.sample(ctx, true)
	if err != nil {
		return fail(err)
	}
	if rep.All.Count == 0 {
		return fail(errors.New("no operation completed"))
	}
	deltas := make([]bench.ProcCounters, len(after))
	for i := range after {
		deltas[i] = after[i].Sub(before[i])
	}
	r := bench.NewCostRun(system, o.durability, rep, names, deltas, da.Sub(db))
	r.Load = load + "–" + loadAvg()
	if finish != nil {
		finish(&r)
	}
	return r
}

// procsOf is the nodes' GOMAXPROCS for --procs p (cluster.UpOptions.Procs).
func procsOf(p int) int { return compare.MembersProcs(p) }

// measureNodes runs protocol on a fresh 3-node cluster.
func measureNodes(ctx context.Context, o costsOptions, protocol string, clients int) bench.CostRun {
	dir := filepath.Join(o.dir, fmt.Sprintf("%s-%s-%d", protocol, o.durability, clients))
	up := cluster.UpOptions{Dir: dir, Nodes: compare.Members, Protocol: protocol, Durability: o.durability, Params: o.params, Procs: o.procs}
	up.Extra = cli.CalleeNamespaces(up) // adam's callee, as cluster up adds it
	up.DieWithParent = true
	c, err := cluster.Up(up)
	if err != nil {
		return failedRun(o, protocol, clients, err)
	}
	defer cluster.Down(dir, true)
	cfg := driverConfig(o, c.ClientAddrs(), clients)
	if m, err := automaton.ConsistencyOf(protocol); err == nil && m == automaton.Linearizable {
		cfg.ReadMode = "linearizable"
	}
	cfg.Leader = true
	if err := withConns(o, &cfg, bench.RedisOptions{ReadMode: cfg.ReadMode, Leader: true, Timeout: cfg.OpTimeout}); err != nil {
		return failedRun(o, protocol, clients, err)
	}
	// A first short run elects the leader, then the rows are ordered
	// leader first.
	warm := cfg
	warm.Duration = 500 * time.Millisecond
	if _, err := bench.Run(ctx, warm, nil); err != nil {
		return failedRun(o, protocol, clients, fmt.Errorf("warm-up: %w", err))
	}
	nodes := append([]cluster.Node(nil), c.Nodes...)
	leader := map[string]bool{}
	for _, n := range nodes {
		if m, err := scrapeNode(ctx, n.Metrics); err == nil && m["synod_is_leader"] > 0 {
			leader[n.ID] = true
		}
	}
	sort.SliceStable(nodes, func(i, j int) bool { return leader[nodes[i].ID] && !leader[nodes[j].ID] })
	s := sampler{}
	var names []string
	for _, n := range nodes {
		s.pids = append(s.pids, n.PID)
		s.metrics = append(s.metrics, n.Metrics)
		name := n.ID
		if leader[n.ID] {
			name += " (leader)"
		}
		names = append(names, name)
	}
	var profile func() func(*bench.CostRun)
	if o.profileDir != "" {
		profile = func() func(*bench.CostRun) {
			name := fmt.Sprintf("%s-%s-%dc-%.0fpctgets", protocol, o.durability, clients, 100*o.readRatio)
			return startProfiles(ctx, o, name, nodes, names)
		}
	}
	return measured(ctx, o, cfg, s, protocol, names, profile)
}

// startProfiles asks every node for a CPU profile of the measured window
// (its metrics port's /debug/pprof/profile) and returns the function that
// waits for them, saves them and adds each node's top functions per
// operation to the run.
func startProfiles(ctx context.Context, o costsOptions, prefix string, nodes []cluster.Node, names []string) func(*bench.CostRun) {
	secs := int(math.Max(1, math.Round(o.duration.Seconds())))
	type result struct {
		path string
		err  error
	}
	res := make([]chan result, len(nodes))
	for i, n := range nodes {
		res[i] = make(chan result, 1)
		path := filepath.Join(o.profileDir, fmt.Sprintf("%s-%s.pb.gz", prefix, n.ID))
		go func() {
			res[i] <- result{path, fetchProfile(ctx, n.Metrics, secs, path)}
		}()
	}
	return func(r *bench.CostRun) {
		r.Top, r.Profiles = map[string][]bench.TopFunc{}, map[string]string{}
		for i := range nodes {
			p := <-res[i]
			if p.err != nil {
				r.Profiles[names[i]] = "failed: " + p.err.Error()
				continue
			}
			r.Profiles[names[i]] = p.path
			out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodefraction=0.001", p.path).Output()
			if err != nil {
				r.Profiles[names[i]] += " (go tool pprof: " + err.Error() + ")"
				continue
			}
			var cpu float64
			for _, p := range r.Procs {
				if p.Name == names[i] {
					cpu = p.CPUUsPerOp
				}
			}
			rows, err := bench.ParsePprofTop(out, cpu)
			if err != nil {
				r.Profiles[names[i]] += " (" + err.Error() + ")"
				continue
			}
			r.Top[names[i]] = bench.PickTop(rows, 10, 8, "github.com/synod-dev/synod/")
		}
	}
}

func fetchProfile(ctx context.Context, metrics string, secs int, path string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", metrics, secs), nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return fmt.Errorf("%s: %s", res.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// measureRedis runs the driver against one redis-server started here (and
// stopped by its PID): no persistence in memory mode, else appendonly yes
// and appendfsync always.
func measureRedis(ctx context.Context, o costsOptions, clients int) bench.CostRun {
	system := "redis-server"
	fail := func(err error) bench.CostRun { return failedRun(o, system, clients, err) }
	dir := filepath.Join(o.dir, fmt.Sprintf("redis-%s-%d", o.durability, clients))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	argv := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "",
		"--daemonize", "no", "--protected-mode", "no", "--appendonly", "no"}
	if o.durability == "fsync" {
		system = "redis-server (appendfsync always)"
		argv = append(argv[:len(argv)-2], "--appendonly", "yes", "--appendfsync", "always")
	}
	cmd := exec.Command(compare.RedisBinary, argv...)
	logf, err := os.Create(filepath.Join(dir, "redis.log"))
	if err != nil {
		return fail(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() { // stop it by its PID: TERM, then KILL
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			return fail(fmt.Errorf("redis-server exited: see %s", logf.Name()))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("redis-server not listening on %s: %w", addr, err))
		}
	}
	cfg := driverConfig(o, []string{addr}, clients)
	if err := withConns(o, &cfg, bench.RedisOptions{Timeout: cfg.OpTimeout}); err != nil {
		return fail(err)
	}
	return measured(ctx, o, cfg, sampler{pids: []int{cmd.Process.Pid}}, system, []string{"redis-server"}, nil)
}
