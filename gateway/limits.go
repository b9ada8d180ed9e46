package gateway

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/synod-dev/synod/config"
)

// Overload: every queue a client's request and its reply pass through is
// bounded, and what happens when it is full is decided here (issue 19,
// item 4). The whole path, client to peers and back, is tabled in
// docs/ARCHITECTURE.md ("Queues and overload"); the gateway's part:
//
//	queue                      bound                              when full
//	accepted connections       maxclients (RESP + gRPC together)  refused: "-ERR max number of clients reached" (RESP;
//	                                                              gRPC: closed), counted (rejected_connections)
//	socket read buffer         16 KiB + one command, each bulk    a longer bulk: "-ERR Protocol error: invalid bulk
//	                           at most proto-max-bulk-len         length", connection closed (as Redis)
//	output buffer (outBuf)     pause at 64 KiB or max-pipeline    backpressure: the connection stops reading commands
//	                           replies owed                       until the writer drains it (TCP then stops the client)
//	output buffer, hard        client-output-buffer-limit         the client is closed and the node logs why, with the
//	                                                              limit (as Redis); counted (client_output_limit_closed)
//	MULTI queue                maxQueued commands (multi.go)      "-ERR too many commands in one MULTI (limit 10000)"
//	requests in flight         one command at a time per          (the connection's goroutine waits for its reply)
//	                           connection; MGET/DEL: one per key
//
// Reading and writing are split: the connection goroutine reads a command,
// runs it and appends its reply to the connection's output buffer; a writer
// goroutine drains that buffer to the socket (an idle connection's reply is
// written by the connection goroutine itself, never blocking: outBuf's
// direct writes). So a client that sends and
// does not read makes its output buffer fill, the connection stops reading
// (the kernel's socket buffers then fill and the client's writes block),
// and memory stays at about 64 KiB per connection plus one reply. A reply
// larger than the hard limit, or leader-channel pushes a subscriber does not
// read, close the client instead, as Redis's client-output-buffer-limit does
// (Redis's default for normal clients is no limit; ours is 256 MB, so one
// huge MGET cannot take the node's memory).
//
// Decisions where Redis differs or is silent:
//
//   - Redis keeps reading a pipelining client and closes it only at the
//     output limit (normal clients: never). Synod stops reading instead
//     (max-pipeline, default 1024 replies, a Synod name: Redis has none),
//     so a pipeline of any length is answered in full with bounded memory.
//   - Redis's soft limit (bytes over a time) is not implemented: CONFIG SET
//     client-output-buffer-limit accepts the class "normal" (and "pubsub",
//     which is the same buffer here) with soft limit 0.
//   - CONFIG SET proto-max-bulk-len applies to connections opened after it.
//   - A gRPC connection over maxclients cannot be sent a Redis error (HTTP/2
//     speaks first, maybe inside TLS): it is closed, logged and counted.
//   - Refusals are logged at most once per refusalLogEvery, with the number
//     refused since, so that a flood of connections does not flood the log.

// outputPause is how many bytes of unwritten replies make a connection stop
// reading commands until its writer drains them.
const outputPause = 64 << 10

// refusalLogEvery rate-limits the log lines of refused connections.
const refusalLogEvery = 10 * time.Second

// maxRefusing bounds the goroutines writing the maxclients error at once;
// beyond it a refused connection is closed without the message.
const maxRefusing = 64

// refusedMsg is Redis's answer to a connection over maxclients.
const refusedMsg = "-ERR max number of clients reached\r\n"

// errOutputLimit closes a client whose output buffer passed the hard limit.
var errOutputLimit = errors.New("client output buffer limit reached")

// limits are the server's current limits (CONFIG SET changes them).
type limits struct {
	maxClients atomic.Int64
	outLimit   atomic.Int64
	bulkLen    atomic.Int64
	pipeline   atomic.Int64
}

// overload counts what the limits refused or delayed.
type overload struct {
	clients       atomic.Int64 // open connections, RESP and gRPC
	outputClosed  atomic.Int64 // clients closed at the output limit
	backpressure  atomic.Int64 // times a connection stopped reading
	refusing      atomic.Int64 // refusal goroutines running
	refusedLogged atomic.Int64 // refusals already logged
	lastLog       atomic.Int64 // unix nanos of the last refusal log line
}

func (s *Server) initLimits() {
	l := (&config.Limits{
		MaxClients:              s.opts.MaxClients,
		ClientOutputBufferLimit: config.ByteSize(s.opts.OutputBufferLimit),
		ProtoMaxBulkLen:         config.ByteSize(s.opts.ProtoMaxBulkLen),
		MaxPipeline:             s.opts.MaxPipeline,
	}).WithDefaults()
	s.lim.maxClients.Store(int64(l.MaxClients))
	s.lim.outLimit.Store(int64(l.ClientOutputBufferLimit))
	s.lim.bulkLen.Store(int64(l.ProtoMaxBulkLen))
	s.lim.pipeline.Store(int64(l.MaxPipeline))
}

// OverloadStats are the gateway's refusal counters.
type OverloadStats struct {
	Clients            int64 // open connections, RESP and gRPC
	Rejected           int64 // connections refused at maxclients
	OutputLimitClosed  int64 // clients closed at the output buffer limit
	BackpressurePauses int64 // times a connection stopped reading (output buffer full)
}

// Overload reports the counters (the node exports them as metrics).
func (s *Server) Overload() OverloadStats {
	return OverloadStats{
		Clients: s.ov.clients.Load(), Rejected: s.rejected.Load(),
		OutputLimitClosed: s.ov.outputClosed.Load(), BackpressurePauses: s.ov.backpressure.Load(),
	}
}

// admit counts a new connection, or reports false when maxclients are open.
func (s *Server) admit() bool {
	for {
		n := s.ov.clients.Load()
		if n >= s.lim.maxClients.Load() {
			return false
		}
		if s.ov.clients.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (s *Server) release() { s.ov.clients.Add(-1) }

// refuse turns nc away at maxclients: counted, logged (rate-limited), and
// told so with Redis's message when msg is set. Over TLS the write runs in
// its own goroutine (the handshake comes first), at most maxRefusing at
// once; beyond those a refused TLS connection is closed without it.
func (s *Server) refuse(nc net.Conn, kind string, msg bool) {
	n := s.rejected.Add(1)
	now := time.Now().UnixNano()
	last := s.ov.lastLog.Load()
	if (last == 0 || now-last >= int64(refusalLogEvery)) && s.ov.lastLog.CompareAndSwap(last, now) {
		since := n - s.ov.refusedLogged.Swap(n)
		s.log.Warn("connection refused: max number of clients reached", "kind", kind, "remote", nc.RemoteAddr().String(),
			"maxclients", s.lim.maxClients.Load(), "refused_since_last_log", since, "refused_total", n)
	}
	if !msg {
		nc.Close()
		return
	}
	if _, isTLS := nc.(*tls.Conn); !isTLS {
		// A fresh socket's send buffer is empty: this write does not wait.
		// The deadline only bounds the impossible; at 100 ms it could pass
		// before the write began on a loaded machine, and the refused
		// client then read nothing (TestNodeUnderFlood under -race at load
		// 35: 'connection 2041: ""'; a 150 ms pause before the write
		// fails it at once).
		nc.SetWriteDeadline(time.Now().Add(time.Second))
		io.WriteString(nc, refusedMsg)
		nc.Close()
		return
	}
	if s.ov.refusing.Add(1) > maxRefusing {
		s.ov.refusing.Add(-1)
		nc.Close()
		return
	}
	go func() {
		defer s.ov.refusing.Add(-1)
		nc.SetWriteDeadline(time.Now().Add(time.Second))
		io.WriteString(nc, refusedMsg)
		nc.Close()
	}()
}

// LimitListener returns l with its connections counted against maxclients
// together with the RESP port's: one over the limit is closed at once and
// counted. For the gRPC port (HTTP/2 cannot carry Redis's message).
func (s *Server) LimitListener(l net.Listener) net.Listener {
	return &limitListener{Listener: l, s: s}
}

type limitListener struct {
	net.Listener
	s *Server
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if !l.s.admit() {
			l.s.refuse(nc, "grpc", false)
			continue
		}
		l.s.totalConns.Add(1)
		return &limitConn{Conn: nc, s: l.s}, nil
	}
}

type limitConn struct {
	net.Conn
	s    *Server
	once sync.Once
}

func (c *limitConn) Close() error {
	c.once.Do(c.s.release)
	return c.Conn.Close()
}

// outBuf is a connection's output buffer (Redis's client output buffer):
// the connection goroutine (and a subscription's pusher, under conn.wmu)
// appends replies, the writer goroutine drains them to the socket.
//
// Direct writes (issue 18): when nothing is buffered and nothing is being
// written, Write tries the socket itself, from the goroutine that completed
// the reply, with one non-blocking write(2) (directWriter); whatever the
// kernel does not take at once goes to the buffer for the writer goroutine,
// as before. So a client that reads its replies (the common one-command-
// at-a-time client) costs no hand-off to the writer and no wake-up of it,
// while a slow client's replies still queue in the buffer under the same
// limits: a direct write never blocks, and while one is under way its bytes
// count as the chunk being written (o.writing) and the writer waits for it
// (o.direct), so replies still reach the socket in the order they were
// appended. Without a raw socket (TLS, net.Pipe) every write goes through
// the writer.
type outBuf struct {
	c    *conn
	mu   sync.Mutex
	cond sync.Cond
	buf  []byte // appended, not yet taken by the writer
	// writing is the size of the chunk the writer (or a direct write) is
	// writing; replies and wreplies count the replies in buf and in that
	// chunk.
	writing           int
	replies, wreplies int
	direct            bool      // a direct write is under way: the writer waits
	paused            int       // readers waiting in waitRoom
	writerWaits       bool      // the writer waits in its cond.Wait
	writerWakes       uint64    // Write's wake-ups of a waiting writer (tests)
	raw               nowWriter // the socket for direct writes; nil: none
	closing           bool      // no more appends; the writer drains and ends
	err               error     // the first failure: nothing more is written
	done              chan struct{}
}

// nowWriter is a socket's non-blocking write: it returns how much of p the
// kernel took at once (directWriter; a test's stand-in).
type nowWriter interface{ writeNow(p []byte) int }

func newOutBuf(c *conn) *outBuf {
	o := &outBuf{c: c, done: make(chan struct{})}
	o.cond.L = &o.mu
	if sc, ok := c.nc.(syscall.Conn); ok && directWrites {
		if raw, err := sc.SyscallConn(); err == nil {
			if d := newDirectWriter(raw); d != nil {
				o.raw = d
			}
		}
	}
	return o
}

// Write appends p (resp.Writer's buffer flushes here). Past the hard limit
// it fails, and the client is closed with a log line.
func (o *outBuf) Write(p []byte) (int, error) {
	o.mu.Lock()
	if o.err != nil || o.closing {
		err := o.err
		o.mu.Unlock()
		if err == nil {
			err = net.ErrClosed
		}
		return 0, err
	}
	pending := len(o.buf) + o.writing + len(p)
	if limit := o.c.s.lim.outLimit.Load(); int64(pending) > limit {
		o.err = errOutputLimit
		o.buf = nil
		o.cond.Broadcast()
		o.mu.Unlock()
		s := o.c.s
		s.ov.outputClosed.Add(1)
		s.log.Warn("closing client: output buffer limit reached", "id", o.c.id, "remote", o.c.nc.RemoteAddr().String(),
			"pending_bytes", pending, "client_output_buffer_limit", limit)
		o.c.nc.Close()
		return 0, errOutputLimit
	}
	if o.raw != nil && len(o.buf) == 0 && o.writing == 0 {
		o.direct, o.writing = true, len(p)
		o.mu.Unlock()
		n := o.raw.writeNow(p)
		o.mu.Lock()
		o.direct, o.writing = false, 0
		if rest := p[n:]; len(rest) > 0 && o.err == nil {
			// The rest goes before whatever was appended meanwhile.
			o.buf = append(append(make([]byte, 0, len(rest)+len(o.buf)), rest...), o.buf...)
		}
		// Wake the writer only for what it has to do (bytes appended or
		// left over, a close or a failure), and a reader paused in waitRoom
		// (its bytes, o.writing, are gone now even if nothing is left to
		// write). An idle writer woken for nothing was one hand-off per
		// reply: a new thread started for it (wakep), its wait again.
		if len(o.buf) > 0 || o.closing || o.err != nil || o.paused > 0 {
			o.wakeAll()
		}
		o.mu.Unlock()
		return len(p), nil
	}
	o.buf = append(o.buf, p...)
	o.wakeAll()
	o.mu.Unlock()
	return len(p), nil
}

// wakeAll is Write's cond.Broadcast, counting the wake-ups of a waiting
// writer (o.mu held).
func (o *outBuf) wakeAll() {
	if o.writerWaits {
		o.writerWakes++
	}
	o.cond.Broadcast()
}

// addReplies counts n replies among the bytes appended so far: with those
// still buffered, or with the chunk being written if the writer took them
// already; replies already written are not counted.
func (o *outBuf) addReplies(n int) {
	o.mu.Lock()
	switch {
	case len(o.buf) > 0:
		o.replies += n
	case o.writing > 0:
		o.wreplies += n
	}
	o.mu.Unlock()
}

// waitRoom blocks while the buffer owes maxPipeline replies or outputPause
// bytes: the connection stops reading commands (backpressure). It returns
// false once the buffer failed or closed.
func (o *outBuf) waitRoom(maxPipeline int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	paused := false
	for o.err == nil && !o.closing && (len(o.buf)+o.writing >= outputPause || o.replies+o.wreplies >= maxPipeline) {
		if !paused {
			paused = true
			o.c.s.ov.backpressure.Add(1)
		}
		o.paused++
		o.cond.Wait()
		o.paused--
	}
	return o.err == nil && !o.closing
}

// hasRoom reports whether waitRoom(maxPipeline) would return at once.
func (o *outBuf) hasRoom(maxPipeline int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err != nil || o.closing || !(len(o.buf)+o.writing >= outputPause || o.replies+o.wreplies >= maxPipeline)
}

// fail stops the buffer: nothing more is appended or written.
func (o *outBuf) fail(err error) {
	o.mu.Lock()
	if o.err == nil {
		o.err = err
	}
	o.buf = nil
	o.cond.Broadcast()
	o.mu.Unlock()
}

// finish lets the writer drain what is buffered and end (QUIT, a protocol
// error's reply), and waits for it, at most until the write deadline.
func (o *outBuf) finish() {
	o.mu.Lock()
	o.closing = true
	o.cond.Broadcast()
	o.mu.Unlock()
	o.c.nc.SetWriteDeadline(time.Now().Add(2 * time.Second))
	<-o.done
}

// writer drains the buffer to the socket until it fails or finishes.
func (o *outBuf) writer() {
	defer close(o.done)
	var spare []byte
	for {
		o.mu.Lock()
		for o.err == nil && (o.direct || len(o.buf) == 0 && !o.closing) {
			o.writerWaits = true
			o.cond.Wait()
			o.writerWaits = false
		}
		if o.err != nil || len(o.buf) == 0 {
			o.mu.Unlock()
			return
		}
		chunk := o.buf
		o.buf = spare[:0]
		o.writing, o.wreplies = len(chunk), o.replies
		o.replies = 0
		o.mu.Unlock()

		_, err := o.c.nc.Write(chunk)

		o.mu.Lock()
		o.writing, o.wreplies = 0, 0
		if err != nil && o.err == nil {
			o.err = err
			o.buf = nil
		}
		if cap(chunk) <= 2*outputPause {
			spare = chunk // reuse a small buffer; let a large one go
		} else {
			spare = nil
		}
		o.cond.Broadcast()
		o.mu.Unlock()
		if err != nil {
			o.c.nc.Close() // wakes the reader
			return
		}
	}
}

// ---- CONFIG GET/SET of the limits ----

// limitParams are the limits as CONFIG GET shows them.
func (s *Server) limitParams() map[string]string {
	return map[string]string{
		"maxclients":                 strconv.FormatInt(s.lim.maxClients.Load(), 10),
		"client-output-buffer-limit": fmt.Sprintf("normal %d 0 0 replica 0 0 0 pubsub %d 0 0", s.lim.outLimit.Load(), s.lim.outLimit.Load()),
		"proto-max-bulk-len":         strconv.FormatInt(s.lim.bulkLen.Load(), 10),
		"max-pipeline":               strconv.FormatInt(s.lim.pipeline.Load(), 10),
	}
}

// setLimit is CONFIG SET name value for a limit. It reports false when name
// is not a limit.
func (s *Server) setLimit(name, value string) (bool, error) {
	var field string
	var target *atomic.Int64
	switch name {
	case "maxclients":
		field, target = "max_clients", &s.lim.maxClients
	case "proto-max-bulk-len":
		field, target = "proto_max_bulk_len", &s.lim.bulkLen
	case "max-pipeline":
		field, target = "max_pipeline", &s.lim.pipeline
	case "client-output-buffer-limit":
		return true, s.setOutputLimit(value)
	default:
		return false, nil
	}
	v, err := config.ParseByteSize(value)
	if err == nil {
		err = config.CheckLimit(field, int64(v))
	}
	if err != nil {
		return true, fmt.Errorf("argument couldn't be parsed into an integer or is out of range: %s: %v", name, err)
	}
	target.Store(int64(v))
	s.log.Info("limit changed by CONFIG SET", "name", name, "value", int64(v))
	return true, nil
}

// setOutputLimit takes Redis's "<class> <hard> <soft> <soft seconds>"...;
// only normal and pubsub (one buffer here), soft limit 0.
func (s *Server) setOutputLimit(value string) error {
	f := strings.Fields(value)
	if len(f) == 0 || len(f)%4 != 0 {
		return errors.New("Wrong number of arguments in buffer limit configuration.")
	}
	hard := int64(-1)
	for i := 0; i < len(f); i += 4 {
		class := strings.ToLower(f[i])
		switch class {
		case "normal", "pubsub":
		case "replica", "slave":
			continue // Synod has no Redis replicas
		default:
			return fmt.Errorf("Invalid client class specified in buffer limit configuration.")
		}
		h, err := config.ParseByteSize(f[i+1])
		if err != nil {
			return fmt.Errorf("Error in hard, soft or soft_seconds setting in buffer limit configuration: %v", err)
		}
		if f[i+2] != "0" || f[i+3] != "0" {
			return errors.New("Synod has no soft output buffer limit: give soft limit and seconds as 0")
		}
		if err := config.CheckLimit("client_output_buffer_limit", int64(h)); err != nil {
			return fmt.Errorf("client-output-buffer-limit %s: %v", class, err)
		}
		if hard >= 0 && int64(h) != hard {
			return errors.New("normal and pubsub clients share one output buffer here: give them the same hard limit")
		}
		hard = int64(h)
	}
	if hard < 0 {
		return errors.New("name the class normal (Synod's only class of client)")
	}
	s.lim.outLimit.Store(hard)
	s.log.Info("limit changed by CONFIG SET", "name", "client-output-buffer-limit", "value", hard)
	return nil
}

// immutableParams are Redis 7.0's configuration parameters that CONFIG SET
// refuses as immutable (config.c, IMMUTABLE_CONFIG): Redis's answer.
var immutableParams = map[string]bool{"daemonize": true, "io-threads": true, "io-threads-do-reads": true,
	"unixsocket": true, "unixsocketperm": true, "pidfile": true, "syslog-enabled": true, "syslog-ident": true,
	"syslog-facility": true, "databases": true, "logfile": true, "always-show-logo": true, "set-proc-title": true,
	"cluster-enabled": true, "cluster-config-file": true, "cluster-port": true, "supervised": true,
	"tcp-backlog": true, "aclfile": true, "disable-thp": true, "enable-protected-configs": true,
	"enable-debug-command": true, "enable-module-command": true, "rdbchecksum": true}

// cmdConfigSet is CONFIG SET name value [name value ...]: the limits and
// the parameters config.go keeps, all checked before any is set (as Redis 7
// does); a parameter twice, an immutable one, or one CONFIG GET shows set to
// another value than it shows answer Redis's errors; one set to the value
// CONFIG GET shows changes nothing and is accepted.
func cmdConfigSet(c *conn, args [][]byte) {
	if len(args) < 4 || len(args)%2 != 0 {
		c.writeError(arityErr("config|set"))
		return
	}
	type set struct{ name, value string }
	var sets []set
	var others []func() // the other parameters (config.go), applied with the limits
	// First the names, as Redis 7's configSetCommand: immutable, then twice.
	seen := map[string]bool{}
	for i := 2; i < len(args); i += 2 {
		name := strings.ToLower(string(args[i]))
		if immutableParams[name] {
			c.writeError(fmt.Sprintf("ERR CONFIG SET failed (possibly related to argument '%s') - can't set immutable config", args[i]))
			return
		}
		canon := name
		if t, ok := tunableByName[name]; ok {
			canon = t.name // the alias names the same tunable
		}
		if seen[canon] {
			c.writeError(fmt.Sprintf("ERR CONFIG SET failed (possibly related to argument '%s') - duplicate parameter", args[i]))
			return
		}
		seen[canon] = true
	}
	shown := c.configParams()
	for i := 2; i < len(args); i += 2 {
		name := strings.ToLower(string(args[i]))
		if _, ok := c.s.limitParams()[name]; !ok {
			apply, known, err := c.s.checkOtherParam(name, string(args[i+1]))
			if cur, ok := shown[name]; !known && ok && cur == string(args[i+1]) {
				continue // a value CONFIG GET shows, set to itself: nothing changes
			}
			if !known {
				c.writeError(fmt.Sprintf("ERR CONFIG SET failed (possibly related to argument '%s') - Synod sets only maxclients, client-output-buffer-limit, proto-max-bulk-len, max-pipeline, maxmemory, save, notify-keyspace-events and the encoding tunables (configure the cluster file for the rest)", args[i]))
				return
			}
			if err != nil {
				c.writeError(fmt.Sprintf("ERR CONFIG SET failed (possibly related to argument '%s') - %v", args[i], err))
				return
			}
			if apply != nil {
				others = append(others, apply)
			}
			continue
		}
		sets = append(sets, set{name, string(args[i+1])})
	}
	// Check all on a scratch server, then apply.
	scratch := &Server{log: slog.New(slog.DiscardHandler), opts: c.s.opts}
	scratch.initLimits()
	for _, st := range sets {
		if _, err := scratch.setLimit(st.name, st.value); err != nil {
			c.writeError(fmt.Sprintf("ERR CONFIG SET failed (possibly related to argument '%s') - %v", st.name, err))
			return
		}
	}
	for _, st := range sets {
		c.s.setLimit(st.name, st.value)
	}
	for _, apply := range others {
		apply()
	}
	c.w.WriteSimple("OK")
}
