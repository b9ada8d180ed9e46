package node

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/synod-dev/synod/gateway"
)

// Overload (issue 19, item 4): every queue on a request's path, client to
// peers and back, is bounded, and each has a decided behaviour when full.
// The gateway's own queues are detailed in gateway/limits.go; the whole
// path (docs/ARCHITECTURE.md, "Queues and overload"):
//
//	queue                              bound                                  when full
//	client connections (RESP + gRPC)   limits.max_clients (10000)             refused, "-ERR max number of clients reached"
//	                                                                          (gRPC: closed); counted, logged rate-limited
//	RESP read buffer / one command     16 KiB; bulk <= proto_max_bulk_len     protocol error, connection closed (as Redis)
//	RESP output buffer                 64 KiB or max_pipeline replies         the connection stops reading (backpressure)
//	                                   client_output_buffer_limit (256 MB)    the client is closed, logged with the limit
//	gRPC message / streams             synodpb.MaxMessageSize (9 MB);         gRPC ResourceExhausted / stream refused
//	                                   1024 streams per connection
//	requests per connection            1 (RESP; 32 for MGET/DEL keys)         the connection waits for its reply
//	namespace inbox (nsLoop.inbox)     Options.InboxLen (4096) inputs         Backend.Do waits (bounded by the request
//	                                                                          timeout: "-TRYAGAIN ... timed out"); a peer
//	                                                                          reader waits, so TCP pushes back to the peer
//	Backend.Do waiters                 one per request in flight: at most     (not a queue of its own)
//	                                   max_clients x 32 RESP, x 1024 gRPC
//	commit queue (nsLoop.commitQ)      commitQueueLen (256) batches           the group is parked until the committer
//	                                                                          takes batches (loop.go, unpark); no pool
//	                                                                          worker waits
//	held outputs (nsLoop.rel)          those of the queued batches            (bounded by the commit queue)
//	peer send queue (transport)        4096 frames and 64 MB per peer         the message is dropped and counted
//	                                                                          (synod_transport_dropped_total): protocols
//	                                                                          tolerate loss
//	peer frame                         64 MB (transport.DefaultMaxFrame)      the connection is refused, logged
//
// The node exports the gateway's counters as metrics (synod_clients,
// synod_clients_rejected_total, synod_clients_output_limit_closed_total,
// synod_clients_backpressure_pauses_total), read at scrape time.

// gatewayOptions are the RESP server's options from the cluster file.
func (n *Node) gatewayOptions() gateway.ServerOptions {
	l := n.cfg.Limits.WithDefaults()
	return gateway.ServerOptions{
		Password: n.cfg.Password, Users: n.cfg.Users, Cluster: n.cfg.Cluster, Logger: n.log.With("component", "gateway"),
		MaxClients:        l.MaxClients,
		OutputBufferLimit: int64(l.ClientOutputBufferLimit),
		ProtoMaxBulkLen:   int(l.ProtoMaxBulkLen),
		MaxPipeline:       l.MaxPipeline,
		EventLoop:         true, // SYNOD_GATEWAY_EVLOOP=0 turns it off (gateway/evloop.go)
	}
}

// registerOverload exports the gateway's overload counters.
func (m *metrics) registerOverload(id string, gw *gateway.Server) {
	cl := prometheus.Labels{"node": id}
	stat := func(f func(gateway.OverloadStats) int64) func() float64 {
		return func() float64 { return float64(f(gw.Overload())) }
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "synod", Name: "clients",
			Help: "Open client connections, RESP and gRPC (maxclients counts these).", ConstLabels: cl},
			stat(func(s gateway.OverloadStats) int64 { return s.Clients })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "synod", Name: "clients_rejected_total",
			Help: "Client connections refused: max number of clients reached.", ConstLabels: cl},
			stat(func(s gateway.OverloadStats) int64 { return s.Rejected })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "synod", Name: "clients_output_limit_closed_total",
			Help: "Clients closed because their output buffer passed client-output-buffer-limit.", ConstLabels: cl},
			stat(func(s gateway.OverloadStats) int64 { return s.OutputLimitClosed })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "synod", Name: "clients_backpressure_pauses_total",
			Help: "Times a client connection stopped being read because it owed too many replies.", ConstLabels: cl},
			stat(func(s gateway.OverloadStats) int64 { return s.BackpressurePauses })),
	)
	ev := func(f func(gateway.EventLoopStats) int64) func() float64 {
		return func() float64 { return float64(f(gw.EventLoopStats())) }
	}
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "synod", Name: "gateway_evloop_steps_total",
			Help: "Readable client sockets the gateway's event loop served (on unless SYNOD_GATEWAY_EVLOOP=0).", ConstLabels: cl},
			ev(func(s gateway.EventLoopStats) int64 { return s.Steps })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "synod", Name: "gateway_evloop_handoffs_total",
			Help: "Client connections the event loop gave to a goroutine (a command it does not serve).", ConstLabels: cl},
			ev(func(s gateway.EventLoopStats) int64 { return s.Handoffs })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "synod", Name: "gateway_evloop_wakes_total",
			Help: "Event loop wake-ups by another goroutine (a reply written after the next command arrived, a close).", ConstLabels: cl},
			ev(func(s gateway.EventLoopStats) int64 { return s.Wakes })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "synod", Name: "gateway_evloop_waits_total",
			Help: "The event loop's epoll_wait calls.", ConstLabels: cl},
			ev(func(s gateway.EventLoopStats) int64 { return s.Waits })),
	)
}
