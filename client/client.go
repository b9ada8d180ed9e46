// Package client is a Go client for Synod nodes: Client over the Redis
// protocol, GRPC over the gRPC API (grpc.go, same fail-over rules). GRPC is
// also the Grid Services thesis's fail-over client stub (failover.go: on a namespace with a
// leader it subscribes to leader-change notifications at every node and
// resubmits outstanding requests to a newly notified leader at once) and a
// fan-out client for protocols whose clients send to every replica
// (fanout.go: Fast Paxos, PB-Paxos).
//
// A Client knows several node addresses and keeps a pool of connections to
// each. Every connection is prepared once, when it is opened, with the
// client's Options: AUTH, then SYNOD NS and SYNOD READ. Requests go to the
// address that last answered; when a connection to it fails, the client fails
// over to the next address, round robin.
//
// # Fail-over and unknown outcomes
//
// A request that never left this process (dialling failed, or writing the
// command failed before it was complete) has certainly not been executed,
// and is retried at the next address whatever it is.
//
// A request whose connection broke after it was sent, or that the node
// answered with TRYAGAIN (the node timed out or is shutting down), may or
// may not have taken effect. Reads (GET, MGET, EXISTS, PING, ...) are then
// retried at the next address: repeating them is harmless. Writes are never
// retried silently, because the first attempt may have been applied (INCR
// would count twice, SET NX could report a spurious failure): the client
// returns an error wrapping ErrUnknownOutcome, and the caller decides, for
// example by reading the key back. Commands the client does not know are
// treated as writes.
//
// Before reusing an idle pooled connection the client checks, without
// blocking, that the server has not closed it, so a node restart does not
// turn the next write into an unknown outcome; a close that races with the
// request still does.
//
// # Errors
//
// Every error a node answers, an error reply or (GRPC) a refusal status,
// is returned as a *Error whose Kind (package synoderr) says what it
// means, so callers ask kinds, never prefixes:
//
//	switch {
//	case errors.Is(err, synoderr.TryAgain):  // not now; ErrUnknownOutcome too for a write
//	case errors.Is(err, synoderr.WrongType): // the key holds another type
//	case errors.Is(err, synoderr.Invalid):   // malformed (GRPC only: RESP says ERR)
//	case errors.Is(err, synoderr.NoAuth), errors.Is(err, synoderr.NoPerm):
//	}
//
// The kind comes from the reply's Redis code (TRYAGAIN, MOVED,
// CLUSTERDOWN, WRONGTYPE, NOAUTH/WRONGPASS, NOPERM, EXECABORT; any other
// is Generic) or from a status's code when its message carries none
// (synoderr.FromGRPC); the client's own retry rules read the same kinds. A
// GRPC *Error keeps its status: status.Code(err) works as before. An
// operation's own error inside a result (GRPC.DoOp's service.Result) reads
// the same way: res.AsError().Kind.
//
// Commands that change a connection's state (AUTH, HELLO, SELECT, QUIT,
// RESET, SUBSCRIBE and UNSUBSCRIBE, SYNOD NS/READ with an argument, SYNOD
// OPT name value..., SYNOD OPTRESET, and the option aliases SYNOD
// STRICT/OPID with an argument and SYNOD PREV) are refused by Do: pooled connections are shared, so a request
// option set on one would apply to whichever request next used it. Set the
// namespace and read mode through Options; for per-request options
// (automaton.OptionSpec) use GRPC.DoOp, which carries them in the request.
package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/resp"
	"github.com/synod-dev/synod/synoderr"
)

// ErrUnknownOutcome is wrapped by errors of writes that may or may not have
// taken effect.
var ErrUnknownOutcome = errors.New("outcome unknown: the write may or may not have taken effect")

// ErrClosed is returned after Close.
var ErrClosed = errors.New("client: closed")

// Reply is a server reply.
type Reply = resp.Reply

// Options configure a Client. Zero values take the defaults noted.
type Options struct {
	// Namespace selects the namespace (default: the node's default).
	Namespace string
	// ReadMode selects the consistency of reads (default: linearizable).
	ReadMode automaton.ReadMode
	// Password is sent with AUTH when set: AUTH User Password when User
	// is set too (a user of the cluster file's users), else AUTH Password
	// (the default user). Over gRPC they go in the synodpb.UserKey and
	// synodpb.PasswordKey metadata.
	Password string
	User     string
	// Timeout bounds each attempt at one address: dialling and preparing a
	// connection, or one request and its reply (default 10 s). A context
	// deadline, when earlier, wins.
	Timeout time.Duration
	// PoolSize bounds the connections in use at once per address, and the
	// idle connections kept per address (default 16).
	PoolSize int
	// OnLeaderChange (GRPC only) is called, from a watch goroutine, when a
	// fail-over notification names a new leader of a namespace the client
	// has used (failover.go), with the time it arrived. It must not block.
	OnLeaderChange func(LeaderChange)
	// NoLeaderWatch (GRPC only) turns the fail-over stub off: no
	// WatchLeader subscriptions, requests round robin as for a protocol
	// without a leader (to measure what the notifications buy).
	NoLeaderWatch bool
	// Pipeline (GRPC only) sends DoOp's and the typed methods' requests on
	// a Pipeline stream per connection (pipeline.go): concurrent callers'
	// requests are pipelined on one connection and, where the protocol
	// applies atomic groups, run as one group per batch; a write that may
	// have reached a node is then never resubmitted.
	Pipeline bool
	// GRPCTransport (GRPC only) selects the HTTP/2 transport:
	// TransportGRPCGo (grpc-go's ClientConn) or TransportDirect (h2.go: the
	// calling goroutine writes its frames and, alone, reads its reply).
	// Empty means DefaultGRPCTransport.
	GRPCTransport string
	// NoFanout (GRPC only) sends requests of client_fanout namespaces to
	// one node, unmarked, as for any other namespace: that node proposes or
	// forwards for the client (fanout.go).
	NoFanout bool
	// ABDAll (GRPC.ABD only) sends each client-driven ABD phase to every
	// replica at once, as the seed's client does, instead of to a
	// majority first (abd.go, "Phases to a majority").
	ABDAll bool
}

// Error is an error a node answered: an error reply ("ERR ...",
// "TRYAGAIN ...", "WRONGTYPE ...") or, on gRPC, a refusal status. Its Kind
// says what the caller can do (package synoderr), so
//
//	errors.Is(err, synoderr.TryAgain)   // not now: retry (a write's outcome is unknown)
//	errors.Is(err, synoderr.WrongType)  // the key holds another type
//
// classify any error the clients return. A gRPC status keeps its code:
// status.Code(err) works on an *Error (GRPCStatus).
type Error struct {
	// Msg is the error's text in its Redis form (synoderr.Error.Error):
	// the code word, then the message.
	Msg string
	// Kind is the error's kind: from the text's code word, or from a gRPC
	// status (synoderr.FromGRPC).
	Kind    synoderr.Kind
	unknown bool
	st      *status.Status // the gRPC status it came from, or nil
}

// replyError is the *Error of an error reply's text (synoderr.Parse).
func replyError(msg string) *Error {
	e := synoderr.Parse(msg)
	return &Error{Msg: msg, Kind: e.Kind}
}

// statusError returns a gRPC error status as an *Error carrying the status
// (a node's refusal or failure, or gRPC's own); other errors, and the
// caller's own cancellation (CANCELED), unchanged.
func statusError(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.OK || st.Code() == codes.Canceled {
		return err
	}
	e := synoderr.FromGRPC(uint32(st.Code()), st.Message())
	return &Error{Msg: e.Error(), Kind: e.Kind, st: st}
}

func (e *Error) Error() string {
	if e.st != nil {
		return "rpc error: code = " + e.st.Code().String() + " desc = " + e.st.Message()
	}
	return e.Msg
}

// Code is the error's Redis code, its text's first word ("ERR",
// "WRONGPASS", "TRYAGAIN").
func (e *Error) Code() string {
	code, _, _ := strings.Cut(e.Msg, " ")
	return code
}

// Is matches the error's kind: errors.Is(err, synoderr.Moved).
func (e *Error) Is(target error) bool {
	k, ok := target.(synoderr.Kind)
	return ok && k == e.Kind
}

// GRPCStatus is the gRPC status the error came from (nil for a RESP
// reply), for status.Code and status.FromError.
func (e *Error) GRPCStatus() *status.Status { return e.st }

// Unwrap returns ErrUnknownOutcome for a write answered with TRYAGAIN.
func (e *Error) Unwrap() error {
	if e.unknown {
		return ErrUnknownOutcome
	}
	return nil
}

// Client is safe for concurrent use.
type Client struct {
	opts  Options
	pools []*pool

	mu     sync.Mutex
	cur    int
	closed bool
}

// New returns a client for the nodes at addrs ("host:port"). It does not
// connect until the first request.
func New(addrs []string, opts Options) (*Client, error) {
	if len(addrs) == 0 {
		return nil, errors.New("client: no addresses")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.PoolSize <= 0 {
		opts.PoolSize = 16
	}
	c := &Client{opts: opts}
	for _, a := range addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("client: address %q is not host:port", a)
		}
		c.pools = append(c.pools, &pool{
			addr: a,
			sem:  make(chan struct{}, opts.PoolSize),
			idle: make(chan *pconn, opts.PoolSize),
		})
	}
	return c, nil
}

// Close closes idle connections; connections in use close when returned.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	for _, p := range c.pools {
		p.drain()
	}
	return nil
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// readOnly lists commands that are safe to repeat at another node.
var readOnly = map[string]bool{
	"get": true, "mget": true, "exists": true, "ping": true, "echo": true, "info": true,
	"command": true, "config": true, "strlen": true,
}

func isRead(args [][]byte) bool {
	name := strings.ToLower(string(args[0]))
	if name == "synod" && len(args) >= 2 {
		switch strings.ToLower(string(args[1])) {
		case "ns", "read", "namespaces", "help":
			return true
		case "op":
			if len(args) >= 3 {
				k := strings.ToLower(string(args[2]))
				return k == "get" || k == "exists" || k == "read"
			}
		}
		return false
	}
	return readOnly[name]
}

func changesState(args [][]byte) bool {
	switch name := strings.ToLower(string(args[0])); name {
	case "auth", "hello", "select", "quit", "reset",
		"subscribe", "unsubscribe", "psubscribe", "punsubscribe": // subscribed mode
		return true
	case "synod":
		if len(args) < 2 {
			return false
		}
		switch sub := strings.ToLower(string(args[1])); sub {
		case "prev", "optreset":
			return true // even without arguments: they change the connection's options
		case "opt":
			return len(args) >= 4 // SYNOD OPT name value...; listing and showing are fine
		case "ns", "read", "strict", "opid":
			return len(args) >= 3
		}
	}
	return false
}

// Do sends one command and returns its reply. An error reply is returned as
// a *Error (wrapping ErrUnknownOutcome for a write answered with TRYAGAIN).
func (c *Client) Do(ctx context.Context, args ...string) (Reply, error) {
	if len(args) == 0 {
		return Reply{}, errors.New("client: empty command")
	}
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	if changesState(b) {
		return Reply{}, fmt.Errorf("client: %s changes the connection's state, which pooled connections share; use Options", strings.ToUpper(args[0]))
	}
	return c.do(ctx, b)
}

func (c *Client) do(ctx context.Context, args [][]byte) (Reply, error) {
	write := !isRead(args)
	name := strings.ToUpper(string(args[0]))
	c.mu.Lock()
	start, closed := c.cur, c.closed
	c.mu.Unlock()
	if closed {
		return Reply{}, ErrClosed
	}
	var errs []error
	for i := range c.pools {
		idx := (start + i) % len(c.pools)
		p := c.pools[idx]
		rep, sent, err := c.attempt(ctx, p, args)
		if err == nil {
			if rep.Kind != resp.Error {
				c.prefer(idx)
				return rep, nil
			}
			e := replyError(string(rep.Str))
			if e.Kind != synoderr.TryAgain {
				c.prefer(idx)
				return rep, e
			}
			if write {
				e.unknown = true
				return rep, e
			}
			errs = append(errs, fmt.Errorf("%s: %w", p.addr, e))
			continue
		}
		var setup *Error
		if errors.As(err, &setup) {
			return Reply{}, fmt.Errorf("client: preparing a connection to %s: %w", p.addr, err)
		}
		if sent && write {
			return Reply{}, fmt.Errorf("client: %s at %s: connection failed after the command was sent (%v): %w", name, p.addr, err, ErrUnknownOutcome)
		}
		if ctxErr := ctxDone(ctx); ctxErr != nil {
			return Reply{}, fmt.Errorf("client: %s: %w (last error: %v)", name, ctxErr, err)
		}
		errs = append(errs, fmt.Errorf("%s: %w", p.addr, err))
	}
	return Reply{}, fmt.Errorf("client: %s failed at every address: %w", name, errors.Join(errs...))
}

// ctxDone is ctx.Err(), also when the deadline has passed but the context's
// own timer has not fired yet (a connection deadline set to the same instant
// can expire first).
func ctxDone(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *Client) prefer(idx int) {
	c.mu.Lock()
	c.cur = idx
	c.mu.Unlock()
}

// attempt runs args on one connection of p. sent reports whether the whole
// command was handed to the network (so that it may have been executed).
func (c *Client) attempt(ctx context.Context, p *pool, args [][]byte) (rep Reply, sent bool, err error) {
	reps, sent, err := c.pipeline(ctx, p, [][][]byte{args})
	if err != nil {
		return Reply{}, sent, err
	}
	return reps[0], true, nil
}

// pipeline writes cmds on one connection of p at once and reads their
// replies. sent reports whether every command was handed to the network.
func (c *Client) pipeline(ctx context.Context, p *pool, cmds [][][]byte) (reps []Reply, sent bool, err error) {
	pc, err := p.get(ctx, c)
	if err != nil {
		return nil, false, err
	}
	ok := false
	defer func() { p.put(pc, ok && !c.isClosed()) }()
	deadline := time.Now().Add(c.opts.Timeout)
	if d, has := ctx.Deadline(); has && d.Before(deadline) {
		deadline = d
	}
	pc.nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { pc.nc.SetDeadline(time.Now()) })
	defer stop()
	for _, args := range cmds {
		pc.w.WriteCommand(args)
	}
	if err := pc.w.Flush(); err != nil {
		return nil, false, err
	}
	reps = make([]Reply, len(cmds))
	for i := range reps {
		if reps[i], err = pc.r.ReadReply(); err != nil {
			return nil, true, err
		}
	}
	ok = true
	return reps, true, nil
}

// --- pool -------------------------------------------------------------------

type pool struct {
	addr string
	sem  chan struct{} // one token per connection in use
	idle chan *pconn
}

type pconn struct {
	nc net.Conn
	r  *resp.Reader
	w  *resp.Writer
}

func (p *pool) get(ctx context.Context, c *Client) (*pconn, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for {
		var pc *pconn
		select {
		case pc = <-p.idle:
		default:
		}
		if pc == nil {
			break
		}
		if err := connCheck(pc.nc); err != nil {
			pc.nc.Close() // the server closed it while idle
			continue
		}
		return pc, nil
	}
	pc, err := p.dial(ctx, c.opts)
	if err != nil {
		<-p.sem
		return nil, err
	}
	return pc, nil
}

// put returns a connection: to the idle list when reusable, else closed.
func (p *pool) put(pc *pconn, reusable bool) {
	if reusable {
		pc.nc.SetDeadline(time.Time{})
		select {
		case p.idle <- pc:
			pc = nil
		default:
		}
	}
	if pc != nil {
		pc.nc.Close()
	}
	<-p.sem
}

func (p *pool) drain() {
	for {
		select {
		case pc := <-p.idle:
			pc.nc.Close()
		default:
			return
		}
	}
}

// dial opens and prepares a connection. A server error during preparation is
// returned as a *Error; anything else is a connection failure.
func (p *pool) dial(ctx context.Context, opts Options) (*pconn, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	pc := &pconn{nc: nc, r: resp.NewReader(bufio.NewReaderSize(nc, 16<<10), resp.Limits{}), w: resp.NewWriter(nc)}
	var setup [][][]byte
	switch {
	case opts.Password != "" && opts.User != "":
		setup = append(setup, [][]byte{[]byte("AUTH"), []byte(opts.User), []byte(opts.Password)})
	case opts.Password != "":
		setup = append(setup, [][]byte{[]byte("AUTH"), []byte(opts.Password)})
	}
	if opts.Namespace != "" {
		setup = append(setup, [][]byte{[]byte("SYNOD"), []byte("NS"), []byte(opts.Namespace)})
	}
	if opts.ReadMode != automaton.ReadDefault {
		setup = append(setup, [][]byte{[]byte("SYNOD"), []byte("READ"), []byte(opts.ReadMode.String())})
	}
	if len(setup) == 0 {
		return pc, nil
	}
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	for _, cmd := range setup {
		pc.w.WriteCommand(cmd)
	}
	err = pc.w.Flush()
	var replyErr error
	for i := 0; err == nil && i < len(setup); i++ {
		var rep Reply
		rep, err = pc.r.ReadReply()
		if err == nil && rep.Kind == resp.Error && replyErr == nil {
			replyErr = replyError(string(rep.Str))
		}
	}
	if err == nil {
		err = replyErr
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	nc.SetDeadline(time.Time{})
	return pc, nil
}

// --- typed commands ----------------------------------------------------------------

func unexpected(cmd string, r Reply) error {
	return fmt.Errorf("client: unexpected %s reply to %s: %s", r.Kind, cmd, r)
}

func (c *Client) doBytes(ctx context.Context, args ...[]byte) (Reply, error) { return c.do(ctx, args) }

// Get returns key's value; found is false when the key does not exist.
func (c *Client) Get(ctx context.Context, key string) (value []byte, found bool, err error) {
	r, err := c.doBytes(ctx, []byte("GET"), []byte(key))
	if err != nil {
		return nil, false, err
	}
	switch r.Kind {
	case resp.Null:
		return nil, false, nil
	case resp.Bulk:
		return r.Str, true, nil
	}
	return nil, false, unexpected("GET", r)
}

// Set stores value under key.
func (c *Client) Set(ctx context.Context, key string, value []byte) error {
	r, err := c.doBytes(ctx, []byte("SET"), []byte(key), value)
	if err != nil {
		return err
	}
	if r.Kind != resp.SimpleString {
		return unexpected("SET", r)
	}
	return nil
}

// SetNX stores value under key if the key does not exist, and reports
// whether it did.
func (c *Client) SetNX(ctx context.Context, key string, value []byte) (bool, error) {
	r, err := c.doBytes(ctx, []byte("SET"), []byte(key), value, []byte("NX"))
	if err != nil {
		return false, err
	}
	switch r.Kind {
	case resp.SimpleString:
		return true, nil
	case resp.Null:
		return false, nil
	}
	return false, unexpected("SET NX", r)
}

func (c *Client) intCmd(ctx context.Context, args ...[]byte) (int64, error) {
	r, err := c.doBytes(ctx, args...)
	if err != nil {
		return 0, err
	}
	if r.Kind != resp.Integer {
		return 0, unexpected(string(args[0]), r)
	}
	return r.Int, nil
}

func keyArgs(cmd string, keys []string) [][]byte {
	args := [][]byte{[]byte(cmd)}
	for _, k := range keys {
		args = append(args, []byte(k))
	}
	return args
}

// Del deletes keys and returns how many existed. Keys are deleted one by
// one, not atomically.
func (c *Client) Del(ctx context.Context, keys ...string) (int64, error) {
	if len(keys) == 0 {
		return 0, errors.New("client: DEL needs at least one key")
	}
	return c.intCmd(ctx, keyArgs("DEL", keys)...)
}

// Exists returns how many of keys exist.
func (c *Client) Exists(ctx context.Context, keys ...string) (int64, error) {
	if len(keys) == 0 {
		return 0, errors.New("client: EXISTS needs at least one key")
	}
	return c.intCmd(ctx, keyArgs("EXISTS", keys)...)
}

// Incr adds one to key's integer value and returns the new value.
func (c *Client) Incr(ctx context.Context, key string) (int64, error) {
	return c.intCmd(ctx, []byte("INCR"), []byte(key))
}

// IncrBy adds delta to key's integer value and returns the new value.
func (c *Client) IncrBy(ctx context.Context, key string, delta int64) (int64, error) {
	return c.intCmd(ctx, []byte("INCRBY"), []byte(key), []byte(strconv.FormatInt(delta, 10)))
}

// Append appends value to key's value and returns the new length.
func (c *Client) Append(ctx context.Context, key string, value []byte) (int64, error) {
	return c.intCmd(ctx, []byte("APPEND"), []byte(key), value)
}
