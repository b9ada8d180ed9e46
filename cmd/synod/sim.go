package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/check"
	"github.com/synod-dev/synod/sim"
)

func init() {
	var (
		cfg                                     sim.Config
		seedsSpec, readMode, saveDir, traceFile string
		params, links                           []string
		membershipSpec                          string
		workers                                 int
		verbose                                 bool
	)
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulate a cluster under faults, deterministically, over many seeds, and check every history",
		Long: `Simulate a whole cluster and its clients in one goroutine, in virtual time, from a
seed (FoundationDB simulation testing / TigerBeetle VOPR style), with crashes,
pauses, partitions, loss, duplication, reordering, latency spikes and slow fsync,
then check each history: for linearizability, or for eventual serializability
(seed 000: --service, --strict, --prev; replicas converge, strict answers agree
with the final order, prev sets hold) for ESDS protocols.

The same seed and flags replay the same run byte for byte: the printed trace
digest is identical. Seeds run in parallel on --workers goroutines. For every
seed whose history is not linearizable the command prints the seed, its digest
and the command that replays it, and saves the history (JSON, for "synod check")
and Porcupine's HTML view under --save-failing. It exits non-zero if any seed
fails.

--faults is all, none, or a comma list of ` + strings.Join(sim.FaultKinds, ",") + `.
Distributions (--latency, --fsync, --client-latency, --think) are
constant:D, uniform:MIN:MAX, normal:MEAN:STDDEV or pareto:SCALE:SHAPE.`,
		Example: `  synod sim --protocol abd --nodes 5 --clients 8 --ops 2000 --seeds 1-500 --faults all
  synod sim --protocol abd-broken-nowriterid --seeds 1-50 --keys 2 --latency pareto:1ms:1.5
  synod sim --protocol abd --seeds 42 --trace /tmp/trace.txt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			seeds, err := sim.ParseSeeds(seedsSpec)
			if err != nil {
				return err
			}
			if cfg.ReadMode, err = automaton.ParseReadMode(readMode); err != nil {
				return err
			}
			if len(params) > 0 {
				cfg.Params = map[string]string{}
				for _, p := range params {
					k, v, ok := strings.Cut(p, "=")
					if !ok || k == "" {
						return fmt.Errorf("--param %q: want key=value", p)
					}
					cfg.Params[k] = v
				}
			}
			if len(links) > 0 {
				cfg.LinkLatency = map[string]string{}
				for _, l := range links {
					k, v, ok := strings.Cut(l, "=")
					if !ok {
						return fmt.Errorf("--link %q: want FROM->TO=DISTRIBUTION", l)
					}
					cfg.LinkLatency[k] = v
				}
			}
			if cfg.Membership, err = sim.ParseMembership(membershipSpec); err != nil {
				return err
			}
			if workers < 1 {
				return fmt.Errorf("--workers must be at least 1, got %d", workers)
			}
			// Validate the configuration once, before starting workers.
			probe := cfg
			probe.Ops, probe.NoCheck, probe.Seed = 0, true, seeds[0]
			if _, err := sim.Run(probe); err != nil {
				return err
			}
			var trace *os.File
			if traceFile != "" {
				if len(seeds) != 1 {
					return fmt.Errorf("--trace needs exactly one seed (got %d)", len(seeds))
				}
				if trace, err = os.Create(traceFile); err != nil {
					return err
				}
				defer trace.Close()
				cfg.Trace = trace
			}
			return runSims(cmd.OutOrStdout(), cmd.ErrOrStderr(), cfg, seeds, workers, saveDir, verbose)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Protocol, "protocol", "abd", "protocol to simulate (known: "+strings.Join(automaton.Names(), ", ")+")")
	f.IntVar(&cfg.Nodes, "nodes", 5, "number of nodes")
	f.IntVar(&cfg.Clients, "clients", 8, "number of closed-loop clients")
	f.IntVar(&cfg.Ops, "ops", 2000, "operations per seed (all clients together)")
	f.StringVar(&seedsSpec, "seeds", "1", `seeds to run: "N", "A-B", or a comma list of those`)
	f.StringVar(&cfg.Faults, "faults", "all", "faults to inject: all, none, or a comma list of "+strings.Join(sim.FaultKinds, ","))
	f.StringVar(&cfg.Latency, "latency", sim.DefaultLatency, "node-to-node one-way latency distribution")
	f.StringVar(&readMode, "read-mode", "linearizable", "read mode clients request: linearizable, regular or local (the checker still demands linearizability)")
	f.IntVar(&cfg.Keys, "keys", sim.DefaultKeys, "number of distinct keys (few keys force contention)")
	f.StringVar(&cfg.Mix, "mix", "", "operation mix as kind:weight (kv: get, set, del, exists; counter: read, add; string: read, append); default per service")
	f.StringVar(&cfg.Service, "service", sim.ServiceName, "data type of the namespace: kv, counter or string")
	f.Float64Var(&cfg.StrictFrac, "strict", 0, "ESDS protocols: fraction of strict operations")
	f.Float64Var(&cfg.PrevProb, "prev", 0, "ESDS protocols: probability that an operation names an earlier completed one in its prev set")
	f.Float64Var(&cfg.Loss, "loss", 0, "base message loss probability on every link")
	f.Float64Var(&cfg.Dup, "dup", 0, "base message duplication probability on every link")
	f.Float64Var(&cfg.ReorderFrac, "reorder", 0, "base fraction of messages delayed by an extra "+sim.DefaultReorderDelay)
	f.StringVar(&cfg.Fsync, "fsync", sim.DefaultFsync, "fsync duration distribution")
	f.StringVar(&cfg.ClientLatency, "client-latency", sim.DefaultClientLatency, "client-to-node one-way latency distribution")
	f.StringVar(&cfg.Think, "think", sim.DefaultThink, "client think time between operations")
	f.DurationVar(&cfg.RequestTimeout, "timeout", sim.DefaultRequestTimeout, "client request timeout (virtual time)")
	f.StringArrayVar(&links, "link", nil, "latency of one directed link, e.g. n1->n2=pareto:5ms:1.5 (repeatable)")
	f.StringArrayVar(&params, "param", nil, "protocol parameter key=value (repeatable)")
	f.DurationVar(&cfg.Liveness, "liveness", 0, "liveness mode: heal every fault at this virtual time while clients continue, then require every operation invoked after it plus --liveness-bound to complete within the bound")
	f.DurationVar(&cfg.LivenessBound, "liveness-bound", sim.DefaultLivenessBound, "liveness mode: the time progress may take to resume, and the latency bound after it")
	f.DurationVar(&cfg.CheckTimeout, "check-timeout", sim.DefaultCheckTimeout, "time limit of each linearizability check (real time)")
	f.StringVar(&saveDir, "save-failing", "sim-failures", "directory for the histories and HTML views of failing seeds")
	f.IntVar(&workers, "workers", runtime.GOMAXPROCS(0), "seeds simulated in parallel")
	f.StringVar(&membershipSpec, "membership", "", `membership changes (paxos), e.g. "add@2s,remove:n1@4s": add a fresh node / remove a node at that virtual time`)
	f.StringVar(&traceFile, "trace", "", "write a per-event trace of the (single) seed to this file")
	f.BoolVarP(&verbose, "verbose", "v", false, "print one line per seed (verdict, ops, times, digest); always on for a single seed")
	rootCmd.AddCommand(cmd)
}

// seedOutcome is what is kept of one seed after its worker is done with it.
type seedOutcome struct {
	seed                     int64
	ops, completed, unknown  int
	simTime, wallTime        time.Duration
	digest, verdict, summary string
	replay                   string
	violation                bool
	err                      error
	saved                    []string
	saveErr                  error
}

func runSims(stdout, stderr io.Writer, cfg sim.Config, seeds []int64, workers int, saveDir string, verbose bool) error {
	if workers > len(seeds) {
		workers = len(seeds)
	}
	// On a terminal the progress line rewrites itself; otherwise (a log file,
	// CI) it is a plain line every 10 seconds.
	tty := isTerminal(stderr)
	clr, every := "", 10*time.Second
	if tty {
		clr, every = "\r\033[K", 500*time.Millisecond
	}
	start := time.Now()
	outcomes := make([]seedOutcome, len(seeds))
	var done, totalOps, violations atomic.Int64
	var mu sync.Mutex // serializes stderr lines
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				o := runSeed(cfg, seeds[i], saveDir)
				outcomes[i] = o
				done.Add(1)
				totalOps.Add(int64(o.ops))
				if o.violation || o.err != nil {
					violations.Add(1)
				}
				if verbose || len(seeds) == 1 {
					mu.Lock()
					fmt.Fprint(stderr, clr)
					fmt.Fprintln(stdout, o.line())
					mu.Unlock()
				}
			}
		}()
	}
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stopProgress:
				mu.Lock()
				fmt.Fprint(stderr, clr)
				mu.Unlock()
				return
			case <-t.C:
				el := time.Since(start)
				end := "\n"
				if tty {
					end = ""
				}
				mu.Lock()
				fmt.Fprintf(stderr, "%s[%s] seeds %d/%d  ops %d  failing %d  %.0fs%s",
					clr, cfg.Protocol, done.Load(), len(seeds), totalOps.Load(), violations.Load(), el.Seconds(), end)
				mu.Unlock()
			}
		}
	}()
	for i := range seeds {
		next <- i
	}
	close(next)
	wg.Wait()
	close(stopProgress)
	<-progressDone
	wall := time.Since(start)

	var ops, completed, unknown, undecided int
	var simTime time.Duration
	var failing []seedOutcome
	for _, o := range outcomes {
		ops += o.ops
		completed += o.completed
		unknown += o.unknown
		simTime += o.simTime
		if o.verdict == check.Unknown {
			undecided++
		}
		if o.violation || o.err != nil {
			failing = append(failing, o)
		}
	}
	sort.Slice(failing, func(i, j int) bool { return failing[i].seed < failing[j].seed })
	for _, o := range failing {
		fmt.Fprintf(stdout, "FAIL seed %d digest %s\n", o.seed, o.digest)
		if o.err != nil {
			fmt.Fprintf(stdout, "  error: %v\n", o.err)
		} else {
			fmt.Fprintf(stdout, "  %s\n", o.summary)
		}
		for _, p := range o.saved {
			fmt.Fprintf(stdout, "  saved %s\n", p)
		}
		if o.saveErr != nil {
			fmt.Fprintf(stdout, "  saving failed: %v\n", o.saveErr)
		}
		fmt.Fprintf(stdout, "  replay: %s\n", o.replay)
	}
	ratio := 0.0
	if wall > 0 {
		ratio = float64(simTime) / float64(wall)
	}
	fmt.Fprintf(stdout, "%s: %d seeds, %d ops (%d completed, %d unknown), %d failing, %d undecided checks\n",
		cfg.Protocol, len(seeds), ops, completed, unknown, len(failing), undecided)
	fmt.Fprintf(stdout, "sim time %v, wall time %v (%.1fx), %.1f seeds/min, %d workers\n",
		simTime.Round(time.Millisecond), wall.Round(time.Millisecond), ratio,
		float64(len(seeds))/wall.Minutes(), workers)
	if len(failing) > 0 {
		return fmt.Errorf("%d of %d seeds failed", len(failing), len(seeds))
	}
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func runSeed(cfg sim.Config, seed int64, saveDir string) seedOutcome {
	cfg.Seed = seed
	o := seedOutcome{seed: seed, replay: cfg.Command()}
	r, err := sim.Run(cfg)
	if err != nil {
		o.err = err
		return o
	}
	o.ops, o.completed, o.unknown = r.Ops, r.Completed, r.Unknown
	o.simTime, o.wallTime, o.digest = r.SimTime, r.WallTime, r.Digest
	o.violation = r.Violation
	if r.Check != nil {
		o.verdict = r.Check.Result
		o.summary = r.Check.String()
	}
	if r.Liveness != "" {
		o.violation = true
		o.summary = r.Liveness + "; " + o.summary
	}
	if r.ESDS != nil {
		o.verdict = "ok"
		if !r.ESDS.Ok {
			o.verdict = "illegal"
		}
		o.summary = r.ESDS.Detail()
	}
	if !o.violation {
		return o
	}
	r.History.Meta["replay"] = o.replay
	if err := os.MkdirAll(saveDir, 0o755); err != nil {
		o.saveErr = err
		return o
	}
	base := filepath.Join(saveDir, fmt.Sprintf("%s-seed%d", cfg.Protocol, seed))
	if err := r.History.Save(base + ".json"); err != nil {
		o.saveErr = err
		return o
	}
	o.saved = append(o.saved, base+".json")
	if r.Check == nil {
		return o
	}
	if err := r.Check.WriteHTML(base + ".html"); err != nil {
		o.saveErr = err
		return o
	}
	o.saved = append(o.saved, base+".html")
	return o
}

func (o seedOutcome) line() string {
	if o.err != nil {
		return fmt.Sprintf("seed %d: error: %v", o.seed, o.err)
	}
	v := o.verdict
	if v == "" {
		v = "unchecked"
	}
	return fmt.Sprintf("seed %d: %s  ops %d (%d unknown)  sim %v  wall %v  digest %s",
		o.seed, v, o.ops, o.unknown, o.simTime.Round(time.Millisecond), o.wallTime.Round(time.Millisecond), o.digest)
}
