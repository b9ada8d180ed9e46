package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
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
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/internal/h2util"
)

// The direct gRPC transport (Options.GRPCTransport = TransportDirect).
//
// h2client speaks gRPC's wire format itself (HTTP/2 with
// golang.org/x/net/http2's Framer and hpack, length-prefixed protobuf
// messages, grpc-status trailers: the gRPC over HTTP/2 protocol document,
// github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md) to the nodes'
// grpc-go server, without goroutines of its own. grpc-go's ClientConn
// costs every unary call two goroutine hand-offs a RESP client does not
// pay: the caller hands its frames to the connection's writer goroutine
// (loopy), and the connection's reader goroutine hands the reply to the
// caller (docs/COSTS.md, "grpc45, session 45"). Here:
//
//   - Writing. The calling goroutine encodes its HEADERS and DATA frames
//     and writes them itself, under the connection's write lock, with one
//     flush (one write system call per call).
//   - Reading is a turn. One goroutine at a time reads the connection: a
//     caller that waits for a reply (or for send window) and finds nobody
//     reading reads itself, dispatching every frame it reads (other
//     streams' messages and end, SETTINGS, PING, WINDOW_UPDATE, GOAWAY);
//     when what it waited for arrived it passes the turn to the oldest
//     other waiter, which the reader woke for that. So a lone call reads
//     its own reply, as a RESP client does: no goroutine is woken on its
//     way. Callers whose reply another reader read are woken by it (one
//     hand-off, as gRPC's reader does for every call).
//   - Nobody reads an idle connection. Before a call on a connection with
//     no stream open, the caller reads whatever is pending without
//     blocking (a non-blocking read, as the RESP pool's connCheck): a
//     connection the node closed or shut down (GOAWAY) while idle is
//     replaced before anything is sent on it, so the call is certainly not
//     sent there (grpc-go's reader goroutine notices the same at once).
//     It is the one read system call a call makes beyond a RESP command on
//     a connection that is not checked (strace, docs/costs/s50-grpc50.md);
//     the RESP pool's connCheck makes it too.
//   - Cancellation. A stream's context ending (context.AfterFunc) fails
//     it with CANCELED or DEADLINE_EXCEEDED, sends RST_STREAM(CANCEL) and,
//     if its caller is the one reading, interrupts the read with a past
//     read deadline; the caller then passes the turn on.
//   - Streams whose reader waits while idle (WatchLeader, Phases: a
//     goroutine of the client blocked in Recv for good) would hold the turn
//     and make every call's reply a hand-off; GRPC opens them on a second
//     connection to the address (gconn.side).
//   - Flow control: the same fixed windows as grpc-go's client
//     (synodpb.StreamWindow, ConnWindow), a WINDOW_UPDATE once a quarter
//     was read; the node's windows are honoured (a writer short of window
//     waits as a reader does, taking the turn when free).
//   - Limits: messages up to synodpb.MaxMessageSize each way, as the
//     grpc-go client is configured; no compression (the server sends none
//     unless asked); no TLS (the GRPC client dials in plain text).
//
// A failed connection (a read or write error, end of stream) fails every
// stream open on it with UNAVAILABLE, and the next call dials anew. A call
// counts as sent (grpc.Peer set) once its HEADERS frame was handed to the
// connection; a dial failure, a GOAWAY found before sending, a stream the
// node refused (REFUSED_STREAM, or above a GOAWAY's last stream id) mean
// not sent (UNAVAILABLE without a peer, or for a refused stream
// the error errH2Refused wraps).

// Transports of GRPC (Options.GRPCTransport).
const (
	// TransportGRPCGo is grpc-go's ClientConn.
	TransportGRPCGo = "grpc-go"
	// TransportDirect is the client's own HTTP/2 transport (h2.go): the
	// calling goroutine writes its frames and reads its reply.
	TransportDirect = "direct"
)

// DefaultGRPCTransport is the transport of a GRPC client whose
// Options.GRPCTransport is empty: the environment variable
// SYNOD_GRPC_TRANSPORT when set (so a test run or a bench driver can
// select one: SYNOD_GRPC_TRANSPORT=direct), else TransportGRPCGo.
//
// The direct transport is cheaper (session 52, docs/costs/s52-grpc.md:
// the driver's CPU per operation lower in 94 of 96 alternated round pairs
// of `CELLS="resp grpc-do grpc-do-direct grpc-stream grpc-stream-direct"
// ROUNDS=4 scripts/bench-parity "paxos:fsync abd:memory esds:fsync" 3s
// 16`) but it is not the default: with it, node's TestFailoverStubOnPaxos
// (a leader whose machine vanishes: its address accepts nothing and
// answers nothing) fails 2 of 3 runs: the outstanding incr is never
// retried at the new leader within 30 s, the last error an HTTP/2
// handshake timeout with the vanished address; on grpc-go it passes
// (`SYNOD_GRPC_TRANSPORT=direct go test -count=3 -run
// TestFailoverStubOnPaxos ./node`). Fail-over comes before CPU.
var DefaultGRPCTransport = func() string {
	if t := os.Getenv("SYNOD_GRPC_TRANSPORT"); t != "" {
		return t
	}
	return TransportGRPCGo
}()

func grpcTransport(t string) (string, error) {
	if t == "" {
		t = DefaultGRPCTransport
	}
	switch t {
	case TransportGRPCGo, TransportDirect:
		return t, nil
	}
	return "", fmt.Errorf("client: unknown gRPC transport %q (%s or %s)", t, TransportGRPCGo, TransportDirect)
}

// h2client is the direct transport to one address: a
// grpc.ClientConnInterface for synodpb.NewSynodClient, over one HTTP/2
// connection at a time, dialled on first use and after a failure.
type h2client struct {
	addr    string
	timeout time.Duration // bounds a dial and the HTTP/2 handshake

	mu      sync.Mutex
	cur     *h2conn
	dialing chan struct{} // closed when the dial under way ends
	closed  bool
}

var errH2Closed = status.Error(codes.Canceled, "grpc: the client connection is closing")

// conn returns a usable connection, dialling if needed (and polling an
// existing one: h2conn.usable). An error means nothing was sent.
func (h *h2client) conn(ctx context.Context) (*h2conn, error) { return h.connect(ctx, true) }

func (h *h2client) connect(ctx context.Context, poll bool) (*h2conn, error) {
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, errH2Closed
		}
		if c := h.cur; c != nil {
			h.mu.Unlock()
			if !poll || c.usable() {
				return c, nil
			}
			h.drop(c)
			continue
		}
		if ch := h.dialing; ch != nil {
			h.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, status.FromContextError(ctx.Err()).Err()
			}
		}
		ch := make(chan struct{})
		h.dialing = ch
		h.mu.Unlock()
		c, err := dialH2(ctx, h.addr, h.timeout)
		h.mu.Lock()
		h.dialing = nil
		close(ch)
		if err == nil {
			if h.closed {
				h.mu.Unlock()
				c.fail(errH2Closed)
				return nil, errH2Closed
			}
			h.cur = c
		}
		h.mu.Unlock()
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "connection error: %v", err)
		}
		return c, nil
	}
}

// drop forgets c as the current connection.
func (h *h2client) drop(c *h2conn) {
	h.mu.Lock()
	if h.cur == c {
		h.cur = nil
	}
	h.mu.Unlock()
}

func (h *h2client) close() {
	h.mu.Lock()
	h.closed = true
	c := h.cur
	h.cur = nil
	h.mu.Unlock()
	if c != nil {
		c.fail(errH2Closed)
	}
}

// ready waits until a connection is up (gconn.ready's contract); the call
// that follows polls it (h2conn.usable), once.
func (h *h2client) ready(ctx context.Context) error {
	if _, err := h.connect(ctx, false); err != nil {
		if status.Code(err) == codes.Canceled && errors.Is(err, errH2Closed) {
			return ErrClosed
		}
		return fmt.Errorf("%w (%v)", errNotConnected, err)
	}
	return nil
}

// Invoke implements grpc.ClientConnInterface: one unary call.
func (h *h2client) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	c, err := h.conn(ctx)
	if err != nil {
		return err
	}
	s, err := c.open(ctx, time.Time{}, method, args, true, nil)
	if err != nil {
		return err
	}
	defer s.release()
	err = c.await(s, s.finished)
	c.mu.Lock()
	st, msgs, refused := s.st, s.msgs, s.refused
	c.mu.Unlock()
	if !refused {
		setPeer(opts, c) // the call may have reached the node
	}
	if err != nil {
		return err
	}
	if st.Code() != codes.OK {
		return st.Err()
	}
	if len(msgs) != 1 {
		return status.Errorf(codes.Internal, "grpc: unary call %s answered with %d messages", method, len(msgs))
	}
	return synodpb.UnmarshalMessage(msgs[0], reply)
}

// NewStream implements grpc.ClientConnInterface.
func (h *h2client) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	c, err := h.conn(ctx)
	if err != nil {
		return nil, err
	}
	s, err := c.open(ctx, time.Time{}, method, nil, false, nil)
	if err != nil {
		return nil, err
	}
	setPeer(opts, c)
	return s, nil
}

// unary is one unary call of method (Invoke without grpc's call options,
// the generated stub's option list and contexts of the caller's own for
// its time limit and its other end): the call ends by deadline, when ctx
// ends or when also (if not nil) ends (CANCELED), whichever is first;
// extra are metadata fields sent besides ctx's (the client's password).
// It returns the reply's message (the stream's own copy); sent reports
// whether the call may have reached the node (it was put on a connection
// and not refused).
func (h *h2client) unary(ctx context.Context, deadline time.Time, also context.Context, method string, args any, extra []hpack.HeaderField) (msg []byte, sent bool, err error) {
	c, err := h.conn(ctx)
	if err != nil {
		return nil, false, err
	}
	s, err := c.open(ctx, deadline, method, args, true, extra)
	if err != nil {
		return nil, false, err
	}
	if also != nil && also.Done() != nil {
		s.stopAlso = context.AfterFunc(also, s.cancelAlso)
	}
	defer s.release()
	err = c.await(s, s.finished)
	c.mu.Lock()
	st, msgs, refused := s.st, s.msgs, s.refused
	c.mu.Unlock()
	if err != nil {
		return nil, !refused, err
	}
	if st.Code() != codes.OK {
		return nil, !refused, st.Err()
	}
	if len(msgs) != 1 {
		return nil, true, status.Errorf(codes.Internal, "grpc: unary call %s answered with %d messages", method, len(msgs))
	}
	return msgs[0], true, nil
}

// up reports whether h has a connection (which the next call polls).
func (h *h2client) up() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cur != nil && !h.closed
}

func setPeer(opts []grpc.CallOption, c *h2conn) {
	for _, o := range opts {
		if p, ok := o.(grpc.PeerCallOption); ok {
			*p.PeerAddr = peer.Peer{Addr: c.nc.RemoteAddr(), LocalAddr: c.nc.LocalAddr()}
		}
	}
}

// h2conn is one HTTP/2 connection of the direct transport.
type h2conn struct {
	nc        net.Conn
	raw       syscall.RawConn // nil when the connection has none
	authority string

	// Writing: under wmu.
	wmu    sync.Mutex
	bw     *bufio.Writer
	fw     *http2.Framer
	hbuf   bytes.Buffer
	henc   *hpack.Encoder
	nextID uint32
	// tableSize is the node's SETTINGS_HEADER_TABLE_SIZE when it changed
	// and the encoder has not yet taken it (-1: none): the reader sets it,
	// the next writer applies it.
	tableSize atomic.Int64
	// toMS and to are the last grpc-timeout sent in milliseconds and its
	// value (timeoutValue).
	toMS int64
	to   string

	// Shared state: under mu.
	mu        sync.Mutex
	streams   map[uint32]*h2stream
	reading   bool        // a goroutine holds the read turn
	reader    *h2stream   // the stream whose caller reads (nil: none, or a poll)
	waiters   []*h2stream // callers waiting (entries of streams no longer waiting are skipped)
	err       error       // set once the connection failed
	goaway    bool        // the node sent GOAWAY: no new streams
	sendWin   int64       // connection-level send window
	streamWin int64       // the node's SETTINGS_INITIAL_WINDOW_SIZE
	maxFrame  uint32      // the node's SETTINGS_MAX_FRAME_SIZE
	// ctl holds control frames the reader wrote (WINDOW_UPDATE, SETTINGS
	// and PING acknowledgements) until a writer sends them: the reader
	// never waits for the write lock, whose holder may be blocked writing
	// to a node that is itself blocked writing to us (sendCtl).
	ctl   bytes.Buffer
	ctlFr *http2.Framer

	deadlines h2util.Queue // the unary calls' deadlines (open's)

	// Reading: by the turn's holder only.
	rbuf        []byte
	rs, re      int // rbuf[rs:re] is read and not yet parsed
	src         frameSource
	pollRead    func(fd uintptr) bool // poll's non-blocking read, made once
	pollN       int                   // its result (the caller holds the turn)
	pollErr     error
	fr          *http2.Framer
	hdec        *hpack.Decoder
	hfields     []hpack.HeaderField // the block's fields (emitHeader), valid until the next block
	block       []byte              // header block being assembled (HEADERS + CONTINUATION)
	blockSID    uint32
	blockEnd    bool // the HEADERS frame ended the stream
	inBlock     bool // CONTINUATION frames of the block are to come
	recvUnacked int  // connection-level bytes read and not yet granted back
}

// frameSource feeds the read Framer from rbuf; the reader hands it only
// complete frames, so it never reads the connection.
type frameSource struct{ c *h2conn }

func (s frameSource) Read(p []byte) (int, error) {
	c := s.c
	if c.rs == c.re {
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(p, c.rbuf[c.rs:c.re])
	c.rs += n
	return n, nil
}

var errH2Refused = errors.New("the node refused the stream before processing it")

func dialH2(ctx context.Context, addr string, timeout time.Duration) (*h2conn, error) {
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	c := &h2conn{nc: nc, authority: addr, streams: map[uint32]*h2stream{}, nextID: 1,
		maxFrame: 16384, sendWin: 65535, streamWin: 65535, rbuf: make([]byte, 64<<10)}
	if sc, ok := nc.(syscall.Conn); ok {
		c.raw, _ = sc.SyscallConn()
	}
	c.bw = bufio.NewWriterSize(nc, 32<<10)
	c.fw = http2.NewFramer(c.bw, nil)
	c.ctlFr = http2.NewFramer(&c.ctl, nil)
	c.tableSize.Store(-1)
	c.henc = hpack.NewEncoder(&c.hbuf)
	c.src = frameSource{c}
	c.fr = http2.NewFramer(nil, c.src)
	c.fr.SetReuseFrames() // every frame is handled before the next is read
	c.pollRead = func(fd uintptr) bool {
		c.pollN, c.pollErr = syscall.Read(int(fd), c.rbuf[c.re:])
		return true
	}
	c.hdec = hpack.NewDecoder(4096, c.emitHeader)
	// The preface, our settings (the stream window; the rest default), the
	// connection window; then the node's SETTINGS, which every HTTP/2
	// server sends first.
	if dl, ok := dctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(dctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	_, err = c.bw.WriteString(http2.ClientPreface)
	if err == nil {
		err = c.fw.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: synodpb.StreamWindow},
			http2.Setting{ID: http2.SettingEnablePush, Val: 0})
	}
	if err == nil {
		err = c.fw.WriteWindowUpdate(0, synodpb.ConnWindow-65535)
	}
	if err == nil {
		err = c.bw.Flush()
	}
	for err == nil {
		var f http2.Frame
		if f, err = c.readFrame(true); err == nil {
			_, isSettings := f.(*http2.SettingsFrame)
			err = c.handle(f)
			if isSettings && err == nil {
				break
			}
		}
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("http2 handshake with %s: %w", addr, err)
	}
	nc.SetDeadline(time.Time{})
	return c, nil
}

// usable reports whether new calls may go on c. When nobody reads c, it
// first reads what the node sent meanwhile, without blocking.
func (c *h2conn) usable() bool {
	c.pollIdle()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err == nil && !c.goaway
}

// pollIdle reads what is pending on c if nobody reads it, without
// blocking (so a connection the node closed or shut down while nobody
// read it is known before anything is sent on it).
func (c *h2conn) pollIdle() {
	c.mu.Lock()
	if c.reading || c.err != nil || c.raw == nil {
		c.mu.Unlock()
		return
	}
	c.reading = true
	c.mu.Unlock()
	err := c.poll()
	if err != nil {
		c.fail(err)
	}
	c.mu.Lock()
	c.reading = false
	c.passTurn()
	c.mu.Unlock()
}

// poll reads and handles what is pending on the connection, without
// blocking. The caller holds the turn.
func (c *h2conn) poll() error {
	for {
		c.compact()
		err := c.raw.Read(c.pollRead)
		n, rerr := c.pollN, c.pollErr
		switch {
		case err != nil:
			return err
		case rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK:
			return nil
		case rerr != nil:
			return rerr
		case n == 0:
			return io.EOF
		}
		c.re += n
		for c.complete() {
			f, err := c.frame()
			if err != nil {
				return err
			}
			if err := c.handle(f); err != nil {
				return err
			}
		}
	}
}

// compact makes room at rbuf's end for at least one more frame.
func (c *h2conn) compact() {
	if c.rs == c.re {
		c.rs, c.re = 0, 0
		return
	}
	need := 9 + 16384
	if c.re-c.rs >= 9 {
		need = 9 + int(uint32(c.rbuf[c.rs])<<16|uint32(c.rbuf[c.rs+1])<<8|uint32(c.rbuf[c.rs+2]))
	}
	if len(c.rbuf)-c.rs >= need && len(c.rbuf)-c.re >= 4096 {
		return
	}
	if need > len(c.rbuf) {
		nb := make([]byte, need+4096)
		c.re = copy(nb, c.rbuf[c.rs:c.re])
		c.rbuf, c.rs = nb, 0
		return
	}
	c.re = copy(c.rbuf, c.rbuf[c.rs:c.re])
	c.rs = 0
}

// complete reports whether rbuf holds a whole frame.
func (c *h2conn) complete() bool {
	if c.re-c.rs < 9 {
		return false
	}
	n := int(uint32(c.rbuf[c.rs])<<16 | uint32(c.rbuf[c.rs+1])<<8 | uint32(c.rbuf[c.rs+2]))
	return c.re-c.rs >= 9+n
}

// readFrame returns the next frame, reading the connection (blocking) if
// rbuf holds no complete one. A read interrupted by a deadline returns the
// timeout error with nothing lost: partial frames stay in rbuf.
func (c *h2conn) readFrame(handshake bool) (http2.Frame, error) {
	for !c.complete() {
		c.compact()
		n, err := c.nc.Read(c.rbuf[c.re:])
		c.re += n
		if err != nil && !(n > 0 && c.complete()) {
			return nil, err
		}
	}
	return c.frame()
}

// frame returns rbuf's next frame (a complete one). A HEADERS frame that
// is a whole header block is handled here (a nil frame returned: handle
// ignores it), parsed in rbuf: the Framer would make a HeadersFrame for
// it, two per call (headers and trailers). The others, and a HEADERS
// frame that CONTINUATION frames follow, are the Framer's (which checks
// their order).
func (c *h2conn) frame() (http2.Frame, error) {
	b := c.rbuf[c.rs:c.re]
	if http2.FrameType(b[3]) != http2.FrameHeaders || c.inBlock || b[4]&byte(http2.FlagHeadersEndHeaders) == 0 {
		return c.fr.ReadFrame()
	}
	n := int(uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]))
	fh := http2.FrameHeader{Type: http2.FrameHeaders, Flags: http2.Flags(b[4]), Length: uint32(n), StreamID: binary.BigEndian.Uint32(b[5:9]) & (1<<31 - 1)}
	frag, err := h2util.HeadersFragment(fh, b[9:9+n])
	if err != nil {
		return nil, err
	}
	c.rs += 9 + n
	c.block = append(c.block[:0], frag...)
	c.blockSID, c.blockEnd = fh.StreamID, fh.Flags.Has(http2.FlagHeadersEndStream)
	return nil, c.handleHeaders()
}

// open starts a stream of method; for a unary call it also sends msg and
// ends the stream's sending side. The stream ends when ctx does or, if
// deadline is set, then (DEADLINE_EXCEEDED); extra are metadata fields
// sent besides ctx's. An error means nothing was sent.
func (c *h2conn) open(ctx context.Context, deadline time.Time, method string, msg any, unary bool, extra []hpack.HeaderField) (*h2stream, error) {
	var body []byte
	var buf *[]byte
	if unary {
		var err error
		buf = frameBufs.Get().(*[]byte)
		if body, err = synodpb.AppendFrame((*buf)[:0], msg); err != nil {
			frameBufs.Put(buf)
			return nil, err
		}
		// Written (copied to the connection's buffer, or sent) before
		// open returns.
		defer putFrameBuf(buf, body)
	}
	timed := !deadline.IsZero() // a timer of the stream's own, unless ctx ends first anyway
	if dl, ok := ctx.Deadline(); ok && (!timed || !dl.After(deadline)) {
		deadline, timed = dl, false
	}
	s := &h2stream{c: c, ctx: ctx, method: method, unary: unary}
	c.wmu.Lock()
	c.mu.Lock()
	if err := c.err; err != nil || c.goaway {
		c.mu.Unlock()
		c.unlockW(nil)
		if err == nil {
			err = errors.New("the node is shutting down (GOAWAY)")
		}
		return nil, status.Errorf(codes.Unavailable, "connection closed before the call was sent: %v", err)
	}
	s.id = c.nextID
	c.nextID += 2
	s.sendWin = c.streamWin
	c.streams[s.id] = s
	c.mu.Unlock()
	err := c.writeRequestHeaders(s.id, ctx, method, deadline, extra)
	end := false
	if err == nil && unary {
		end, err = c.writeSome(s, body, true)
	}
	err = c.unlockW(err)
	if ctx.Done() != nil {
		s.stop = context.AfterFunc(ctx, s.abort)
	}
	if timed {
		s.queued = true
		c.deadlines.Add(&s.dl, deadline, s)
	}
	if err == nil && unary && !end {
		err = c.sendRest(s, body, true)
	}
	// A failed write leaves the stream failed by c.fail: its caller learns
	// it from the stream, as for a failure after sending.
	return s, nil
}

// writeRequestHeaders writes the request's header block: gRPC's fields,
// the deadline as grpc-timeout, extra and ctx's outgoing metadata. The
// caller holds wmu.
func (c *h2conn) writeRequestHeaders(sid uint32, ctx context.Context, method string, deadline time.Time, extra []hpack.HeaderField) error {
	if ts := c.tableSize.Swap(-1); ts >= 0 {
		c.henc.SetMaxDynamicTableSizeLimit(uint32(ts))
	}
	c.hbuf.Reset()
	e := c.henc
	e.WriteField(hpack.HeaderField{Name: ":method", Value: "POST"})
	e.WriteField(hpack.HeaderField{Name: ":scheme", Value: "http"})
	e.WriteField(hpack.HeaderField{Name: ":path", Value: method})
	e.WriteField(hpack.HeaderField{Name: ":authority", Value: c.authority})
	e.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
	e.WriteField(hpack.HeaderField{Name: "user-agent", Value: "synod-go-direct"})
	e.WriteField(hpack.HeaderField{Name: "te", Value: "trailers"})
	if !deadline.IsZero() {
		v, same := c.timeoutValue(time.Until(deadline))
		// A value sent before goes into the header table (the calls of one
		// client mostly have the same time limit); others are not kept.
		e.WriteField(hpack.HeaderField{Name: "grpc-timeout", Value: v, Sensitive: !same})
	}
	for _, f := range extra {
		e.WriteField(f)
	}
	if md, ok := metadata.FromOutgoingContext(ctx); ok {
		for k, vs := range md {
			if strings.HasPrefix(k, ":") || strings.HasPrefix(k, "grpc-") || k == "content-type" || k == "te" || k == "user-agent" {
				continue
			}
			for _, v := range vs {
				if strings.HasSuffix(k, "-bin") {
					v = base64.RawStdEncoding.EncodeToString([]byte(v))
				}
				e.WriteField(hpack.HeaderField{Name: k, Value: v, Sensitive: true})
			}
		}
	}
	return c.writeBlock(sid, false)
}

// timeoutValue is grpc-timeout's value for d, and whether it is the value
// the connection sent last: time limits of a second or more in whole
// milliseconds, rounded up (the node's deadline at most a millisecond
// later than the caller's, which ends the call first), so that one
// client's calls send the same value. The caller holds wmu.
func (c *h2conn) timeoutValue(d time.Duration) (string, bool) {
	if d < time.Second {
		return synodpb.EncodeTimeout(d), false
	}
	ms := int64((d + time.Millisecond - 1) / time.Millisecond)
	if ms == c.toMS && c.to != "" {
		return c.to, true
	}
	c.toMS, c.to = ms, strconv.FormatInt(ms, 10)+"m"
	return c.to, false
}

// writeBlock writes the header block in hbuf (HEADERS, CONTINUATION as
// needed). The caller holds wmu.
func (c *h2conn) writeBlock(sid uint32, end bool) error {
	block := c.hbuf.Bytes()
	first := true
	for first || len(block) > 0 {
		n := min(len(block), 16384) // any peer accepts frames of 16 KiB
		frag, last := block[:n], n == len(block)
		var err error
		if first {
			err = c.fw.WriteHeaders(http2.HeadersFrameParam{StreamID: sid, BlockFragment: frag, EndStream: end, EndHeaders: last})
		} else {
			err = c.fw.WriteContinuation(sid, last, frag)
		}
		if err != nil {
			return err
		}
		block, first = block[n:], false
	}
	return nil
}

// frameBufs hold the buffers unary calls' messages are framed in (open).
var frameBufs = sync.Pool{New: func() any { return new([]byte) }}

// putFrameBuf returns buf, which body (framed there) may have grown, to
// frameBufs.
func putFrameBuf(buf *[]byte, body []byte) {
	if cap(body) > maxKeptFrame {
		body = nil // a rare large message's buffer is not kept
	}
	*buf = body[:0]
	frameBufs.Put(buf)
}

// writeSome writes as much of body as the send windows allow, moving
// s.sent on, and ends the stream with the last of it when end is set. It
// reports whether everything was written. The caller holds wmu.
func (c *h2conn) writeSome(s *h2stream, body []byte, end bool) (bool, error) {
	for {
		rest := body[s.sent:]
		c.mu.Lock()
		n := int64(len(rest))
		n = min(n, c.sendWin, s.sendWin, int64(c.maxFrame))
		if n < 0 {
			n = 0
		}
		if n == 0 && len(rest) > 0 {
			c.mu.Unlock()
			return false, nil
		}
		c.sendWin -= n
		s.sendWin -= n
		c.mu.Unlock()
		last := int(n) == len(rest)
		if err := c.fw.WriteData(s.id, end && last, rest[:n]); err != nil {
			return false, err
		}
		s.sent += int(n)
		if last {
			return true, nil
		}
	}
}

// sendRest writes the rest of body as the node grants window, waiting for
// it as a reader does.
func (c *h2conn) sendRest(s *h2stream, body []byte, end bool) error {
	for {
		c.mu.Lock()
		s.winWait = true
		c.mu.Unlock()
		err := c.await(s, func() bool {
			return s.done || (c.sendWin > 0 && s.sendWin > 0)
		})
		c.mu.Lock()
		s.winWait = false
		c.mu.Unlock()
		if err != nil {
			return err
		}
		c.mu.Lock()
		done := s.done
		c.mu.Unlock()
		if done {
			return nil // the stream ended: its caller learns how from it
		}
		var all bool
		if err := c.write(func() (err error) {
			all, err = c.writeSome(s, body, end)
			return err
		}); err != nil {
			return nil
		}
		if all {
			return nil
		}
	}
}

// write runs fn (writing frames) under the write lock and flushes; an
// error fails the connection.
func (c *h2conn) write(fn func() error) error {
	c.wmu.Lock()
	return c.unlockW(fn())
}

// unlockW sends the pending control frames, flushes and releases the
// write lock; err (a failed write) or a failed flush fails the connection.
// Control frames the reader queued meanwhile are sent by taking the lock
// again if it is free.
func (c *h2conn) unlockW(err error) error {
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
		pending := c.ctl.Len() > 0
		c.mu.Unlock()
		if !pending || !c.wmu.TryLock() {
			return nil
		}
	}
}

// takeCtl returns (a copy of) the pending control frames, or nil.
func (c *h2conn) takeCtl() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctl.Len() == 0 {
		return nil
	}
	b := bytes.Clone(c.ctl.Bytes())
	c.ctl.Reset()
	return b
}

// sendCtl queues a control frame (fn writes it) and sends it now if the
// write lock is free, else its holder does when it releases it. The reader
// uses it: it must never wait for the write lock.
func (c *h2conn) sendCtl(fn func(fr *http2.Framer) error) error {
	c.mu.Lock()
	err := fn(c.ctlFr)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if c.wmu.TryLock() {
		return c.unlockW(nil)
	}
	return nil
}

// await waits until cond (evaluated under mu) holds, reading the
// connection when nobody else does. It returns an error when the
// connection failed before cond held.
func (c *h2conn) await(s *h2stream, cond func() bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for !cond() {
		if c.err != nil {
			c.dropTurn(s)
			return c.err
		}
		if !c.reading || s.turn {
			s.turn = false
			c.reading, c.reader = true, s
			c.mu.Unlock()
			err := c.readUntil(cond)
			if err != nil {
				c.fail(err)
			}
			c.mu.Lock()
			c.reading, c.reader = false, nil
			c.passTurn()
			continue
		}
		s.waiting = true
		if s.ch == nil {
			s.ch = make(chan struct{}, 1) // a caller that reads its own reply never waits
		}
		c.waiters = append(c.waiters, s)
		c.mu.Unlock()
		<-s.ch // woken for data, the stream's end, window or the turn
		c.mu.Lock()
	}
	c.dropTurn(s)
	return nil
}

// dropTurn passes on the read turn if it was passed to s, which no longer
// needs it. The caller holds mu.
func (c *h2conn) dropTurn(s *h2stream) {
	if s.turn {
		s.turn = false
		c.reading = false
		c.passTurn()
	}
}

// passTurn gives the read turn to the oldest waiting caller, if any. The
// caller holds mu and has left the turn.
func (c *h2conn) passTurn() {
	for len(c.waiters) > 0 && !c.reading {
		w := c.waiters[0]
		c.waiters[0] = nil
		c.waiters = c.waiters[1:]
		if w.waiting {
			w.waiting = false
			w.turn = true
			c.reading = true // held for w
			w.wake()
		}
	}
	if len(c.waiters) == 0 {
		c.waiters = nil
	}
}

// readUntil reads and handles frames until cond holds. The caller holds
// the turn (not mu).
func (c *h2conn) readUntil(cond func() bool) error {
	for {
		c.mu.Lock()
		ok := cond()
		c.mu.Unlock()
		if ok {
			return nil
		}
		f, err := c.readFrame(false)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// s's context ended (s.abort) or a stale interruption of an
				// earlier reader's: read on unless cond now holds.
				c.nc.SetReadDeadline(time.Time{})
				continue
			}
			return err
		}
		if err := c.handle(f); err != nil {
			return err
		}
	}
}

// handle acts on one frame read. The caller holds the turn.
func (c *h2conn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.DataFrame:
		return c.handleData(f)
	case *http2.HeadersFrame:
		c.block = append(c.block[:0], f.HeaderBlockFragment()...)
		c.blockSID, c.blockEnd = f.StreamID, f.StreamEnded()
		c.inBlock = !f.HeadersEnded()
		if f.HeadersEnded() {
			return c.handleHeaders()
		}
	case *http2.ContinuationFrame:
		if f.StreamID != c.blockSID {
			return errors.New("http2: CONTINUATION of another stream")
		}
		c.block = append(c.block, f.HeaderBlockFragment()...)
		if f.HeadersEnded() {
			c.inBlock = false
			return c.handleHeaders()
		}
	case *http2.RSTStreamFrame:
		st := status.Newf(codes.Internal, "stream terminated by RST_STREAM with error code: %v", f.ErrCode)
		refused := false
		switch f.ErrCode {
		case http2.ErrCodeRefusedStream:
			st = status.Newf(codes.Unavailable, "%v: %v", errH2Refused, f.ErrCode)
			refused = true
		case http2.ErrCodeCancel:
			st = status.New(codes.Canceled, "stream terminated by RST_STREAM with error code: CANCEL")
		case http2.ErrCodeEnhanceYourCalm:
			st = status.New(codes.ResourceExhausted, "stream terminated by RST_STREAM with error code: ENHANCE_YOUR_CALM")
		}
		c.mu.Lock()
		if s := c.streams[f.StreamID]; s != nil {
			s.refused = refused
			s.end(st)
		}
		c.mu.Unlock()
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		c.mu.Lock()
		f.ForeachSetting(func(st http2.Setting) error {
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
		c.wakeWriters()
		c.mu.Unlock()
		return c.sendCtl(func(fr *http2.Framer) error { return fr.WriteSettingsAck() })
	case *http2.PingFrame:
		if f.IsAck() {
			return nil
		}
		return c.sendCtl(func(fr *http2.Framer) error { return fr.WritePing(true, f.Data) })
	case *http2.WindowUpdateFrame:
		c.mu.Lock()
		if f.StreamID == 0 {
			c.sendWin += int64(f.Increment)
		} else if s := c.streams[f.StreamID]; s != nil {
			s.sendWin += int64(f.Increment)
		}
		c.wakeWriters()
		c.mu.Unlock()
	case *http2.GoAwayFrame:
		c.mu.Lock()
		c.goaway = true
		for id, s := range c.streams {
			if id > f.LastStreamID {
				s.refused = true
				s.end(status.Newf(codes.Unavailable, "%v: GOAWAY, last stream %d", errH2Refused, f.LastStreamID))
			}
		}
		c.closeDrained()
		c.mu.Unlock()
	}
	return nil
}

// wakeWriters wakes the callers waiting for send window. The caller holds
// mu.
func (c *h2conn) wakeWriters() {
	for _, w := range c.waiters {
		if w != nil && w.waiting && w.winWait {
			w.waiting = false
			w.wake()
		}
	}
}

func (c *h2conn) handleData(f *http2.DataFrame) error {
	n := int(f.Header().Length)
	c.recvUnacked += n
	var connInc, streamInc uint32
	if c.recvUnacked >= synodpb.ConnWindow/4 {
		connInc, c.recvUnacked = uint32(c.recvUnacked), 0
	}
	c.mu.Lock()
	s := c.streams[f.StreamID]
	var err error
	if s != nil && !s.done {
		s.partial = append(s.partial, f.Data()...)
		for len(s.partial) >= 5 {
			if s.partial[0] != 0 {
				s.end(status.New(codes.Internal, "grpc: compressed message received, none asked for"))
				break
			}
			l := int(binary.BigEndian.Uint32(s.partial[1:5]))
			if l > synodpb.MaxMessageSize {
				s.end(status.Newf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", l, synodpb.MaxMessageSize))
				break
			}
			if len(s.partial) < 5+l {
				break
			}
			if s.msgs == nil {
				s.msgs = s.msgs0[:0] // a unary call's one message: no list of its own
			}
			s.msgs = append(s.msgs, s.partial[5:5+l:5+l])
			s.partial = s.partial[5+l:]
			if len(s.partial) == 0 {
				s.partial = nil
			}
			s.wakeReader()
		}
		s.recvUnacked += n
		if !f.StreamEnded() && s.recvUnacked >= synodpb.StreamWindow/4 {
			streamInc, s.recvUnacked = uint32(s.recvUnacked), 0
		}
		if f.StreamEnded() && !s.done {
			s.end(status.New(codes.Internal, "server closed the stream without sending trailers"))
		}
	}
	c.mu.Unlock()
	if connInc > 0 || streamInc > 0 {
		err = c.sendCtl(func(fr *http2.Framer) (err error) {
			if connInc > 0 {
				err = fr.WriteWindowUpdate(0, connInc)
			}
			if streamInc > 0 && err == nil {
				err = fr.WriteWindowUpdate(f.StreamID, streamInc)
			}
			return err
		})
	}
	return err
}

// handleHeaders decodes a complete header block: a response's headers, or
// its trailers (or both at once: trailers-only).
func (c *h2conn) handleHeaders() error {
	c.hfields = c.hfields[:0]
	_, err := c.hdec.Write(c.block)
	if err == nil {
		err = c.hdec.Close()
	}
	if err != nil {
		return fmt.Errorf("http2: header block: %w", err)
	}
	fields := c.hfields
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.streams[c.blockSID]
	if s == nil || s.done {
		return nil
	}
	var md metadata.MD // made for the first field of metadata
	httpStatus, ctype := "", ""
	grpcStatus, grpcMsg := "", ""
	for _, f := range fields {
		switch f.Name {
		case ":status":
			httpStatus = f.Value
		case "content-type":
			ctype = f.Value
		case "grpc-status":
			grpcStatus = f.Value
		case "grpc-message":
			grpcMsg = synodpb.DecodeStatusMessage(f.Value)
		default:
			if strings.HasPrefix(f.Name, ":") || strings.HasPrefix(f.Name, "grpc-") {
				continue
			}
			v := f.Value
			if strings.HasSuffix(f.Name, "-bin") {
				if b, err := synodpb.DecodeBinaryHeader(v); err == nil {
					v = string(b)
				}
			}
			if md == nil {
				md = metadata.MD{}
			}
			md[f.Name] = append(md[f.Name], v)
		}
	}
	if !s.gotHeader {
		s.gotHeader = true
		s.header = md
		if httpStatus != "200" && grpcStatus == "" {
			s.end(status.Newf(httpCode(httpStatus), "unexpected HTTP status code received from server: %s", httpStatus))
			return nil
		}
		if grpcStatus == "" && !strings.HasPrefix(ctype, "application/grpc") {
			s.end(status.Newf(codes.Unknown, "unexpected content-type %q", ctype))
			return nil
		}
		if !c.blockEnd {
			s.wakeReader()
			return nil
		}
	} else {
		s.trailer = md
	}
	if !c.blockEnd {
		return errors.New("http2: trailers without END_STREAM")
	}
	code, err := strconv.ParseUint(grpcStatus, 10, 32)
	if err != nil {
		s.end(status.Newf(codes.Internal, "malformed grpc-status %q", grpcStatus))
		return nil
	}
	if code == 0 && grpcMsg == "" {
		s.end(statusOK)
		return nil
	}
	s.end(status.New(codes.Code(code), grpcMsg))
	return nil
}

// statusOK is every call's OK status (a Status is not changed once made).
var statusOK = status.New(codes.OK, "")

// emitHeader is the header decoder's: one field of the block being
// decoded (handleHeaders).
func (c *h2conn) emitHeader(f hpack.HeaderField) { c.hfields = append(c.hfields, f) }

func httpCode(s string) codes.Code {
	switch s {
	case "400":
		return codes.Internal
	case "401":
		return codes.Unauthenticated
	case "403":
		return codes.PermissionDenied
	case "404":
		return codes.Unimplemented
	case "429", "502", "503", "504":
		return codes.Unavailable
	}
	return codes.Unknown
}

// fail ends the connection: every open stream fails with UNAVAILABLE.
func (c *h2conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	st, ok := status.FromError(err)
	if !ok {
		st = status.Newf(codes.Unavailable, "connection error: %v", err)
	}
	c.err = st.Err()
	for _, s := range c.streams {
		s.end(st)
	}
	for _, w := range c.waiters {
		if w != nil && w.waiting {
			w.waiting = false
			w.wake()
		}
	}
	c.waiters = nil
	c.mu.Unlock()
	c.deadlines.Stop()
	c.nc.Close()
}

// h2stream is one stream: a unary call, or a grpc.ClientStream.
type h2stream struct {
	c      *h2conn
	id     uint32
	ctx    context.Context
	method string
	unary  bool
	stop   func() bool // stops the context's AfterFunc
	// dl is open's deadline in the connection's deadlines (queued: it was
	// added), one timer for all the connection's calls.
	dl     h2util.Entry
	queued bool
	// stopAlso stops the AfterFunc of unary's other context (cancelAlso).
	stopAlso func() bool
	ch       chan struct{} // made when the caller first waits (await)

	// Under c.mu.
	sendWin     int64
	sent        int  // bytes of the message being written
	winWait     bool // the caller waits for send window (wakeWriters)
	refused     bool // the node refused the stream: not processed
	waiting     bool // the caller waits on ch (an entry of c.waiters)
	turn        bool // the read turn was passed to the caller
	gotHeader   bool
	header      metadata.MD
	trailer     metadata.MD
	msgs        [][]byte
	msgs0       [1][]byte // msgs' array for the first message
	partial     []byte
	done        bool
	st          *status.Status
	sentEnd     bool
	recvUnacked int
	wmuSend     sync.Mutex // serialises SendMsg/CloseSend (a stream's sending side is one goroutine's, but be safe)
	sbuf        []byte     // SendMsg's frame, reused (under wmuSend)
}

// h2Wakes counts callers woken by another goroutine (hand-offs), for
// tests.
var h2Wakes atomic.Int64

func (s *h2stream) wake() {
	h2Wakes.Add(1)
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

// wakeReader wakes s's caller if it waits. The caller holds c.mu.
func (s *h2stream) wakeReader() {
	if s.waiting {
		s.waiting = false
		s.wake()
	}
}

// end records the stream's status and forgets it. The caller holds c.mu.
func (s *h2stream) end(st *status.Status) {
	if s.done {
		return
	}
	s.done, s.st = true, st
	delete(s.c.streams, s.id)
	s.wakeReader()
	s.c.closeDrained()
}

// errH2Drained is the error of a connection closed by closeDrained.
var errH2Drained = status.Error(codes.Unavailable, "connection closed: the node sent GOAWAY and its last stream ended")

// closeDrained closes c once the node sent GOAWAY and no stream is left
// open: nothing more can go on it, and the node may keep its side open
// (grpc-go does while a GracefulStop or a max-age grace lasts), so it
// would otherwise wait for the finalizer. The caller holds c.mu.
func (c *h2conn) closeDrained() {
	if !c.goaway || len(c.streams) > 0 || c.err != nil {
		return
	}
	c.err = errH2Drained
	c.nc.Close()
}

func (s *h2stream) finished() bool { return s.done }

// abort ends s when its context ends: RST_STREAM(CANCEL) to the node, and
// an interrupted read if its caller reads.
func (s *h2stream) abort() { s.abortWith(s.ctx.Err()) }

// Expire ends s at its deadline, as abort (DEADLINE_EXCEEDED): the
// connection's deadlines (h2util.Queue) call it.
func (s *h2stream) Expire() { s.abortWith(context.DeadlineExceeded) }

// cancelAlso ends s when unary's other context ends, as abort (CANCELED).
func (s *h2stream) cancelAlso() { s.abortWith(context.Canceled) }

func (s *h2stream) abortWith(cause error) {
	c := s.c
	c.mu.Lock()
	if s.done {
		c.mu.Unlock()
		return
	}
	s.end(status.FromContextError(cause))
	if c.reader == s {
		c.nc.SetReadDeadline(time.Unix(1, 0))
	}
	dead := c.err != nil
	c.mu.Unlock()
	if !dead {
		c.write(func() error { return c.fw.WriteRSTStream(s.id, http2.ErrCodeCancel) })
	}
}

// release ends a finished unary call: the context's AfterFunc stops, the
// deadline leaves the connection's deadlines.
func (s *h2stream) release() {
	if s.stop != nil {
		s.stop()
	}
	if s.queued {
		s.c.deadlines.Remove(&s.dl)
	}
	if s.stopAlso != nil {
		s.stopAlso()
	}
	c := s.c
	c.mu.Lock()
	if !s.done {
		s.end(status.New(codes.Canceled, "call abandoned"))
	}
	c.mu.Unlock()
}

// Header implements grpc.ClientStream.
func (s *h2stream) Header() (metadata.MD, error) {
	if err := s.c.await(s, func() bool { return s.gotHeader || s.done }); err != nil {
		return nil, err
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if !s.gotHeader && s.st.Code() != codes.OK {
		return nil, s.st.Err()
	}
	return s.header, nil
}

// Trailer implements grpc.ClientStream (meaningful once RecvMsg returned an error).
func (s *h2stream) Trailer() metadata.MD {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.trailer
}

// Context implements grpc.ClientStream.
func (s *h2stream) Context() context.Context { return s.ctx }

// SendMsg implements grpc.ClientStream. An error means m was not sent:
// io.EOF when the stream had ended (RecvMsg says how).
func (s *h2stream) SendMsg(m any) error {
	s.wmuSend.Lock()
	defer s.wmuSend.Unlock()
	// Framed into the stream's buffer: written (copied to the connection's
	// buffer, or sent) before SendMsg returns.
	body, err := synodpb.AppendFrame(s.sbuf[:0], m)
	if err != nil {
		return err
	}
	if cap(body) <= maxKeptFrame {
		s.sbuf = body[:0]
	}
	c := s.c
	c.pollIdle() // an end of the stream (or connection) while nobody read
	c.mu.Lock()
	if s.done || s.sentEnd {
		c.mu.Unlock()
		return io.EOF
	}
	s.sent = 0
	c.mu.Unlock()
	var all bool
	if err := c.write(func() (err error) {
		all, err = c.writeSome(s, body, false)
		return err
	}); err != nil {
		return io.EOF
	}
	if !all {
		c.sendRest(s, body, false)
	}
	return nil
}

// maxKeptFrame bounds the frame buffer a stream keeps for its next
// message (SendMsg).
const maxKeptFrame = 64 << 10

// CloseSend implements grpc.ClientStream.
func (s *h2stream) CloseSend() error {
	s.wmuSend.Lock()
	defer s.wmuSend.Unlock()
	c := s.c
	c.mu.Lock()
	if s.done || s.sentEnd {
		c.mu.Unlock()
		return nil
	}
	s.sentEnd = true
	c.mu.Unlock()
	c.write(func() error { return c.fw.WriteData(s.id, true, nil) })
	return nil
}

// RecvMsg implements grpc.ClientStream: the next message, or io.EOF when
// the stream ended with OK, or the stream's status.
func (s *h2stream) RecvMsg(m any) error {
	b, err := s.recvBytes()
	if err != nil {
		return err
	}
	return synodpb.UnmarshalMessage(b, m)
}

// recvBytes is RecvMsg without the unmarshalling: the message's bytes
// (the stream's own copy, kept by nobody else).
func (s *h2stream) recvBytes() ([]byte, error) {
	c := s.c
	if err := c.await(s, func() bool { return len(s.msgs) > 0 || s.done }); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(s.msgs) > 0 {
		b := s.msgs[0]
		s.msgs[0] = nil
		if len(s.msgs) == 1 {
			s.msgs = s.msgs[:0] // its array kept for the next message
		} else {
			s.msgs = s.msgs[1:]
		}
		c.mu.Unlock()
		return b, nil
	}
	st := s.st
	c.mu.Unlock()
	if s.stop != nil {
		s.stop()
	}
	if st.Code() == codes.OK {
		return nil, io.EOF
	}
	return nil, st.Err()
}
