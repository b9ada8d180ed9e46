package pbdurable

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/sim"
)

// TestSuspectBound (package doc, "Failure detection"): the senior backup
// takes over only after suspect_checks (3) consecutive check periods
// without a word from the primary; a heartbeat in between starts the
// count again. On 0a0a1ee (one silent period) n2 took over at the first
// silent check here.
func TestSuspectBound(t *testing.T) {
	c := stallCluster(t, "pb")
	silent := func() {
		c.Drop(harness.Match("n1", ""))
		c.FireTimer("n2", timerCheck)
	}
	c.FireTimer("n1", timerHeartbeat)
	c.DeliverAll()
	silent() // heard since the last check: the count starts
	for round := 0; round < 3; round++ {
		silent()
		silent()
		if pbd(c, "n2").primary {
			t.Fatalf("round %d: n2 took over after two silent check periods", round)
		}
		c.FireTimer("n1", timerHeartbeat) // one heartbeat: the count starts again
		c.Deliver(harness.Match("n1", "n2"), 0)
		c.Drop(nil)
		silent()
	}
	silent()
	silent()
	silent()
	if !pbd(c, "n2").primary {
		t.Fatal("n2 did not take over after three silent check periods")
	}
}

// takeOvers counts, in a simulation trace, the changes of primary: only
// a primary sets the heartbeat timer, so each time it fires at another
// node than the last time, a node took over (two primaries alternating,
// the deposed one not yet told, would count more: an upper bound).
type takeOvers struct {
	w     *io.PipeWriter
	done  chan struct{}
	count int
}

func countTakeOvers() *takeOvers {
	r, w := io.Pipe()
	c := &takeOvers{w: w, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		last := "n1"
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 5 && f[2] == "timer" && f[3] == fmt.Sprint(int(timerHeartbeat)) && f[4] == "fired" && f[1] != last {
				c.count++
				last = f[1]
			}
		}
	}()
	return c
}

func (c *takeOvers) wait() int { c.w.Close(); <-c.done; return c.count }

// simTakeOvers runs the seeds of `synod-lab sim` with args and returns
// the changes of primary per seed.
func simTakeOvers(t *testing.T, args []string, seeds string) (per map[int64]int, ops int) {
	t.Helper()
	cfg, list, err := sim.ParseArgs(append(append([]string(nil), args...), "--seeds", seeds))
	if err != nil {
		t.Fatal(err)
	}
	per = map[int64]int{}
	for _, seed := range list {
		c := cfg
		c.Seed = seed
		tc := countTakeOvers()
		c.Trace = tc.w
		r, err := sim.Run(c)
		n := tc.wait()
		if err != nil {
			t.Fatal(err)
		}
		if r.Violation || r.Invariant != "" || r.Liveness != "" {
			t.Errorf("seed %d: violation %v, invariant %q, liveness %q; replay: %s", seed, r.Violation, r.Invariant, r.Liveness, c.Command())
		}
		per[seed] = n
		ops += r.Completed
	}
	return per, ops
}

// pauseArgs: pauses (10-500 ms: shorter than suspect_checks x
// rate_checking = 750 ms even with a heartbeat interval and a latency
// added) and slow windows with the default fsync (x10-x50 of 0.1-1 ms),
// nothing else.
var pauseArgs = []string{"--protocol", Name, "--nodes", "3", "--clients", "8", "--ops", "300", "--faults", "pause,slow"}

// TestPausesTakeNoOver: under pauses shorter than the bound no backup
// takes over (mappings pb and db, seeds 1-10); with one silent check
// period (suspect_checks=1, the detector of 0a0a1ee) the same runs take
// over many times. A crash of the primary is still taken over
// (TestCrashTakenOver).
func TestPausesTakeNoOver(t *testing.T) {
	for _, mapping := range []string{"pb", "db"} {
		args := append(append([]string(nil), pauseArgs...), "--param", "mapping="+mapping)
		now, ops := simTakeOvers(t, args, "1-10")
		old, _ := simTakeOvers(t, append(args, "--param", "suspect_checks=1"), "1-10")
		total, oldTotal := 0, 0
		for s := int64(1); s <= 10; s++ {
			total += now[s]
			oldTotal += old[s]
			if now[s] > 0 {
				t.Errorf("mapping %s seed %d: %d take-overs under pauses of at most 500 ms; replay: synod-lab sim %s --seeds %d --trace t.txt",
					mapping, s, now[s], strings.Join(args, " "), s)
			}
		}
		t.Logf("mapping %s, seeds 1-10 (%d ops completed): changes of primary %d (suspect_checks=3), %d (suspect_checks=1, per seed: %v)", mapping, ops, total, oldTotal, old)
		if oldTotal == 0 {
			t.Errorf("mapping %s: with one silent period no pause caused a take-over either: the scenario shows nothing", mapping)
		}
	}
}

// TestCrashTakenOver: crashes are still taken over with suspect_checks 3:
// the primary changes under crashes (a seed's nemesis may crash only
// backups: seeds 7 and 9), every history is linearizable, and nearly
// every operation completes.
func TestCrashTakenOver(t *testing.T) {
	args := []string{"--protocol", Name, "--nodes", "3", "--clients", "8", "--ops", "300", "--faults", "crash", "--param", "mapping=pb"}
	per, ops := simTakeOvers(t, args, "1-10")
	total := 0
	for _, n := range per {
		total += n
	}
	if total < 5 || ops < 2700 {
		t.Errorf("seeds 1-10: %d changes of primary under crashes (%v), %d of 3000 operations completed; replay: synod-lab sim %s --seeds 1-10", total, per, ops, strings.Join(args, " "))
	}
	t.Logf("seeds 1-10 (%d ops completed): changes of primary per seed %v", ops, per)
}
