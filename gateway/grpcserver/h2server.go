package grpcserver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/internal/h2util"
)

// The server's transports (Options.Transport).
//
// TransportGRPCGo is grpc-go's server (grpc.Server): per call its HTTP/2
// reader hands the stream to a goroutine of its own (the handler), which
// hands the reply to the connection's writer goroutine (loopy): two
// goroutine hand-offs per unary call besides the network's.
//
// TransportDirect is this package's own HTTP/2 server for gRPC (h2server,
// below): the goroutine that read a unary request runs its handler and
// writes HEADERS, DATA and trailers in one write, after starting another
// goroutine that reads the connection meanwhile (a new goroutine, not a
// hand-off: nothing waits for it). Do on a gateway.ReplyBackend (the
// node) is not waited for at all: the reader hands it over and reads on,
// and the goroutine that completes it writes the reply (doreply.go). Streams run their handler on a goroutine
// of their own (as grpc-go), fed by the reader, and write their messages
// themselves (no writer goroutine). It serves the same registered services
// (synod.v1.Synod and reflection) with the same interceptors (auth.go),
// TLS, deadlines (grpc-timeout), cancellation (RST_STREAM), flow control
// both ways, GOAWAY on Close, PING acknowledgements (keepalive) and messages
// up to synodpb.MaxMessageSize. What it does not do, it refuses: compressed
// messages (UNIMPLEMENTED: it announces no grpc-accept-encoding, so clients
// do not compress), requests that are not POSTs of application/grpc
// (HTTP 415, as grpc-go), unknown methods (UNIMPLEMENTED), more than 1024
// concurrent streams (REFUSED_STREAM). It enforces no keepalive policy (a
// client's pings are always acknowledged; grpc-go's server would GOAWAY a
// client pinging more than every 5 minutes without streams).
const (
	TransportGRPCGo = "grpc-go"
	TransportDirect = "direct"
)

// DefaultTransport is the transport of a Server whose Options.Transport is
// empty: SYNOD_GRPC_SERVER from the environment (for tests and benchmark
// drivers), else TransportDirect (session 49: docs/COSTS.md, "grpc49";
// grpc-go's server stays selectable: grpc_server: grpc-go in the cluster
// file, or SYNOD_GRPC_SERVER=grpc-go).
var DefaultTransport = func() string {
	if t := os.Getenv("SYNOD_GRPC_SERVER"); t != "" {
		return t
	}
	return TransportDirect
}()

// maxStreams bounds a connection's concurrent streams (grpc-go's server:
// grpc.MaxConcurrentStreams(1024) in New).
const maxStreams = 1024

// h2server is the direct transport: a grpc.ServiceRegistrar serving the
// services registered on it.
type h2server struct {
	tls       *tls.Config
	unaryInt  grpc.UnaryServerInterceptor
	streamInt grpc.StreamServerInterceptor
	log       *slog.Logger
	methods   map[string]*h2method
	info      map[string]grpc.ServiceInfo

	mu      sync.Mutex
	ls      map[net.Listener]struct{}
	conns   map[*h2sconn]struct{}
	closing bool

	active   atomic.Int64  // calls running (callStart, callDone)
	draining atomic.Bool   // close waits for active to reach 0
	idle     chan struct{} // signalled when the last call ends while draining
}

func (h *h2server) callStart() { h.active.Add(1) }

func (h *h2server) callDone() {
	if h.active.Add(-1) == 0 && h.draining.Load() {
		select {
		case h.idle <- struct{}{}:
		default:
		}
	}
}

type h2method struct {
	impl   any
	unary  grpc.MethodHandler
	stream *grpc.StreamDesc
	name   string
	// turn, when set (Pipeline), lets the stream's RecvMsg take the
	// connection's read turn (h2sconn's "Read turn"): the handler
	// promises to call RecvMsg again soon after a message, or
	// keepReading before it stops receiving for a while.
	turn bool
	// async, when set, serves the unary method without waiting for its
	// answer (Server.doReply): it decodes the call's message msg and hands
	// the request over; s.replied is called once, on whatever goroutine
	// has the answer, and must not block (it may run on a node loop's
	// goroutine). s is the call's context.
	async func(s *h2sstream, msg []byte)
}

func newH2Server(tc *tls.Config, ui grpc.UnaryServerInterceptor, si grpc.StreamServerInterceptor, log *slog.Logger) *h2server {
	if tc != nil {
		tc = tc.Clone()
		if !slices.Contains(tc.NextProtos, "h2") {
			tc.NextProtos = append(tc.NextProtos, "h2")
		}
	}
	return &h2server{tls: tc, unaryInt: ui, streamInt: si, log: log, methods: map[string]*h2method{},
		info: map[string]grpc.ServiceInfo{}, ls: map[net.Listener]struct{}{}, conns: map[*h2sconn]struct{}{},
		idle: make(chan struct{}, 1)}
}

// RegisterService implements grpc.ServiceRegistrar.
func (h *h2server) RegisterService(sd *grpc.ServiceDesc, impl any) {
	info := grpc.ServiceInfo{Metadata: sd.Metadata}
	for i := range sd.Methods {
		m := &sd.Methods[i]
		h.methods["/"+sd.ServiceName+"/"+m.MethodName] = &h2method{impl: impl, unary: m.Handler, name: "/" + sd.ServiceName + "/" + m.MethodName}
		info.Methods = append(info.Methods, grpc.MethodInfo{Name: m.MethodName})
	}
	for i := range sd.Streams {
		st := &sd.Streams[i]
		h.methods["/"+sd.ServiceName+"/"+st.StreamName] = &h2method{impl: impl, stream: st, name: "/" + sd.ServiceName + "/" + st.StreamName}
		info.Methods = append(info.Methods, grpc.MethodInfo{Name: st.StreamName, IsClientStream: st.ClientStreams, IsServerStream: st.ServerStreams})
	}
	h.info[sd.ServiceName] = info
}

// GetServiceInfo implements reflection.ServiceInfoProvider.
func (h *h2server) GetServiceInfo() map[string]grpc.ServiceInfo { return h.info }

// serve accepts connections on l until close.
func (h *h2server) serve(l net.Listener) error {
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		l.Close()
		return nil
	}
	h.ls[l] = struct{}{}
	h.mu.Unlock()
	var delay time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			h.mu.Lock()
			closing := h.closing
			h.mu.Unlock()
			if closing {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		go h.serveConn(nc)
	}
}

// close stops accepting, sends GOAWAY on every connection, waits up to 2 s
// for handlers to return (the Server cancelled their contexts), then closes
// the connections.
func (h *h2server) close() {
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		return
	}
	h.closing = true
	for l := range h.ls {
		l.Close()
	}
	conns := make([]*h2sconn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	acks := make([]chan struct{}, len(conns))
	for i, c := range conns {
		acks[i] = c.goAway()
		c.cancelAsync()
	}
	h.draining.Store(true)
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	// Each client acknowledged the PING sent behind GOAWAY, so it read
	// GOAWAY before its connection closes (as grpc-go's GracefulStop): it
	// knows that what it sends from now on is not served, never sent.
wait:
	for _, ack := range acks {
		select {
		case <-ack:
		case <-t.C:
			break wait
		}
	}
wait2:
	for h.active.Load() > 0 {
		select {
		case <-h.idle:
		case <-t.C:
			break wait2
		}
	}
	h.mu.Lock()
	conns = conns[:0]
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		c.fail(errors.New("server closed"))
	}
}

// h2sconn is one client connection.
type h2sconn struct {
	srv  *h2server
	nc   net.Conn
	ctx  context.Context // the calls' parent: peer; cancelled when the connection ends
	stop context.CancelFunc

	// Writing: under wmu.
	wmu       sync.Mutex
	bw        *bufio.Writer
	out       h2out // bw's writer
	fw        *http2.Framer
	hbuf      bytes.Buffer
	henc      *hpack.Encoder
	tableSize atomic.Int64 // the client's SETTINGS_HEADER_TABLE_SIZE to apply, or -1

	// Shared: under mu.
	mu        sync.Mutex
	window    *sync.Cond // signalled when send window grows or the connection fails
	streams   map[uint32]*h2sstream
	lastID    uint32
	sendWin   int64
	streamWin int64 // the client's SETTINGS_INITIAL_WINDOW_SIZE
	maxFrame  uint32
	err       error
	goaway    bool
	goawayAck chan struct{} // closed when the client acknowledges the PING behind GOAWAY
	// ctl holds control frames (acknowledgements, window updates) the
	// reader produced until the holder of wmu writes them: the reader
	// never waits for wmu, whose holder may be blocked writing to a client
	// that is itself blocked writing to us.
	ctl   bytes.Buffer
	ctlFr *http2.Framer

	// Read turn. One goroutine at a time reads the connection: the one
	// holding the turn (reading, under mu). Usually that is a reader
	// (read: serveConn's goroutine, or one started in its place), but a
	// stream whose method has turn set (Pipeline) reads for itself: its
	// RecvMsg takes the turn when nobody holds it, reads frames (the
	// other streams' are handled as the reader handles them, but a call
	// never runs on this goroutine: it is handed over or run beside),
	// and returns its own message. It gives the turn up to nobody when
	// its stream is the connection's only one and open (the handler's
	// next RecvMsg takes it again and reads whatever is buffered), else
	// to a new reader. A reader that gave such a stream's waiting RecvMsg
	// a message under the same conditions ends, leaving the turn free for
	// that stream's next RecvMsg. So a lone Pipeline message is read by
	// the goroutine that runs it: no reader → handler hand-off (issue 28
	// item 6). While nobody holds the turn nobody reads, so whatever may
	// wait for the client starts a reader first (ensureReader: a stream's
	// end, waiting for send window, GOAWAY, keepReading).
	reading bool

	// Reading: by the goroutine holding the read turn only.
	br          *bufio.Reader
	fr          *http2.Framer
	recvUnacked int
	delivered   *h2sstream // a turn stream handleData gave a message to (read's yield)
	hb          headerBlock
	rawBlock    bool // nextFrame completed a header block (readFrame decodes it)

	deadlines h2util.Queue // the unary calls' deadlines (h2ctx.go)
}

func (h *h2server) serveConn(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	p := &peer.Peer{Addr: nc.RemoteAddr(), LocalAddr: nc.LocalAddr()}
	if h.tls != nil {
		tconn := tls.Server(nc, h.tls)
		nc.SetDeadline(time.Now().Add(20 * time.Second))
		if err := tconn.Handshake(); err != nil {
			h.log.Debug("gRPC TLS handshake failed", "remote", nc.RemoteAddr().String(), "err", err)
			nc.Close()
			return
		}
		cs := tconn.ConnectionState()
		if cs.NegotiatedProtocol != "h2" && cs.NegotiatedProtocol != "" {
			nc.Close()
			return
		}
		p.AuthInfo = credentials.TLSInfo{State: cs, CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}
		nc = tconn
	} else {
		nc.SetDeadline(time.Now().Add(20 * time.Second))
	}
	c := &h2sconn{srv: h, nc: nc, streams: map[uint32]*h2sstream{}, sendWin: 65535, streamWin: 65535, maxFrame: 16384, reading: true}
	c.ctx, c.stop = context.WithCancel(context.WithValue(peer.NewContext(context.Background(), p), h2connKey{}, c))
	c.window = sync.NewCond(&c.mu)
	c.out.nc = nc
	if sc, ok := nc.(syscall.Conn); ok { // a socket (the node's counted connections are too)
		if raw, err := sc.SyscallConn(); err == nil {
			c.out.dw = gateway.NewDirectWriter(raw) // nil where there are no direct writes
		}
	}
	c.bw = bufio.NewWriterSize(&c.out, 32<<10)
	c.fw = http2.NewFramer(c.bw, nil)
	c.henc = hpack.NewEncoder(&c.hbuf)
	c.tableSize.Store(-1)
	c.ctlFr = http2.NewFramer(&c.ctl, nil)
	c.br = bufio.NewReaderSize(nc, 64<<10)
	c.fr = http2.NewFramer(nil, c.br)
	c.fr.SetReuseFrames() // every frame is handled before the next is read (readFrame)
	c.fr.SetMaxReadFrameSize(16384)
	c.hb.init()

	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		nc.Close()
		return
	}
	h.conns[c] = struct{}{}
	h.mu.Unlock()

	pre := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c.br, pre); err != nil || string(pre) != http2.ClientPreface {
		c.fail(fmt.Errorf("no HTTP/2 client preface (%v)", err))
		return
	}
	nc.SetDeadline(time.Time{})
	err := c.write(func() error {
		if err := c.fw.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: maxStreams},
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: synodpb.StreamWindow}); err != nil {
			return err
		}
		return c.fw.WriteWindowUpdate(0, synodpb.ConnWindow-65535)
	})
	if err != nil {
		c.fail(err)
		return
	}
	c.read()
}

// write runs fn under wmu, then flushes (with the queued control frames).
func (c *h2sconn) write(fn func() error) error {
	c.wmu.Lock()
	err := fn()
	return c.unlockW(err)
}

// unlockW writes the queued control frames, flushes and releases wmu;
// control frames queued meanwhile are written by whoever takes wmu next or,
// if it is free, here.
func (c *h2sconn) unlockW(err error) error {
	for {
		if err == nil {
			if b := c.takeCtl(); b != nil {
				_, err = c.bw.Write(b)
			}
		}
		if err == nil {
			err = c.bw.Flush()
		}
		c.wmu.Unlock()
		if err != nil {
			c.fail(err)
			return err
		}
		c.mu.Lock()
		more := c.ctl.Len() > 0
		c.mu.Unlock()
		if !more || !c.wmu.TryLock() {
			return nil
		}
	}
}

// h2out is a connection's writer under bw: the socket, or (now set, by
// unlockNow) only what the socket takes at once, the rest kept in rest.
type h2out struct {
	nc   net.Conn
	dw   *gateway.DirectWriter // nil: TLS, or no direct writes here
	now  bool
	rest []byte
}

func (o *h2out) Write(p []byte) (int, error) {
	if !o.now {
		return o.nc.Write(p)
	}
	n := 0
	if len(o.rest) == 0 {
		n = o.dw.WriteNow(p)
	}
	o.rest = append(o.rest, p[n:]...)
	return len(p), nil
}

// unlockNow is unlockW for a goroutine that must not wait for the client
// (one of a node loop's, answering a call: finishNow): the flush writes
// what the socket takes at once; the rest, if any, is written by a
// goroutine of its own, which holds wmu until it is written.
func (c *h2sconn) unlockNow(err error) {
	if err == nil {
		if b := c.takeCtl(); b != nil {
			_, err = c.bw.Write(b)
		}
	}
	if err == nil {
		c.out.now = true
		err = c.bw.Flush()
		c.out.now = false
	}
	if err == nil && len(c.out.rest) > 0 {
		go func() {
			_, err := c.nc.Write(c.out.rest)
			c.out.rest = c.out.rest[:0]
			c.unlockW(err)
		}()
		return
	}
	c.wmu.Unlock()
	if err != nil {
		c.fail(err)
		return
	}
	c.mu.Lock()
	more := c.ctl.Len() > 0
	c.mu.Unlock()
	if more && c.wmu.TryLock() {
		c.unlockNow(nil)
	}
}

func (c *h2sconn) takeCtl() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctl.Len() == 0 {
		return nil
	}
	b := bytes.Clone(c.ctl.Bytes())
	c.ctl.Reset()
	return b
}

// sendCtl queues a control frame and writes it now if wmu is free.
func (c *h2sconn) sendCtl(fn func(fr *http2.Framer) error) {
	c.mu.Lock()
	fn(c.ctlFr)
	c.mu.Unlock()
	if c.wmu.TryLock() {
		c.unlockW(nil)
	}
}

// fail ends the connection: every call's context is cancelled.
func (c *h2sconn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	c.ackGoAway()
	for _, s := range c.streams {
		s.endLocked()
	}
	c.window.Broadcast()
	c.mu.Unlock()
	c.deadlines.Stop()
	c.stop()
	c.nc.Close()
	c.srv.mu.Lock()
	delete(c.srv.conns, c)
	c.srv.mu.Unlock()
}

// goAway tells the client that no new stream will be served (Close),
// followed by a PING; the channel returned is closed when the client
// acknowledged it (or the connection ended).
func (c *h2sconn) goAway() chan struct{} {
	c.mu.Lock()
	c.goaway = true
	last := c.lastID
	ack := make(chan struct{})
	if c.err != nil {
		close(ack)
	} else {
		c.goawayAck = ack
	}
	c.mu.Unlock()
	c.ensureReader() // the PING's acknowledgement is read
	c.write(func() error {
		if err := c.fw.WriteGoAway(last, http2.ErrCodeNo, nil); err != nil {
			return err
		}
		return c.fw.WritePing(false, goAwayPing)
	})
	return ack
}

// cancelAsync cancels the contexts of the calls handed over by runAsync
// (Close: their callers learn at once that the outcome is unknown, as the
// Server cancels the others', doreply.go).
func (c *h2sconn) cancelAsync() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.streams {
		if s.m != nil && s.m.async != nil {
			s.stop()
		}
	}
}

// goAwayPing is the data of the PING sent behind GOAWAY.
var goAwayPing = [8]byte{'g', 'o', 'a', 'w', 'a', 'y', 0, 1}

// ackGoAway closes the GOAWAY PING's channel. The caller holds mu.
func (c *h2sconn) ackGoAway() {
	if c.goawayAck != nil {
		close(c.goawayAck)
		c.goawayAck = nil
	}
}

// read holds the read turn: it reads frames until the connection ends or
// a unary request is complete with nothing more read behind it; then it
// starts another goroutine to read and runs the call itself. It also ends,
// giving the turn up, when it gave a lone turn stream's waiting RecvMsg
// a message (the Read turn).
func (c *h2sconn) read() {
	for {
		s, ok := c.readFrame()
		if !ok {
			return
		}
		if s == nil {
			if c.delivered != nil && c.yield() {
				return
			}
			continue
		}
		if c.br.Buffered() > 0 {
			// More was read behind it (a client's concurrent calls):
			// run it beside the reader.
			go s.runUnary()
			continue
		}
		h2Readers.Add(1)
		go c.read()
		s.runUnary()
		return
	}
}

// readFrame reads one frame and acts on it, holding the read turn; it
// returns a unary call to run (one handed over by runAsync is not), and
// false when the connection failed.
func (c *h2sconn) readFrame() (*h2sstream, bool) {
	c.delivered = nil
	f, err := c.nextFrame()
	if err != nil {
		if ce, ok := err.(http2.ConnectionError); ok {
			c.write(func() error { return c.fw.WriteGoAway(c.lastID, http2.ErrCode(ce), nil) })
		}
		c.fail(err)
		return nil, false
	}
	var s *h2sstream
	switch {
	case f != nil:
		s, err = c.handle(f)
	case c.rawBlock: // a header block nextFrame completed
		c.rawBlock = false
		s, err = c.headerBlock()
	}
	if err != nil {
		code := http2.ErrCodeProtocol
		if ce, ok := err.(http2.ConnectionError); ok {
			code = http2.ErrCode(ce)
		}
		c.write(func() error { return c.fw.WriteGoAway(c.lastID, code, []byte(err.Error())) })
		c.fail(err)
		return nil, false
	}
	if s == nil || s.runAsync() {
		// Nothing to run, or a call handed over whose answer is
		// written by the goroutine that has it (finishNow).
		return nil, true
	}
	return s, true
}

// yield gives the read turn up to nobody, and reports whether it did,
// when the frame just read gave a message to the RecvMsg of a turn stream
// waiting for it, the connection's only stream (what more is buffered,
// that RecvMsg reads): that stream's next RecvMsg takes the turn. The
// reader holds the turn.
//
// The message must still be there: a waiting RecvMsg, woken by it, may
// have taken it, returned, and its handler's next RecvMsg found the turn
// held (by this reader) and waits again, for a message only the turn's
// holder reads; giving the turn up then would leave nobody reading (the
// turn lost: session 48's hang, TestDirectReadTurnNotLostToReturnedReceiver).
// With the message still queued, the RecvMsg that takes it returns it,
// and the handler's next RecvMsg takes the turn.
func (c *h2sconn) yield() bool {
	s := c.delivered
	if f := testBeforeYield.Load(); f != nil {
		(*f)(s)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !s.waiting || len(s.msgs) == 0 || !c.alone(s) {
		return false
	}
	c.reading = false
	h2Yields.Add(1)
	return true
}

// alone reports whether s is the connection's only stream, open both
// ways, on a connection neither failed nor going away: the conditions
// for leaving the read turn to s's RecvMsg. The caller holds mu.
func (c *h2sconn) alone(s *h2sstream) bool {
	return len(c.streams) == 1 && c.streams[s.id] == s && !s.recvDone && !s.done && s.bad == nil && c.err == nil && !c.goaway
}

// ensureReader starts a reader unless somebody holds the read turn (or
// the connection failed): before anything that may wait for the client
// while the turn may be free.
func (c *h2sconn) ensureReader() {
	c.mu.Lock()
	start := !c.reading && c.err == nil
	c.reading = c.reading || start
	c.mu.Unlock()
	if start {
		h2Readers.Add(1)
		go c.read()
	}
}

// h2connKey is the context key of a call's connection (keepReading), and
// h2streamKey a turn stream's (sendNowOf).
type (
	h2connKey   struct{}
	h2streamKey struct{}
)

// sendNowOf returns a function writing a framed message on the stream
// whose context is ctx now, reporting whether it did (h2sstream.sendNow),
// or nil if the stream is not the direct transport's turn stream.
func sendNowOf(ctx context.Context) func([]byte) bool {
	if s, ok := ctx.Value(h2streamKey{}).(*h2sstream); ok {
		return s.sendNow
	}
	return nil
}

// sendNow writes msg (a framed message) on s as DATA and reports whether
// it did: not when that could wait (the stream's or the connection's
// write lock held, no window, TLS) or s ended. A plain socket's write
// never waits here (unlockNow), so a node loop's goroutine may call it.
func (s *h2sstream) sendNow(msg []byte) bool {
	c := s.c
	if c.out.dw == nil || !s.sendMu.TryLock() {
		return false
	}
	defer s.sendMu.Unlock()
	if !c.wmu.TryLock() {
		return false
	}
	n := int64(len(msg))
	c.mu.Lock()
	ok := !s.reset && c.err == nil && !s.done && n <= c.sendWin && n <= s.sendWin && n <= int64(c.maxFrame)
	if ok {
		c.sendWin -= n
		s.sendWin -= n
	}
	c.mu.Unlock()
	if !ok {
		c.wmu.Unlock()
		return false
	}
	err := s.writeHeader()
	if err == nil {
		err = c.fw.WriteData(s.id, false, msg)
	}
	c.unlockNow(err)
	return err == nil
}

// keepReading makes sure the connection of the call whose context is ctx
// is read (ensureReader), when it is the direct transport's: a turn
// stream's handler calls it before it stops receiving for a while (the
// Read turn's promise).
func keepReading(ctx context.Context) {
	if c, ok := ctx.Value(h2connKey{}).(*h2sconn); ok {
		c.ensureReader()
	}
}

// handle acts on one frame; it returns a unary call ready to run, or a
// connection error.
func (c *h2sconn) handle(f http2.Frame) (*h2sstream, error) {
	switch f := f.(type) {
	case *http2.HeadersFrame:
		if !c.hb.start(f) {
			return nil, nil
		}
		return c.headerBlock()
	case *http2.ContinuationFrame:
		if !c.hb.add(f) {
			return nil, nil
		}
		return c.headerBlock()
	case *http2.DataFrame:
		return c.handleData(f)
	case *http2.RSTStreamFrame:
		c.mu.Lock()
		if s := c.streams[f.StreamID]; s != nil {
			s.reset = true
			s.endLocked()
		}
		c.mu.Unlock()
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil, nil
		}
		c.mu.Lock()
		err := f.ForeachSetting(func(st http2.Setting) error {
			switch st.ID {
			case http2.SettingInitialWindowSize:
				d := int64(st.Val) - c.streamWin
				c.streamWin = int64(st.Val)
				for _, s := range c.streams {
					s.sendWin += d
				}
			case http2.SettingMaxFrameSize:
				c.maxFrame = st.Val
			case http2.SettingHeaderTableSize:
				c.tableSize.Store(int64(st.Val))
			}
			return nil
		})
		c.window.Broadcast()
		c.mu.Unlock()
		if err != nil {
			return nil, err
		}
		c.sendCtl(func(fr *http2.Framer) error { return fr.WriteSettingsAck() })
	case *http2.PingFrame:
		if !f.IsAck() {
			c.sendCtl(func(fr *http2.Framer) error { return fr.WritePing(true, f.Data) })
		} else if f.Data == goAwayPing {
			c.mu.Lock()
			c.ackGoAway()
			c.mu.Unlock()
		}
	case *http2.WindowUpdateFrame:
		c.mu.Lock()
		if f.StreamID == 0 {
			c.sendWin += int64(f.Increment)
		} else if s := c.streams[f.StreamID]; s != nil {
			s.sendWin += int64(f.Increment)
		}
		c.window.Broadcast()
		c.mu.Unlock()
	case *http2.GoAwayFrame:
		// The client sends no new streams; those open finish.
	case *http2.PushPromiseFrame:
		return nil, errors.New("PUSH_PROMISE from a client")
	}
	return nil, nil
}

// h2sstream is one call: a unary call or a grpc.ServerStream.
type h2sstream struct {
	c      *h2sconn
	id     uint32
	m      *h2method
	ctx    context.Context    // a unary call's is s itself (h2ctx.go)
	cancel context.CancelFunc // streams' (nil: a unary call's, stop)
	ch     chan struct{}      // a message arrived or the stream ended (streams)

	// A unary call's context and metadata (h2ctx.go), and a Do's request
	// handed over (doreply.go).
	uctx unaryCtx
	do   doCall

	// Under c.mu.
	sendWin  int64
	body     []byte    // bytes received, not yet made messages
	msgs     [][]byte  // whole messages not yet received by the handler
	msgs0    [1][]byte // msgs' array for a unary call's one message
	queued   int       // bytes in msgs
	unacked  int       // stream-level bytes received and not yet granted back
	recvDone bool      // END_STREAM received
	waiting  bool      // a RecvMsg waits for a message (read's yield)
	started  bool      // the call runs (unary: dispatch)
	done     bool      // the stream ended (reply written, reset, or the connection failed)
	reset    bool      // the client reset it
	bad      *status.Status

	// By the handler's goroutine.
	sendMu     sync.Mutex
	sentHeader bool
	header     metadata.MD
	trailer    metadata.MD
}

// headerBlock decodes the header block just completed and acts on it
// (handleHeaders): a malformed one (hpack) ends the connection, one with
// invalid fields resets its stream (PROTOCOL_ERROR), as x/net's server.
func (c *h2sconn) headerBlock() (*h2sstream, error) {
	fields, err := c.hb.decode()
	if err != nil {
		return nil, err
	}
	if c.hb.bad != nil {
		id := c.hb.sid
		c.mu.Lock()
		s := c.streams[id]
		if s != nil {
			s.reset = true
			s.endLocked()
		} else if id > c.lastID && id%2 == 1 {
			c.lastID = id
		}
		c.mu.Unlock()
		if id%2 == 0 && s == nil {
			return nil, fmt.Errorf("client opened even stream %d", id)
		}
		c.sendCtl(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, http2.ErrCodeProtocol) })
		return nil, nil
	}
	return c.handleHeaders(c.hb.sid, c.hb.end, fields)
}

// handleHeaders acts on a decoded header block of stream id (end: the
// HEADERS frame ended the stream). fields are the connection's, valid
// until the next block.
func (c *h2sconn) handleHeaders(id uint32, end bool, fields []hpack.HeaderField) (*h2sstream, error) {
	c.mu.Lock()
	if s := c.streams[id]; s != nil {
		// Trailers from the client: only END_STREAM matters.
		var ready *h2sstream
		if end {
			ready = s.recvEnd()
		}
		c.mu.Unlock()
		return ready, nil
	}
	if id%2 == 0 || id <= c.lastID {
		c.mu.Unlock()
		if id%2 == 0 {
			return nil, fmt.Errorf("client opened even stream %d", id)
		}
		return nil, nil // a stream already ended: ignore
	}
	c.lastID = id
	refuse := c.goaway || len(c.streams) >= maxStreams || c.err != nil
	c.mu.Unlock()
	if refuse {
		c.sendCtl(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, http2.ErrCodeRefusedStream) })
		return nil, nil
	}
	var path, method string
	var h callHeaders
	var timeout time.Duration
	var terr error
	nmd := 0 // fields[:nmd]: the metadata beyond callHeaders' own
	for _, hf := range fields {
		switch hf.Name {
		case ":path":
			path = hf.Value
		case ":method":
			method = hf.Value
		case ":authority":
			h.authority, h.hasAuthority = hf.Value, true
		case "content-type":
			h.ctype = hf.Value
		case "user-agent":
			h.ua, h.hasUA = hf.Value, true
		case "grpc-timeout":
			timeout, terr = synodpb.DecodeTimeout(hf.Value)
		case "grpc-encoding", "grpc-accept-encoding", "te", "connection", "grpc-message-type":
		default:
			if strings.HasPrefix(hf.Name, ":") {
				continue
			}
			v := hf.Value
			if strings.HasSuffix(hf.Name, "-bin") {
				b, err := synodpb.DecodeBinaryHeader(v)
				if err != nil {
					terr = fmt.Errorf("malformed binary metadata %q: %v", hf.Name, err)
					continue
				}
				v = string(b)
			}
			fields[nmd] = hpack.HeaderField{Name: hf.Name, Value: v} // nmd <= this field's index
			nmd++
		}
	}
	ctype := h.ctype
	if method != "POST" || !isGRPC(ctype) {
		c.write(func() error {
			return c.writeHeaderFields(id, true, hpack.HeaderField{Name: ":status", Value: "415"},
				hpack.HeaderField{Name: "content-type", Value: "text/plain"},
				hpack.HeaderField{Name: "grpc-status", Value: strconv.Itoa(int(codes.Internal))},
				hpack.HeaderField{Name: "grpc-message", Value: synodpb.EncodeStatusMessage(fmt.Sprintf("invalid gRPC request method %q content-type %q", method, ctype))})
		})
		return nil, nil
	}
	m := c.srv.methods[path]
	s := &h2sstream{c: c, id: id, m: m}
	if m != nil && m.stream != nil {
		s.ch = make(chan struct{}, 1)
		ctx := metadata.NewIncomingContext(c.ctx, h.md(fields[:nmd]))
		if m.turn {
			ctx = context.WithValue(ctx, h2streamKey{}, s) // the pipe's sendNow
		}
		if timeout > 0 {
			s.ctx, s.cancel = context.WithTimeout(ctx, timeout)
		} else {
			s.ctx, s.cancel = context.WithCancel(ctx)
		}
	} else {
		// A unary call (or a refused one): its context is the stream
		// itself, its metadata made only if asked for (h2ctx.go).
		if nmd > 0 {
			h.extra = slices.Clone(fields[:nmd])
		}
		s.uctx.h = h
		if timeout > 0 {
			s.uctx.deadline = time.Now().Add(timeout)
		}
		s.ctx = s
	}
	switch {
	case terr != nil:
		s.bad = status.New(codes.Internal, terr.Error())
	case m == nil:
		svc, name, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
		if _, ok := c.srv.info[svc]; ok {
			s.bad = status.Newf(codes.Unimplemented, "unknown method %s for service %s", name, svc)
		} else {
			s.bad = status.Newf(codes.Unimplemented, "unknown service %s", svc)
		}
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		s.stop()
		return nil, nil
	}
	s.sendWin = c.streamWin
	c.streams[id] = s
	var ready *h2sstream
	switch {
	case s.bad != nil:
		ready = s.dispatch() // answered at once
	case end:
		ready = s.recvEnd()
	}
	c.mu.Unlock()
	if s.bad == nil && m.stream != nil {
		c.srv.callStart()
		go s.runStream()
		return nil, nil
	}
	return ready, nil
}

func isGRPC(ct string) bool {
	if !strings.HasPrefix(ct, "application/grpc") {
		return false
	}
	rest := ct[len("application/grpc"):]
	return rest == "" || rest == "+proto" || rest[0] == ';'
}

// recvEnd records the client's END_STREAM and returns s if it is a unary
// call now ready to run. The caller holds c.mu.
func (s *h2sstream) recvEnd() *h2sstream {
	if s.recvDone {
		return nil
	}
	s.recvDone = true
	if s.m != nil && s.m.stream != nil {
		s.notify()
		return nil
	}
	return s.dispatch()
}

// dispatch returns s to be run (runUnary) unless it already was or ended.
// The caller holds c.mu.
func (s *h2sstream) dispatch() *h2sstream {
	if s.started || s.done {
		return nil
	}
	s.started = true
	s.c.srv.callStart()
	return s
}

func (c *h2sconn) handleData(f *http2.DataFrame) (*h2sstream, error) {
	n := int(f.Header().Length)
	c.recvUnacked += n
	if c.recvUnacked >= synodpb.ConnWindow/4 {
		inc := uint32(c.recvUnacked)
		c.recvUnacked = 0
		c.sendCtl(func(fr *http2.Framer) error { return fr.WriteWindowUpdate(0, inc) })
	}
	c.mu.Lock()
	s := c.streams[f.StreamID]
	if s == nil || s.recvDone {
		c.mu.Unlock()
		return nil, nil
	}
	var inc uint32
	if s.bad == nil {
		s.body = append(s.body, f.Data()...)
		s.unacked += n
		for len(s.body) >= 5 {
			if s.body[0] != 0 {
				s.bad = status.New(codes.Unimplemented, "grpc: compressed message received; this server accepts none (it announces no grpc-accept-encoding)")
				break
			}
			l := int(binary.BigEndian.Uint32(s.body[1:5]))
			if l > synodpb.MaxMessageSize {
				s.bad = status.Newf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", l, synodpb.MaxMessageSize)
				break
			}
			if len(s.body) < 5+l {
				break
			}
			if s.msgs == nil {
				s.msgs = s.msgs0[:0]
			}
			s.msgs = append(s.msgs, s.body[5:5+l:5+l])
			s.queued += l
			s.body = s.body[5+l:]
			if len(s.body) == 0 {
				s.body = nil
			}
			if s.m.stream != nil {
				s.notify()
				if s.m.turn {
					c.delivered = s
				}
			} else if len(s.msgs) > 1 {
				s.bad = status.New(codes.Internal, "grpc: a unary call sent more than one message")
			}
		}
		if s.bad != nil {
			// A stream's handler gets the status from Recv and returns
			// it; a unary call is answered at once (its data left
			// unread: RST_STREAM(NO_ERROR) after the answer).
			s.body, s.msgs = nil, nil
			s.notify()
		}
		// Grant the stream's window back while its unconsumed messages
		// stay under a window (a unary call's one message may be larger).
		if s.unacked >= synodpb.StreamWindow/4 && (s.queued < synodpb.StreamWindow || s.m.stream == nil) {
			inc, s.unacked = uint32(s.unacked), 0
		}
	}
	var ready *h2sstream
	switch {
	case f.StreamEnded():
		ready = s.recvEnd()
	case s.bad != nil && (s.m == nil || s.m.stream == nil):
		ready = s.dispatch()
	}
	c.mu.Unlock()
	if inc > 0 {
		c.sendCtl(func(fr *http2.Framer) error { return fr.WriteWindowUpdate(s.id, inc) })
	}
	return ready, nil
}

func (s *h2sstream) notify() {
	if s.ch == nil {
		return // a unary call: nobody waits
	}
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

// endLocked ends s: its context is cancelled, its handler's Recv fails.
// The caller holds c.mu.
func (s *h2sstream) endLocked() {
	if s.done {
		return
	}
	s.done = true
	delete(s.c.streams, s.id)
	s.stop()
	s.notify()
}

// h2Inline counts unary calls run on the goroutine that read them,
// h2Readers the readers started (for a call run on the one that read it,
// or to read on where the turn was free), h2OwnReads the turn streams'
// messages read by their own RecvMsg and h2Yields the readers that left
// the turn to one, for tests.
var h2Inline, h2Readers, h2OwnReads, h2Yields atomic.Int64

// testBeforeYield, when set (tests only), runs on the reader between
// handing a turn stream a message and yield's decision.
var testBeforeYield atomic.Pointer[func(s *h2sstream)]

// runAsync hands s over to its method's async handler, if it has one,
// on this goroutine (the reader: handing over does not wait for the
// answer), and reports whether it did.
func (s *h2sstream) runAsync() bool {
	if s.m == nil || s.m.async == nil {
		return false
	}
	c := s.c
	c.mu.Lock()
	if s.bad != nil || len(s.msgs) != 1 {
		c.mu.Unlock()
		return false // runUnary answers it
	}
	msg := s.msgs[0]
	s.msgs = nil
	c.mu.Unlock()
	h2Inline.Add(1)
	s.m.async(s, msg)
	return true
}

// replied is an async call's answer: written here when that cannot wait
// (finishNow), else by a goroutine of its own.
func (s *h2sstream) replied(reply any, err error) {
	var out []byte
	var buf *[]byte
	if err == nil {
		buf = replyBufs.Get().(*[]byte)
		out, err = synodpb.AppendFrame((*buf)[:0], reply)
	}
	s.send(buf, out, statusOf(err))
}

// send is replied's end: the reply msg (a framed message in buf, from
// replyBufs, or nil) and the trailers with st.
func (s *h2sstream) send(buf *[]byte, out []byte, st *status.Status) {
	if s.finishNow(out, st) {
		putReplyBuf(buf, out)
		return
	}
	go func() {
		defer s.c.srv.callDone()
		s.finish(out, st)
		putReplyBuf(buf, out)
	}()
}

// replyBufs hold the buffers async replies are framed in: a reply is
// copied to the connection's buffer (or the socket) before finish or
// finishNow returns.
var replyBufs = sync.Pool{New: func() any { return new([]byte) }}

// putReplyBuf returns buf (out, if framed there, grew it) to replyBufs.
func putReplyBuf(buf *[]byte, out []byte) {
	if buf == nil {
		return
	}
	if cap(out) > 64<<10 {
		out = nil // a rare large reply's buffer is not kept
	}
	*buf = out[:0]
	replyBufs.Put(buf)
}

// finishNow writes the reply (msg, a framed message or nil, then the
// trailers with st) and ends the call, and reports whether it did: not
// when that could wait (for the write lock, for flow-control window, for
// a TLS write), which finish may do. A plain socket's write never waits
// here (unlockNow).
func (s *h2sstream) finishNow(msg []byte, st *status.Status) bool {
	c := s.c
	if c.out.dw == nil || !c.wmu.TryLock() {
		return false
	}
	if !s.sendMu.TryLock() {
		c.wmu.Unlock()
		return false
	}
	n := int64(len(msg))
	c.mu.Lock()
	dead := s.reset || c.err != nil || s.done
	fits := n <= c.sendWin && n <= s.sendWin && n <= int64(c.maxFrame)
	if !dead && fits {
		c.sendWin -= n
		s.sendWin -= n
	}
	c.mu.Unlock()
	switch {
	case dead:
		c.wmu.Unlock()
	case !fits:
		s.sendMu.Unlock()
		c.wmu.Unlock()
		return false
	default:
		err := s.writeHeader()
		if err == nil && msg != nil {
			err = c.fw.WriteData(s.id, false, msg)
		}
		if err == nil {
			err = s.writeTrailers(st)
		}
		c.unlockNow(err)
	}
	s.sendMu.Unlock()
	s.end()
	c.srv.callDone()
	return true
}

// decoder returns a function decoding msg (decode).
func decoder(msg []byte) func(any) error {
	return func(v any) error { return decode(msg, v) }
}

// decode decodes msg into v, a protobuf message.
func decode(msg []byte, v any) error {
	if m, ok := v.(*synodpb.PhaseRequest); ok && synodpb.DecodePhaseRequest(msg, m) {
		return nil // by hand (api/synodpb phasecodec.go)
	} else if ok {
		proto.Reset(m)
	}
	m, ok := v.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "grpc: %T is not a protobuf message", v)
	}
	if err := proto.Unmarshal(msg, m); err != nil {
		return status.Errorf(codes.Internal, "grpc: error unmarshalling request: %v", err)
	}
	return nil
}

// runUnary runs a unary call (or answers its refusal) and writes the
// reply.
func (s *h2sstream) runUnary() {
	defer s.c.srv.callDone()
	h2Inline.Add(1)
	c := s.c
	c.mu.Lock()
	bad, msgs := s.bad, s.msgs
	s.msgs = nil
	c.mu.Unlock()
	if bad != nil {
		s.finish(nil, bad)
		return
	}
	if len(msgs) != 1 {
		s.finish(nil, status.Newf(codes.Internal, "grpc: a unary call sent %d messages, want 1", len(msgs)))
		return
	}
	s.arm()
	reply, err := s.m.unary(s.m.impl, s.ctx, decoder(msgs[0]), c.srv.unaryInt)
	var out []byte
	if err == nil {
		out, err = synodpb.FrameMessage(reply)
	}
	s.finish(out, statusOf(err))
}

// statusOf is err's status, OK for nil (status.Convert(nil) is a nil
// *Status).
func statusOf(err error) *status.Status {
	if err == nil {
		return statusOK
	}
	return status.Convert(err)
}

// statusOK is every call's OK status (a Status is not changed once made).
var statusOK = status.New(codes.OK, "")

// finish writes what is left of the reply: the headers unless sent, msg
// (a framed message, or nil), and the trailers with st; then it ends the
// stream (RST_STREAM(NO_ERROR) if the client still sends).
func (s *h2sstream) finish(msg []byte, st *status.Status) {
	c := s.c
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if msg != nil {
		if err := s.sendData(msg, st); err != nil {
			s.end()
			return
		}
	} else {
		c.wmu.Lock()
		if s.dead() {
			c.wmu.Unlock()
			s.end()
			return
		}
		err := s.writeTrailers(st)
		c.unlockW(err)
	}
	s.end()
}

// end forgets s; a client still sending is told to stop. The connection
// is read on (ensureReader: the turn may have been left to s).
func (s *h2sstream) end() {
	c := s.c
	c.mu.Lock()
	rst := !s.recvDone && !s.done && c.err == nil
	s.endLocked()
	start := !c.reading && c.err == nil
	c.reading = c.reading || start
	c.mu.Unlock()
	if rst {
		c.sendCtl(func(fr *http2.Framer) error { return fr.WriteRSTStream(s.id, http2.ErrCodeNo) })
	}
	if start {
		h2Readers.Add(1)
		go c.read()
	}
}

// dead reports whether nothing more may be written on s (reset, the
// connection failed).
func (s *h2sstream) dead() bool {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return s.reset || c.err != nil || s.done
}

// writeTrailers writes the trailers with st (trailers-only if no header
// was sent). The caller holds wmu.
func (s *h2sstream) writeTrailers(st *status.Status) error {
	fs := make([]hpack.HeaderField, 0, 6)
	if !s.sentHeader {
		s.sentHeader = true
		fs = append(fs, hpack.HeaderField{Name: ":status", Value: "200"}, hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
		fs = appendMD(fs, s.header)
	}
	fs = append(fs, hpack.HeaderField{Name: "grpc-status", Value: strconv.Itoa(int(st.Code()))})
	if m := st.Message(); m != "" {
		fs = append(fs, hpack.HeaderField{Name: "grpc-message", Value: synodpb.EncodeStatusMessage(m)})
	}
	if st.Code() == codes.OK {
		// no details (Proto would copy them)
	} else if p := st.Proto(); p != nil && len(p.Details) > 0 {
		if b, err := proto.Marshal(p); err == nil {
			fs = append(fs, hpack.HeaderField{Name: "grpc-status-details-bin", Value: base64.RawStdEncoding.EncodeToString(b)})
		}
	}
	fs = appendMD(fs, s.trailer)
	return s.c.writeHeaderFields(s.id, true, fs...)
}

// writeHeader writes the response headers unless sent. The caller holds
// wmu.
func (s *h2sstream) writeHeader() error {
	if s.sentHeader {
		return nil
	}
	s.sentHeader = true
	fs := appendMD([]hpack.HeaderField{{Name: ":status", Value: "200"}, {Name: "content-type", Value: "application/grpc"}}, s.header)
	return s.c.writeHeaderFields(s.id, false, fs...)
}

func appendMD(fs []hpack.HeaderField, md metadata.MD) []hpack.HeaderField {
	for k, vs := range md {
		for _, v := range vs {
			if strings.HasSuffix(k, "-bin") {
				v = base64.RawStdEncoding.EncodeToString([]byte(v))
			}
			fs = append(fs, hpack.HeaderField{Name: k, Value: v})
		}
	}
	return fs
}

// writeHeaderFields encodes fs and writes them as HEADERS (+CONTINUATION).
// The caller holds wmu.
func (c *h2sconn) writeHeaderFields(id uint32, end bool, fs ...hpack.HeaderField) error {
	if ts := c.tableSize.Swap(-1); ts >= 0 {
		c.henc.SetMaxDynamicTableSizeLimit(uint32(ts))
	}
	c.hbuf.Reset()
	for _, f := range fs {
		c.henc.WriteField(f)
	}
	block := c.hbuf.Bytes()
	c.mu.Lock()
	max := int(c.maxFrame)
	c.mu.Unlock()
	first := true
	for first || len(block) > 0 {
		n := min(len(block), max)
		frag := block[:n]
		block = block[n:]
		var err error
		if first {
			err = c.fw.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: frag, EndStream: end, EndHeaders: len(block) == 0})
			first = false
		} else {
			err = c.fw.WriteContinuation(id, len(block) == 0, frag)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// sendData writes the headers unless sent, then msg as DATA within the
// flow-control windows, then (with st non-nil) the trailers; it waits for
// window when there is none, without wmu.
func (s *h2sstream) sendData(msg []byte, st *status.Status) error {
	c := s.c
	for {
		c.wmu.Lock()
		if s.dead() {
			c.wmu.Unlock()
			return errStreamGone
		}
		err := s.writeHeader()
		for err == nil && len(msg) > 0 {
			c.mu.Lock()
			n := int(min(int64(len(msg)), c.sendWin, s.sendWin, int64(c.maxFrame)))
			if n > 0 {
				c.sendWin -= int64(n)
				s.sendWin -= int64(n)
			}
			c.mu.Unlock()
			if n <= 0 {
				break
			}
			err = c.fw.WriteData(s.id, false, msg[:n])
			msg = msg[n:]
		}
		if err == nil && len(msg) == 0 && st != nil {
			err = s.writeTrailers(st)
		}
		if err = c.unlockW(err); err != nil || len(msg) == 0 {
			return err
		}
		// Out of window: wait for the client's WINDOW_UPDATE, which
		// somebody must read.
		c.ensureReader()
		c.mu.Lock()
		for c.err == nil && !s.done && (c.sendWin <= 0 || s.sendWin <= 0) {
			c.window.Wait()
		}
		c.mu.Unlock()
	}
}

var errStreamGone = status.Error(codes.Canceled, "the stream ended (reset by the client, or the connection closed)")

// runStream runs a streaming method's handler on this goroutine.
func (s *h2sstream) runStream() {
	defer s.c.srv.callDone()
	info := &grpc.StreamServerInfo{FullMethod: s.m.name, IsClientStream: s.m.stream.ClientStreams, IsServerStream: s.m.stream.ServerStreams}
	var err error
	if s.c.srv.streamInt != nil {
		err = s.c.srv.streamInt(s.m.impl, s, info, s.m.stream.Handler)
	} else {
		err = s.m.stream.Handler(s.m.impl, s)
	}
	s.finish(nil, statusOf(err))
}

// Context implements grpc.ServerStream.
func (s *h2sstream) Context() context.Context { return s.ctx }

// SetHeader implements grpc.ServerStream.
func (s *h2sstream) SetHeader(md metadata.MD) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if s.sentHeader {
		return status.Error(codes.Internal, "transport: the stream is done or WriteHeader was already called")
	}
	s.header = metadata.Join(s.header, md)
	return nil
}

// SendHeader implements grpc.ServerStream.
func (s *h2sstream) SendHeader(md metadata.MD) error {
	if err := s.SetHeader(md); err != nil {
		return err
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.c.write(func() error {
		if s.dead() {
			return nil
		}
		return s.writeHeader()
	})
}

// SetTrailer implements grpc.ServerStream.
func (s *h2sstream) SetTrailer(md metadata.MD) {
	s.sendMu.Lock()
	s.trailer = metadata.Join(s.trailer, md)
	s.sendMu.Unlock()
}

// SendMsg implements grpc.ServerStream.
func (s *h2sstream) SendMsg(m any) error {
	b, err := synodpb.FrameMessage(m)
	if err != nil {
		return err
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if err := s.sendData(b, nil); err != nil {
		if s.ctx.Err() != nil {
			return status.FromContextError(s.ctx.Err()).Err()
		}
		return status.Error(codes.Unavailable, err.Error())
	}
	return nil
}

// RecvMsg implements grpc.ServerStream.
func (s *h2sstream) RecvMsg(m any) error {
	b, err := s.recvBytes()
	if err != nil {
		return err
	}
	return decode(b, m)
}

// recvBytes is RecvMsg without the decoding: the message's bytes (the
// stream's own copy, kept by nobody else).
func (s *h2sstream) recvBytes() ([]byte, error) {
	c := s.c
	for {
		c.mu.Lock()
		if len(s.msgs) > 0 {
			b := s.msgs[0]
			s.msgs[0] = nil
			if len(s.msgs) == 1 {
				s.msgs = s.msgs[:0] // its array kept for the next message
			} else {
				s.msgs = s.msgs[1:]
			}
			s.queued -= len(b)
			var inc uint32
			if !s.done && !s.recvDone && s.unacked >= synodpb.StreamWindow/4 && s.queued < synodpb.StreamWindow {
				inc, s.unacked = uint32(s.unacked), 0
			}
			c.mu.Unlock()
			if inc > 0 {
				c.sendCtl(func(fr *http2.Framer) error { return fr.WriteWindowUpdate(s.id, inc) })
			}
			return b, nil
		}
		bad, recvDone, done := s.bad, s.recvDone, s.done
		turn := !c.reading && s.m.turn && bad == nil && !recvDone && !done && c.err == nil
		c.reading = c.reading || turn
		s.waiting = !turn && bad == nil && !recvDone && !done
		c.mu.Unlock()
		switch {
		case bad != nil:
			return nil, bad.Err()
		case recvDone:
			return nil, io.EOF
		case done:
			if err := s.ctx.Err(); err != nil {
				return nil, status.FromContextError(err).Err()
			}
			return nil, status.Error(codes.Canceled, "the stream ended")
		case turn:
			s.readOwn()
			continue
		}
		select {
		case <-s.ch:
		case <-s.ctx.Done():
			c.mu.Lock()
			s.waiting = false
			more := len(s.msgs) > 0
			c.mu.Unlock()
			if !more {
				return nil, status.FromContextError(s.ctx.Err()).Err()
			}
		}
		c.mu.Lock()
		s.waiting = false
		c.mu.Unlock()
	}
}

// readOwn reads frames holding the read turn (the Read turn) until s has
// a message or ended: the other streams' frames are handled as the
// reader handles them, a unary call they complete runs beside. Then it
// gives the turn up: to nobody if s may take it again (alone), else to a
// new reader.
func (s *h2sstream) readOwn() {
	c := s.c
	for {
		u, ok := c.readFrame()
		if !ok {
			return
		}
		if u != nil {
			go u.runUnary()
		}
		c.mu.Lock()
		if len(s.msgs) == 0 && s.bad == nil && !s.recvDone && !s.done {
			c.mu.Unlock()
			continue
		}
		got := len(s.msgs) > 0
		if c.alone(s) {
			c.reading = false
			c.mu.Unlock()
			if got {
				h2OwnReads.Add(1)
			}
			return
		}
		c.mu.Unlock()
		if got {
			h2OwnReads.Add(1)
		}
		h2Readers.Add(1)
		go c.read()
		return
	}
}
