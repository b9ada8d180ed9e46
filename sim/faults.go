package sim

import (
	"time"
)

// Fault schedule. The nemesis acts every nemesisGap; each action picks one
// enabled fault kind at random and applies it for a random duration. Crashes
// and pauses together never take more than (Nodes-1)/2 nodes away, and a
// partition always leaves one side with a majority of the nodes, so that a
// majority is mostly available and runs make progress.
var (
	nemesisGapDist = MustParseDist("uniform:20ms:200ms")
	downtimeDist   = MustParseDist("uniform:20ms:1s")
	pauseDist      = MustParseDist("uniform:10ms:500ms")
	partitionDist  = MustParseDist("uniform:50ms:1s")
	windowDist     = MustParseDist("uniform:100ms:1s")
	spikeDist      = MustParseDist("uniform:5ms:50ms")
)

func (s *simulator) nemesisGap() time.Duration { return nemesisGapDist.Sample(s.rngFault) }

func (s *simulator) faultBudget() int {
	k := 0
	for _, n := range s.nodes {
		if !n.out {
			k++
		}
	}
	return (k - 1) / 2
}

func (s *simulator) unavailable() int {
	k := 0
	for _, n := range s.nodes {
		if !n.out && (!n.up || n.paused) {
			k++
		}
	}
	return k
}

// available returns the nodes that are up and not paused.
func (s *simulator) available() []int {
	var out []int
	for _, n := range s.nodes {
		if n.up && !n.paused {
			out = append(out, n.idx)
		}
	}
	return out
}

func (s *simulator) onNemesis() {
	if s.healed {
		return
	}
	kinds := s.faults.kinds()
	switch kinds[s.rngFault.Intn(len(kinds))] {
	case "crash":
		if av := s.available(); s.unavailable() < s.faultBudget() && len(av) > 0 {
			n := s.nodes[av[s.rngFault.Intn(len(av))]]
			s.crash(n)
			s.after(downtimeDist.Sample(s.rngFault), &event{kind: evRestart, node: n.idx})
		}
	case "pause":
		if av := s.available(); s.unavailable() < s.faultBudget() && len(av) > 0 {
			n := s.nodes[av[s.rngFault.Intn(len(av))]]
			s.pause(n)
			s.after(pauseDist.Sample(s.rngFault), &event{kind: evResume, node: n.idx, inc: n.inc})
		}
	case "partition":
		if s.net.group == nil && len(s.nodes) >= 2 {
			s.partition()
		}
	case "loss":
		s.openWindow(winLoss, -1, 0.05+0.25*s.rngFault.Float64())
	case "dup":
		s.openWindow(winDup, -1, 0.05+0.25*s.rngFault.Float64())
	case "reorder":
		s.openWindow(winReorder, -1, 0.1+0.4*s.rngFault.Float64())
	case "slow":
		i := s.rngFault.Intn(len(s.nodes))
		if s.rngFault.Intn(2) == 0 {
			s.openWindow(winSpike, i, float64(spikeDist.Sample(s.rngFault)))
		} else {
			s.openWindow(winSlowDisk, i, 10+40*s.rngFault.Float64())
		}
	}
	s.after(s.nemesisGap(), &event{kind: evNemesis})
}

// partition splits the nodes in two sides, the smaller of 1..max(1,(N-1)/2)
// random nodes, until it heals.
func (s *simulator) partition() {
	perm := s.rngFault.Perm(len(s.nodes))
	m := 1
	if f := s.faultBudget(); f > 1 {
		m = 1 + s.rngFault.Intn(f)
	}
	g := make([]int, len(s.nodes))
	minority := make([]byte, 0, m)
	for _, i := range perm[:m] {
		g[i] = 1
		minority = append(minority, byte(i))
	}
	s.net.group = g
	s.net.partGen++
	s.stats.Partitions++
	s.digestEvent(-1, 'N', minority)
	if s.cfg.Trace != nil {
		var names []string
		for _, i := range perm[:m] {
			names = append(names, string(s.ids[i]))
		}
		s.tracef("partition: %v cut off", names)
	}
	s.after(partitionDist.Sample(s.rngFault), &event{kind: evHealPartition, gen: s.net.partGen})
}

// openWindow starts a fault window of kind w (on node i for per-node kinds)
// with strength v, replacing any open window of the same kind.
func (s *simulator) openWindow(w windowKind, i int, v float64) {
	var gen uint64
	switch w {
	case winLoss:
		s.net.lossWin = v
	case winDup:
		s.net.dupWin = v
	case winReorder:
		s.net.reorderWin = v
	case winSpike:
		s.net.spike[i] = time.Duration(v)
		s.net.spikeGen[i]++
		gen = s.net.spikeGen[i]
	case winSlowDisk:
		s.nodes[i].slowDisk = v
		s.net.slowGen[i]++
		gen = s.net.slowGen[i]
	}
	if i < 0 {
		s.net.winGen[w]++
		gen = s.net.winGen[w]
	}
	s.stats.Windows++
	s.digestEvent(i, 'W', []byte{byte(w)})
	s.tracef("window %d opens (node %d, strength %.3g)", w, i, v)
	s.after(windowDist.Sample(s.rngFault), &event{kind: evWindowEnd, window: w, node: i, gen: gen})
}

func (s *simulator) closeWindow(w windowKind, i int) {
	switch w {
	case winLoss:
		s.net.lossWin = 0
	case winDup:
		s.net.dupWin = 0
	case winReorder:
		s.net.reorderWin = 0
	case winSpike:
		s.net.spike[i] = 0
	case winSlowDisk:
		s.nodes[i].slowDisk = 0
	}
}

func (s *simulator) onWindowEnd(e *event) {
	var cur uint64
	switch e.window {
	case winSpike:
		cur = s.net.spikeGen[e.node]
	case winSlowDisk:
		cur = s.net.slowGen[e.node]
	default:
		cur = s.net.winGen[e.window]
	}
	if cur != e.gen {
		return // replaced by a later window, or healed
	}
	s.tracef("window %d closes (node %d)", e.window, e.node)
	s.closeWindow(e.window, e.node)
}

func (s *simulator) onRestart(e *event) {
	if n := s.nodes[e.node]; !n.up && !n.out && !s.powerIsOff(e.node) {
		s.boot(n)
	}
}

func (s *simulator) onResume(e *event) {
	if n := s.nodes[e.node]; n.inc == e.inc {
		s.resume(n)
	}
}

func (s *simulator) onHealPartition(e *event) {
	if s.net.group != nil && s.net.partGen == e.gen {
		s.healPartition()
	}
}

func (s *simulator) healPartition() {
	s.tracef("partition heals")
	s.digestEvent(-1, 'H', nil)
	s.net.group = nil
	s.net.partGen++
}

// healAll ends every fault for good: crashed nodes restart, paused ones
// resume, the partition heals and every window closes. Base Loss, Dup and
// ReorderFrac from the Config stay.
func (s *simulator) healAll() {
	if s.healed {
		return
	}
	s.healed = true
	s.tracef("final heal")
	if s.net.group != nil {
		s.healPartition()
	}
	for w := winLoss; w <= winReorder; w++ {
		s.closeWindow(w, -1)
		s.net.winGen[w]++
	}
	for _, n := range s.nodes {
		s.closeWindow(winSpike, n.idx)
		s.closeWindow(winSlowDisk, n.idx)
		s.net.spikeGen[n.idx]++
		s.net.slowGen[n.idx]++
	}
	for _, n := range s.nodes {
		switch {
		case !n.up && !n.out:
			s.boot(n)
		case n.paused:
			s.resume(n)
		}
	}
}
