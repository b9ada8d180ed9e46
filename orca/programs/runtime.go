package programs

import (
	"fmt"
	"time"
)

// Runtime is an Orca runtime system and, for orca-primary, its strategy.
type Runtime struct {
	Protocol string // orca-bcast or orca-primary
	// Strategy for orca-primary: "update" (two-phase update, the Orca paper
	// §3.2) or "invalidate" (§3.1, every object). Ignored by orca-bcast.
	Strategy string
}

// Runtimes lists the three the paper compares.
var Runtimes = []Runtime{
	{Protocol: "orca-bcast"},
	{Protocol: "orca-primary", Strategy: "update"},
	{Protocol: "orca-primary", Strategy: "invalidate"},
}

func (r Runtime) String() string {
	if r.Protocol == "orca-primary" {
		return r.Protocol + "/" + r.Strategy
	}
	return r.Protocol
}

// ParseRuntime reads "orca-bcast", "orca-primary/update" or
// "orca-primary/invalidate" (or a protocol and a separate strategy).
func ParseRuntime(protocol, strategy string) (Runtime, error) {
	switch protocol {
	case "orca-bcast":
		return Runtime{Protocol: protocol}, nil
	case "orca-primary":
		if strategy == "" {
			strategy = "update"
		}
		if strategy != "update" && strategy != "invalidate" {
			return Runtime{}, fmt.Errorf("strategy %q: want update or invalidate", strategy)
		}
		return Runtime{Protocol: protocol, Strategy: strategy}, nil
	}
	return Runtime{}, fmt.Errorf("runtime %q: want orca-bcast or orca-primary", protocol)
}

// Params are the protocol parameters of a program run: the strategy, and
// a retransmission interval far above any round trip of the model (the
// programs run without faults; a spurious retransmission would only add
// messages the paper's reliable transport does not send).
func (r Runtime) Params() map[string]string {
	p := map[string]string{"retransmit": time.Second.String()}
	if r.Protocol == "orca-primary" && r.Strategy == "invalidate" {
		p["invalidate"] = "*"
	}
	return p
}

// World creates a world of n nodes for r.
func (r Runtime) World(n int, net Net, seed int64) (*World, error) {
	return NewWorld(r.Protocol, n, r.Params(), net, seed)
}

// RunTSP runs TSP on n nodes under r.
func (r Runtime) RunTSP(n int, t TSP, cfg TSPConfig, net Net, seed int64) (Result, error) {
	w, err := r.World(n, net, seed)
	if err != nil {
		return Result{}, err
	}
	return RunTSP(w, t, cfg)
}
