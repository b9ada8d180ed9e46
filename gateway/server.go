package gateway

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/resp"
	"github.com/synod-dev/synod/service"
)

// The RESP server.
//
// Each connection is served by one goroutine that reads a command, executes
// it, and writes its reply, in order; pipelined single-key commands may run
// concurrently under the conflict rule of pipeline.go (a command waits for
// the earlier in-flight commands on its key; any other command waits for
// all of them), their replies still in command order; where the protocol
// applies atomic groups a pipeline's commands go out as one group per read
// instead (pipeline.go, "Batches"). Replies are buffered and flushed
// to the connection's output buffer when the read buffer holds no further
// command; a writer goroutine drains that buffer to the socket, so a
// pipeline of N commands costs about one write system call rather than N.
// When the buffer is empty and the socket takes the reply at once (a client
// with nothing else in flight), the goroutine that flushes writes it to the
// socket itself, without waking the writer (limits.go, outBuf).
// The output buffer is bounded: the connection stops reading while it owes
// too many replies, and a client whose unwritten replies pass the hard
// limit is closed (limits.go). The only concurrency inside
// a connection is in multi-key commands (MGET, DEL, EXISTS), whose per-key
// requests are independent and are issued together (one after the other
// inside an interactive transaction, txn.go).
//
// Every request a connection sends to the Backend carries the RequestID
// (client, seq): client is a random 64-bit number chosen when the connection
// opens, seq counts that connection's requests from 1. A multi-key
// command's concurrent requests go out under client ids of their own
// (lanes, commands.go), so no client id ever has two requests in flight.
// The gateway never
// retries a request by itself: a timeout is reported to the client as
// "-TRYAGAIN ... outcome is unknown", and whether to retry is the client's
// decision.
//
// Malformed input (a RESP protocol error) is answered with
// "-ERR Protocol error: ..." and the connection is closed, as Redis does; it is
// logged, and the server and its other connections carry on.

// ErrShuttingDown may be returned (or wrapped) by a Backend whose node is
// stopping; the gateway answers "-TRYAGAIN node is shutting down".
var ErrShuttingDown = errors.New("node is shutting down")

// ServerOptions configure a Server. Zero values take the defaults noted.
type ServerOptions struct {
	// Password, when set, is required (AUTH or HELLO ... AUTH) before any
	// command other than AUTH, HELLO and QUIT. The user name, when given,
	// must be "default".
	Password string
	// Users are ACL users besides "default" (acl.go); with any, clients
	// must AUTH even without a Password.
	Users []config.User
	// Cluster is the cluster's name: a client certificate of another
	// cluster names no user (certuser.go).
	Cluster string
	// MaxClients bounds concurrent connections, RESP and those of
	// LimitListener (gRPC) together (default config.DefaultMaxClients).
	// Connections beyond it get "-ERR max number of clients reached" and
	// are closed (limits.go).
	MaxClients int
	// OutputBufferLimit is the hard limit, in bytes, of a connection's
	// unwritten replies: past it the client is closed (default
	// config.DefaultOutputBufferLimit).
	OutputBufferLimit int64
	// ProtoMaxBulkLen bounds a bulk string in a command (default and
	// maximum config.MaxProtoBulkLen).
	ProtoMaxBulkLen int
	// MaxPipeline is how many replies a connection may owe before it stops
	// being read (default config.DefaultMaxPipeline).
	MaxPipeline int
	// Logger receives protocol errors and connection events (default: discard).
	Logger *slog.Logger
	// RequestTimeout bounds each Backend.Do call (default 10 s).
	RequestTimeout time.Duration
	// EventLoop serves plaintext connections' plain data commands from one
	// epoll loop instead of a goroutine per connection (evloop.go); the
	// node sets it (since session 50). SYNOD_GATEWAY_EVLOOP=0 turns it off
	// and =1 on, whatever this says. Linux only.
	EventLoop bool
}

// Server is a Redis-protocol server in front of a Backend.
type Server struct {
	b Backend
	// noReplyFn: no reply written by the goroutine that completes the
	// request (replyfn.go); tests' "before".
	noReplyFn bool
	opts      ServerOptions
	log       *slog.Logger
	start     time.Time
	runID     string
	acl       *acl // users (acl.go)

	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	nextID    int64
	wg        sync.WaitGroup

	totalConns    atomic.Int64
	totalCommands atomic.Int64
	rejected      atomic.Int64
	// statBase holds the counts above at the last CONFIG RESETSTAT: INFO
	// shows the difference (infostats.go).
	statBase struct{ commands, conns, rejected atomic.Int64 }

	lim    limits        // limits.go
	ov     overload      // limits.go
	errs   errorStats    // error replies by code (errorstats.go)
	tun    tunableValues // CONFIG's encoding tunables (config.go)
	cmds   cmdStats      // INFO commandstats (infostats.go)
	acc    *accessTable  // keys' last access through this node (access.go)
	acllog aclLog        // ACL LOG (acllog.go)
	blk    blockReg      // blocked clients (blocking.go)
	ord    orderReg      // arrival order across connections (order.go)
	// testBeforeRead, set by tests only, runs before a connection marks
	// its last command done and reads its next (order_test.go: a
	// goroutine late to read).
	testBeforeRead atomic.Pointer[func(c *conn)]
	scr            scripts                // the script cache and function libraries (script.go)
	ps             hub                    // pub/sub subscribers (pubsub.go)
	notify         notifySetting          // notify-keyspace-events (notify.go)
	mem            memLimit               // maxmemory (maxmemory.go)
	saveParam      atomic.Pointer[string] // CONFIG SET save's schedule (maxmemory.go); nil: ""
	mon            monitors               // MONITOR connections (monitor.go)
	ev             *evLoop                // the client event loop, nil when off (evloop.go)
}

// NewServer returns a server for b. Call Serve to accept connections.
func NewServer(b Backend, opts ServerOptions) *Server {
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 10 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var id [20]byte
	rand.Read(id[:])
	a, err := newACL(opts.Users)
	if err != nil {
		// config.Validate checks every hash; one that slips through locks
		// its user out rather than the server.
		log.Error("ACL users refused", "err", err)
		a = &acl{users: map[string]*aclUser{}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		b: b, opts: opts, log: log, start: time.Now(), runID: hex.EncodeToString(id[:]), acl: a,
		ctx: ctx, cancel: cancel,
		listeners: map[net.Listener]struct{}{}, conns: map[*conn]struct{}{},
		acc: newAccessTable(),
	}
	s.initLimits()
	s.initPubSub()
	s.ev = newEvLoop(s)                    // evloop.go: nil unless on
	context.AfterFunc(ctx, s.stopCommands) // deadline.go
	return s
}

// Serve accepts connections on l until Close is called (it then returns nil)
// or l fails permanently (it returns the error). l is closed on return.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
		l.Close()
	}()
	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.isClosed() {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Error("accept failed; retrying", "addr", l.Addr().String(), "err", err, "backoff", backoff)
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return nil
			}
			continue
		}
		backoff = 0
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return nil
		}
		if !s.admit() {
			s.mu.Unlock()
			s.refuse(nc, "resp", true)
			continue
		}
		s.nextID++
		var ev bool
		nc, ev = s.ev.own(nc) // evconn_linux.go: the loop's socket, out of Go's netpoller
		c := s.newConn(nc, s.nextID)
		ev = ev && c.ev.on
		s.conns[c] = struct{}{}
		s.ord.conns.Add(1)
		s.wg.Add(1)
		s.mu.Unlock()
		s.totalConns.Add(1)
		go c.out.writer()
		if ev {
			s.ev.add(c)
			continue
		}
		go c.serve()
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops every Serve call, closes all client connections, cancels
// requests in flight (their clients see "-TRYAGAIN": outcome unknown) and
// waits for the connection goroutines to end.
func (s *Server) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		for l := range s.listeners {
			l.Close()
		}
		for c := range s.conns {
			c.nc.Close()
			c.out.fail(net.ErrClosed)
		}
	}
	s.mu.Unlock()
	s.cancel()
	s.ev.stop() // evloop.go: its connections go to goroutines, which end them
	s.wg.Wait()
	return nil
}

// conn is one client connection. Fields without a comment are used only by
// the connection's goroutine; mu guards those that CLIENT LIST reads from
// other connections.
type conn struct {
	s          *Server
	nc         net.Conn
	r          *resp.Reader
	br         *bufio.Reader // under r: watched while the client is blocked (blocking.go)
	w          *resp.Writer  // writes to out
	out        *outBuf       // the output buffer and its writer (limits.go)
	owed       int           // replies written to w since the last flush to out
	id         int64
	client     uint64   // RequestID.Client
	seq        uint64   // last RequestID.Seq used
	errReplies int      // error replies written (writeError): a command that wrote one failed (INFO commandstats)
	lanes      []*lane  // client ids of a multi-key command's concurrent requests (runAll)
	cmds       cmdCache // the last command name read (commands.go)
	created    time.Time
	ownWrote   atomic.Bool // sessions.go
	usedNS     []config.Namespace
	authed     bool
	user       *aclUser // nil: the default user, who may do everything (acl.go)
	quit       bool
	opts       optConn                       // protocol request options (options.go)
	txn        txnConn                       // the open interactive transaction (txn.go)
	multi      multiConn                     // MULTI's queue and the watched keys (multi.go)
	sub        subConn                       // subscriptions (subscribe.go, pubsub.go)
	push       pushQueue                     // pub/sub messages not yet written (pubsub.go)
	reply      replyMode                     // CLIENT REPLY (replymode.go)
	sink       replySink                     // between w and out: drops replies CLIENT REPLY silences
	blk        blockConn                     // blocking commands (blocking.go)
	ord        orderConn                     // arrival order across connections (order.go)
	pl         pipeConn                      // pipelined commands in flight (pipeline.go)
	bat        batchConn                     // pipeline batches sent as atomic groups (pipeline.go)
	setKey     string                        // the last SET's key (strings.go, keyOfSet)
	opChunk    []service.Op                  // one-operation lists to hand out (strings.go, oneOp)
	cluster    clusterConn                   // the Redis Cluster protocol (cluster.go)
	dl         deadlines                     // the deadline of the request in flight (deadline.go)
	bdl        [maxBatchesInFlight]deadlines // pipeline batches' deadlines (batchAsync)
	as         replyConn                     // the request answered by replied (replyfn.go)
	ev         evConnState                   // the event loop's (evloop.go)

	// wmu serialises writes: the connection goroutine holds it while it
	// runs a command and flushes, a subscription's pusher while it writes
	// a message (subscribe.go).
	wmu sync.Mutex

	mu      sync.Mutex
	ns      config.Namespace
	svc     service.Service // nil when the node serves no namespace
	read    automaton.ReadMode
	name    string
	libName string
	libVer  string
	lastCmd string
	// CLIENT LIST's view of the connection (clientlist.go), written by its
	// goroutine under mu.
	list listState
}

// randomClientID returns a fresh random 64-bit client id.
func randomClientID() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

func (s *Server) newConn(nc net.Conn, id int64) *conn {
	c := &conn{s: s, nc: nc, id: id, client: randomClientID(), created: time.Now(),
		authed: s.opts.Password == "" && len(s.opts.Users) == 0,
	}
	br := bufio.NewReaderSize(orderReader{c, c.evSource(nc)}, 16<<10)
	c.br = br
	c.r = resp.NewReader(br, resp.Limits{MaxBulk: int(s.lim.bulkLen.Load())})
	if sc, ok := nc.(syscall.Conn); ok { // not TLS: its bytes are not peekable (order.go)
		c.ord.raw, _ = sc.SyscallConn()
	}
	c.out = newOutBuf(c)
	c.list = listState{fd: socketFD(nc), multi: -1}
	c.sink.out = c.out
	c.w = resp.NewWriter(&c.sink)
	if nss := s.b.Namespaces(); len(nss) > 0 {
		c.ns = nss[0]
		c.svc, _ = service.Lookup(nss[0].Service)
	}
	return c
}

func (c *conn) serve() {
	c.s.log.Debug("client connected", "id", c.id, "remote", c.nc.RemoteAddr().String())
	c.certLogin() // a verified client certificate may name the user (certuser.go)
	c.serveFrom(evResume{})
}

// serveFrom is the connection's goroutine from where r says (a command
// the event loop read, evloop.go; nothing: the next command) until the
// connection ends, or until it hands the connection back to the event
// loop.
func (c *conn) serveFrom(r evResume) {
	s := c.s
	back := false // handed back to the event loop: nothing to end
	defer func() {
		if back {
			return
		}
		c.awaitReply()  // replyfn.go: the reply in flight first
		c.endPipeline() // the pipelined commands' replies go out first
		c.out.finish()  // then the replies already computed
		c.nc.Close()
		s.release()
		c.unsubscribeAll()
		c.abortOnClose()
		c.endSessions() // sessions.go
		c.dl.close()    // deadline.go: the slots' timers
		for i := range c.bdl {
			c.bdl[i].close()
		}
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.ord.conns.Add(-1)
		c.endOrdered() // nobody waits for a connection that ended (order.go)
		s.wg.Done()
	}()
	remote := c.nc.RemoteAddr().String()
	if r.failed {
		return
	}
	if r.detour != nil { // exec's command, left for a goroutine (evloop.go); wmu held
		r.detour()
		if err := c.finishReply(false, false); err != nil {
			s.log.Debug("writing reply failed", "id", c.id, "remote", remote, "err", err)
			return
		}
	}
	// held is a command (or a read error) that ended a pipeline batch
	// (pipeline.go, batch), or one the event loop read: the next iteration
	// serves it without reading.
	held, heldErr := r.held, r.heldErr
	heldCmd, heldPlan := r.heldCmd, r.heldPlan // held's plan, made by the event loop (evBatch)
	for first := true; ; first = false {
		// Back to the event loop once a command was served here (the one
		// that brought the connection here first: a read error, a command
		// the loop does not serve).
		if !first && held == nil && heldErr == nil && c.handBack() { // evloop.go
			back = true
			return
		}
		// Backpressure: while the client owes too many replies, read no
		// more of its commands (limits.go).
		if !c.out.waitRoom(int(s.lim.pipeline.Load())) {
			s.log.Debug("client connection closed", "id", c.id, "remote", remote)
			return
		}
		var args [][]byte
		var err error
		if f := s.testBeforeRead.Load(); f != nil {
			(*f)(c)
		}
		c.endCommand(held != nil || c.r.Buffered() > 0) // order.go
		switch {
		case held != nil || heldErr != nil:
			args, err, held, heldErr = held, heldErr, nil, nil
		default:
			args, err = c.r.ReadCommand()
			if err == nil {
				s.totalCommands.Add(1)
			}
		}
		if werr := c.awaitReply(); werr != nil { // replyfn.go: its reply first
			s.log.Debug("writing reply failed", "id", c.id, "remote", remote, "err", werr)
			return
		}
		c.beginCommand(args)
		if err != nil {
			c.drainPipeline()
			switch {
			case resp.IsProtocolError(err):
				s.log.Warn("closing client connection after protocol error", "id", c.id, "remote", remote, "err", err)
				c.writeError("ERR " + err.Error())
				c.w.Flush()
			case errors.Is(err, io.EOF), s.isClosed():
				s.log.Debug("client disconnected", "id", c.id, "remote", remote)
			default:
				s.log.Debug("client connection failed", "id", c.id, "remote", remote, "err", err)
			}
			return
		}
		var cmd *command
		var p plan
		var pipelined bool
		if heldCmd != nil { // made and noted by the loop's pipelineRule: not again
			cmd, p, pipelined, heldCmd, heldPlan = heldCmd, heldPlan, true, nil, plan{}
		} else {
			cmd, p, pipelined = c.pipelineable(args)
		}
		if c.reply != replyOn {
			pipelined = false // silenced replies: one command at a time (replymode.go)
		}
		c.awaitIndepBatch() // the loop's batch in flight first (pipeline.go)
		if pipelined && p.concurrent() && c.batchesInFlight() {
			// Batches go in flight one after another (pipeline.go): a
			// serial command's reply goes out before the replier's.
			if !c.flushOwed() {
				return
			}
			held, heldErr = c.batchAsync(p)
			continue
		}
		if pipelined && p.concurrent() && c.r.Buffered() > 0 && c.groupsPipelines() {
			c.drainPipeline()
			var ok bool
			if held, heldErr, ok = c.batch(p); !ok {
				return
			}
			continue
		}
		if pipelined && p.concurrent() {
			if !c.flushOwed() { // a serial command's reply, before the replier's
				return
			}
			c.pipeline(p)
			continue
		}
		c.drainPipeline()
		c.wmu.Lock()
		mute, skipping := c.muteReply()
		if pipelined {
			c.writeResult(c.sendPlan(cmd.name, p))
		} else {
			c.as.may = c.replyFirst() // replyfn.go
			c.exec(args)
			c.as.may = false
		}
		if c.as.submitted { // replied writes its reply; wmu was released
			c.as.submitted = false
			c.noteState()
			continue
		}
		if err := c.finishReply(mute, skipping); err != nil {
			s.log.Debug("writing reply failed", "id", c.id, "remote", remote, "err", err)
			return
		}
		if c.quit {
			return
		}
	}
}

// finishReply ends a command exec ran (wmu held, released on return): it
// counts its reply and flushes the replies owed when nothing is buffered
// behind it (or QUIT, or too many owed); the flush's error, if any.
func (c *conn) finishReply(mute, skipping bool) error {
	c.noteState()
	c.unmuteReply(mute, skipping)
	c.owed++
	var err error
	if c.quit || c.r.Buffered() == 0 || c.owed >= int(c.s.lim.pipeline.Load()) {
		err = c.w.Flush()
		c.out.addReplies(c.owed)
		c.owed = 0
	}
	c.wmu.Unlock()
	return err
}

// flushOwed flushes the serial commands' replies written and not yet
// flushed (c.owed); false when the connection failed.
func (c *conn) flushOwed() bool {
	if c.owed == 0 {
		return true
	}
	c.wmu.Lock()
	err := c.w.Flush()
	c.out.addReplies(c.owed)
	c.owed = 0
	c.wmu.Unlock()
	return err == nil
}
