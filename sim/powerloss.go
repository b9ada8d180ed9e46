package sim

import (
	"fmt"
	"strings"
	"time"
)

// Whole-cluster faults (Config.PowerLoss; issue 29). At each given virtual
// time every node of the namespace crashes at once, as in a power cut of
// the whole cluster: each loses its volatile state, the records it
// persisted but had not yet synced (the disk keeps only what an fsync made
// durable, as Pebble's strict in-memory filesystem does when it is told to
// crash), the outputs held for them, its timers and the messages in flight
// to it. Power comes back after a downtime drawn from Config.PowerOff
// (default DefaultPowerOff); each node restarts from its durable records
// alone, at a small random offset of its own (machines do not boot in
// step). While the power is off the nemesis restarts nothing.
//
// No acknowledged write may be lost: the history check judges what the
// clients saw before and after. A protocol that stays down after the
// power comes back is caught by the liveness mode (--liveness after the
// last restart). The conformance suite runs every registered protocol so
// (its standard scenario "power loss"); a protocol that does not promise
// to survive it leaves "powerloss" out of its automaton.FaultAssumer kinds.
//
// The draws come from a stream of their own, so that adding a power loss
// changes no other stream of the run (the workload and the nemesis make
// the same choices until the power goes).

// DefaultPowerOff is Config.PowerOff's default: how long the power stays off.
const DefaultPowerOff = "uniform:50ms:500ms"

// Event kinds of whole-cluster faults (beside liveness.go's).
const (
	evPowerLoss evKind = 240
	evPowerOn   evKind = 241
)

// powerState is the simulator's whole-cluster fault state.
type powerState struct {
	off   []bool // per node: down with the power, not restartable by the nemesis
	dist  Dist
	count int
}

// schedulePowerLoss queues the power cuts of Config.PowerLoss.
func (s *simulator) schedulePowerLoss() {
	if len(s.cfg.PowerLoss) == 0 {
		return
	}
	spec := s.cfg.PowerOff
	if spec == "" {
		spec = DefaultPowerOff
	}
	d, err := ParseDist(spec)
	if err != nil {
		s.fail("--power-off: %v", err)
		return
	}
	s.power = &powerState{off: make([]bool, len(s.nodes)), dist: d}
	s.rngPower = labeledRand(s.cfg.Seed, "powerloss")
	for _, t := range s.cfg.PowerLoss {
		if t <= 0 {
			s.fail("--power-loss: times must be positive, got %v", t)
			return
		}
		s.schedule(t, &event{kind: evPowerLoss})
	}
}

// onPowerLoss crashes every node at once and schedules each one's restart.
func (s *simulator) onPowerLoss() {
	if s.healed {
		return // the run's final heal came first
	}
	s.power.count++
	s.stats.PowerLosses++
	s.tracef("power loss %d: every node crashes at once", s.power.count)
	s.digestEvent(-1, 'P', nil)
	down := s.power.dist.Sample(s.rngPower)
	for _, n := range s.nodes {
		if n.out {
			continue
		}
		if n.up {
			s.crash(n)
		}
		s.power.off[n.idx] = true
		stagger := time.Duration(s.rngPower.Int63n(int64(down)/4 + 1))
		s.after(down+stagger, &event{kind: evPowerOn, node: n.idx})
	}
}

// onPowerOn restarts one node after a power loss (unless the final heal
// already did).
func (s *simulator) onPowerOn(e *event) {
	s.power.off[e.node] = false
	if n := s.nodes[e.node]; !n.up && !n.out {
		s.boot(n)
	}
}

// powerIsOff reports whether node i is down with the power.
func (s *simulator) powerIsOff(i int) bool {
	return s.power != nil && s.power.off[i]
}

// ParsePowerLoss parses --power-loss: a comma list of virtual times.
func ParsePowerLoss(spec string) ([]time.Duration, error) {
	if spec == "" {
		return nil, nil
	}
	var out []time.Duration
	for _, f := range strings.Split(spec, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("--power-loss %q: want a comma list of positive durations (e.g. 300ms,2s)", spec)
		}
		out = append(out, d)
	}
	return out, nil
}

// PowerLossSpec renders Config.PowerLoss as --power-loss takes it.
func PowerLossSpec(ts []time.Duration) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.String()
	}
	return strings.Join(parts, ",")
}
