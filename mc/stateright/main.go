// Command stateright runs the Stateright comparison (issue 32 item 6):
// Stateright's own examples — single-decree Paxos (examples/paxos.rs,
// `paxos check 3`: 3 servers, 3 clients, breadth-first) and the
// linearizable register (examples/linearizable-register.rs,
// `linearizable-register check 2`: ABD, 3 servers, 2 clients, depth-first)
// — checked by Stateright's binaries and, in the same run, by Synod's model
// checker on the same models written as Synod protocols
// (mc/stateright/srpaxos, mc/stateright/srregister; mc.CheckActors,
// Stateright's actor semantics). It prints one table: unique states,
// depth, wall seconds, unique states per wall second and per CPU second,
// and the property results, for each tool, with the load average before
// and after. Then Synod's own ABD and Multi-Paxos models in the general
// checker (mc.Check), whose states/s and bytes per state FIGURES.md
// follows from session to session.
//
// Usage (run.sh builds Stateright's examples and passes -sr):
//
//	go run ./mc/stateright [-sr DIR] [-seconds N] [-paxos-seconds N] [-only paxos|register|own] [-workers N] [-cpuprofile F] [-own-states N]
//
// -seconds bounds the register's searches (0: to the end; its model has
// 41 M states, minutes on a quiet machine), -paxos-seconds the Paxos
// ones (0: to the end); a bounded search compares rates, not counts.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/synod-dev/synod/mc"
	"github.com/synod-dev/synod/mc/stateright/srpaxos"
	"github.com/synod-dev/synod/mc/stateright/srregister"
	_ "github.com/synod-dev/synod/protocol/all"
)

type row struct {
	model, tool               string
	states, depth             int64
	wall, cpu                 time.Duration
	complete                  bool
	linearizable, valueChosen string
	note                      string
}

func main() {
	srDir := flag.String("sr", "", "directory of Stateright's built examples (paxos, linearizable-register); empty: Synod only")
	seconds := flag.Int("seconds", 0, "bound the register's searches to this many seconds (0: run to the end, 41 M states)")
	paxosSeconds := flag.Int("paxos-seconds", 0, "bound the Paxos searches to this many seconds (0: run to the end, 1.19 M states with 3 clients)")
	only := flag.String("only", "", "paxos, register or own (Synod's own models); empty: all")
	workers := flag.Int("workers", 0, "Synod's workers (0: GOMAXPROCS; Stateright uses every core)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of Synod's searches")
	ownStates := flag.Int("own-states", 200000, "state bound of Synod's own ABD and Multi-Paxos models")
	paxosClients := flag.Int("paxos-clients", 3, "clients of the Paxos model")
	regClients := flag.Int("register-clients", 2, "clients of the register model")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	load0 := loadavg()
	fmt.Printf("load average at start: %s; GOMAXPROCS %d\n", load0, runtime.GOMAXPROCS(0))
	limit := time.Duration(*seconds) * time.Second
	plimit := time.Duration(*paxosSeconds) * time.Second
	var rows []row
	if *only == "" || *only == "paxos" {
		m := fmt.Sprintf("single-decree Paxos, 3 servers, %d clients, BFS", *paxosClients)
		if *srDir != "" {
			rows = append(rows, stateright(m, filepath.Join(*srDir, "paxos"), plimit, "check", strconv.Itoa(*paxosClients)))
		}
		rows = append(rows, synod(m, mc.ActorModel{Protocol: srpaxos.Protocol{}, Servers: 3, Clients: *paxosClients, PutCount: 1},
			mc.ActorOptions{Workers: *workers, Timeout: plimit}))
	}
	if *only == "" || *only == "register" {
		m := fmt.Sprintf("linearizable register (ABD), 3 servers, %d clients, DFS", *regClients)
		if *srDir != "" {
			rows = append(rows, stateright(m, filepath.Join(*srDir, "linearizable-register"), limit, "check", strconv.Itoa(*regClients)))
		}
		rows = append(rows, synod(m, mc.ActorModel{Protocol: srregister.Protocol{}, Servers: 3, Clients: *regClients, PutCount: 1},
			mc.ActorOptions{DFS: true, Workers: *workers, Timeout: limit}))
	}
	fmt.Printf("\n| model | checker | unique states | depth | wall s | states/s | CPU s | states/CPU s | complete | linearizable | value chosen |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %d | %d | %.2f | %.0f | %.2f | %.0f | %v | %s | %s |\n", r.model, r.tool, r.states, r.depth,
			r.wall.Seconds(), rate(r.states, r.wall), r.cpu.Seconds(), rate(r.states, r.cpu), r.complete, r.linearizable, r.valueChosen)
	}
	for _, r := range rows {
		if r.note != "" {
			fmt.Printf("note (%s, %s): %s\n", r.tool, r.model, r.note)
		}
	}
	for i := 0; i+1 < len(rows); i += 2 {
		if rows[i].tool == "Stateright 0.31" && rows[i+1].model == rows[i].model {
			fmt.Printf("ratio Synod/Stateright, %s: %.2f per wall second, %.2f per CPU second; same unique states: %v\n", rows[i].model,
				rate(rows[i+1].states, rows[i+1].wall)/rate(rows[i].states, rows[i].wall),
				rate(rows[i+1].states, rows[i+1].cpu)/rate(rows[i].states, rows[i].cpu),
				rows[i].complete && rows[i+1].complete && rows[i].states == rows[i+1].states)
		}
	}
	if *only == "" || *only == "own" {
		fmt.Printf("\nSynod's own models in the general checker (mc.Check, %d states):\n\n| protocol | model | states | depth | wall s | states/s | CPU s | B/state | result |\n|---|---|---|---|---|---|---|---|---|\n", *ownStates)
		own(*ownStates)
	}
	fmt.Printf("\nload average at end: %s\n", loadavg())
}

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func synod(model string, m mc.ActorModel, opt mc.ActorOptions) row {
	runtime.GC()
	cpu0 := cpuNow()
	res, err := mc.CheckActors(m, opt)
	cpu := cpuNow() - cpu0
	if err != nil {
		fmt.Fprintln(os.Stderr, model, err)
		os.Exit(1)
	}
	r := row{model: model, tool: "Synod mc", states: res.States, depth: int64(res.Depth), wall: res.Elapsed, cpu: cpu, complete: res.Complete,
		linearizable: "holds", valueChosen: "not found"}
	if !res.Complete {
		r.linearizable = "no violation found"
	}
	if res.Violation != nil {
		r.linearizable = fmt.Sprintf("VIOLATED (%d deliveries)", len(res.Violation.Events))
	}
	if res.ValueChosen != nil {
		r.valueChosen = fmt.Sprintf("found (%d deliveries)", len(res.ValueChosen.Events))
	}
	r.note = fmt.Sprintf("%d transitions; fingerprint set %d B (%.1f B/state); depth counts deliveries (Stateright's counts the initial state too)",
		res.Transitions, res.Bytes, float64(res.Bytes)/float64(res.States))
	return r
}

var (
	doneRE     = regexp.MustCompile(`Done\. states=(\d+), unique=(\d+), depth=(\d+), sec=(\d+)`)
	progressRE = regexp.MustCompile(`Checking\. states=(\d+), unique=(\d+), depth=(\d+)`)
	discRE     = regexp.MustCompile(`Discovered "([^"]+)" (\w+) Path\[(\d+)\]`)
)

// stateright runs one of Stateright's examples and reads its report.
func stateright(model, bin string, limit time.Duration, args ...string) row {
	ctx := context.Background()
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, bin, err)
		os.Exit(1)
	}
	r := row{model: model, tool: "Stateright 0.31", linearizable: "holds", valueChosen: "not found"}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := doneRE.FindStringSubmatch(line); m != nil {
			r.states, _ = strconv.ParseInt(m[2], 10, 64)
			r.depth, _ = strconv.ParseInt(m[3], 10, 64)
			r.complete = true
			r.note = "Stateright reports whole seconds (sec=" + m[4] + "); wall time measured here"
		} else if m := progressRE.FindStringSubmatch(line); m != nil {
			r.states, _ = strconv.ParseInt(m[2], 10, 64)
			r.depth, _ = strconv.ParseInt(m[3], 10, 64)
		} else if m := discRE.FindStringSubmatch(line); m != nil {
			if m[1] == "linearizable" {
				r.linearizable = "VIOLATED (" + m[3] + " steps)"
			} else {
				r.valueChosen = "found (" + m[3] + " actions)"
			}
		}
	}
	cmd.Wait()
	r.wall = time.Since(start)
	if ps := cmd.ProcessState; ps != nil {
		r.cpu = ps.UserTime() + ps.SystemTime()
	}
	if !r.complete {
		r.linearizable = "no violation found"
		r.note = fmt.Sprintf("stopped after %v; unique states from its last progress line (printed every few seconds), so its rate is a lower bound", limit)
	}
	return r
}

// own checks Synod's own ABD and Multi-Paxos in the general checker, as
// FIGURES.md has since issue 20: ABD with 2 clients depth-first to depth
// 30 without timers; paxos with clients at n1 and one timer firing,
// breadth-first.
func own(max int) {
	for _, p := range []string{"abd", "paxos"} {
		cfg := mc.NewConfig(p)
		cfg.Model.Clients = 2
		cfg.Timers = "none"
		desc := "2 clients, no timers, DFS to depth 30"
		cfg.DFS = true
		if p == "paxos" {
			cfg.Timers, cfg.Model.Target, cfg.DFS = "quiet:1", "first", false
			desc = "2 clients at n1, one timer firing, BFS"
		}
		cfg.Depth = 30
		cfg.MaxStates = max
		runtime.GC()
		cpu0 := cpuNow()
		res, err := mc.Check(cfg)
		cpu := cpuNow() - cpu0
		if err != nil {
			fmt.Fprintln(os.Stderr, p, err)
			os.Exit(1)
		}
		verdict := "ok"
		if res.Violation != nil {
			verdict = "VIOLATION"
		}
		fmt.Printf("| %s | %s | %d | %d | %.2f | %.0f | %.2f | %.0f | %s |\n", p, desc, res.States, res.Depth, res.Elapsed.Seconds(),
			res.StatesPerSecond(), cpu.Seconds(), res.BytesPerState(), verdict)
	}
}
