package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/internal/cli"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/orca/programs"
)

func init() {
	orcaCmd := &cobra.Command{
		Use:   "orca",
		Short: "Orca parallel programs over shared data-objects (seed 004: TSP, ASP)",
	}
	orcaCmd.AddCommand(orcaRunCmd())
	cli.AddCommand(orcaCmd)
}

func orcaRunCmd() *cobra.Command {
	var (
		nodes, cities, size int
		protocol, strategy  string
		seed                int64
		multicast, live     bool
		fsync, nodeCost     time.Duration
		cellCost            time.Duration
	)
	cmd := &cobra.Command{
		Use:   "run tsp|asp|PROGRAM",
		Short: "Run TSP or ASP on simulated nodes under an Orca runtime and check it against the sequential solver",
		Long: `Runs seed 004's TSP (master/worker branch and bound with a shared bound and a
guarded job queue) or ASP (parallel Floyd sharing each iteration's pivot row)
on --nodes simulated nodes (virtual time, the cost model printed with the
figures), checks the answer against the sequential solver, and prints the
elapsed virtual time, the speedup over the sequential program's time, and
the communication (messages, bytes).

With --live, the program runs instead on real loopback clusters of 1, 2,
..., --nodes synod node processes (service orca, memory durability): the
master and one worker per node are clients of their node over gRPC, a
worker's computation burns --node-cost (tsp, per expansion) or --cell-cost
(asp, per cell update) of processor time, and the wall-clock time is
compared with the sequential solver's at the same cost on this machine.

A binary built with synod.Main runs its registered programs
(synod.RegisterProgram, docs/ORCA.md) the same way: simulated on --nodes
nodes, or with --live on clusters of 1..--nodes node processes of that
binary (so they serve its object types).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rt, err := programs.ParseRuntime(protocol, strategy)
			if err != nil {
				return err
			}
			if prog, err := programs.LookupProgram(args[0]); err == nil {
				return orcaRunProgram(rt, prog, nodes, seed, live, multicast, fsync)
			}
			if live {
				switch args[0] {
				case "tsp":
					return orcaRunTSPLive(rt, nodes, cities, seed, nodeCost)
				case "asp":
					return orcaRunASPLive(rt, nodes, size, seed, cellCost)
				}
				return fmt.Errorf("unknown program %q (want one of %v)", args[0], programs.AllProgramNames())
			}
			net := programs.Ethernet10
			net.Multicast, net.Fsync = multicast, fsync
			var res programs.Result
			var seq time.Duration
			var ok bool
			switch args[0] {
			case "tsp":
				inst := programs.NewTSP(cities, seed)
				want, exp := programs.SolveTSP(inst)
				seq = time.Duration(exp) * programs.DefaultTSPConfig.NodeCost
				res, err = rt.RunTSP(nodes, inst, programs.DefaultTSPConfig, net, seed)
				ok = err == nil && res.Answer == want
				if err == nil {
					fmt.Printf("tsp %d cities: tour %d, sequential solver %d\n", cities, res.Answer, want)
				}
			case "asp":
				g := programs.NewGraph(size, seed)
				want := programs.SolveASP(g)
				seq = time.Duration(size*size*size) * programs.DefaultASPConfig.CellCost
				var got programs.Graph
				res, got, err = rt.RunASP(nodes, g, programs.DefaultASPConfig, net, seed)
				ok = err == nil && got.Equal(want)
				if err == nil {
					fmt.Printf("asp %d vertices: matrix equals the sequential solver's: %v\n", size, ok)
				}
			default:
				return fmt.Errorf("unknown program %q (want one of %v)", args[0], programs.AllProgramNames())
			}
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "runtime\tnodes\telapsed\tsequential\tspeedup\tsends\tframes\tbytes\twrites\n")
			fmt.Fprintf(tw, "%s\t%d\t%v\t%v\t%.2f\t%d\t%d\t%d\t%d\n", rt, nodes, res.Elapsed.Round(time.Millisecond),
				seq.Round(time.Millisecond), float64(seq)/float64(res.Elapsed), res.Stats.Sends, res.Stats.Frames, res.Stats.Bytes, res.Writes)
			tw.Flush()
			fmt.Println(net)
			if !ok {
				return fmt.Errorf("the parallel answer differs from the sequential solver's")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&nodes, "nodes", 4, "simulated nodes (one worker process each)")
	f.IntVar(&cities, "cities", 12, "TSP: number of cities")
	f.IntVar(&size, "size", 128, "ASP: number of vertices")
	f.StringVar(&protocol, "runtime", "orca-bcast", "orca-bcast or orca-primary")
	f.StringVar(&strategy, "strategy", "update", "orca-primary: update or invalidate")
	f.Int64Var(&seed, "seed", 1, "instance and simulation seed")
	f.BoolVar(&multicast, "multicast", false, "model hardware multicast (one frame for a step's identical sends)")
	f.DurationVar(&fsync, "fsync", 0, "virtual fsync time per persist (0: off)")
	f.BoolVar(&live, "live", false, "run on real loopback clusters of 1..--nodes node processes (wall-clock time)")
	f.DurationVar(&nodeCost, "node-cost", time.Microsecond, "--live: processor time burnt per expansion (the simulation's model is 20µs)")
	f.DurationVar(&cellCost, "cell-cost", time.Microsecond, "--live asp: processor time burnt per cell update (the simulation's model is 5µs)")
	return cmd
}

// orcaRunTSPLive runs TSP on loopback clusters of 1..nodes processes and
// prints the wall-clock speedups.
func orcaRunTSPLive(rt programs.Runtime, nodes, cities int, seed int64, nodeCost time.Duration) error {
	inst := programs.NewTSP(cities, seed)
	cfg := programs.DefaultTSPConfig
	cfg.NodeCost = nodeCost
	want, seq := programs.SequentialTSPLive(inst, cfg)
	fmt.Printf("tsp %d cities, live: sequential solver %d in %v (%v per expansion burnt), %d CPUs\n",
		cities, want, seq.Round(time.Millisecond), nodeCost, runtime.NumCPU())
	bad, err := liveClusters(rt, nodes, "tour\telapsed\tspeedup\trequests\twrites\tbound lowered", func(addrs []string) (string, bool, error) {
		res, err := programs.RunTSPLive(context.Background(), addrs, inst, cfg)
		return fmt.Sprintf("%d\t%v\t%.2f\t%d\t%d\t%d", res.Answer, res.Elapsed.Round(time.Millisecond),
			float64(seq)/float64(res.Elapsed), res.Requests, res.Writes, res.BoundSet), res.Answer == want, err
	})
	if err != nil {
		return err
	}
	if bad > 0 {
		return fmt.Errorf("%d runs found a tour other than the sequential solver's %d", bad, want)
	}
	return nil
}

// orcaRunASPLive runs ASP on loopback clusters of 1..nodes processes and
// prints the wall-clock speedups.
func orcaRunASPLive(rt programs.Runtime, nodes, size int, seed int64, cellCost time.Duration) error {
	g := programs.NewGraph(size, seed)
	cfg := programs.ASPConfig{CellCost: cellCost}
	want, seq := programs.SequentialASPLive(g, cfg)
	fmt.Printf("asp %d vertices, live: sequential solver in %v (%v per cell update burnt), %d CPUs\n",
		size, seq.Round(time.Millisecond), cellCost, runtime.NumCPU())
	bad, err := liveClusters(rt, nodes, "matrix equal\telapsed\tspeedup\trequests\twrites", func(addrs []string) (string, bool, error) {
		res, got, err := programs.RunASPLive(context.Background(), addrs, g, cfg)
		ok := got.Equal(want)
		return fmt.Sprintf("%v\t%v\t%.2f\t%d\t%d", ok, res.Elapsed.Round(time.Millisecond),
			float64(seq)/float64(res.Elapsed), res.Requests, res.Writes), ok, err
	})
	if err != nil {
		return err
	}
	if bad > 0 {
		return fmt.Errorf("%d runs computed a matrix other than the sequential solver's", bad)
	}
	return nil
}

// liveClusters starts a fresh loopback cluster of n synod node processes
// for n = 1..nodes, runs the program on it (run, given the nodes' gRPC
// addresses, returns the table row after the runtime and node count, and
// whether the answer is the sequential solver's), stops it, and prints
// the table under header. It returns how many answers differed.
func liveClusters(rt programs.Runtime, nodes int, header string, run func(addrs []string) (row string, ok bool, err error)) (bad int, err error) {
	work, err := os.MkdirTemp("", "synod-orca-live-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(work)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintf(tw, "runtime\tnodes\t%s\n", header)
	for n := 1; n <= nodes; n++ {
		c, err := cluster.Up(cluster.UpOptions{Dir: filepath.Join(work, strconv.Itoa(n)), Nodes: n, Protocol: rt.Protocol,
			Service: orca.ServiceName, Durability: "memory", Params: rt.Params(), DieWithParent: true})
		if err != nil {
			return bad, err
		}
		addrs := make([]string, n)
		for i, nd := range c.Nodes {
			addrs[i] = nd.GRPC
		}
		row, ok, err := run(addrs)
		if _, derr := c.Down(true); derr != nil && err == nil {
			err = derr
		}
		if err != nil {
			return bad, fmt.Errorf("%d nodes: %w", n, err)
		}
		if !ok {
			bad++
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", rt, n, row)
	}
	tw.Flush()
	fmt.Printf("live: node processes on 127.0.0.1, workers are goroutines of this process (one gRPC client each, to its node) burning thread CPU time; %d CPUs bound the speedup\n", runtime.NumCPU())
	return bad, nil
}

// orcaRunProgram runs a registered program (programs.RegisterProgram):
// on --nodes simulated nodes, or with --live on loopback clusters of
// 1..nodes node processes of this binary.
func orcaRunProgram(rt programs.Runtime, prog programs.Program, nodes int, seed int64, live, multicast bool, fsync time.Duration) error {
	if live {
		_, err := liveClusters(rt, nodes, "elapsed\trequests\toutput", func(addrs []string) (string, bool, error) {
			res, err := programs.RunProgramLive(context.Background(), addrs, prog)
			return fmt.Sprintf("%v\t%d\t%s", res.Elapsed.Round(time.Millisecond), res.Requests, res.Output), err == nil, err
		})
		return err
	}
	net := programs.Ethernet10
	net.Multicast, net.Fsync = multicast, fsync
	res, err := rt.RunProgram(prog, nodes, net, seed)
	if err != nil {
		return fmt.Errorf("%s on %d simulated nodes (%s, seed %d): %w", prog.Name, nodes, rt, seed, err)
	}
	fmt.Printf("%s: %s\n", prog.Name, res.Output)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "runtime\tnodes\telapsed\trequests\tsends\tframes\tbytes\n")
	fmt.Fprintf(tw, "%s\t%d\t%v\t%d\t%d\t%d\t%d\n", rt, nodes, res.Elapsed.Round(time.Millisecond), res.Requests,
		res.Stats.Sends, res.Stats.Frames, res.Stats.Bytes)
	tw.Flush()
	fmt.Println(net)
	return nil
}
