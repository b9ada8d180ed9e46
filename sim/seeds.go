package sim

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/synod-dev/synod/check"
)

// SeedOptions configure RunSeeds.
type SeedOptions struct {
	// Stdout receives per-seed lines, failures and the summary; Stderr the
	// progress line. Nil discards.
	Stdout, Stderr io.Writer
	// Workers is the number of seeds simulated in parallel (default 1).
	Workers int
	// SaveDir receives the history (and HTML view) of each failing seed
	// (default "sim-failures").
	SaveDir string
	// Verbose prints one line per seed.
	Verbose bool
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
	txns                     Stats // the transaction counts only
}

// RunSeeds simulates cfg once per seed on Workers goroutines, checks every
// run, prints one line per seed when Verbose (or when there is one seed), a
// progress line on Stderr, a report of every failing seed (its digest, what
// failed, where its history was saved, and the command that replays it) and
// a summary on Stdout. It returns an error when any seed fails.
func RunSeeds(cfg Config, seeds []int64, o SeedOptions) error {
	stdout, stderr, workers, saveDir, verbose := o.Stdout, o.Stderr, o.Workers, o.SaveDir, o.Verbose
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	if workers < 1 {
		workers = 1
	}
	if saveDir == "" {
		saveDir = "sim-failures"
	}
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
	var txns Stats
	for _, o := range outcomes {
		txns.TxnCommitted += o.txns.TxnCommitted
		txns.TxnAborted += o.txns.TxnAborted
		txns.TxnConflicts += o.txns.TxnConflicts
		txns.TxnFailed += o.txns.TxnFailed
		txns.TxnUnknown += o.txns.TxnUnknown
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
	if t := txns.TxnString(); t != "" {
		fmt.Fprintln(stdout, t)
	}
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

func runSeed(cfg Config, seed int64, saveDir string) seedOutcome {
	cfg.Seed = seed
	o := seedOutcome{seed: seed, replay: cfg.Command()}
	r, err := Run(cfg)
	if err != nil {
		o.err = err
		return o
	}
	o.ops, o.completed, o.unknown = r.Ops, r.Completed, r.Unknown
	o.simTime, o.wallTime, o.digest = r.SimTime, r.WallTime, r.Digest
	o.violation = r.Violation
	o.txns = Stats{TxnCommitted: r.Stats.TxnCommitted, TxnAborted: r.Stats.TxnAborted,
		TxnConflicts: r.Stats.TxnConflicts, TxnFailed: r.Stats.TxnFailed, TxnUnknown: r.Stats.TxnUnknown}
	if r.Check != nil {
		o.verdict = r.Check.Result
		o.summary = r.Check.String()
	}
	if r.Invariant != "" {
		o.verdict = "invariant"
		o.summary = "invariant violated " + r.Invariant
	}
	if r.Divergence != "" {
		o.verdict = "diverged"
		o.summary = r.Divergence
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
	if r.viz != nil {
		if err := r.viz(base + ".html"); err != nil {
			o.saveErr = err
			return o
		}
		o.saved = append(o.saved, base+".html")
		return o
	}
	if r.Check == nil || (r.Check.Guarantee != check.GuaranteeLinearizable && r.Check.Guarantee != "") {
		return o // Porcupine's view draws linearizability reports only
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
