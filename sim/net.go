package sim

import (
	"time"

	"github.com/synod-dev/synod/automaton"
)

// netState is the network's fault state. Every field is indexed by node.
type netState struct {
	// group[i] is node i's side of the current partition; nil when none.
	group   []int
	partGen uint64
	// Probabilities added by fault windows to the base Config values.
	lossWin, dupWin, reorderWin float64
	// spike[i] is extra latency on every message to or from node i.
	spike []time.Duration
	// Window generations: an end event only ends its own window.
	winGen [numWindows]uint64
	// spikeGen/slowGen: per-node window generations.
	spikeGen, slowGen []uint64
}

type windowKind uint8

const (
	winLoss windowKind = iota
	winDup
	winReorder
	winSpike
	winSlowDisk
	numWindows
)

func (ns *netState) init(n int) {
	ns.spike = make([]time.Duration, n)
	ns.spikeGen = make([]uint64, n)
	ns.slowGen = make([]uint64, n)
}

// cut reports whether a partition separates from and to.
func (ns *netState) cut(from, to int) bool {
	return ns.group != nil && ns.group[from] != ns.group[to]
}

// netSend puts one message on the link from -> to: it may be cut by a
// partition, lost, duplicated, delayed (latency + spikes) and, for a fraction
// of messages, delayed further so that it overtakes nothing but is overtaken.
func (s *simulator) netSend(from, to int, msg []byte) {
	s.stats.MsgsSent++
	if s.net.cut(from, to) {
		s.stats.MsgsDropped++
		s.tracef("%s -> %s dropped by partition", s.ids[from], s.ids[to])
		return
	}
	if p := s.cfg.Loss + s.net.lossWin; p > 0 && s.rngNet.Float64() < p {
		s.stats.MsgsDropped++
		s.tracef("%s -> %s lost", s.ids[from], s.ids[to])
		return
	}
	copies := 1
	if p := s.cfg.Dup + s.net.dupWin; p > 0 && s.rngNet.Float64() < p {
		copies = 2
		s.stats.MsgsDuped++
	}
	for i := 0; i < copies; i++ {
		d := s.linkLat[from][to].Sample(s.rngNet) + s.net.spike[from] + s.net.spike[to]
		if p := s.cfg.ReorderFrac + s.net.reorderWin; p > 0 && s.rngNet.Float64() < p {
			d += s.reorderDelay.Sample(s.rngNet)
		}
		s.after(d, &event{kind: evPeer, node: to, inc: s.nodes[to].inc, from: from, msg: append([]byte{}, msg...)})
	}
}

// respond sends a response over the client's connection to its client.
// Responses already sent survive a later crash of the node (they are on the wire).
func (s *simulator) respond(n *node, r automaton.Response) {
	if s.adminResponse(r) {
		return
	}
	if s.caller != nil {
		s.answerCalls(n, r) // a callee's answer to nested calls (callee.go)
		return
	}
	c, ok := s.clientByID[r.ID.Client]
	if !ok {
		s.fail("%s responded to request %v of an unknown client", n.id, r.ID)
		return
	}
	s.noteReplicaTime(n, r.ID)
	resp := r
	resp.Result.Bytes = append([]byte(nil), r.Result.Bytes...)
	if r.Result.Bytes != nil && resp.Result.Bytes == nil {
		resp.Result.Bytes = []byte{}
	}
	s.after(s.clientLat.Sample(s.rngNet), &event{kind: evClientResp, client: c.idx, node: n.idx, resp: resp})
}

func durationTimes(d time.Duration, f float64) time.Duration { return time.Duration(float64(d) * f) }
