// Package transport carries automaton messages between Synod nodes over TCP.
//
// # Design
//
// Every node listens on its peer address. For each other member it keeps one
// outgoing connection, owned by a writer goroutine that is fed by a bounded
// queue. Messages therefore flow one way on a connection: node A's messages to
// B travel on the connection A dialed, and B's replies on the one B dialed.
// This keeps each connection's state machine trivial (no tie-breaking between
// simultaneous dials) and makes per-destination ordering FIFO while connected.
//
// Loss is allowed. The automata tolerate lost, duplicated and reordered
// messages (see package automaton), so the transport never blocks a sender:
// Send drops the message and counts it when the destination's queue is full,
// and frames buffered on a connection that fails are lost. The writer batches
// queued frames through a bufio.Writer and flushes when the queue is empty, so
// a burst costs one write system call. When nothing is queued nor being
// written, Send writes the frame itself (inline write, below), so that a
// message to an idle peer costs no goroutine hand-off. After a connection fails the writer
// redials with capped exponential backoff (with jitter).
//
// # Wire format
//
// A new connection starts with a handshake: "SYND", a version byte (2), the
// cluster name, the sender's node id and the receiver's node id
// (uvarint length-prefixed strings), and the sender's 32-byte random nonce.
// The acceptor answers "SYND", version, and a status byte: 1 refused,
// followed by a reason; 2 challenge, followed by its own nonce. It refuses
// a peer from another cluster, an unknown node id, one that meant to reach a
// different node (a mis-wired address), and a nonce it has already seen (a
// replayed handshake), so configuration mistakes show up in the logs of both
// sides instead of as silent message loss. After a challenge the dialer sends
// its 32-byte proof, an HMAC with the cluster secret over both nonces and the
// names, and the acceptor answers 0 accepted with its own proof, or 1
// refused (auth.go). The secret never crosses the wire. With TLS configured
// (Options.TLS, tls.go) all of this runs inside mutual TLS, and each side
// also checks that the other's certificate names the node id it claims.
// Refusals and garbage are logged at most once per Options.LogEvery for each
// kind and remote host, so a flood costs one line.
//
// Then frames follow: a 4-byte big-endian payload length (at most MaxFrame,
// 64 MiB by default), and the payload: the namespace name (uvarint length +
// bytes) and the automaton's message bytes up to the end of the frame. A
// decoding error (garbage on the peer port, a frame over the limit, a bad
// handshake) closes that one connection and is logged; the node is unaffected.
// Both decoders are fuzzed.
//
// # Other transports
//
// This transport is the default, the seed's raw socket (the Grid Services thesis, Table
// III.1 "Socket"). A namespace may instead send through package
// transport/grpcpeer, by one gRPC unary call per message (grpc-unary, the
// seed's method call) or down a server-streamed gRPC call the receiver holds
// open (grpc-stream, the seed's push notification); config.Namespace's
// transport field chooses. Every one is a Sender (peer.go) with the same
// contract: never block, drop and count when full, FIFO per peer while
// connected. The gRPC peer service needs no address of its own:
// SplitListener (mux.go) shares the peer port, handing connections that open
// with HTTP/2's client preface to gRPC and every other to this transport,
// whose behaviour is unchanged (the node splits the port only when some
// namespace uses gRPC).
package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/bits"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/internal/ratelog"
)

// Handler receives a message from peer from for namespace ns. msg is freshly
// allocated and owned by the handler. It is called from the connection's
// reader goroutine: a handler that blocks applies TCP back-pressure to that
// one peer.
type Handler func(from automaton.NodeID, ns string, msg []byte)

// Options configure a Transport.
type Options struct {
	Cluster string
	Self    automaton.NodeID
	// Peers maps every other member to its peer address. An entry for Self is ignored.
	Peers map[automaton.NodeID]string
	// Listener, when set, is used instead of listening on ListenAddr (tests
	// pass a ":0" listener). The transport closes it.
	Listener   net.Listener
	ListenAddr string
	Handler    Handler
	// Idle, when set, is called by a connection's reader goroutine once it
	// has handed over every frame it has read (its buffer is empty: the
	// next frame needs another read), and when the reader ends: a handler
	// that holds back the wake-ups of what it was handed wakes them then,
	// after the frames that arrived together (node: inline passes).
	Idle   func(from automaton.NodeID)
	Logger *slog.Logger

	QueueLen         int           // per-peer queue, default 4096 frames
	QueueBytes       int64         // per-peer queued bytes, default DefaultQueueBytes
	MaxFrame         int           // default DefaultMaxFrame
	MinBackoff       time.Duration // default 50ms
	MaxBackoff       time.Duration // default 2s
	DialTimeout      time.Duration // default 2s
	HandshakeTimeout time.Duration // default 5s
	WriteTimeout     time.Duration // default 10s

	// Secret is the cluster secret both sides of a peer handshake prove
	// they know (auth.go). Empty authenticates nothing (New warns).
	Secret string
	// TLS, when set, makes every peer connection mutual TLS (tls.go): it
	// holds this node's certificate and the cluster CA as RootCAs.
	TLS *tls.Config
	// TLSSource, when set, returns the current TLS configuration (of the
	// same form as TLS), read at every handshake, so that certificates
	// replaced on disk and reloaded (certs.Live, on SIGHUP) serve new
	// connections while established ones keep theirs. TLS must then hold
	// the configuration at start.
	TLSSource func() *tls.Config
	// LogEvery bounds how often one kind of refused or bad incoming
	// connection from one host is logged (default 10s).
	LogEvery time.Duration
}

// DefaultQueueBytes bounds the bytes queued for one peer unless
// Options.QueueBytes says otherwise: with QueueLen, a peer that does not
// drain costs at most this much memory; further messages are dropped.
const DefaultQueueBytes = 64 << 20

// PeerStats counts one peer's traffic.
type PeerStats struct {
	Sent   uint64 // frames written to a connection
	Writes uint64 // writes to a connection: an inline frame, or a batch of queued frames flushed together
	// Queued counts hand-offs to the peer's writer goroutine: entries
	// (a frame, or SendFrames' frames together) it took from the
	// sender through its queue, and wake-ups to write the rest of an
	// inline write the socket took only part of. An inline write is not
	// one (issue 28 item 5: hand-offs per request).
	Queued    uint64
	Dropped   uint64 // frames dropped (queue full, or lost with a failed connection)
	Received  uint64 // frames received from this peer
	Connected bool   // the outgoing connection is up
}

// Errors returned by Send.
var (
	ErrDropped     = errors.New("transport: queue full, message dropped")
	ErrUnknownPeer = errors.New("transport: unknown peer")
	ErrClosed      = errors.New("transport: closed")
)

// Transport is one node's peer network endpoint.
type Transport struct {
	o     Options
	log   *slog.Logger
	ln    net.Listener
	pmu   sync.RWMutex // guards peers (peers.go adds and removes at run time)
	peers map[automaton.NodeID]*peer

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // accepted connections
	closed bool

	srvTLS *tls.Config      // acceptor's TLS configuration, nil without TLS (tls.go)
	rawIO  bool             // plaintext sockets by raw read(2)/write(2) (rawio.go), from rawIO at New
	limit  *ratelog.Limiter // refusals and garbage (auth.go)
	nonces *nonceCache      // dialer nonces seen (auth.go)
}

type peer struct {
	t      *Transport
	id     automaton.NodeID
	addr   string
	q      chan *frame
	ctx    context.Context // ends with the transport, or when the peer is removed
	cancel context.CancelFunc

	sent, dropped, received, writes atomic.Uint64
	handoffs                        atomic.Uint64 // PeerStats.Queued
	qbytes                          atomic.Int64  // bytes of the frames in q
	connected                       atomic.Bool

	// Inline write (Send, tryInline): wmu is held by whoever writes to the
	// connection, the writer goroutine for a batch (until its buffer is
	// flushed) or a Send writing one frame itself. queued counts the frames
	// in q; the writer takes them out under wmu, so under wmu queued == 0
	// means nothing waits to be written before a new frame.
	wmu    sync.Mutex
	raw    syscall.RawConn // under wmu: the connection, for inline writes; nil when down or TLS
	wconn  net.Conn        // under wmu: raw's connection (tryInline clears the writer's stale deadline on it)
	carry  *frame          // under wmu: the rest of a frame an inline write began; written first
	kick   chan struct{}   // wakes the writer for carry
	queued atomic.Int64
	// The inline write in progress (under wmu): the frame, what the socket
	// took and the error; iwFn, made once per peer, is what RawConn.Write
	// calls, so that an inline write allocates nothing.
	iwB     []byte
	iwN     int
	iwErr   error
	iwFn    func(fd uintptr) bool
	lastErr string // writer goroutine only
	everUp  bool   // writer goroutine only
}

// New validates opts, listens, and starts the accept loop and one writer per peer.
func New(o Options) (*Transport, error) {
	if o.Cluster == "" || o.Self == "" {
		return nil, errors.New("transport: Cluster and Self are required")
	}
	if o.Handler == nil {
		return nil, errors.New("transport: Handler is required")
	}
	if o.QueueLen <= 0 {
		o.QueueLen = 4096
	}
	if o.MaxFrame <= 0 {
		o.MaxFrame = DefaultMaxFrame
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = DefaultQueueBytes
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
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 5 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.LogEvery <= 0 {
		o.LogEvery = 10 * time.Second
	}
	lg := o.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	t := &Transport{o: o, log: lg.With("component", "transport"), peers: map[automaton.NodeID]*peer{}, conns: map[net.Conn]struct{}{},
		limit: ratelog.New(o.LogEvery), nonces: newNonceCache(1 << 14), rawIO: rawIO}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	if err := t.tlsConfigs(); err != nil {
		t.cancel()
		return nil, err
	}
	if o.Secret == "" && o.TLS == nil {
		t.log.Warn("peer connections are not authenticated: anyone who can reach the peer port can join the cluster; set secret in the cluster file (docs/SECURITY.md)")
	}
	for id, addr := range o.Peers {
		if id == o.Self {
			continue
		}
		if id == "" || addr == "" {
			t.cancel()
			return nil, fmt.Errorf("transport: peer %q has an empty id or address", id)
		}
		t.peers[id] = t.newPeer(id, addr)
	}
	t.ln = o.Listener
	if t.ln == nil {
		ln, err := net.Listen("tcp", o.ListenAddr)
		if err != nil {
			t.cancel()
			return nil, fmt.Errorf("transport: listen on peer address: %w", err)
		}
		t.ln = ln
	}
	// Every peer is whole (its context set) before the accept loop can
	// hand a connection from it to serve, which reads p.ctx.
	t.wg.Add(1 + len(t.peers))
	for _, p := range t.peers {
		go p.run()
	}
	go t.acceptLoop()
	return t, nil
}

// newPeer makes peer id at addr, with its queue, its wake-up channel and a
// context under the transport's. t.ctx must be set.
func (t *Transport) newPeer(id automaton.NodeID, addr string) *peer {
	p := &peer{t: t, id: id, addr: addr, q: make(chan *frame, t.o.QueueLen), kick: make(chan struct{}, 1)}
	p.ctx, p.cancel = context.WithCancel(t.ctx)
	return p
}

// Addr is the listening address.
func (t *Transport) Addr() net.Addr { return t.ln.Addr() }

// Peers lists the other members, sorted.
func (t *Transport) Peers() []automaton.NodeID {
	t.pmu.RLock()
	defer t.pmu.RUnlock()
	out := make([]automaton.NodeID, 0, len(t.peers))
	for id := range t.peers {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Send queues msg for namespace ns to peer to. It never blocks. It returns
// ErrDropped when the peer's queue is full, in frames (QueueLen) or in bytes
// (QueueBytes) (the drop is counted: protocols tolerate loss), and an error
// for an unknown peer, an oversized message or a closed transport. msg is
// copied; the caller may reuse it.
func (t *Transport) Send(to automaton.NodeID, ns string, msg []byte) error {
	return t.send(to, ns, msg, true)
}

// SendQueued is Send without the inline write: the frame always goes
// through the peer's queue to its writer goroutine. A busy sender uses it
// (the node's loop with more inputs waiting): its frames then leave in
// batches, one write system call for many, from the writer, instead of one
// system call each on the sender's goroutine.
func (t *Transport) SendQueued(to automaton.NodeID, ns string, msg []byte) error {
	return t.send(to, ns, msg, false)
}

func (t *Transport) send(to automaton.NodeID, ns string, msg []byte, inline bool) error {
	p, ok := t.peer(to)
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownPeer, to)
	}
	if ns == "" || len(ns) > maxName {
		return fmt.Errorf("transport: bad namespace name %q", ns)
	}
	if FrameSize(ns, msg)-4 > t.o.MaxFrame {
		p.dropped.Add(1)
		return fmt.Errorf("%w: message of %d bytes to %s (limit %d)", ErrFrameTooLarge, len(msg), to, t.o.MaxFrame)
	}
	if t.ctx.Err() != nil {
		return ErrClosed
	}
	f := newFrame(FrameSize(ns, msg))
	f.b = AppendFrame(f.b, ns, msg)
	return p.enqueue(f, inline)
}

// SendFrames sends n messages to peer to, already encoded as consecutive
// frames (AppendFrame), in order, in one write system call when the
// connection is idle (else through the peer's queue, as one entry): the
// runtime's per-destination coalescing of what one loop turn sends
// (issue 28). frames is copied; the caller may reuse it. A frame over
// MaxFrame refuses the whole batch (ErrFrameTooLarge, counted as n drops);
// a full queue drops it whole (ErrDropped).
func (t *Transport) SendFrames(to automaton.NodeID, frames []byte, n int) error {
	p, err := t.checkFrames(to, frames, n)
	if err != nil {
		return err
	}
	f := newFrame(len(frames))
	f.b = append(f.b, frames...)
	f.n = n
	return p.enqueue(f, true)
}

// checkFrames checks SendFrames' arguments and returns the peer: a known
// peer, whole frames none over MaxFrame (else n drops counted), an open
// transport.
func (t *Transport) checkFrames(to automaton.NodeID, frames []byte, n int) (*peer, error) {
	p, ok := t.peer(to)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownPeer, to)
	}
	for rest := frames; len(rest) > 0; {
		if len(rest) < 4 {
			return nil, fmt.Errorf("transport: SendFrames: truncated frame")
		}
		size := int(binary.BigEndian.Uint32(rest))
		if size > t.o.MaxFrame || size > len(rest)-4 {
			p.dropped.Add(uint64(n))
			return nil, fmt.Errorf("%w: frame of %d bytes to %s (limit %d)", ErrFrameTooLarge, size, to, t.o.MaxFrame)
		}
		rest = rest[4+size:]
	}
	if t.ctx.Err() != nil {
		return nil, ErrClosed
	}
	return p, nil
}

// SendFramesOwned is SendFrames that takes frames over instead of copying
// it: the caller gives up frames (it must not read or write it after the
// call) and gets back spare, an empty buffer to append its next frames to.
// spare comes from the pool that frames' buffer returns to once written
// (framePools: its capacity class, of at least half its capacity), so that
// a sender that swaps its buffer for spare at every send takes from a
// class what it gives back to it: it copies nothing and, in the steady
// state, allocates nothing, however large its frames (a pipelined
// Multi-Paxos leader's per-turn Accept frames were copied once more per
// peer and, over 64 KiB, allocated afresh: session 56, issue 28). With
// none pooled (the first sends, or frames still being written), spare is
// a new buffer with room for as many bytes as frames holds, and at least
// minPooledFrame. When the frames are refused before being taken (an
// unknown peer, a frame over MaxFrame, a closed transport), spare is
// frames emptied: the caller keeps its buffer.
func (t *Transport) SendFramesOwned(to automaton.NodeID, frames []byte, n int) (spare []byte, err error) {
	p, err := t.checkFrames(to, frames, n)
	if err != nil {
		return frames[:0], err
	}
	var f *frame
	if c := cap(frames); c >= minPooledFrame && c <= maxPooledFrame {
		f, _ = framePools[fullClass(c)].Get().(*frame)
	}
	if f == nil {
		f = newFrame(len(frames))
	}
	spare = f.b[:0] // f, emptied of its buffer, carries frames
	f.b, f.n = frames, n
	return spare, p.enqueue(f, true)
}

// enqueue writes f inline when inline and the connection is idle, else
// queues it for the writer; a full queue drops it (counted).
func (p *peer) enqueue(f *frame, inline bool) error {
	if inline && p.tryInline(f) {
		return nil
	}
	size := int64(len(f.b))
	if p.qbytes.Add(size) > p.t.o.QueueBytes {
		p.qbytes.Add(-size)
		p.dropped.Add(uint64(f.n))
		f.free()
		return ErrDropped
	}
	p.queued.Add(1)
	select {
	case p.q <- f:
		p.handoffs.Add(1)
		return nil
	default:
		p.queued.Add(-1)
		p.qbytes.Add(-size)
		p.dropped.Add(uint64(f.n))
		f.free()
		return ErrDropped
	}
}

// tryInline writes a frame to the peer's connection on the caller's
// goroutine when the connection is up, nothing is queued for it and the
// writer is not writing: one non-blocking write system call instead of
// waking the writer goroutine (issue 18: a hand-off per message on a
// put's critical path, two to four per put). It never waits: if the
// writer holds the connection, or the socket buffer takes only part of the
// frame, the writer goroutine writes the rest (carry) before anything else.
// It reports whether it took the frame; false leaves it to the queue.
func (p *peer) tryInline(f *frame) bool {
	if p.queued.Load() != 0 || !p.wmu.TryLock() {
		return false
	}
	defer p.wmu.Unlock()
	if p.raw == nil || p.carry != nil || p.queued.Load() != 0 {
		return false
	}
	p.iwB, p.iwN, p.iwErr = f.b, 0, nil
	if p.iwFn == nil {
		p.iwFn = p.writeOnce
	}
	err := p.raw.Write(p.iwFn)
	if err != nil && p.iwN == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
		// The writer's deadline, set for its last write and left to
		// lapse (clearing it after each write would take the runtime
		// timer out of its heap, and the next write's deadline would put
		// it back and wake an idle thread for the netpoller: a wake-up
		// per writer write). RawConn.Write refuses to write past it, and
		// this used to be taken for a failed connection: the frame
		// dropped and inline writes off until a reconnect, every later
		// message through the writer (session 56). Nothing was written:
		// clear it (the writer is not writing: wmu) and write.
		p.wconn.SetWriteDeadline(time.Time{})
		err = p.raw.Write(p.iwFn)
	}
	if err != nil {
		p.iwErr = err
	}
	p.writes.Add(1)
	n, werr := max(p.iwN, 0), p.iwErr
	p.iwB, p.iwErr = nil, nil
	if n == len(f.b) {
		p.sent.Add(uint64(f.n))
		f.free()
		return true
	}
	if werr != nil && werr != syscall.EAGAIN {
		// The connection failed: the writer finds out at its next write
		// and reconnects; the frame is lost with the connection.
		p.dropped.Add(uint64(f.n))
		f.free()
		p.raw = nil
		return true
	}
	// The socket took n bytes: the writer writes the rest before any
	// other frame.
	rest := copy(f.b, f.b[n:])
	f.b = f.b[:rest]
	p.carry = f
	p.handoffs.Add(1)
	select {
	case p.kick <- struct{}{}:
	default:
	}
	return true
}

// frame is one encoded frame queued for a peer, or n consecutive frames
// (SendFrames). Frames are recycled through framePools once the writer has
// copied them into its buffer, so a peer message costs no allocation in the
// steady state (issue 18).
type frame struct {
	b []byte
	n int // the messages in b
}

// Frame buffers are pooled by size class: class k holds frames whose
// buffer has room for at least minPooledFrame<<k bytes, so a frame taken
// from class k fits any message of up to that size. A pipelined Multi-Paxos
// leader's Accepts carry several instances, 50-100 KiB each; with one pool
// of every size they were allocated afresh (and zeroed) each time: a pool's
// frame was too small, or too large to be kept (session 56, issue 28).
// maxPooledFrame bounds the frames kept for reuse: a rare huge message (a
// snapshot in a catch-up) is left to the garbage collector. The pools hold
// only what the garbage collector leaves them (sync.Pool), so frames kept
// for a burst are freed after it.
const (
	minPooledFrame = 512
	maxPooledFrame = 1 << 20
	frameClasses   = 12 // minPooledFrame<<(frameClasses-1) == maxPooledFrame
)

var framePools [frameClasses]sync.Pool

// frameClass is the class a new frame of size bytes comes from: the
// smallest whose frames all have room for it; frameClasses: none.
func frameClass(size int) int {
	if size <= minPooledFrame {
		return 0
	}
	return bits.Len(uint(size-1)) - bits.Len(minPooledFrame-1)
}

// fullClass is the largest class whose every size a buffer of capacity c
// (minPooledFrame..maxPooledFrame) holds: minPooledFrame<<k <= c.
func fullClass(c int) int { return bits.Len(uint(c)) - bits.Len(minPooledFrame) }

// newFrame returns a frame with room for size bytes, empty, one message.
func newFrame(size int) *frame {
	k := frameClass(size)
	var f *frame
	if k < frameClasses {
		f, _ = framePools[k].Get().(*frame)
	}
	if f == nil {
		f = new(frame)
		if k < frameClasses {
			size = minPooledFrame << k // a whole class: any frame of it fits
		}
		f.b = make([]byte, 0, size)
	}
	f.b = f.b[:0]
	f.n = 1
	return f
}

// free returns f to the pool of the largest class its buffer fills.
func (f *frame) free() {
	c := cap(f.b)
	if c < minPooledFrame || c > maxPooledFrame {
		return
	}
	framePools[fullClass(c)].Put(f)
}

// Stats returns per-peer counters.
func (t *Transport) Stats() map[automaton.NodeID]PeerStats {
	t.pmu.RLock()
	defer t.pmu.RUnlock()
	out := make(map[automaton.NodeID]PeerStats, len(t.peers))
	for id, p := range t.peers {
		out[id] = PeerStats{Sent: p.sent.Load(), Writes: p.writes.Load(), Dropped: p.dropped.Load(), Received: p.received.Load(), Connected: p.connected.Load(), Queued: p.handoffs.Load()}
	}
	return out
}

// Close stops accepting, closes every connection and waits for the
// transport's goroutines. Queued messages are discarded.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.cancel()
	err := t.ln.Close()
	t.wg.Wait()
	return err
}

// ---- accepting side ----

func (t *Transport) acceptLoop() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if t.ctx.Err() != nil {
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and friends: keep serving after a pause.
			t.log.Error("accept on peer port failed", "err", err)
			select {
			case <-time.After(100 * time.Millisecond):
			case <-t.ctx.Done():
				return
			}
			continue
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			c.Close()
			return
		}
		t.conns[c] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		go t.serve(c)
	}
}

// check validates a handshake and returns a refusal reason, or "".
func (t *Transport) check(h Handshake) string {
	if h.Cluster != t.o.Cluster {
		return fmt.Sprintf("cluster mismatch: peer is in cluster %q, this node (%s) is in cluster %q", h.Cluster, t.o.Self, t.o.Cluster)
	}
	if automaton.NodeID(h.To) != t.o.Self {
		return fmt.Sprintf("wrong node: peer %q meant to reach node %q, but this is node %q", h.From, h.To, t.o.Self)
	}
	if _, ok := t.peer(automaton.NodeID(h.From)); !ok {
		return fmt.Sprintf("unknown node id %q: not a member of cluster %q as configured on node %s", h.From, t.o.Cluster, t.o.Self)
	}
	return ""
}

func (t *Transport) serve(raw net.Conn) {
	defer t.wg.Done()
	defer func() {
		raw.Close()
		t.mu.Lock()
		delete(t.conns, raw)
		t.mu.Unlock()
	}()
	c := raw
	remote := c.RemoteAddr().String()
	c.SetDeadline(time.Now().Add(t.o.HandshakeTimeout))
	var peerCert *x509.Certificate
	if t.srvTLS != nil {
		tc, err := t.acceptTLS(c)
		if err != nil {
			if t.ctx.Err() == nil {
				t.logRefusal(true, "tls", remote, "refused peer connection: TLS handshake failed", "err", err)
			}
			return
		}
		c, peerCert = tc, tc.ConnectionState().PeerCertificates[0]
	}
	sr := &sockReader{c: c}
	br := bufio.NewReaderSize(sr, 64<<10)
	h, err := ReadHandshake(br)
	if err != nil {
		if t.ctx.Err() == nil {
			if errors.Is(err, ErrVersion) {
				c.Write(AppendAck(nil, err.Error()))
			}
			t.logRefusal(false, "handshake", remote, "bad handshake on peer port, closing connection", "err", err)
		}
		return
	}
	reason := t.check(h)
	kind := "names"
	if reason == "" && peerCert != nil {
		if err := t.checkIdentity(peerCert, h.From); err != nil {
			reason, kind = err.Error(), "cert"
		}
	}
	if reason == "" && !t.nonces.add(h.Nonce) {
		reason, kind = fmt.Sprintf("replayed handshake: node %q's nonce was already used", h.From), "replay"
	}
	if reason == "" {
		kind = "auth"
		if reason, err = t.challenge(c, br, h); err != nil {
			if t.ctx.Err() == nil {
				t.logRefusal(false, "handshake", remote, "peer handshake failed, closing connection", "peer", h.From, "err", err)
			}
			return
		}
	}
	if reason != "" {
		t.logRefusal(true, kind, remote, "refused peer connection", "peer", h.From, "reason", reason)
		c.Write(AppendAck(nil, reason))
		return
	}
	c.SetDeadline(time.Time{})
	p, ok := t.peer(automaton.NodeID(h.From))
	if !ok {
		return // removed meanwhile
	}
	if t.srvTLS == nil {
		sr.raw(t.rawConnOf(c)) // frames by raw read(2): rawio.go
	}
	t.log.Debug("peer connected", "peer", h.From, "remote", remote)
	if t.o.Idle != nil {
		defer t.o.Idle(p.id)
	}
	ns := "" // the previous frame's namespace, reused while it repeats
	for {
		payload, err := ReadFrame(br, t.o.MaxFrame)
		if err != nil {
			switch {
			case t.ctx.Err() != nil:
			case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
				t.log.Debug("peer disconnected", "peer", h.From, "remote", remote)
			default:
				t.logRefusal(false, "frame", remote, "bad frame from peer, closing connection", "peer", h.From, "err", err)
			}
			return
		}
		if p.ctx.Err() != nil {
			return // the peer was removed (peers.go)
		}
		nsb, msg, err := splitPayload(payload)
		if err != nil {
			t.logRefusal(false, "frame", remote, "bad frame from peer, closing connection", "peer", h.From, "err", err)
			return
		}
		if string(nsb) != ns {
			ns = string(nsb)
		}
		p.received.Add(1)
		t.o.Handler(p.id, ns, msg)
		if t.o.Idle != nil && br.Buffered() == 0 {
			t.o.Idle(p.id)
		}
	}
}

// writeOnce is write(2) of p.iwB on the non-blocking descriptor, retried
// after EINTR only: it never waits for the socket. Under wmu. With raw
// I/O (rawio.go) it is made by RawSyscall.
func (p *peer) writeOnce(fd uintptr) bool {
	if p.t.rawIO {
		n, e := rawWrite(fd, p.iwB)
		p.iwN, p.iwErr = n, nil
		if e != 0 {
			p.iwN, p.iwErr = -1, e
		}
		return true
	}
	for {
		p.iwN, p.iwErr = syscall.Write(int(fd), p.iwB)
		if p.iwErr != syscall.EINTR {
			return true
		}
	}
}

// ---- dialing side ----

func (p *peer) run() {
	t := p.t
	defer t.wg.Done()
	backoff := t.o.MinBackoff
	for {
		c, err := p.dial()
		if err != nil {
			if p.ctx.Err() != nil {
				return
			}
			p.noteFailure(err)
			// Full jitter in [backoff/2, backoff].
			d := backoff/2 + rand.N(backoff/2+1)
			select {
			case <-time.After(d):
			case <-p.ctx.Done():
				return
			}
			backoff = min(2*backoff, t.o.MaxBackoff)
			continue
		}
		backoff = t.o.MinBackoff
		if p.lastErr != "" {
			t.log.Info("peer connection restored", "peer", p.id, "addr", p.addr)
		} else {
			t.log.Debug("connected to peer", "peer", p.id, "addr", p.addr)
		}
		p.lastErr = ""
		p.everUp = true
		p.connected.Store(true)
		err = p.pump(c)
		p.connected.Store(false)
		if p.ctx.Err() != nil {
			return
		}
		p.noteFailure(err)
	}
}

// noteFailure logs a connection problem once per distinct error, so a peer
// that stays down does not flood the log.
func (p *peer) noteFailure(err error) {
	s := err.Error()
	if s == p.lastErr {
		return
	}
	p.lastErr = s
	var rf *refusedError
	if errors.As(err, &rf) {
		p.t.log.Error("peer refused our connection", "peer", p.id, "addr", p.addr, "reason", rf.reason)
		return
	}
	if !p.everUp {
		// Peers of a starting cluster come up in any order.
		p.t.log.Info("peer not reachable yet, retrying", "peer", p.id, "addr", p.addr, "err", err)
		return
	}
	p.t.log.Warn("peer connection down, retrying", "peer", p.id, "addr", p.addr, "err", err)
}

type refusedError struct{ reason string }

func (e *refusedError) Error() string { return "refused: " + e.reason }

func (p *peer) dial() (net.Conn, error) {
	t := p.t
	d := net.Dialer{Timeout: t.o.DialTimeout}
	raw, err := d.DialContext(p.ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	// Closing the transport interrupts a handshake in progress. The closure
	// holds the TCP connection, not c, which a TLS handshake replaces.
	stop := context.AfterFunc(p.ctx, func() { raw.Close() })
	c := raw
	defer stop()
	c.SetDeadline(time.Now().Add(t.o.HandshakeTimeout))
	if t.o.TLS != nil {
		tc, err := p.dialTLS(p.ctx, c)
		if err != nil {
			c.Close()
			return nil, err
		}
		c = tc
	}
	h := Handshake{Version: Version, Cluster: t.o.Cluster, From: string(t.o.Self), To: string(p.id), Nonce: NewNonce()}
	reason, err := Authenticate(c, bufio.NewReaderSize(c, 64), t.o.Secret, h)
	if err != nil {
		c.Close()
		return nil, err
	}
	if reason != "" {
		c.Close()
		return nil, &refusedError{reason}
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

var errPeerClosed = errors.New("peer closed the connection")

// pump writes queued frames to c until c fails or the transport closes.
func (p *peer) pump(c net.Conn) error {
	t := p.t
	defer c.Close()
	// The peer never sends after the handshake; reading detects its close
	// (for example a restart) at once instead of at the next failed write.
	dead := make(chan struct{})
	go func() {
		io.Copy(io.Discard, c)
		close(dead)
	}()
	defer func() { c.Close(); <-dead }()
	bw := bufio.NewWriterSize(c, 64<<10)
	var raw syscall.RawConn
	if sc, ok := c.(syscall.Conn); ok && t.o.TLS == nil {
		raw, _ = sc.SyscallConn()
	}
	if rc := t.rawConnOf(c); rc != nil && t.o.TLS == nil {
		bw = bufio.NewWriterSize(newSockWriter(rc), 64<<10) // rawio.go
	}
	p.wmu.Lock()
	p.raw, p.wconn = raw, c
	p.wmu.Unlock()
	defer func() {
		p.wmu.Lock()
		p.raw, p.wconn = nil, nil
		if p.carry != nil { // a frame begun on this connection ends with it
			p.dropped.Add(uint64(p.carry.n))
			p.carry.free()
			p.carry = nil
		}
		p.wmu.Unlock()
	}()
	// write writes the rest of an inline write (carry), then f (if not nil)
	// and every frame queued behind it, under wmu, and flushes them.
	write := func(f *frame) error {
		p.wmu.Lock()
		defer p.wmu.Unlock()
		pending := uint64(0) // frames in bw not yet flushed
		fail := func(err error) error {
			p.raw = nil // bw holds unflushed bytes: no inline write after them
			p.dropped.Add(pending)
			return err
		}
		c.SetWriteDeadline(time.Now().Add(t.o.WriteTimeout))
		if cf := p.carry; cf != nil {
			p.carry = nil
			_, err := bw.Write(cf.b)
			pending += uint64(cf.n)
			cf.free()
			if err != nil {
				return fail(err)
			}
		}
		if f == nil {
			select {
			case f = <-p.q:
			default:
			}
		}
		for f != nil {
			p.queued.Add(-1)
			p.qbytes.Add(-int64(len(f.b)))
			_, err := bw.Write(f.b)
			pending += uint64(f.n)
			f.free() // copied into bw (or lost with the connection)
			if err != nil {
				return fail(err)
			}
			select {
			case f = <-p.q:
			default:
				f = nil
			}
		}
		if err := bw.Flush(); err != nil {
			return fail(err)
		}
		p.writes.Add(1)
		p.sent.Add(pending)
		return nil
	}
	for {
		select {
		case f := <-p.q:
			if err := write(f); err != nil {
				return err
			}
		case <-p.kick:
			if err := write(nil); err != nil {
				return err
			}
		case <-dead:
			return errPeerClosed
		case <-p.ctx.Done():
			return nil
		}
	}
}
