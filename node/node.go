// Package node is Synod's live runtime: it runs the pure automata of package
// automaton as a real server process, with TCP between nodes, a real clock and
// a real disk.
//
// # Design
//
// A Node hosts one automaton per namespace of the cluster file. Each automaton
// has its own event loop and inbox, stepped by the node's fixed pool of
// workers (sched.go) one pass at a time, so protocol code needs no locks and
// an idle loop owns no goroutine. Inputs come from three places: clients
// (Backend.Do, called by the Redis gateway), peers (the transport's reader
// goroutines) and timers (the node's one timer heap, sched.go).
//
// The loop steps every input that is already queued (up to Options.BatchLimit)
// and hands the batch's Persist records to the namespace's committer
// goroutine, then goes on stepping new inputs without waiting. The committer
// commits the records of every batch queued at that moment in ONE storage
// batch (one fsync in durability fsync). Persists are numbered in emission
// order; each Send and Respond waits for the last Persist emitted before it
// (in its own step or an earlier one) and no longer: it leaves, in emission
// order, as soon as that record is durable — at step time when it is durable
// already and nothing earlier waits, else right after the commit that covers
// it. That is the durability rule of package automaton (a Persist is durable
// before any later Send or Respond is released) at its finest grain, made
// cheap by group commit: reads and messages that depend on no pending record
// skip the commit, and under load inputs are stepped while an fsync runs and
// the next commit covers all of them. Commits are lazy: records that no
// waiting output needs yet (a record persisted after the answers it
// follows, such as Multi-Paxos's chosen prefix) are held by the committer
// and join the next commit, made at once when an output comes to need them
// and at shutdown; the durable records stay a prefix of those emitted (loop.go,
// committer). With durability memory there is no
// fsync to overlap, so the loop commits each batch itself at the end of the
// pass (loop.go, commitInline) and releases what waited for it at once,
// saving the committer's wake-up. (With fsync the committer always
// commits: a follower committing on its loop when idle was tried for issue
// 18 and made a lone client's puts slower in the tail, p99 2.5-4.1 ms
// against 0.9-3.1 ms in four rounds; docs/COSTS.md, "One client's put,
// stage by stage".) Peer messages are written by the loop itself
// when it is idle (transport.Transport.Send's inline write) and left to the
// transport's writer goroutines in batches when more inputs wait
// (Transport.SendQueued). SetTimer and CancelTimer
// take effect at once: they are not visible outside the node, so holding
// them back would only delay timers. If a Commit fails, the node releases
// no output still waiting, nor any emitted later, in any namespace, and
// refuses every request with the storage error until it is restarted
// (storagefault.go; Options.Fatal, when set, is called and the node shuts
// down instead): continuing would risk answering clients from state that is
// not on disk.
//
// Timers carry a generation number. Replacing or cancelling a timer stops it
// and forgets its generation, so a firing that raced with the Stop is dropped
// by the loop instead of reaching the automaton.
//
// Backend.Do registers a waiter under the request's RequestID before injecting
// the request, and removes it when the caller's context ends. A client retry
// carries the same RequestID; when two waiters share an id, the first Respond
// for that id answers both.
//
// Nested requests (automaton.CallKind effects; the Eve/Adam thesis Adam) are carried
// by call.go: the call is submitted to the named namespace of this same
// node, as a client request, and retried with the same id until answered;
// a call to a namespace of another Synod cluster (the cluster file's
// remotes) travels over that cluster's Redis protocol (remote.go).
//
// Storage is chosen by the cluster's durability and storage fields: the WAL
// engine (or Pebble, storage: pebble) under data_dir/<node id> for fsync, or
// memory (nothing survives a restart). The
// node also serves the Redis protocol (package gateway) on its client address,
// peers on its peer address (package transport; namespaces whose transport
// is grpc-unary or grpc-stream through package transport/grpcpeer on the
// same address, see PeerGRPC), the gRPC API (package
// gateway/grpcserver) when the node has a grpc address, and, when the node has a
// metrics address, Prometheus /metrics and net/http/pprof under /debug/pprof/.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/internal/ratelog"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/storage"
	"github.com/synod-dev/synod/synoderr"
	"github.com/synod-dev/synod/transport"
)

// Options tune a Node. Zero values take the defaults noted.
type Options struct {
	Logger *slog.Logger // default: discard

	// Storage replaces the engine chosen by the cluster's durability (tests
	// use it to observe commits). The node closes it on shutdown.
	Storage storage.Engine
	// Pre-opened listeners replace listening on the configured addresses
	// (tests use ":0" listeners). The node closes them.
	PeerListener, ClientListener, MetricsListener net.Listener
	// GRPCListener serves the gRPC API even when the node has no grpc address.
	GRPCListener net.Listener
	// GRPC builds the gRPC API server over the node (a gateway.Backend).
	// The runtime does not link a gRPC server itself: the process that
	// assembles a node (package daemon, used by `synod node`) supplies it.
	// Nil with a grpc address configured is an error at Run.
	GRPC func(b gateway.Backend, password string, log *slog.Logger) ClientServer
	// MetricsAuth, when set, wraps the metrics port's handler (package
	// daemon checks the cluster file's metrics_token with it).
	MetricsAuth func(http.Handler) http.Handler

	BatchLimit int // inputs per batch, default 1024
	InboxLen   int // per-namespace inbox, default 4096
	// Fatal, when set, is called when storage fails; when it returns, the
	// node shuts down and Run returns the error. Default (nil): the node
	// stays up in the failed state of storagefault.go (acknowledges nothing,
	// refuses requests with the error, reports it) until it is restarted.
	Fatal func(error)
	// Transport tunes the peer transport; Cluster, Self, Peers, Listener,
	// Handler and Logger are set by the node.
	Transport transport.Options
	// PeerGRPC builds the gRPC peer transport (package transport/grpcpeer)
	// for namespaces whose transport is grpc-unary or grpc-stream. Like
	// GRPC it is supplied by the process that assembles the node (package
	// daemon), so that node links no gRPC. Nil while such a namespace is
	// configured is an error at Run; unused when every namespace uses tcp.
	PeerGRPC func(PeerGRPCOptions) (PeerGRPC, error)

	trace tracer // stage tracing, tests only (trace.go)
	// holdPoll, while true, pauses the background placement reads of
	// sharded namespaces (slotmap.go runPlacement; #placement's own
	// members are still read): tests only, to keep a node's view of the
	// groups' members stale (placer.go's re-read before each decision).
	holdPoll *atomic.Bool
	// noCoalesce turns coalesced heartbeats off (coalesce.go): tests'
	// and benchmarks' "before" variant only.
	noCoalesce bool
	// noYield: the loop does not yield before stepping a pass's client
	// batch (loop.go, yieldForRequests): benchmarks' "before" variant.
	noYield bool
	// loneYield: the loop yields for a lone read after a lone request too
	// (yieldForRequests), as before session 56: tests' and benchmarks'
	// "before" variant.
	loneYield bool
	// noDirect: no direct passes (nsLoop.directPass) and no inline
	// passes (nsLoop.inlinePass): every input goes through the pool's
	// passes (benchmarks' and tests' before/after).
	noDirect bool
	// noReaderPass: a TCP peer reader wakes a loop that runs direct
	// passes (abd, esds) for every message, as before readerpass.go
	// (tests' and benchmarks' before/after).
	noReaderPass bool
	// noReplyFn: SubmitReply takes nothing (replyfn.go): the gateway's
	// replies are written by the connections' goroutines (tests' "before").
	noReplyFn bool
	// noCallerCommit: a lone callback request's direct pass hands its
	// records to a committer goroutine, as before replyfn.go's caller
	// commit (tests' and benchmarks' "before").
	noCallerCommit bool
	// noCommitterReply: a single callback answered by a committer
	// goroutine's release runs on a goroutine of its own, as before
	// runAside ran it on the committer (tests' and benchmarks' "before").
	noCommitterReply bool
	// noLoopHold: a batch that nothing needs committed yet goes to a
	// committer goroutine, which holds it (lazy commit), as before flush
	// held it itself (loop.go, holdInLoop; tests' and benchmarks' "before").
	noLoopHold bool
	// noInlineCommit: the inline pass of a lone callback request (a loop
	// without direct passes: a Multi-Paxos leader's one-client put) hands
	// its records to a committer goroutine, as before session 50
	// (sched.go, inlinePassCommit); the direct passes' caller commit is
	// kept. SYNOD_INLINE_COMMIT=0 in a node's environment sets it and
	// SYNOD_LOOP_HOLD=0 sets noLoopHold (New), for a quiet A/B of one
	// binary: one client's put p99 was higher with both on in 15 of 18
	// alternated rounds on the loaded machine (docs/costs/s50-lat50.md).
	noInlineCommit bool
	// noTurnCommit: the pass Kick runs for an event-loop turn's held
	// requests hands its records to a committer goroutine instead of
	// committing them on the event loop's goroutine (sched.go,
	// turnCommits, on by default since session 52). SYNOD_TURN_COMMIT=0
	// in a node's environment sets it (New), for an A/B of one binary.
	noTurnCommit bool
	// readerCommit: a TCP reader's pass of a lone message commits its
	// records on the reader (sched.go, readerCommitPass). Off by default
	// (docs/COSTS.md, lat46: one client's put p99 rose with it on this
	// loaded machine); SYNOD_READER_COMMIT=1 in a node's environment turns
	// it on (New), for a quiet A/B.
	readerCommit bool
	// readerCommitIdle: readerCommit only in a loop with no client
	// waiting on this node (sched.go, readerCommitPass);
	// SYNOD_READER_COMMIT=2 sets both.
	readerCommitIdle bool
	// reqNoted, when set, is called by a pool worker when it runs a
	// pass with queued client requests, before the pass: a test widens
	// that window (TestSubmitKeepsOrderDirect).
	reqNoted func()
	// txnTailHook, when set, runs before the commits of a cross-shard
	// transaction answered at its decision from its prepares' evaluation
	// (tests: it holds the commits while the test reads).
	txnTailHook func()
	// brokenReadGuards: reads of a sharded group go without their slot
	// guards, so they pass a prepared transaction's locks (the broken
	// variant TestCrossShardExecReadAfterAnswer catches).
	brokenReadGuards bool
	// onStep, when set, is called before (enter) and after each
	// automaton step (tests: TestGroupStepsSerial).
	onStep func(l *nsLoop, enter bool)
	// onHandoff, when set, is called with every hand-off the node counts
	// (handoff), on the goroutine that counts it (tests: TestReaderCommit
	// tells the commit path's hand-offs from a timer's or a wake-up's).
	onHandoff func(k int)
	// unserialized: the step pool's broken variant (sched.go): wake
	// queues a loop whatever its state and a pool pass takes no pass
	// lock, so a group may be stepped by two goroutines at once
	// (TestGroupStepsSerial shows it caught).
	unserialized bool
}

// PeerGRPCOptions is what the node hands to Options.PeerGRPC: the fields of
// grpcpeer.Options it sets.
//
// The gRPC peer service listens on the node's peer address: the node splits
// that listener (transport.SplitListener) between the TCP transport and the
// gRPC server, so a peer's gRPC address is its transport address (Addr and
// Peers are the TCP transport's, which follow membership changes).
type PeerGRPCOptions struct {
	Cluster  string
	Self     automaton.NodeID
	Listener net.Listener
	Addr     func(automaton.NodeID) (string, bool)
	Peers    func() []automaton.NodeID
	Handler  transport.Handler
	Logger   *slog.Logger
	// Stream: some namespace uses grpc-stream, so subscribe to every peer.
	Stream bool
}

// PeerGRPC is a running gRPC peer transport (grpcpeer.Transport).
type PeerGRPC interface {
	Unary() transport.Sender
	Stream() transport.Sender
	Stats() (unary, stream map[automaton.NodeID]transport.PeerStats)
	Close() error
}

// Node is one running Synod server.
type Node struct {
	cfg     *config.Cluster
	self    config.Node
	id      automaton.NodeID
	opts    Options
	log     *slog.Logger
	m       *metrics
	durable bool
	// handoffs counts inputs and outputs one goroutine passes to another
	// on the request path (handoff; synod_handoffs_total).
	handoffs atomic.Uint64
	// held: per peer, the loops a TCP reader put messages into without
	// waking them yet (deliverTCP), woken or passed inline when it is
	// idle (readerIdle). Under heldMu.
	heldMu sync.Mutex
	held   map[automaton.NodeID][]heldWake

	lt      loopTable                 // the replica groups this node runs, by name (groups.go)
	nss     []config.Namespace        // the cluster file's namespaces, as clients name them
	local   []config.Namespace        // the replica groups this node runs, one loop each
	shards  map[string]*shardedNS     // sharded namespaces by name (shard.go)
	groupOf map[string]*shardedNS     // the sharded namespace of each group (shard.go)
	fwd     forwarder                 // requests forwarded to other nodes' groups (shard.go)
	txs     txnStats                  // cross-shard transactions coordinated and resolved here (txn.go)
	tails   txnTails                  // cross-shard transactions' steps after their answers (txn.go)
	itx     itxTable                  // interactive transactions on sharded namespaces (itxn.go)
	co      coalescer                 // coalesced heartbeats waiting for their batch (coalesce.go)
	mem     memberState               // live membership per namespace (membership.go)
	place   placementCache            // Orca copies per namespace, for INFO (placement.go)
	remotes map[string]*remoteCluster // other clusters nested calls go to (remote.go)
	pubsub  pubsubPeers               // the gateway's handler of peers' pub/sub messages (pubsub.go)
	// gossipNudge asks for a leader gossip round now (leadergossip.go);
	// nil without sharded namespaces.
	gossipNudge chan struct{}
	// Slot migration (slotmap.go, migrate.go): this node's own requests'
	// client id and sequence, a placement read asked for now, the driver.
	slotClient, slotSeq uint64
	placeNudge          chan struct{}
	drive               driveState
	placer              placerState // placement decisions (placer.go)

	engine storage.Engine
	// wal is engine when it is the WAL (set once storage is open): its
	// frames are the node's real writes and fdatasyncs, which the
	// namespaces share (storagefault.go storageInfo, metric
	// synod_wal_frames_total).
	wal     atomic.Pointer[storage.WAL]
	tr      *transport.Transport
	gp      PeerGRPC // nil unless a namespace uses a gRPC transport
	gw      *gateway.Server
	grpc    ClientServer // nil without a grpc address
	httpSrv *http.Server

	peerAddr, clientAddr, metricsAddr, grpcAddr net.Addr

	wg       sync.WaitGroup // event loops
	pool     *stepPool      // sched.go
	pm       placeMembers   // placemembers.go: the stored members of #placement
	timers   timerHeap      // sched.go
	bg       sync.WaitGroup // server goroutines
	ready    chan struct{}
	stopping chan struct{}
	closeReq chan struct{}
	runDone  chan struct{}
	once     sync.Once
	stopOnce sync.Once
	started  bool
	startMu  sync.Mutex

	fatalMu  sync.Mutex
	fatalErr error
	fatalCh  chan struct{}
	fatalOne sync.Once
	begun    time.Time
	sf       storageFault // storagefault.go
}

// New checks the configuration for node id and creates its automata. Nothing
// is opened until Run.
func New(cfg *config.Cluster, id string, opts Options) (*Node, error) {
	if cfg == nil {
		return nil, errors.New("node: nil cluster config")
	}
	self, err := cfg.Node(id)
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.BatchLimit <= 0 {
		opts.BatchLimit = 1024
	}
	switch os.Getenv("SYNOD_READER_COMMIT") {
	case "1":
		opts.readerCommit = true
	case "2":
		opts.readerCommit, opts.readerCommitIdle = true, true
	}
	if os.Getenv("SYNOD_INLINE_COMMIT") == "0" {
		opts.noInlineCommit = true
	}
	if os.Getenv("SYNOD_TURN_COMMIT") == "0" {
		opts.noTurnCommit = true
	}
	if os.Getenv("SYNOD_LOOP_HOLD") == "0" {
		opts.noLoopHold = true
	}
	if opts.InboxLen <= 0 {
		opts.InboxLen = 4096
	}
	n := &Node{
		cfg: cfg, self: self, id: automaton.NodeID(id), opts: opts,
		log:      opts.Logger.With("node", id),
		m:        newMetrics(id),
		lt:       loopTable{m: map[string]*nsLoop{}},
		nss:      append([]config.Namespace(nil), cfg.Namespaces...),
		ready:    make(chan struct{}),
		stopping: make(chan struct{}),
		closeReq: make(chan struct{}),
		runDone:  make(chan struct{}),
		fatalCh:  make(chan struct{}),
		pool:     newStepPool(),
	}
	n.initStorageFault()
	n.durable = cfg.Durability != config.Memory
	if opts.Storage != nil {
		n.durable = opts.Storage.Durability() == config.Fsync
	}
	n.initShards() // shard.go
	n.initPlacer() // placer.go
	if n.remotes, err = newRemotes(cfg); err != nil {
		return nil, err
	}
	for _, g := range cfg.Groups() {
		if !slices.Contains(g.Nodes, n.id) {
			continue // a shard on other nodes: reached by forwarding (shard.go)
		}
		ns := g.Namespace
		l, err := n.groupLoop(g)
		if err != nil {
			return nil, err
		}
		n.lt.m[ns.Name] = l
		n.local = append(n.local, ns)
	}
	return n, nil
}

// ClientServer serves clients over a listener on the node's behalf (the
// gRPC API).
type ClientServer interface {
	Serve(net.Listener) error
	Close()
}

// ID is the node's id.
func (n *Node) ID() automaton.NodeID { return n.id }

// Ready is closed once Run has opened storage and listeners and started the
// automata.
func (n *Node) Ready() <-chan struct{} { return n.ready }

// PeerAddr, ClientAddr and MetricsAddr are the bound addresses (valid after
// Ready; MetricsAddr is nil without a metrics address).
func (n *Node) PeerAddr() net.Addr    { return n.peerAddr }
func (n *Node) ClientAddr() net.Addr  { return n.clientAddr }
func (n *Node) MetricsAddr() net.Addr { return n.metricsAddr }

// GRPCAddr is the gRPC API's bound address (nil without a grpc address).
func (n *Node) GRPCAddr() net.Addr { return n.grpcAddr }

// Run opens storage, starts the transport, the automata, the gateway and the
// metrics server, and serves until ctx ends or Close is called; then it shuts
// down cleanly and returns. It returns an error if startup fails or storage
// fails. Run may be called once.
func (n *Node) Run(ctx context.Context) error {
	n.startMu.Lock()
	if n.started {
		n.startMu.Unlock()
		return errors.New("node: Run called twice")
	}
	n.started = true
	n.startMu.Unlock()
	defer close(n.runDone)
	n.begun = time.Now()

	err := n.start()
	if err != nil {
		n.shutdown()
		return err
	}
	close(n.ready)
	n.log.Info("node started", "cluster", n.cfg.Cluster, "clients", n.clientAddr.String(),
		"peers", n.peerAddr.String(), "durability", n.Durability(), "namespaces", len(n.nss))
	select {
	case <-ctx.Done():
	case <-n.closeReq:
	case <-n.fatalCh:
	}
	n.shutdown()
	n.fatalMu.Lock()
	defer n.fatalMu.Unlock()
	return n.fatalErr
}

func (n *Node) listen(given net.Listener, addr, what string) (net.Listener, error) {
	if given != nil {
		return given, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("node %s: listen for %s on %s: %w", n.id, what, addr, err)
	}
	return ln, nil
}

func (n *Node) start() error {
	var err error
	n.engine = n.opts.Storage
	if n.engine == nil {
		if n.engine, err = storage.Open(n.cfg, string(n.id)); err != nil {
			return err
		}
	}
	if w, ok := n.engine.(*storage.WAL); ok {
		n.wal.Store(w)
		n.m.walWrites(string(n.id), w) // metrics.go
	}
	if err := n.openPlacementMembers(); err != nil { // placemembers.go
		return err
	}
	starts := map[string]automaton.Start{}
	for _, ns := range n.local {
		l := n.loop(ns.Name)
		if l.store, err = n.engine.Namespace(ns.Name); err != nil {
			return err
		}
		recs, err := l.store.Load()
		if err != nil {
			return fmt.Errorf("namespace %s: loading records: %w", ns.Name, err)
		}
		starts[ns.Name] = automaton.Start{Records: recs}
		if len(recs) > 0 {
			l.log.Info("recovered durable records", "records", len(recs))
		}
	}

	peerLn, err := n.listen(n.opts.PeerListener, n.self.Peer, "peers")
	if err != nil {
		return err
	}
	n.peerAddr = peerLn.Addr()
	peers := map[automaton.NodeID]string{}
	for _, m := range n.cfg.Nodes {
		peers[automaton.NodeID(m.ID)] = m.Peer
	}
	grpcKinds := map[string]bool{}
	for _, ns := range n.nss {
		if k := ns.PeerTransport(); k != config.TransportTCP {
			grpcKinds[k] = true
		}
	}
	tcpLn, h2Ln := peerLn, net.Listener(nil)
	if len(grpcKinds) > 0 {
		if n.opts.PeerGRPC == nil {
			peerLn.Close()
			return fmt.Errorf("node %s: a namespace uses a gRPC peer transport but this program links none (node.Options.PeerGRPC)", n.id)
		}
		tcpLn, h2Ln = transport.SplitListener(peerLn, 0, n.log)
	}
	to := n.opts.Transport
	to.Cluster, to.Self, to.Peers, to.Listener, to.Logger = n.cfg.Cluster, n.id, peers, tcpLn, n.log
	to.Handler, to.Idle = n.deliverTCP, n.readerIdle
	if n.tr, err = transport.New(to); err != nil {
		tcpLn.Close()
		if h2Ln != nil {
			h2Ln.Close()
		}
		return err
	}
	n.m.registerTransport(string(n.id), n.tr)
	n.m.registerHandoffs(string(n.id), n)
	n.m.registerRounds(string(n.id), n)
	if h2Ln != nil {
		n.gp, err = n.opts.PeerGRPC(PeerGRPCOptions{
			Cluster: n.cfg.Cluster, Self: n.id, Listener: h2Ln,
			Addr: n.tr.PeerAddr, Peers: n.tr.Peers, Handler: n.deliver, Logger: n.log,
			Stream: grpcKinds[config.TransportGRPCStream],
		})
		if err != nil {
			h2Ln.Close()
			return fmt.Errorf("node %s: gRPC peer transport: %w", n.id, err)
		}
	}
	for _, ns := range n.local {
		n.loop(ns.Name).out = n.peerSender(ns)
	}

	clientLn, err := n.listen(n.opts.ClientListener, n.self.Client, "clients")
	if err != nil {
		return err
	}
	n.clientAddr = clientLn.Addr()

	var metricsLn net.Listener
	if n.opts.MetricsListener != nil || n.self.Metrics != "" {
		if metricsLn, err = n.listen(n.opts.MetricsListener, n.self.Metrics, "metrics"); err != nil {
			clientLn.Close()
			return err
		}
		n.metricsAddr = metricsLn.Addr()
	}
	var grpcLn net.Listener
	if n.opts.GRPCListener != nil || n.self.GRPC != "" {
		if n.opts.GRPC == nil {
			clientLn.Close()
			if metricsLn != nil {
				metricsLn.Close()
			}
			return fmt.Errorf("node %s has a grpc address but this program links no gRPC server (node.Options.GRPC)", n.id)
		}
		if grpcLn, err = n.listen(n.opts.GRPCListener, n.self.GRPC, "gRPC clients"); err != nil {
			clientLn.Close()
			if metricsLn != nil {
				metricsLn.Close()
			}
			return err
		}
		n.grpcAddr = grpcLn.Addr()
	}

	n.pool.start(poolWorkers()) // sched.go
	for _, ns := range n.local {
		n.wg.Add(1)
		n.loop(ns.Name).start(starts[ns.Name])
	}
	n.hostPlacementMembers() // placemembers.go: by the stored record

	if len(n.groupOf) > 0 {
		n.bg.Add(2)
		go n.leaderGossip() // leadergossip.go
		go n.runPlacement() // slotmap.go
		n.bg.Add(1)
		go n.resolveTxns() // txn.go
		n.bg.Add(1)
		go n.runPlacer() // placer.go
	}
	n.gw = gateway.NewServer(n, n.gatewayOptions()) // overload.go
	n.m.registerOverload(string(n.id), n.gw)
	n.m.registerErrors(string(n.id), n.gw)
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		if err := n.gw.Serve(clientLn); err != nil {
			n.log.Error("client listener failed", "err", err)
		}
	}()
	if grpcLn != nil {
		n.grpc = n.opts.GRPC(n, n.cfg.Password, n.log.With("component", "grpc"))
		n.bg.Add(1)
		go func() {
			defer n.bg.Done()
			// gRPC connections count against maxclients with RESP's.
			if err := n.grpc.Serve(n.gw.LimitListener(grpcLn)); err != nil {
				n.log.Error("gRPC listener failed", "err", err)
			}
		}()
	}
	if metricsLn != nil {
		var h http.Handler = n.withHealth(n.m.handler())
		if n.opts.MetricsAuth != nil {
			h = n.opts.MetricsAuth(h)
		}
		n.httpSrv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: ratelog.New(0).HTTPErrorLog(n.log.With("component", "metrics"))}
		n.bg.Add(1)
		go func() {
			defer n.bg.Done()
			if err := n.httpSrv.Serve(metricsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				n.log.Error("metrics server failed", "err", err)
			}
		}()
	}
	return nil
}

// shutdown stops everything Run started, in dependency order: no new client
// or peer input, then the loops (each finishes its batch: commit, release),
// then storage.
func (n *Node) shutdown() {
	n.stopOnce.Do(func() {
		close(n.stopping)
		n.failCallbacks(stopped) // replyfn.go: as await's stopping case
		n.endLoops()             // sched.go
		n.tails.close()
		if n.gw != nil {
			n.gw.Close()
		} else if n.opts.ClientListener != nil {
			n.opts.ClientListener.Close()
		}
		if n.grpc != nil {
			n.grpc.Close()
		} else if n.opts.GRPCListener != nil {
			n.opts.GRPCListener.Close()
		}
		if n.httpSrv != nil {
			n.httpSrv.Close()
		} else if n.opts.MetricsListener != nil {
			n.opts.MetricsListener.Close()
		}
		if n.gp != nil {
			n.gp.Close()
		}
		if n.tr != nil {
			n.tr.Close()
		} else if n.opts.PeerListener != nil {
			n.opts.PeerListener.Close()
		}
		n.tails.wg.Wait()
		n.closeLoops() // groups.go: no group starts from here on
		n.wg.Wait()
		n.pool.stop()   // sched.go: no loop is queued any more
		n.timers.stop() // no loop has a timer any more
		n.bg.Wait()
		for _, rc := range n.remotes {
			rc.close()
		}
		for _, l := range n.loopList() {
			if l.store != nil {
				l.store.Close()
			}
		}
		n.closePlacementMembers() // placemembers.go
		if n.engine != nil {
			if err := n.engine.Close(); err != nil {
				n.log.Error("closing storage", "err", err)
			}
		}
		n.log.Info("node stopped")
	})
}

// Close stops a running node and waits for Run to return. It is safe to call
// more than once, and before Run (the node then never starts).
func (n *Node) Close() error {
	n.once.Do(func() { close(n.closeReq) })
	n.startMu.Lock()
	started := n.started
	n.startMu.Unlock()
	if started {
		<-n.runDone
	}
	return nil
}

// fatal reports a storage failure: the node enters the failed state
// (storagefault.go); with Options.Fatal set, it calls it and shuts down.
func (n *Node) fatal(ns string, err error) {
	n.storageFailed(ns, err)
	if n.opts.Fatal != nil {
		n.opts.Fatal(err)
		n.fatalOne.Do(func() { close(n.fatalCh) })
	}
}

// deliver is the transport's handler.
func (n *Node) deliver(from automaton.NodeID, ns string, msg []byte) {
	n.deliverFrom(from, ns, msg, false)
}

// deliverTCP is deliver for the TCP transport's readers, which call
// readerIdle once they have handed over every frame they read: a message
// for a loop that does not run direct passes is put into its inbox
// without waking it (hold), and readerIdle then runs the loop's pass on
// the reader's goroutine if the loop is idle (inlinePass), else wakes it.
// A lone message (a one-client put's Accept, Accepted, Forward,
// ForwardReply) is thus stepped without a hand-off to a pool worker,
// while the frames a reader read together still reach the loop before
// its pass, as they did when each woke it (a pass takes them all).
func (n *Node) deliverTCP(from automaton.NodeID, ns string, msg []byte) {
	n.deliverFrom(from, ns, msg, true)
}

func (n *Node) deliverFrom(from automaton.NodeID, ns string, msg []byte, hold bool) {
	l := n.loop(ns)
	if l == nil && ns == forwardNS {
		n.onForward(from, msg) // shard.go
		return
	}
	if l == nil && ns == pubsubNS {
		n.onPublish(msg) // pubsub.go
		return
	}
	if l == nil && ns == announceNS {
		n.onPeerAnnounce(msg) // pubsub.go
		return
	}
	if l == nil && ns == batchNS {
		n.onBatch(from, msg) // coalesce.go
		return
	}
	n.deliverOne(from, ns, msg, false, hold)
}

// heldWake is a loop a reader put k messages into without waking it.
type heldWake struct {
	l *nsLoop
	k int
}

// hold notes that the reader of peer from put a message into l's inbox
// without waking l.
func (n *Node) hold(from automaton.NodeID, l *nsLoop) {
	n.heldMu.Lock()
	hs := n.held[from]
	if k := len(hs); k > 0 && hs[k-1].l == l {
		hs[k-1].k++
	} else {
		if n.held == nil {
			n.held = map[automaton.NodeID][]heldWake{}
		}
		hs = append(hs, heldWake{l, 1})
	}
	n.held[from] = hs
	n.heldMu.Unlock()
}

// readerIdle runs, for each loop the reader of peer from put messages into
// since its last call, the loop's pass here if the loop is idle
// (readerPass), else wakes it (a hand-off per message, as before).
func (n *Node) readerIdle(from automaton.NodeID) {
	var buf [4]heldWake
	n.heldMu.Lock()
	hs := append(buf[:0], n.held[from]...)
	if len(hs) > 0 {
		clear(n.held[from])
		n.held[from] = n.held[from][:0]
	}
	n.heldMu.Unlock()
	for _, h := range hs {
		// Inline only when the loop holds nothing but what this reader
		// put there (a lone message): a loop that other inputs wait for
		// (client requests, the other peers' messages) is a busy one,
		// whose pass a worker runs while the readers go on reading.
		// A lone message (one read, one message: a one-client put's
		// Accept at a follower) is also committed here (readerCommitPass).
		pass := h.l.readerPass
		if h.k == 1 {
			pass = h.l.readerCommitPass
		}
		if h.l.inbox.len() <= h.k && h.l.reqIn.len() == 0 && pass() {
			continue
		}
		h.l.wake()
		n.handoff(h.k)
	}
}

// deliverOne hands peer message msg to namespace ns's loop; lazy: it came
// in a coalesced batch (coalesce.go).
func (n *Node) deliverOne(from automaton.NodeID, ns string, msg []byte, lazy, hold bool) {
	l := n.loop(ns)
	if l == nil {
		n.log.Warn("peer message for a namespace this node does not serve; dropped", "peer", from, "namespace", ns)
		return
	}
	if n.sf.err.Load() != nil {
		return // storage failed: the loop may have stopped (storagefault.go)
	}
	if tr := n.opts.trace; tr != nil {
		tr(stageDeliver, from, msgKind(msg))
	}
	ev := event{in: automaton.PeerMessage{From: from, Msg: msg}, lazy: lazy}
	if hold && l.holds() && !l.retired.Load() {
		if l.inbox.tryPut(ev) == nil {
			n.hold(from, l)
			l.msgsIn.Add(1)
			l.mIn.Inc()
			return
		}
		// Full: what this reader holds is woken before it waits for room.
		n.readerIdle(from)
	}
	if l.push(ev) {
		n.handoff(1)
		l.msgsIn.Add(1)
		l.mIn.Inc()
	}
}

// ---- gateway.Backend ----

var _ gateway.Backend = (*Node)(nil)

// Do implements gateway.Backend.
func (n *Node) Do(ctx context.Context, ns string, req automaton.Request) (automaton.Response, error) {
	return n.do(ctx, ns, req)
}

// do is Do. A request validated already (Request.Checked: by the gateway,
// or by doSharded to route it) is not validated again, here or by the
// protocol (proto.Validating).
func (n *Node) do(ctx context.Context, ns string, req automaton.Request) (automaton.Response, error) {
	l := n.loop(ns)
	if n.shards[ns] != nil && (l == nil || !n.serves(ns)) {
		// A sharded namespace, or the placement namespace on a node that
		// does not serve it (not a member, or its replica retired or
		// outside the configuration: placemembers.go): routed.
		return n.doSharded(ctx, ns, req) // shard.go
	}
	if l == nil {
		return automaton.Response{}, fmt.Errorf("unknown namespace %q (this node serves %s)", ns, n.nsNames())
	}
	if err := n.open(); err != nil {
		return automaton.Response{}, err
	}
	// A request is validated once: by the RESP and gRPC edges, which mark
	// it Checked, or else by the protocol's step (proto.Validating). Only
	// a shard group's ownership check reads the keys of the request before
	// the protocol does, so it validates an unchecked one first (a
	// forwarded request, or a nested call, reaches it without an edge). A
	// client request of a shard group then runs guarded by its slots'
	// states in the group's log (slotmap.go); the node's own requests
	// (internal) skip both.
	if s := n.shardOfLoop(ns); s != nil && !isInternal(ctx) {
		if !req.Checked {
			if err := automaton.ValidateRequest(l.svc, req); err != nil {
				return automaton.Response{ID: req.ID, Result: service.Fail(synoderr.Invalid, "%v", err)}, nil
			}
			req.Checked = true
		}
		epoch := s.view().epoch
		res, refused := n.refuseUnowned(ctx, ns, req) // shard.go
		if refused && isMoved(res) && n.consultPlacement(ctx, s, epoch) {
			res, refused = n.refuseUnowned(ctx, ns, req) // by the newest map (slotmap.go)
		}
		if refused {
			return automaton.Response{ID: req.ID, Result: res}, nil
		}
		return n.doGuarded(ctx, s, ns, req) // slotmap.go
	}
	req, refused, ok := n.admit(l, req)
	if !ok {
		return refused, nil
	}
	ch, t0, err := n.handOver(ctx, l, req)
	if err != nil {
		return automaton.Response{}, err
	}
	return n.await(ctx, l, req.ID, ch, t0)
}

// handOver puts an admitted request into loop l's inbox, with a waiter
// for its response (await); the inbox is a FIFO, so requests one
// goroutine hands over reach the loop in that order.
func (n *Node) handOver(ctx context.Context, l *nsLoop, req automaton.Request) (chan automaton.Response, time.Time, error) {
	return n.handOverTo(ctx, l, req, nil)
}

// handOverTo is handOver with the response going to fn (a callback
// waiter, replyfn.go) instead of a channel when fn is not nil.
func (n *Node) handOverTo(ctx context.Context, l *nsLoop, req automaton.Request, fn func(automaton.Response, error)) (chan automaton.Response, time.Time, error) {
	if tr := n.opts.trace; tr != nil {
		tr(stageDo, "", 0)
	}
	t0 := time.Now()
	var ch chan automaton.Response
	if fn != nil {
		l.addCallback(req.ID, fn, t0)
	} else {
		ch = respChans.Get().(chan automaton.Response)
		l.addWaiter(req.ID, ch)
	}
	if ok, deferred := l.directPass(l.callerCommits(fn), req); ok { // loop.go
		l.requests.Add(1)
		l.mRequests.Inc()
		if deferred {
			l.commitOnCaller() // replyfn.go, callerCommits
		}
		return ch, t0, nil
	} else if deferred {
		l.commitOnCaller() // the pass stepped queued requests only; req is queued below
	}
	switch l.requestQueue().put(event{in: automaton.ClientRequest{Req: req}}, ctx.Done(), n.stopping, n.sf.ch) {
	case -1:
		if !l.inlinePassCommit(!n.opts.noInlineCommit && l.callerCommits(fn)) { // sched.go; else stepped here
			l.noteRequest()
			n.handoff(1)
		}
	case 0:
		l.unwait(req.ID, ch) // a callback is SubmitReply's to remove
		return nil, t0, fmt.Errorf("request %s not submitted: %w", req.ID, ctx.Err())
	case 1:
		l.unwait(req.ID, ch) // a callback is SubmitReply's to remove
		return nil, t0, gateway.ErrShuttingDown
	default:
		l.unwait(req.ID, ch) // a callback is SubmitReply's to remove
		return nil, t0, n.StorageErr()
	}
	l.requests.Add(1)
	l.mRequests.Inc()
	return ch, t0, nil
}

var _ gateway.SubmitBackend = (*Node)(nil)

// Submit implements gateway.SubmitBackend: req goes into namespace ns's
// loop's inbox before Submit returns (as Do hands it over), and the
// returned function waits for its response as Do would. req.Ops is the
// node's from then on (SubmitBackend's contract): its operations'
// arguments are copied into it in place (admitOwned). A shard group's
// or a sharded namespace's request is not handed over by itself (do
// routes and guards it): Submit then runs it to its end, so the order of
// submissions is kept all the same.
func (n *Node) Submit(ctx context.Context, ns string, req automaton.Request) func() (automaton.Response, error) {
	l := n.loop(ns)
	if l == nil || n.shardOfLoop(ns) != nil {
		r, err := n.do(ctx, ns, req)
		return func() (automaton.Response, error) { return r, err }
	}
	if err := n.open(); err != nil {
		return func() (automaton.Response, error) { return automaton.Response{}, err }
	}
	req, refused, ok := n.admitOwned(l, req, true)
	if !ok {
		return func() (automaton.Response, error) { return refused, nil }
	}
	ch, t0, err := n.handOver(ctx, l, req)
	if err != nil {
		return func() (automaton.Response, error) { return automaton.Response{}, err }
	}
	return func() (automaton.Response, error) { return n.await(ctx, l, req.ID, ch, t0) }
}

// open reports why the node takes no request now (shutting down, a
// storage failure), or nil.
func (n *Node) open() error {
	select {
	case <-n.stopping:
		return gateway.ErrShuttingDown
	default:
	}
	return n.StorageErr()
}

var _ gateway.BatchBackend = (*Node)(nil)

// DoBatch implements gateway.BatchBackend: reqs go to namespace ns's loop
// in one hand-off, in order, so that a protocol stepping client batches
// steps them in this order in one ClientBatch (with whatever else the pass
// holds; nsLoop.take); each request is answered as Do answers it.
// Elsewhere (a protocol that does not step batches, a sharded namespace)
// they run one after the other through Do.
func (n *Node) DoBatch(ctx context.Context, ns string, reqs []automaton.Request) ([]automaton.Response, []error) {
	out := make([]automaton.Response, len(reqs))
	errs := make([]error, len(reqs))
	l := n.loop(ns)
	if l == nil || !l.batches || n.shardOfLoop(ns) != nil { // a shard group's requests are guarded one by one (do)
		for i, req := range reqs {
			out[i], errs[i] = n.Do(ctx, ns, req)
		}
		return out, errs
	}
	if err := n.open(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return out, errs
	}
	type sub struct {
		i  int
		id automaton.RequestID
		ch chan automaton.Response
	}
	batch := make([]automaton.Request, 0, len(reqs))
	subs := make([]sub, 0, len(reqs))
	for i, req := range reqs {
		req, refused, ok := n.admit(l, req)
		if !ok {
			out[i] = refused
			continue
		}
		ch := respChans.Get().(chan automaton.Response)
		l.addWaiter(req.ID, ch)
		batch = append(batch, req)
		subs = append(subs, sub{i, req.ID, ch})
	}
	if len(batch) == 0 {
		return out, errs
	}
	if tr := n.opts.trace; tr != nil {
		for range batch {
			tr(stageDo, "", 0)
		}
	}
	t0 := time.Now()
	if err := n.handOverBatch(ctx, l, batch); err != nil {
		for _, s := range subs {
			l.removeWaiter(s.id, s.ch)
			errs[s.i] = fmt.Errorf("request %s not submitted: %w", s.id, err)
		}
		return out, errs
	}
	l.requests.Add(uint64(len(batch)))
	l.mRequests.Add(float64(len(batch)))
	for _, s := range subs {
		out[s.i], errs[s.i] = n.await(ctx, l, s.id, s.ch, t0)
	}
	return out, errs
}

// handOverBatch steps batch, admitted requests with their waiters, on
// this goroutine (a direct pass) or puts it in loop l's inbox as one
// ClientBatch, in order; an error: nothing was handed over.
func (n *Node) handOverBatch(ctx context.Context, l *nsLoop, batch []automaton.Request) error {
	if ok, _ := l.directPass(false, batch...); ok { // loop.go
		return nil
	}
	switch l.requestQueue().put(event{in: automaton.ClientBatch{Reqs: batch}}, ctx.Done(), n.stopping, n.sf.ch) {
	case -1:
		l.noteRequest()
		n.handoff(1)
		return nil
	case 0:
		return ctx.Err()
	case 1:
		return gateway.ErrShuttingDown
	default:
		return n.StorageErr()
	}
}

// admit checks req for namespace ns (loop l) as Do does and gives the
// automaton its own copy of it, stamped with the environment observed now;
// a request refused here comes back as its response, with ok false. (A
// shard group's client requests are checked by do before.)
func (n *Node) admit(l *nsLoop, req automaton.Request) (_ automaton.Request, refused automaton.Response, ok bool) {
	return n.admitOwned(l, req, false)
}

// admitOwned is admit; ownOps says req.Ops (the list, not the arguments
// its operations point to) and req.Opts.Ext (the map and its value lists)
// are already the node's (Submit's contract): the operations' arguments
// are then copied into it in place instead of into a new list (one list
// of a batch's operations fewer per pipelined batch), and the options are
// not copied (a map and its lists, three allocations per ESDS request,
// whose gateway assigns every request an option of its own).
func (n *Node) admitOwned(l *nsLoop, req automaton.Request, ownOps bool) (_ automaton.Request, refused automaton.Response, ok bool) {
	return n.admitArgs(l, req, ownOps, false)
}

// admitArgs is admitOwned; ownArgs says req.Op's arguments (the list and
// the bytes it points to) are the node's too (SubmitReplyBatchOwned's
// contract): they are then not copied.
func (n *Node) admitArgs(l *nsLoop, req automaton.Request, ownOps, ownArgs bool) (_ automaton.Request, refused automaton.Response, ok bool) {
	// A transaction shape the protocol cannot honour is refused here, before
	// anything is applied (automaton/txn.go). Only groups and transaction
	// steps can be refused, so a plain request skips the registry lookup
	// (a quarter of Do's allocations when it ran for every request).
	if len(req.Ops) > 0 || req.Txn != nil {
		if res, refused := automaton.RefuseUnsupported(l.ns.Protocol, req); refused {
			return req, automaton.Response{ID: req.ID, Result: res}, false
		}
	}
	// The request may sit in the inbox after Do returns (context ended); the
	// caller may then reuse its buffers, so the automaton gets its own copy.
	if !ownArgs {
		req.Op.Args = cloneArgs(req.Op.Args)
	}
	if ownOps {
		cloneGroupArgs(req.Ops)
	} else if req.Ops != nil {
		ops := make([]service.Op, len(req.Ops))
		for i, op := range req.Ops {
			op.Args = cloneArgs(op.Args)
			ops[i] = op
		}
		req.Ops = ops
	}
	if req.Opts.Ext != nil && !ownOps { // owned: the map is the node's too (gateway.SubmitBackend)
		ext := make(map[string][]string, len(req.Opts.Ext))
		for k, v := range req.Opts.Ext {
			ext[k] = append([]string(nil), v...)
		}
		req.Opts.Ext = ext
	}
	if req.Txn != nil {
		t := *req.Txn
		req.Txn = &t
	}
	// The environment observed on arrival (service/env.go); only
	// nondeterministic services read it, through the protocol.
	req.Env = newEnv()
	return req, automaton.Response{}, true
}

// await waits for the answer to request id, submitted to loop l at t0 with
// answer channel ch (Do's second half).
func (n *Node) await(ctx context.Context, l *nsLoop, id automaton.RequestID, ch chan automaton.Response, t0 time.Time) (automaton.Response, error) {
	select {
	case r := <-ch:
		// respond removed ch from the waiters before its one send: nothing
		// else can reach ch now, so it is reused. (On the other paths a
		// respond may still be about to send, and ch is left to the GC.)
		respChans.Put(ch)
		l.mLatency.Observe(time.Since(t0).Seconds())
		if tr := n.opts.trace; tr != nil {
			tr(stageDoDone, "", 0)
		}
		return r, nil
	case <-ctx.Done():
		l.removeWaiter(id, ch)
		return automaton.Response{}, fmt.Errorf("request %s: outcome unknown: %w", id, ctx.Err())
	case <-n.stopping:
		l.removeWaiter(id, ch)
		return automaton.Response{}, fmt.Errorf("request %s: outcome unknown: %w", id, gateway.ErrShuttingDown)
	case <-n.sf.ch:
		l.removeWaiter(id, ch)
		select {
		case r := <-ch: // released before the failure: durable
			return r, nil
		default:
		}
		return automaton.Response{}, n.errStorageUnknown(id)
	}
}

// respChans recycles Do's one-slot response channels.
var respChans = sync.Pool{New: func() any { return make(chan automaton.Response, 1) }}

func cloneArgs(args [][]byte) [][]byte {
	if args == nil {
		return nil
	}
	return cloneArgsInto(make([][]byte, len(args)), args)
}

// cloneGroupArgs gives each operation of a group (the caller's own list)
// a copy of its arguments, as cloneArgs does, with the group's argument
// lists carved from one array, each capped at its own length (an append
// to one never writes into the next): one allocation per group instead of
// one per operation. Each operation's argument bytes stay a buffer of its
// own, so a value the store keeps keeps no other operation's bytes alive.
func cloneGroupArgs(ops []service.Op) {
	total := 0
	for _, op := range ops {
		total += len(op.Args)
	}
	lists := make([][]byte, total)
	for i := range ops {
		args := ops[i].Args
		if args == nil {
			continue
		}
		n := len(args)
		ops[i].Args = cloneArgsInto(lists[:n:n], args)
		lists = lists[n:]
	}
}

// cloneArgsInto copies args' bytes into one fresh buffer, each argument
// capped at its own length (nil stays nil), into out (len(args) long).
func cloneArgsInto(out, args [][]byte) [][]byte {
	size := 0
	for _, a := range args {
		size += len(a)
	}
	buf := make([]byte, 0, size)
	for i, a := range args {
		if a == nil {
			continue
		}
		buf = append(buf, a...)
		out[i] = buf[len(buf)-len(a) : len(buf) : len(buf)]
	}
	return out
}

// Namespaces implements gateway.Backend: the cluster file's order, so the
// first is the default.
func (n *Node) Namespaces() []config.Namespace {
	return append([]config.Namespace(nil), n.nss...)
}

func (n *Node) nsNames() string {
	names := make([]string, len(n.nss))
	for i, ns := range n.nss {
		names[i] = ns.Name
	}
	return strings.Join(names, ", ")
}

// Durability is the storage mode in force.
func (n *Node) Durability() string {
	if n.opts.Storage != nil {
		return n.opts.Storage.Durability()
	}
	return n.cfg.Durability
}

// Counters are one namespace's runtime counters.
type Counters struct {
	Requests, Responses, Persists, Fsyncs, MessagesIn, MessagesOut uint64
	Orphans                                                        uint64 // responses nobody waited for (client gave up; duplicates)
	Waiting                                                        int    // clients waiting now
	BadSends                                                       uint64 // sends to self or unknown nodes
	Stepped                                                        uint64 // inputs stepped by the automaton (Start included)
}

// Counters returns the counters of namespace ns.
func (n *Node) Counters(ns string) (Counters, bool) {
	l := n.loop(ns)
	if l == nil {
		return Counters{}, false
	}
	return Counters{
		Requests: l.requests.Load(), Responses: l.responses.Load(), Persists: l.persisted.Load(),
		Fsyncs: l.fsyncs.Load(), MessagesIn: l.msgsIn.Load(), MessagesOut: l.msgsOut.Load(),
		Orphans: l.orphans.Load(), Waiting: l.waiting(), BadSends: l.badSends.Load(),
		Stepped: l.stepped.Load(),
	}, true
}

// Info implements gateway.Backend. Sections: "synod" (merged into the
// gateway's Synod section), "namespaces" (one line per namespace with its
// protocol, service and counters), "params" (each namespace's protocol
// parameters in effect), "placement" (where Orca objects' copies are, for
// runtimes that place them) and "peers" (transport state per peer).
func (n *Node) Info() map[string]map[string]string {
	syn := map[string]string{
		"node_id":                string(n.id),
		"cluster":                n.cfg.Cluster,
		"durability":             n.Durability(),
		"peer_addr":              n.self.Peer,
		"client_addr":            n.self.Client,
		"node_uptime_in_seconds": strconv.Itoa(int(time.Since(n.begun).Seconds())),
	}
	if n.self.Metrics != "" {
		syn["metrics_addr"] = n.self.Metrics
	}
	n.storageInfo(syn)
	if n.self.GRPC != "" {
		syn["grpc_addr"] = n.self.GRPC
	}
	nss := map[string]string{}
	for _, ns := range n.nss {
		c, _ := n.Counters(ns.Name)
		nss[ns.Name] = fmt.Sprintf("protocol=%s,service=%s,requests=%d,responses=%d,persists=%d,fsyncs=%d,messages_in=%d,messages_out=%d,waiting=%d",
			ns.Protocol, ns.Service, c.Requests, c.Responses, c.Persists, c.Fsyncs, c.MessagesIn, c.MessagesOut, c.Waiting) + transportFact(ns) + n.membersFact(ns.Name)
	}
	out := map[string]map[string]string{"synod": syn, "namespaces": nss, "params": n.paramsInfo()}
	if p := n.placementInfo(); len(p) > 0 {
		out["placement"] = p
	}
	if sh := n.shardsInfo(); len(sh) > 0 {
		out["shards"] = sh                 // shard.go
		out["transactions"] = n.txs.info() // txn.go
		if c := n.crossInfo(); len(c) > 0 {
			out["crossgroup"] = c // crossgroup.go
		}
	}
	if n.tr != nil {
		peers := map[string]string{}
		st := n.tr.Stats()
		ids := make([]string, 0, len(st))
		for id := range st {
			ids = append(ids, string(id))
		}
		sort.Strings(ids)
		for _, id := range ids {
			s := st[automaton.NodeID(id)]
			conn := 0
			if s.Connected {
				conn = 1
			}
			peers[id] = fmt.Sprintf("connected=%d,sent=%d,dropped=%d,received=%d", conn, s.Sent, s.Dropped, s.Received)
		}
		out["peers"] = peers
	}
	if n.gp != nil {
		unary, stream := n.gp.Stats()
		for name, st := range map[string]map[automaton.NodeID]transport.PeerStats{"peers_grpc_unary": unary, "peers_grpc_stream": stream} {
			sec := map[string]string{}
			for id, s := range st {
				conn := 0
				if s.Connected {
					conn = 1
				}
				sec[string(id)] = fmt.Sprintf("connected=%d,sent=%d,dropped=%d,received=%d", conn, s.Sent, s.Dropped, s.Received)
			}
			out[name] = sec
		}
	}
	return out
}

// paramsInfo is INFO's Params section: every namespace's protocol
// parameters in effect, the protocol's defaults overridden by the cluster
// file's (and so by `synod cluster up --param`), one line "<ns>.<name>".
func (n *Node) paramsInfo() map[string]string {
	out := map[string]string{}
	for _, ns := range n.nss {
		for k, v := range automaton.DefaultParams(ns.Protocol) {
			out[ns.Name+"."+k] = v
		}
		for k, v := range ns.Params {
			out[ns.Name+"."+k] = v
		}
	}
	return out
}

// transportFact is the ",transport=..." suffix of a namespace's INFO line
// ("" for the default, tcp).
func transportFact(ns config.Namespace) string {
	if k := ns.PeerTransport(); k != config.TransportTCP {
		return ",transport=" + k
	}
	return ""
}
