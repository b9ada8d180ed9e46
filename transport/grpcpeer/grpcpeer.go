// Package grpcpeer carries automaton messages between Synod nodes over gRPC,
// in the two ways the Grid Services thesis (chapter III.C.2, Table III.1) compares with a raw
// socket for the primary's state updates to its backups:
//
//   - Unary (config.TransportGRPCUnary, "grpc-unary"): each message is one
//     unary call Deliver(PeerMsg) from the sender to the receiver, answered
//     by an empty Ack. This is the seed's "Call": a state update sent as a
//     grid service method call on the backup.
//   - Stream (config.TransportGRPCStream, "grpc-stream"): every receiver
//     holds a server-streamed call Subscribe(SubscribeRequest) open to every
//     sender, and the sender pushes each message for that receiver down it.
//     This is the seed's "Notification": the backup registers with the
//     primary as a sink (register_notification, Fig. III.3) and the primary
//     pushes each state change to its sinks (notify_change, Fig. III.2).
//
// The third, the seed's "Socket", is package transport (framed TCP), the
// default. A namespace picks one with its transport field; a protocol's own
// acknowledgement (the seed's notify_change_with_ack) is an ordinary
// automaton message travelling back the same way.
//
// # Where it listens
//
// The peer service is served on the node's peer address, the one the TCP
// transport uses: transport.SplitListener hands connections that open with
// HTTP/2's client preface to this package's gRPC server and all others to
// the TCP transport. Choices considered (the issue leaves it open): a new
// peer_grpc address per node would need a fifth port in every cluster file
// and in cluster tooling, and is unknown for members added at run time
// (automaton.Members carries one peer address); the node's client gRPC API
// is optional, password-protected and owned by the client API. Sharing the
// peer address needs no configuration, follows membership changes (a peer's
// gRPC address is its transport address, looked up through Options.Addr on
// every (re)connection), and puts all three transports on the same path,
// so a WAN-like delay on the peer link applies to each alike.
//
// # Authentication
//
// As the TCP handshake does, every call names the cluster, the sender and
// the node it meant to reach. Deliver checks them on each message,
// Subscribe once when the stream opens; a peer from another cluster, an
// unknown node id or a mis-wired address is refused with PERMISSION_DENIED
// and a reason, logged at error level on both sides. A subscriber also
// checks the response header in which the sender names its cluster and node
// id, so that a subscriber that dialled the wrong node notices too.
// There is no TLS and no password, as with the TCP transport.
//
// # Loss, queues, ordering
//
// Send never blocks: each peer has a bounded queue per mode (QueueLen,
// default 4096); a full queue drops the message and counts it. Loss is
// allowed, as the automata tolerate it.
//
// Unary: one goroutine per peer takes messages from the queue in order and
// makes one call at a time, so messages to a peer arrive in the order sent
// (FIFO, no reordering). A failed call (peer down, timeout, refusal) loses
// that message, counted as dropped, and the next call waits a backoff (from
// MinBackoff doubling to MaxBackoff, with jitter) so a dead peer costs no
// busy loop. One call per round trip caps the rate per peer at 1/RTT; that
// is the seed's method call, and what Table III.1 measures.
//
// Stream: the queue for a receiver is drained by the Subscribe call that
// receiver holds open, in order, so messages arrive FIFO while it stays
// open. Messages queue while no subscription is open (up to QueueLen) and
// flow once the receiver (re)subscribes; a message whose Send on the stream
// fails is lost. A new subscription from the same receiver (after its
// restart) replaces the old one. The subscriber reconnects with the same
// backoff, and reconciles its set of senders with Options.Peers every
// Resync, so members added or removed at run time are followed.
//
// gRPC's own connection backoff is bounded by MinBackoff and MaxBackoff (its
// default grows to two minutes, far too slow after a peer restarts), and
// keepalive pings (every 10 s, 5 s timeout) detect a vanished peer on an
// idle connection. Messages are limited to transport.DefaultMaxFrame.
package grpcpeer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/transport"
	"github.com/synod-dev/synod/transport/grpcpeer/peerpb"
)

// Options configure a Transport.
type Options struct {
	Cluster string
	Self    automaton.NodeID
	// Listener serves the peer service (the gRPC side of
	// transport.SplitListener, or a listener of its own). The transport
	// closes it. Nil: the transport only sends (and subscribes).
	Listener net.Listener
	// Addr returns peer id's address, or false for a node that is not a
	// peer. Required. The node passes the TCP transport's PeerAddr.
	Addr func(automaton.NodeID) (string, bool)
	// Peers lists the peers this node subscribes to in stream mode
	// (required when Stream is set). The node passes the TCP transport's Peers.
	Peers   func() []automaton.NodeID
	Handler transport.Handler
	Logger  *slog.Logger
	// Stream subscribes to every peer, so that peers can push messages to
	// this node in stream mode. Set it when some namespace uses grpc-stream.
	Stream bool

	QueueLen    int           // per peer and mode, default 4096 messages
	MaxMsg      int           // default transport.DefaultMaxFrame
	MinBackoff  time.Duration // default 50ms
	MaxBackoff  time.Duration // default 2s
	DialTimeout time.Duration // default 2s
	CallTimeout time.Duration // one Deliver call, default 10s
	Resync      time.Duration // subscriptions reconciled with Peers, default 1s
}

// Errors returned by Send.
var (
	ErrDropped     = transport.ErrDropped
	ErrUnknownPeer = transport.ErrUnknownPeer
	ErrClosed      = transport.ErrClosed
)

// Metadata keys of a Subscribe response header: the sender's cluster and
// node id, checked by the subscriber.
const (
	MDCluster = "synod-peer-cluster"
	MDNode    = "synod-peer-node"
)

// Transport is one node's gRPC peer endpoint: a server for the peer service
// and a client of every peer's. Unary and Stream are its two senders.
type Transport struct {
	peerpb.UnimplementedPeerServer

	o      Options
	log    *slog.Logger
	srv    *grpc.Server
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	conns  map[automaton.NodeID]*conn
	unary  map[automaton.NodeID]*unaryPeer
	stream map[automaton.NodeID]*streamPeer
	subs   map[automaton.NodeID]*subscriber
}

type conn struct {
	addr string
	cc   *grpc.ClientConn
}

// counters are one peer's traffic in one mode.
type counters struct {
	sent, dropped, received atomic.Uint64
	connected               atomic.Bool
}

func (c *counters) stats() transport.PeerStats {
	return transport.PeerStats{Sent: c.sent.Load(), Dropped: c.dropped.Load(), Received: c.received.Load(), Connected: c.connected.Load()}
}

// New validates o, starts serving on o.Listener and, with o.Stream,
// subscribes to every peer.
func New(o Options) (*Transport, error) {
	if o.Cluster == "" || o.Self == "" {
		return nil, errors.New("grpcpeer: Cluster and Self are required")
	}
	if o.Handler == nil || o.Addr == nil {
		return nil, errors.New("grpcpeer: Handler and Addr are required")
	}
	if o.Stream && o.Peers == nil {
		return nil, errors.New("grpcpeer: Peers is required with Stream")
	}
	if o.QueueLen <= 0 {
		o.QueueLen = 4096
	}
	if o.MaxMsg <= 0 {
		o.MaxMsg = transport.DefaultMaxFrame
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 50 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(2*time.Second, o.MinBackoff)
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 2 * time.Second
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 10 * time.Second
	}
	if o.Resync <= 0 {
		o.Resync = time.Second
	}
	lg := o.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	t := &Transport{
		o: o, log: lg.With("component", "grpcpeer"),
		conns:  map[automaton.NodeID]*conn{},
		unary:  map[automaton.NodeID]*unaryPeer{},
		stream: map[automaton.NodeID]*streamPeer{},
		subs:   map[automaton.NodeID]*subscriber{},
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	if o.Listener != nil {
		t.srv = grpc.NewServer(
			grpc.MaxRecvMsgSize(o.MaxMsg+1024),
			grpc.MaxSendMsgSize(o.MaxMsg+1024),
			grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
			grpc.KeepaliveParams(keepalive.ServerParameters{Time: 10 * time.Second, Timeout: 5 * time.Second}),
		)
		peerpb.RegisterPeerServer(t.srv, t)
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			if err := t.srv.Serve(o.Listener); err != nil && t.ctx.Err() == nil {
				t.log.Error("gRPC peer service failed", "err", err)
			}
		}()
	}
	if o.Stream {
		t.wg.Add(1)
		go t.resyncLoop()
	}
	return t, nil
}

// Addr is the listening address (nil without a listener).
func (t *Transport) Addr() net.Addr {
	if t.o.Listener == nil {
		return nil
	}
	return t.o.Listener.Addr()
}

// Unary is the sender of mode grpc-unary.
func (t *Transport) Unary() transport.Sender { return unarySender{t} }

// Stream is the sender of mode grpc-stream.
func (t *Transport) Stream() transport.Sender { return streamSender{t} }

// Stats returns per-peer counters of each mode. In unary mode Received
// counts Deliver calls served for the peer; in stream mode Received counts
// messages received on this node's subscription to the peer, Sent the
// messages pushed to the peer's subscription, and Connected whether the
// peer's subscription to this node is open.
func (t *Transport) Stats() (unary, stream map[automaton.NodeID]transport.PeerStats) {
	t.mu.Lock()
	defer t.mu.Unlock()
	unary = map[automaton.NodeID]transport.PeerStats{}
	stream = map[automaton.NodeID]transport.PeerStats{}
	for id, p := range t.unary {
		unary[id] = p.c.stats()
	}
	for id, p := range t.stream {
		stream[id] = p.c.stats()
	}
	for id, s := range t.subs {
		st := stream[id]
		st.Received = s.received.Load()
		stream[id] = st
	}
	return unary, stream
}

// Close stops the server and every peer goroutine and closes connections.
// Queued messages are discarded.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	t.cancel()
	if t.srv != nil {
		t.srv.Stop() // closes the listener and every server stream
	}
	t.wg.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.conns {
		c.cc.Close()
	}
	return nil
}

// client returns the connection to peer id, created (lazily connecting) on
// first use and replaced when the peer's address changed.
func (t *Transport) client(id automaton.NodeID) (peerpb.PeerClient, error) {
	addr, ok := t.o.Addr(id)
	if !ok || id == t.o.Self {
		return nil, fmt.Errorf("%w %q", ErrUnknownPeer, id)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, ErrClosed
	}
	if c, ok := t.conns[id]; ok {
		if c.addr == addr {
			return peerpb.NewPeerClient(c.cc), nil
		}
		c.cc.Close()
		delete(t.conns, id)
	}
	bo := backoff.DefaultConfig
	bo.BaseDelay, bo.MaxDelay = t.o.MinBackoff, t.o.MaxBackoff
	cc, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: t.o.DialTimeout}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(t.o.MaxMsg+1024), grpc.MaxCallSendMsgSize(t.o.MaxMsg+1024)),
	)
	if err != nil {
		return nil, fmt.Errorf("grpcpeer: client for %s at %s: %w", id, addr, err)
	}
	t.conns[id] = &conn{addr: addr, cc: cc}
	return peerpb.NewPeerClient(cc), nil
}

// check validates the identity a caller claims and returns a refusal
// reason, or "" (the TCP transport's handshake rules).
func (t *Transport) check(cluster, from, to string) string {
	if cluster != t.o.Cluster {
		return fmt.Sprintf("cluster mismatch: peer is in cluster %q, this node (%s) is in cluster %q", cluster, t.o.Self, t.o.Cluster)
	}
	if automaton.NodeID(to) != t.o.Self {
		return fmt.Sprintf("wrong node: peer %q meant to reach node %q, but this is node %q", from, to, t.o.Self)
	}
	if _, ok := t.o.Addr(automaton.NodeID(from)); !ok || automaton.NodeID(from) == t.o.Self {
		return fmt.Sprintf("unknown node id %q: not a member of cluster %q as configured on node %s", from, t.o.Cluster, t.o.Self)
	}
	return ""
}

func (t *Transport) refuse(call, remote, from, reason string) error {
	t.log.Error("refused peer "+call, "remote", remote, "peer", from, "reason", reason)
	return status.Error(codes.PermissionDenied, reason)
}

// failures logs a peer's connection problems once per distinct error, so
// a peer that stays down does not flood the log.
type failures struct {
	last   string
	everUp bool
}

func (f *failures) note(log *slog.Logger, what string, id automaton.NodeID, err error) {
	s := err.Error()
	if s == f.last {
		return
	}
	f.last = s
	if status.Code(err) == codes.PermissionDenied {
		log.Error("peer refused our "+what, "peer", id, "reason", status.Convert(err).Message())
		return
	}
	if !f.everUp {
		log.Info("peer not reachable yet, retrying", "peer", id, "mode", what, "err", err)
		return
	}
	log.Warn("peer connection down, retrying", "peer", id, "mode", what, "err", err)
}

func (f *failures) up(log *slog.Logger, what string, id automaton.NodeID) {
	if f.last != "" && f.everUp {
		log.Info("peer connection restored", "peer", id, "mode", what)
	}
	f.last = ""
	f.everUp = true
}

// sleep waits d with full jitter in [d/2, d], or until ctx ends.
func sleep(ctx context.Context, d time.Duration) bool {
	d = d/2 + rand.N(d/2+1)
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// remoteOf is a server call's remote address, for logs.
func remoteOf(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return "?"
}
