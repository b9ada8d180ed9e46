package node

import (
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/storage"
	"github.com/synod-dev/synod/transport"
)

// metrics are one node's Prometheus series. Each node has its own registry
// (several nodes can share a test process), labelled with node=<id>.
type metrics struct {
	reg          *prometheus.Registry
	requests     *prometheus.CounterVec
	responses    *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	commit       *prometheus.HistogramVec
	effects      *prometheus.HistogramVec // by namespace and kind
	batchInputs  *prometheus.HistogramVec
	batchPersist *prometheus.HistogramVec
	persists     *prometheus.CounterVec
	fsyncs       *prometheus.CounterVec
	msgsIn       *prometheus.CounterVec
	msgsOut      *prometheus.CounterVec
	// Leadership, as this node's replica of each namespace sees it.
	leaderChanges *prometheus.CounterVec
	isLeader      *prometheus.GaugeVec
	leader        *prometheus.GaugeVec
	term          *prometheus.GaugeVec
	// Keys in each namespace's service state here (noteKeys, leader.go).
	keys   *prometheus.GaugeVec
	copies *prometheus.GaugeVec // Orca copies held here by role (notePlacement, placement.go)
	// Replica groups started at run time (groups.go).
	groupsStarted prometheus.Counter
	groupsStopped prometheus.Counter
	keysMu        sync.Mutex
	keysSeen      map[string]time.Time // namespace -> last refresh
}

func newMetrics(id string) *metrics {
	reg := prometheus.NewRegistry()
	cl := prometheus.Labels{"node": id}
	ns := []string{"namespace"}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "synod", Name: name, Help: help, ConstLabels: cl}, ns)
	}
	hist := func(name, help string, b []float64) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "synod", Name: name, Help: help, ConstLabels: cl, Buckets: b}, ns)
	}
	gauge := func(name, help string, labels []string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "synod", Name: name, Help: help, ConstLabels: cl}, labels)
	}
	lat := prometheus.ExponentialBucketsRange(20e-6, 10, 20)
	sizes := prometheus.ExponentialBuckets(1, 2, 12)
	m := &metrics{
		reg:          reg,
		requests:     counter("requests_total", "Client requests submitted to a namespace's automaton."),
		responses:    counter("responses_total", "Responses released to clients."),
		latency:      hist("request_duration_seconds", "Client request latency inside the node (submit to response).", lat),
		commit:       hist("storage_commit_duration_seconds", "Latency of one storage batch commit (an fsync in durability fsync).", lat),
		batchInputs:  hist("batch_inputs", "Inputs stepped per event-loop batch.", sizes),
		batchPersist: hist("batch_persists", "Persist records per storage batch.", sizes),
		persists:     counter("persists_total", "Persist records committed."),
		fsyncs:       counter("fsyncs_total", "Storage batches committed with fsync."),
		msgsIn:       counter("peer_messages_received_total", "Peer messages delivered to the automaton."),
		msgsOut:      counter("peer_messages_sent_total", "Peer messages handed to the transport."),
		leaderChanges: counter("leader_changes_total",
			"Changes of the namespace's leader hint seen here (elections and fail-overs, and the first leader)."),
		isLeader: gauge("is_leader", "1 when this node believes it leads the namespace (its role), else 0.", ns),
		leader:   gauge("leader", "1 for the node this replica believes leads the namespace (label leader; \"\" while none).", []string{"namespace", "leader"}),
		term:     gauge("term", "The highest term, ballot or view this replica has seen (protocols implementing automaton.TermReporter).", ns),
		keys: gauge("keys", "Keys in the namespace's service state on this replica (services that count keys; refreshed at most once a second; "+
			"absent on nodes holding no replica and for protocols whose state an Effect may be executing on).", ns),
		copies: gauge("orca_copies", "Copies of Orca objects this node holds, by role (primary or secondary), for runtimes that place copies "+
			"(automaton.PlacementReporter: orca-primary); INFO's Placement section names them.", []string{"namespace", "role"}),
		keysSeen: map[string]time.Time{},
		groupsStarted: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "synod", Name: "groups_started_total",
			Help: "Replica groups this node started at run time (a member added by a placement replacement, or such a group after a restart).", ConstLabels: cl}),
		groupsStopped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "synod", Name: "groups_stopped_total",
			Help: "Replica groups this node stopped at run time (a placement replacement removed it from them).", ConstLabels: cl}),
	}
	m.effects = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "synod", Name: "effect_duration_seconds",
		Help: "Time one Effect took in its executor (automaton/effect.go: e.g. pbdurable's database transaction), by kind; " +
			"timed by the runtime around Execute.", ConstLabels: cl, Buckets: lat}, []string{"namespace", "kind"})
	reg.MustRegister(m.requests, m.responses, m.latency, m.commit, m.effects, m.batchInputs, m.batchPersist,
		m.persists, m.fsyncs, m.msgsIn, m.msgsOut, m.leaderChanges, m.isLeader, m.leader, m.term, m.keys, m.copies, m.groupsStarted, m.groupsStopped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// registerTransport exports per-peer transport counters, read at scrape time.
func (m *metrics) registerTransport(id string, tr *transport.Transport) {
	for _, p := range tr.Peers() {
		p := p
		cl := prometheus.Labels{"node": id, "peer": string(p)}
		stat := func(f func(transport.PeerStats) uint64) func() float64 {
			return func() float64 { return float64(f(tr.Stats()[p])) }
		}
		m.reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "synod", Name: "transport_dropped_total",
				Help: "Peer frames dropped (queue full or lost with a failed connection).", ConstLabels: cl},
				stat(func(s transport.PeerStats) uint64 { return s.Dropped })),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "synod", Name: "transport_sent_total",
				Help: "Peer frames written to a connection.", ConstLabels: cl},
				stat(func(s transport.PeerStats) uint64 { return s.Sent })),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "synod", Name: "transport_received_total",
				Help: "Peer frames received.", ConstLabels: cl},
				stat(func(s transport.PeerStats) uint64 { return s.Received })),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "synod", Name: "transport_connected",
				Help: "1 when the outgoing connection to the peer is up.", ConstLabels: cl},
				func() float64 {
					if tr.Stats()[p].Connected {
						return 1
					}
					return 0
				}),
		)
	}
}

// leaderChanged records a new leader hint of namespace ns seen by node self.
func (m *metrics) leaderChanged(ns, self, old, leader string) {
	m.leaderChanges.WithLabelValues(ns).Inc()
	m.leader.DeleteLabelValues(ns, old)
	m.leader.WithLabelValues(ns, leader).Set(1)
	v := 0.0
	if leader == self {
		v = 1
	}
	m.isLeader.WithLabelValues(ns).Set(v)
}

// setTerm records namespace ns's term when its automaton reports one.
func (m *metrics) setTerm(ns string, a any) {
	if tr, ok := a.(automaton.TermReporter); ok {
		m.term.WithLabelValues(ns).Set(float64(tr.Term()))
	}
}

// keysDue reports whether namespace ns's key count is due for a refresh
// (once a second) and, if so, notes it as refreshed at now.
func (m *metrics) keysDue(ns string, now time.Time) bool {
	m.keysMu.Lock()
	defer m.keysMu.Unlock()
	if now.Sub(m.keysSeen[ns]) < keysEvery {
		return false
	}
	m.keysSeen[ns] = now
	return true
}

// keysEvery is how often a namespace's key count is refreshed.
const keysEvery = time.Second

// setKeys records namespace ns's key count.
func (m *metrics) setKeys(ns string, n int) { m.keys.WithLabelValues(ns).Set(float64(n)) }

// registerErrors exports the RESP server's error replies by code
// (synod_errors_total{kind}, Redis's errorstats), read at scrape time.
func (m *metrics) registerErrors(id string, gw *gateway.Server) {
	m.reg.MustRegister(errorsCollector{gw: gw, desc: prometheus.NewDesc("synod_errors_total",
		"Error replies written to RESP clients, by kind (the reply's first word: ERR, WRONGTYPE, TRYAGAIN, NOAUTH, EXECABORT, ...; INFO errorstats).",
		[]string{"kind"}, prometheus.Labels{"node": id})})
}

type errorsCollector struct {
	gw   *gateway.Server
	desc *prometheus.Desc
}

func (e errorsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- e.desc }

func (e errorsCollector) Collect(ch chan<- prometheus.Metric) {
	for kind, n := range e.gw.ErrorStats() {
		ch <- prometheus.MustNewConstMetric(e.desc, prometheus.CounterValue, float64(n), kind)
	}
}

// handler serves /metrics and /debug/pprof/.
func (m *metrics) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// walWrites registers the node's WAL counters (m may be nil): the commits
// of every namespace and the frames that carried them, each frame one
// write and one fdatasync. synod_fsyncs_total counts a namespace's
// commits, so with several namespaces sharing frames it counts more
// fsyncs than the disk did; synod_wal_frames_total is what the disk did.
func (m *metrics) walWrites(node string, w *storage.WAL) {
	if m == nil {
		return
	}
	cl := prometheus.Labels{"node": node}
	for _, c := range []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "synod", Name: "wal_commits_total",
			Help: "Storage commits of every namespace of the node (WAL engine).", ConstLabels: cl},
			func() float64 { c, _ := w.Writes(); return float64(c) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "synod", Name: "wal_frames_total",
			Help: "WAL frames written, each one write and one fdatasync shared by the commits it carries (group commit across namespaces).", ConstLabels: cl},
			func() float64 { _, f := w.Writes(); return float64(f) }),
	} {
		m.reg.MustRegister(c) // once: Run runs once per Node
	}
}

// handoff counts k hand-offs between goroutines on the request path (issue
// 28 item 5: hand-offs per request): a client request or batch, a peer
// message or a timer's firing passed to a namespace's loop through its
// inbox, a response passed to the waiting client's goroutine, a batch of
// records passed to the committer. Each is a channel send that wakes (or
// finds awake) another goroutine. The transport counts its own, to a
// peer's writer goroutine (transport.PeerStats.Queued); Handoffs adds them.
func (n *Node) handoff(k int) {
	n.handoffs.Add(uint64(k))
	if f := n.opts.onHandoff; f != nil {
		f(k)
	}
}

// Handoffs is the node's hand-offs between goroutines so far: the node's
// (handoff) and its TCP transport's to peer writers. A gRPC peer
// transport's and the gateway's own (a pipelined connection's lanes) are
// not counted.
func (n *Node) Handoffs() uint64 {
	h := n.handoffs.Load()
	if n.tr != nil {
		for _, s := range n.tr.Stats() {
			h += s.Queued
		}
	}
	return h
}

// registerHandoffs exports Node.Handoffs as synod_handoffs_total, read
// at scrape time (`synod costs`: hand-offs per operation).
func (m *metrics) registerHandoffs(id string, n *Node) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "synod", Name: "handoffs_total",
		Help:        "Inputs and outputs passed between goroutines on the request path: to a namespace's loop (client requests, peer messages, timers), to a waiting client, to the committer, to a peer's writer.",
		ConstLabels: prometheus.Labels{"node": id}},
		func() float64 { return float64(n.Handoffs()) }))
}
