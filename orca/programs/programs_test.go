package programs

import (
	"testing"

	_ "github.com/synod-dev/synod/protocol/orcabcast"
	_ "github.com/synod-dev/synod/protocol/orcaprimary"
)

// runtimes are the runtime and strategy combinations every program runs under.
var runtimes = Runtimes

// brute is an independent check of the sequential solver: every tour.
func brute(t TSP) int64 {
	n := len(t.D)
	best := noBound
	var rec func(route []int, used []bool, l int64)
	rec = func(route []int, used []bool, l int64) {
		last := route[len(route)-1]
		if len(route) == n {
			best = min(best, l+t.D[last][0])
			return
		}
		for c := 1; c < n; c++ {
			if !used[c] {
				used[c] = true
				rec(append(route, c), used, l+t.D[last][c])
				used[c] = false
			}
		}
	}
	rec([]int{0}, make([]bool, n), 0)
	return best
}

func TestSolveTSPMatchesBruteForce(t *testing.T) {
	for seed := int64(1); seed <= 3; seed++ {
		inst := NewTSP(8, seed)
		got, _ := SolveTSP(inst)
		if want := brute(inst); got != want {
			t.Fatalf("seed %d: branch and bound %d, brute force %d", seed, got, want)
		}
	}
}

// The parallel TSP finds the sequential solver's tour under every runtime
// and strategy, on 1 and 3 nodes, and the shared bound was written.
func TestParallelTSPMatchesSequential(t *testing.T) {
	inst := NewTSP(9, 7)
	want, _ := SolveTSP(inst)
	for _, rt := range runtimes {
		for _, n := range []int{1, 3} {
			res, err := rt.RunTSP(n, inst, DefaultTSPConfig, Ethernet10, 1)
			if err != nil {
				t.Fatalf("%s on %d nodes: %v", rt, n, err)
			}
			if res.Answer != want {
				t.Fatalf("%s on %d nodes: tour %d, sequential %d", rt, n, res.Answer, want)
			}
			if res.BoundSet == 0 || res.Work == 0 {
				t.Fatalf("%s on %d nodes: bound set %d times, %d expansions", rt, n, res.BoundSet, res.Work)
			}
			if n > 1 && res.Stats.Sends == 0 {
				t.Fatalf("%s on %d nodes: no messages", rt, n)
			}
		}
	}
}

// Floyd-Warshall agrees with repeated relaxation (Bellman-Ford from every vertex).
func TestSolveASPMatchesBellmanFord(t *testing.T) {
	g := NewGraph(12, 3)
	d := SolveASP(g)
	n := len(g)
	for s := 0; s < n; s++ {
		dist := append([]int32(nil), g[s]...)
		for round := 0; round < n; round++ {
			for u := 0; u < n; u++ {
				for v := 0; v < n; v++ {
					if dist[u] < Inf && g[u][v] < Inf && dist[u]+g[u][v] < dist[v] {
						dist[v] = dist[u] + g[u][v]
					}
				}
			}
		}
		for v := range dist {
			if dist[v] != d[s][v] {
				t.Fatalf("d[%d][%d] = %d, Bellman-Ford %d", s, v, d[s][v], dist[v])
			}
		}
	}
}

// The parallel ASP computes the sequential matrix under every runtime and
// strategy, on 1 and 3 nodes; more nodes share the pivot rows by messages.
func TestParallelASPMatchesSequential(t *testing.T) {
	g := NewGraph(16, 5)
	want := SolveASP(g)
	for _, rt := range runtimes {
		for _, n := range []int{1, 3} {
			res, got, err := rt.RunASP(n, g, DefaultASPConfig, Ethernet10, 1)
			if err != nil {
				t.Fatalf("%s on %d nodes: %v", rt, n, err)
			}
			for i := range want {
				for j := range want[i] {
					if got[i][j] != want[i][j] {
						t.Fatalf("%s on %d nodes: d[%d][%d] = %d, sequential %d", rt, n, i, j, got[i][j], want[i][j])
					}
				}
			}
			if res.Work != int64(16*16*16) {
				t.Fatalf("%s on %d nodes: %d cell updates, want %d", rt, n, res.Work, 16*16*16)
			}
			if n > 1 && res.Stats.Sends == 0 {
				t.Fatalf("%s on %d nodes: no messages", rt, n)
			}
		}
	}
}
