// Command stateright runs Synod's side of the Stateright comparison
// (issue 20, item 4; run.sh runs both sides): the models equivalent to
// Stateright's examples, breadth-first on all cores, printing states, depth,
// time and states/s. Usage: go run ./mc/stateright [max-states]
package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/synod-dev/synod/mc"
	_ "github.com/synod-dev/synod/protocol/all"
)

func main() {
	max := 200000
	if len(os.Args) > 1 {
		max, _ = strconv.Atoi(os.Args[1])
	}
	runs := []struct {
		name, protocol string
		dfs            bool
	}{
		// linearizable-register: ABD, 3 servers, 2 clients (put then get
		// each), unordered non-duplicating network, depth-first.
		{"abd (linearizable-register check 2)", "abd", true},
		// paxos: 3 servers, 2 clients (put then get each), unordered
		// non-duplicating network, breadth-first. Synod's paxos is
		// Multi-Paxos with leader election: a larger state per node. The
		// closest configuration: clients at n1, one timer firing on a
		// path (n1's election timeout; no heartbeats, lease or
		// retransmission timers after it), which runs phase 1 once, as
		// Stateright's proposer does on its first Put.
		{"paxos (paxos check 2)", "paxos", false},
	}
	for _, r := range runs {
		cfg := mc.NewConfig(r.protocol)
		cfg.Model.Clients = 2
		cfg.Timers = "none"
		if r.protocol == "paxos" {
			cfg.Timers, cfg.Model.Target = "quiet:1", "first"
		}
		cfg.Depth = 30
		cfg.DFS = r.dfs
		cfg.MaxStates = max
		res, err := mc.Check(cfg)
		if err != nil {
			fmt.Println(r.name, err)
			os.Exit(1)
		}
		verdict := "ok"
		if res.Violation != nil {
			verdict = "VIOLATION"
		}
		fmt.Printf("-- %s: %d states, depth %d, %v, %.0f states/s, %.0f B/state, complete %v, %s\n",
			r.name, res.States, res.Depth, res.Elapsed.Round(1e6), res.StatesPerSecond(), res.BytesPerState(), res.Complete, verdict)
	}
}
