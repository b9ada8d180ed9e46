package node

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/synod-dev/synod/automaton"
)

// Round groups (issue 28, abd49): an automaton that begins client
// requests together in round groups (automaton.RoundReporter: ABD) shares
// one round of peer messages among a group's requests, so the requests per
// group decide the peer messages, wake-ups and CPU per request at 64
// clients. synod_round_group_requests is the histogram of the groups'
// sizes per namespace, by how a group began: start="arrival" (its
// requests found room in the window) or start="queue" (they waited for a
// group to end). _sum / _count is the requests per group (scripts/bench-ab:
// reqs/group); le="1" counts the groups of one request.

// registerRounds exports the round groups of the node's loops, read at
// scrape time.
func (m *metrics) registerRounds(id string, n *Node) {
	m.reg.MustRegister(roundCollector{n: n, desc: prometheus.NewDesc("synod_round_group_requests",
		"Client requests per round group an automaton began (ABD), by how the group began: on arrival, or from the queue of requests that waited for a group to end.",
		[]string{"namespace", "start"}, prometheus.Labels{"node": id})})
}

// roundCollector reads every loop's round groups at scrape time.
type roundCollector struct {
	n    *Node
	desc *prometheus.Desc
}

func (c roundCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c roundCollector) Collect(ch chan<- prometheus.Metric) {
	for _, l := range c.n.loopList() {
		rr, ok := l.a.(automaton.RoundReporter)
		if !ok {
			continue
		}
		l.pass.Lock() // the automaton's state is its passes'
		g := rr.RoundGroups()
		l.pass.Unlock()
		for _, s := range [...]struct {
			start string
			sizes automaton.GroupSizes
		}{{"arrival", g.OnArrival}, {"queue", g.FromQueue}} {
			buckets := make(map[float64]uint64, len(automaton.GroupSizeBounds))
			var cum uint64
			for i, b := range automaton.GroupSizeBounds {
				cum += s.sizes.Buckets[i]
				buckets[float64(b)] = cum
			}
			if m, err := prometheus.NewConstHistogram(c.desc, s.sizes.Groups, float64(s.sizes.Requests), buckets, l.ns.Name, s.start); err == nil {
				ch <- m
			}
		}
	}
}
