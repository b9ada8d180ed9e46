package programs

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/synod-dev/synod/internal/registry"
)

// Program is a parallel program over shared data-objects, written against
// Process only, so that it runs in the simulated world (virtual time, the
// cost model) and on a live cluster alike (the Orca paper §2: processes on
// processors sharing objects). A run has three parts:
//
//   - Setup runs as one process on node 0 before any worker starts: it
//     creates the shared objects (orca.New) and may fill them (a job queue).
//   - Worker runs once per node, worker i on node i of n, all at once: it
//     shares the objects through its node (orca.Call), blocking in guarded
//     operations, and computes (Process.Compute).
//   - Finish runs on node 0 after every worker returned: it reads the
//     outcome and checks it (against a sequential computation, say). Its
//     text is printed; an error fails the run.
//
// A Process's Must panics on an error answer; the runners report it as the
// run's error. `synod-lab orca run NAME` runs a registered program.
type Program struct {
	Name   string
	Doc    string // one line, for `synod-lab orca run --help`
	Setup  func(p Process) error
	Worker func(p Process, i, n int) error
	Finish func(p Process, n int) (string, error)
}

var known = registry.New[Program]("orca program")

// RegisterProgram makes p runnable by name (`synod-lab orca run NAME`). Call
// it from init or before synod.Main. The built-in tsp and asp are not in
// this registry (they have their own flags); their names are refused.
func RegisterProgram(p Program) error {
	switch {
	case p.Name == "" || p.Name == "tsp" || p.Name == "asp":
		return fmt.Errorf("orca program name %q is empty or taken by a built-in program", p.Name)
	case p.Worker == nil:
		return fmt.Errorf("orca program %q has no Worker", p.Name)
	case slices.Contains(known.Names(), p.Name):
		return fmt.Errorf("orca program %q registered twice", p.Name)
	}
	known.Register(p.Name, p)
	return nil
}

// LookupProgram returns a registered program.
func LookupProgram(name string) (Program, error) { return known.Lookup(name) }

// ProgramNames lists the registered programs, sorted.
func ProgramNames() []string { return known.Names() }

// ProgramRun is one run of a Program.
type ProgramRun struct {
	Output   string        // Finish's text
	Elapsed  time.Duration // from the workers' start to the last one's end: virtual (simulated) or wall (live)
	Requests int           // operations the processes made
	Stats    Stats         // simulated runs: the world's communication
}

// RunProgram runs prog on n simulated nodes under r (virtual time, net's
// cost model, deterministic for seed).
func (r Runtime) RunProgram(prog Program, n int, net Net, seed int64) (ProgramRun, error) {
	var run ProgramRun
	w, err := r.World(n, net, seed)
	if err != nil {
		return run, err
	}
	const limit = 24 * time.Hour
	var perr error
	fail := func(err error) {
		if err != nil && perr == nil {
			perr = err
		}
	}
	if prog.Setup != nil {
		if err := w.Phase(0, "setup", func(p *Proc) { fail(prog.Setup(p)) }, limit); err != nil {
			return run, err
		}
	}
	start := w.Now()
	for i := 0; i < n; i++ {
		w.Spawn(i, fmt.Sprintf("worker%d", i), func(p *Proc) { fail(prog.Worker(p, i, n)) })
	}
	if err := w.Run(limit); err != nil {
		return run, err
	}
	run.Elapsed = w.Now() - start
	if perr != nil {
		return run, perr
	}
	if prog.Finish != nil {
		if err := w.Phase(0, "finish", func(p *Proc) { run.Output, perr = prog.Finish(p, n) }, limit); err != nil {
			return run, err
		}
	}
	run.Requests, run.Stats = w.Stats.Requests, w.Stats
	return run, perr
}

// RunProgramLive runs prog on a live cluster whose default namespace
// serves the orca service: setup and finish as clients of addrs[0],
// worker i a client of addrs[i] (one worker per node).
func RunProgramLive(ctx context.Context, addrs []string, prog Program) (ProgramRun, error) {
	var run ProgramRun
	g, err := newLiveGroup(ctx, addrs)
	if err != nil {
		return run, err
	}
	defer g.close()
	n := len(addrs)
	once := func(who string, f func(p Process) error) error {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			defer g.fail(who)
			if err := f(g.procs[0]); err != nil {
				panic(err)
			}
		}()
		var lr LiveResult
		return g.wait(&lr)
	}
	if prog.Setup != nil {
		if err := once("setup", prog.Setup); err != nil {
			return run, err
		}
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		g.goWorker(i, func(p Process) {
			if err := prog.Worker(p, i, n); err != nil {
				panic(err)
			}
		})
	}
	var lr LiveResult
	if err := g.wait(&lr); err != nil {
		return run, err
	}
	run.Elapsed = time.Since(start)
	if prog.Finish != nil {
		if err := once("finish", func(p Process) (err error) { run.Output, err = prog.Finish(p, n); return }); err != nil {
			return run, err
		}
	}
	for _, p := range g.procs {
		run.Requests += p.n
	}
	return run, nil
}

// AllProgramNames lists the built-in programs (tsp, asp) and the
// registered ones.
func AllProgramNames() []string { return slices.Concat([]string{"tsp", "asp"}, ProgramNames()) }
