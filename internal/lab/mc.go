package lab

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/spf13/cobra"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/internal/cli"
	"github.com/synod-dev/synod/mc"
)

func init() { cli.AddCommand(mcCmd("mc")) }

// `synod-lab mc`: the exhaustive model checker (package mc). It was `synod
// model check`, which remains as a hidden, deprecated name: "model" is the
// analytical models' word (`synod-lab model`).
func mcCmd(use string) *cobra.Command {
	var (
		protocol, network, timers, out, replayFile, target, symmetry     string
		cpuProfile                                                       string
		depth, crashes, workers, maxStates, nodes, clients               int
		dfs, replay, keepGoing, crashBeforeFsync, noPrefix, clientDriven bool
	)
	cmd := &cobra.Command{
		Use:   use,
		Short: "Model checker: explore every interleaving of a protocol's small instance (BFS/DFS to a depth), checking invariants, histories and sometimes/eventually properties",
		Long: `Explore every interleaving of a small configuration of a protocol (or of every
protocol with --protocol all), checking its invariants in every state, its
consistency checker on every history, and printing states/s and bytes/state.
A counterexample (the shortest with BFS) is printed step by step and saved
with --out; --replay-file replays a saved one from fresh automata, and
'synod-lab explore --trace FILE' opens it in the browser.

Broken variants:
` + automaton.DescribeBroken(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if replayFile != "" {
				t, err := mc.LoadTrace(replayFile)
				if err != nil {
					return err
				}
				why, err := t.Replay()
				if err != nil {
					return err
				}
				fmt.Print(t)
				if why == "" {
					fmt.Println("replay: no violation")
					return nil
				}
				fmt.Println("replay reproduces:", why)
				return nil
			}
			net, err := mc.ParseNetwork(network)
			if err != nil {
				return err
			}
			if cpuProfile != "" {
				pf, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(pf); err != nil {
					return err
				}
				defer func() { pprof.StopCPUProfile(); pf.Close() }()
			}
			names := []string{protocol}
			if protocol == "all" {
				names = append(automaton.Names(), automaton.BrokenNames()...)
			}
			failed := false
			fmt.Printf("%-32s %8s %5s %9s %9s %8s  %s\n", "protocol", "states", "depth", "time", "states/s", "B/state", "result")
			for _, name := range names {
				cfg := mc.NewConfig(name)
				// The network, timer mode and crash bound a model declares
				// stand unless the flag is given.
				if cmd.Flags().Changed("network") {
					cfg.Net = net
				}
				if cmd.Flags().Changed("timers") {
					cfg.Timers = timers
				}
				if cmd.Flags().Changed("crashes") {
					cfg.Crashes = crashes
				}
				if cmd.Flags().Changed("crash-before-fsync") {
					cfg.CrashBeforeFsync = crashBeforeFsync
				}
				if noPrefix {
					cfg.Model.Prefix = nil
				}
				cfg.DFS, cfg.Workers, cfg.MaxStates, cfg.Replay, cfg.KeepGoing = dfs, workers, maxStates, replay, keepGoing
				if depth > 0 {
					cfg.Depth = depth
				}
				if nodes > 0 {
					cfg.Model.Nodes = nodes
				}
				if clients > 0 {
					cfg.Model.Clients = clients
				}
				if target != "" {
					cfg.Model.Target = target
				}
				if cmd.Flags().Changed("client-driven") {
					cfg.Model.ClientDriven = clientDriven
				}
				if symmetry != "" {
					nodes, clients, err := parseSymmetry(symmetry)
					if err != nil {
						return err
					}
					cfg.Model.SymmetricNodes, cfg.Model.SymmetricClients = nodes, clients
				}
				r, err := mc.Check(cfg)
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				res := "ok"
				switch {
				case r.Violation != nil:
					res = fmt.Sprintf("VIOLATION after %d events: %s", len(r.Violation.Events), firstLineOf(r.Violation.Violation))
				case r.Frontier == 0 && r.Complete:
					res = "ok (exhausted)"
				case !r.Complete:
					res = "ok (stopped at --max-states)"
				}
				fmt.Printf("%-32s %8d %5d %9s %9.0f %8.0f  %s\n", name, r.States, r.Depth, r.Elapsed.Round(1e6), r.StatesPerSecond(), r.BytesPerState(), res)
				if len(names) == 1 {
					fmt.Printf("\n%s\ntransitions %d, terminal states %d, histories checked %d, frontier left at the depth bound %d, peak heap %d MB\n",
						cfg.Describe(), r.Transitions, r.Terminal, r.HistoryChecks, r.Frontier, r.PeakHeap>>20)
					for _, s := range r.Sometimes {
						how := "NOT reached (the search may be vacuous for it)"
						if s.Reached {
							how = fmt.Sprintf("reached in %d events", len(s.Witness))
						}
						fmt.Printf("sometimes %q: %s\n", s.Name, how)
					}
					fmt.Printf("eventually: %s\n", mc.EventuallyDone)
				}
				if r.Violation != nil {
					failed = failed || !automaton.IsBroken(name)
					if len(names) == 1 {
						fmt.Printf("\ncounterexample:\n%s", r.Violation)
					}
					if out != "" {
						path := out
						if len(names) > 1 {
							path = strings.TrimSuffix(out, ".json") + "-" + name + ".json"
						}
						if err := r.Violation.Save(path); err != nil {
							return err
						}
						fmt.Printf("saved %s (replay: synod-lab mc --replay-file %s; explore: synod-lab explore --trace %s)\n", path, path, path)
					}
				}
			}
			if failed {
				pprof.StopCPUProfile()
				os.Exit(1)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&protocol, "protocol", automaton.DefaultProtocol, "protocol or broken variant to check, or all")
	f.IntVar(&depth, "depth", 0, "search depth in events (0: the model's)")
	f.BoolVar(&dfs, "dfs", false, "depth-first search (default breadth-first: shortest counterexample)")
	f.StringVar(&network, "network", "lossless,unordered", "network model: lossless|lossy, ordered|unordered, duplicating")
	f.StringVar(&timers, "timers", "quiet", "when timers fire: quiet (no message in flight), all (any time), none")
	f.IntVar(&crashes, "crashes", 0, "crashes allowed on a path (crashed nodes may restart)")
	f.BoolVar(&crashBeforeFsync, "crash-before-fsync", false, "let a crash fall after a step's Early Send and before the fsync of its records, losing them (counted by --crashes; default: the model's)")
	f.BoolVar(&noPrefix, "no-prefix", false, "search from the initial state, ignoring the model's scripted prefix")
	f.IntVar(&workers, "workers", 0, "goroutines expanding states (0: GOMAXPROCS)")
	f.IntVar(&maxStates, "max-states", 0, "stop after this many states (0: no limit)")
	f.IntVar(&nodes, "nodes", 0, "override the model's node count")
	f.IntVar(&clients, "clients", 0, "override the model's client count")
	f.StringVar(&target, "target", "", "which node clients send to: fixed, first, any")
	f.BoolVar(&clientDriven, "client-driven", false, "clients run each operation's phases against every node themselves (protocols with a client coordinator: abd), as sim --client-driven")
	f.StringVar(&symmetry, "symmetry", "", "symmetry reduction: nodes,clients, nodes, clients or none (default: the model's declaration; nodes need a protocol that renames them, e.g. abd with --target first)")
	f.BoolVar(&replay, "replay", false, "expand states by replaying their path from fresh automata instead of copying them")
	f.BoolVar(&keepGoing, "keep-going", false, "count every violation instead of stopping at the first")
	f.StringVar(&out, "out", "", "save the counterexample to this JSON file")
	f.StringVar(&replayFile, "replay-file", "", "replay a saved counterexample from fresh automata and exit")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the search to this file (go tool pprof)")
	return cmd
}

func firstLineOf(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

// parseSymmetry reads --symmetry: "none", or a comma-separated list of
// "nodes" and "clients".
func parseSymmetry(s string) (nodes, clients bool, err error) {
	if s == "none" {
		return false, false, nil
	}
	for _, part := range strings.Split(s, ",") {
		switch strings.TrimSpace(part) {
		case "nodes":
			nodes = true
		case "clients":
			clients = true
		default:
			return false, false, fmt.Errorf("--symmetry %q: want none, or nodes and/or clients separated by commas", s)
		}
	}
	return nodes, clients, nil
}
