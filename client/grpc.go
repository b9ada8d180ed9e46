package client

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// The gRPC transport.
//
// GRPC talks to the nodes' gRPC API (api/synod.proto) and offers the typed
// methods of Client plus DoOp, which runs any service operation with any
// request options the namespace's protocol declares, and DoGroup, which runs
// an atomic group of operations, and Begin, which opens an interactive
// transaction (Txn; its steps never fail over). It keeps one gRPC connection per address and sends each request
// to the address that last answered, failing over round robin, with the same
// rules as Client:
//
//   - A request that certainly never left this process (the connection to
//     the address could not be established) is tried at the next address.
//   - A request that may have reached a node and failed without an answer
//     (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELED, ... or a TRYAGAIN result) is
//     retried at the next address if it is a read. A write is retried there
//     only if the namespace's protocol deduplicates retries
//     (Namespace.idempotent_retry: a replicated dedup table); the retry
//     carries the same (client id, seq), so the operation takes effect once.
//     Otherwise the write fails with an error wrapping ErrUnknownOutcome.
//   - Refusals (INVALID_ARGUMENT, NOT_FOUND, UNAUTHENTICATED,
//     RESOURCE_EXHAUSTED, ...) executed nothing and are returned at once.
//
// A request counts as sent once gRPC opened a stream for it on a connection
// (grpc.Peer reports the peer then); a request that failed before that is
// certainly not executed. Before each attempt the client also waits (within
// Options.Timeout) until the address's connection is ready, redialling at
// once a connection that broke instead of waiting out gRPC's reconnect
// backoff, so a node restart does not cost the next request a failure.
//
// Whether an operation reads is decided by the namespace's service
// (Service.IsRead; a group reads when all its operations do); the client learns each namespace's service and protocol
// properties with one Namespaces call, on first use.
//
// Options.PoolSize is ignored: gRPC multiplexes requests over one
// connection per address. Options.GRPCTransport selects grpc-go's
// transport or the client's own (h2.go: no goroutines of its own, a lone
// call read by its caller; the WatchLeader and Phases streams then go on a
// second connection per address). With Options.Pipeline, DoOp and the typed
// methods send their requests on a Pipeline stream per connection instead
// of one Do call each (pipeline.go).

// OpOptions are per-request options of GRPC.DoOp and GRPC.DoGroup.
type OpOptions struct {
	// Read is the read mode; the zero value (ReadDefault) means the client's
	// Options.ReadMode.
	Read automaton.ReadMode
	// Ext holds request options the namespace's protocol declares, by name
	// (Namespaces lists them: Namespace.options), with values as the node
	// parses them: one for a string option, "on"/"off" for a bool, any
	// number for a list. The node refuses unknown names and invalid values
	// (INVALID_ARGUMENT); nothing is then executed.
	Ext map[string][]string
	// OpID, Prev and Strict are shorthands for the eventually-serializable
	// model's options (the ESDS thesis chapter 3; automaton.OptOpID, OptPrev,
	// OptStrict): the operation's id (empty: the node assigns
	// "<client id as 16 hex>-<seq>", returned by DoOp), the ids of
	// operations that must precede it, and whether to answer only once it
	// is stable. A zero value leaves the option out; setting a shorthand and
	// the same Ext entry is an error.
	OpID   string
	Prev   []string
	Strict bool
}

// options returns the request's options map, shorthands included.
func (o OpOptions) options() (map[string]*synodpb.OptionValues, error) {
	if len(o.Ext) == 0 && o.OpID == "" && len(o.Prev) == 0 && !o.Strict {
		return nil, nil // the common case, without a map per request
	}
	ext := make(map[string][]string, len(o.Ext)+3)
	for k, v := range o.Ext {
		ext[k] = v
	}
	for _, sh := range []struct {
		field, name string
		vals        []string
	}{
		{"OpID", automaton.OptOpID, nonEmpty(o.OpID)},
		{"Prev", automaton.OptPrev, o.Prev},
		{"Strict", automaton.OptStrict, automaton.BoolOption(o.Strict)},
	} {
		if len(sh.vals) == 0 {
			continue
		}
		if _, dup := ext[sh.name]; dup {
			return nil, fmt.Errorf("client: option %s set twice: in OpOptions.Ext and as OpOptions.%s", sh.name, sh.field)
		}
		ext[sh.name] = sh.vals
	}
	return synodpb.FromOptions(ext), nil
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// GRPC is a client over the gRPC API. It is safe for concurrent use.
type GRPC struct {
	opts   Options
	conns  []*gconn
	client uint64
	seq    atomic.Uint64
	lanes  lanes               // client ids of concurrent requests (lanes.go)
	auth   []hpack.HeaderField // the direct transport's password metadata (authFields)
	glanes lanes               // identities of named pipeline messages (pipeline.go)

	mu      sync.Mutex
	cur     int
	closed  bool
	nss     []*synodpb.Namespace    // nil until fetched
	leaders map[string]*leaderState // namespaces with a leader, once used (failover.go)
	nodeIDs []string                // node id of each address, learned from WatchLeader ("" unknown)

	life       context.Context // ends at Close: leader watches
	lifeCancel context.CancelFunc

	abdNext  atomic.Uint64 // where client-driven ABD's next majority starts (abd.go)
	abdPhase atomic.Int64  // client-driven ABD's recent phase time, ns (abd.go hedge)
	timers   sync.Pool     // client-driven ABD's phase timers, stopped (abd.go phaseTimer)
}

type gconn struct {
	addr string
	cc   *grpc.ClientConn    // TransportGRPCGo
	h2   *h2client           // TransportDirect: calls and Pipeline streams
	side *h2client           // WatchLeader (TransportDirect) and Phases streams (h2.go)
	stub synodpb.SynodClient // over cc or h2
	// sideStub is the stub for streams whose reader waits while idle:
	// stub's over grpc-go, side's over the direct transport.
	sideStub synodpb.SynodClient
	// phaseStub is the stub for Phases streams (client-driven ABD,
	// phases.go): side's, over the direct transport, whichever transport
	// the calls use. The direct transport costs the client about half the
	// CPU per phase of grpc-go's (docs/costs/s52-grpc.md, s54-cabd54.md);
	// grpc-go's stays the default for calls because of fail-over to a
	// leader whose address vanished, which phases do not do (a phase
	// hedges to the other replicas, abd.go).
	phaseStub synodpb.SynodClient

	smu sync.Mutex
	st  *gstream // the Pipeline stream (pipeline.go), nil until first used
	ps  *pstream // the Phases stream (phases.go), nil until first used

	// noPhases: the node answered Phases UNIMPLEMENTED (an older node);
	// client-driven ABD asks it through the Pipeline stream (abd.go).
	noPhases atomic.Bool

	abdSuspect atomic.Int64 // unix ns until which ABD phases ask it last (abd.go)

	mu         sync.Mutex
	starts     uint64        // dials started
	lastFailed uint64        // number of the latest dial that failed
	dialErr    error         // its error
	failed     chan struct{} // closed (and replaced) when a dial fails
}

func (g *gconn) dial(ctx context.Context, addr string) (net.Conn, error) {
	g.mu.Lock()
	g.starts++
	n := g.starts
	g.mu.Unlock()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		g.mu.Lock()
		if n > g.lastFailed {
			g.lastFailed, g.dialErr = n, err
		}
		close(g.failed)
		g.failed = make(chan struct{})
		g.mu.Unlock()
	}
	return nc, err
}

var errNotConnected = errors.New("not connected")

// ready waits until the connection can carry a request, dialling if needed.
// It fails when a dial that started during the call fails, or when ctx ends.
// An error means nothing was sent.
func (g *gconn) ready(ctx context.Context) error {
	if g.h2 != nil {
		return g.h2.ready(ctx)
	}
	g.mu.Lock()
	since := g.starts
	g.mu.Unlock()
	resetDone := false
	for {
		s := g.cc.GetState()
		g.mu.Lock()
		failed, lastFailed, dialErr := g.failed, g.lastFailed, g.dialErr
		g.mu.Unlock()
		if lastFailed > since {
			return fmt.Errorf("%w (%v)", errNotConnected, dialErr)
		}
		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.Shutdown:
			return ErrClosed
		case connectivity.Idle:
			g.cc.Connect()
		case connectivity.TransientFailure:
			if !resetDone {
				// Dial again now rather than wait out gRPC's reconnect backoff.
				g.cc.ResetConnectBackoff()
				g.cc.Connect()
				resetDone = true
			}
		}
		wctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-failed:
				cancel()
			case <-wctx.Done():
			}
		}()
		changed := g.cc.WaitForStateChange(wctx, s)
		cancel()
		if !changed && ctx.Err() != nil {
			return fmt.Errorf("%w: %v", errNotConnected, ctx.Err())
		}
	}
}

// NewGRPC returns a gRPC client for the nodes' gRPC addresses ("host:port").
// It does not connect until the first request.
func NewGRPC(addrs []string, opts Options) (*GRPC, error) {
	if len(addrs) == 0 {
		return nil, errors.New("client: no addresses")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	transport, err := grpcTransport(opts.GRPCTransport)
	if err != nil {
		return nil, err
	}
	var b [8]byte
	c := &GRPC{opts: opts, nodeIDs: make([]string, len(addrs)), auth: authFields(opts)}
	c.glanes.init = true // no own lane: every named message has a client id of its own
	c.life, c.lifeCancel = context.WithCancel(context.Background())
	for c.client == 0 {
		if _, err := crand.Read(b[:]); err != nil {
			return nil, err
		}
		c.client = binary.LittleEndian.Uint64(b[:])
	}
	for _, a := range addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			c.Close()
			return nil, fmt.Errorf("client: address %q is not host:port", a)
		}
		g := &gconn{addr: a, failed: make(chan struct{})}
		if transport == TransportDirect {
			g.h2 = &h2client{addr: a, timeout: opts.Timeout}
			g.side = &h2client{addr: a, timeout: opts.Timeout}
			g.stub, g.sideStub = synodpb.NewSynodClient(g.h2), synodpb.NewSynodClient(g.side)
			g.phaseStub = g.sideStub
			c.conns = append(c.conns, g)
			continue
		}
		bo := backoff.DefaultConfig
		bo.MaxDelay = 2 * time.Second
		cc, err := grpc.NewClient("passthrough:///"+a,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(g.dial),
			grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: opts.Timeout}),
			grpc.WithStaticStreamWindowSize(synodpb.StreamWindow), // no BDP pings: synodpb.StreamWindow
			grpc.WithStaticConnWindowSize(synodpb.ConnWindow),
			grpc.WithDefaultCallOptions(
				grpc.MaxCallRecvMsgSize(synodpb.MaxMessageSize),
				grpc.MaxCallSendMsgSize(synodpb.MaxMessageSize)),
		)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("client: %s: %w", a, err)
		}
		g.cc, g.stub = cc, synodpb.NewSynodClient(cc)
		g.sideStub = g.stub
		g.side = &h2client{addr: a, timeout: opts.Timeout} // Phases only; dials on first use
		g.phaseStub = synodpb.NewSynodClient(g.side)
		c.conns = append(c.conns, g)
	}
	return c, nil
}

// ClientID is the client's own id: every request carries it, except one
// sent while another is in flight, which carries a lane's (lanes.go).
func (c *GRPC) ClientID() uint64 { return c.client }

// Close closes the connections; requests in flight fail.
func (c *GRPC) Close() error {
	c.mu.Lock()
	was := c.closed
	c.closed = true
	c.mu.Unlock()
	if !was {
		c.endSessions() // sessions.go
	}
	c.lifeCancel()
	for _, g := range c.conns {
		if g.cc != nil {
			g.cc.Close()
		}
		if g.h2 != nil {
			g.h2.close()
		}
		if g.side != nil {
			g.side.close()
		}
	}
	return nil
}

// authFields are the password (and user) metadata as the direct
// transport sends them (GRPC.auth): as withAuth's.
func authFields(o Options) []hpack.HeaderField {
	if o.Password == "" {
		return nil
	}
	fs := []hpack.HeaderField{{Name: synodpb.PasswordKey, Value: o.Password, Sensitive: true}}
	if o.User != "" {
		fs = append(fs, hpack.HeaderField{Name: synodpb.UserKey, Value: o.User, Sensitive: true})
	}
	return fs
}

func (c *GRPC) withAuth(ctx context.Context) context.Context {
	if c.opts.Password == "" {
		return ctx
	}
	if c.opts.User != "" {
		return metadata.AppendToOutgoingContext(ctx, synodpb.PasswordKey, c.opts.Password, synodpb.UserKey, c.opts.User)
	}
	return metadata.AppendToOutgoingContext(ctx, synodpb.PasswordKey, c.opts.Password)
}

// definite reports status codes under which a request was refused without
// being executed (retrying elsewhere would only be refused again).
func definite(code codes.Code) bool {
	switch code {
	case codes.InvalidArgument, codes.NotFound, codes.Unauthenticated, codes.PermissionDenied,
		codes.ResourceExhausted, codes.FailedPrecondition, codes.Unimplemented, codes.OutOfRange,
		codes.AlreadyExists:
		return true
	}
	return false
}

// Namespaces returns the nodes' namespaces (the first is the default),
// fetched once and cached.
func (c *GRPC) Namespaces(ctx context.Context) ([]*synodpb.Namespace, error) {
	c.mu.Lock()
	nss, start, closed := c.nss, c.cur, c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if nss != nil {
		return nss, nil
	}
	var errs []error
	for i := range c.conns {
		g := c.conns[(start+i)%len(c.conns)]
		actx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
		err := g.ready(actx)
		var resp *synodpb.NamespacesResponse
		if err == nil {
			resp, err = g.stub.Namespaces(c.withAuth(actx), &synodpb.NamespacesRequest{})
			err = statusError(err)
		}
		cancel()
		if err == nil {
			nss = resp.GetNamespaces()
			if nss == nil {
				nss = []*synodpb.Namespace{}
			}
			c.mu.Lock()
			c.nss = nss
			c.mu.Unlock()
			return nss, nil
		}
		if definite(status.Code(err)) {
			return nil, fmt.Errorf("client: listing namespaces at %s: %w", g.addr, err)
		}
		if cerr := ctxDone(ctx); cerr != nil {
			return nil, fmt.Errorf("client: listing namespaces: %w (last error: %v)", cerr, err)
		}
		errs = append(errs, fmt.Errorf("%s: %w", g.addr, err))
	}
	return nil, fmt.Errorf("client: listing namespaces failed at every address: %w", errors.Join(errs...))
}

// nsProps are what send needs to know of a request's namespace.
type nsProps struct {
	name       string // the namespace's name ("" resolved to the default)
	read       bool   // every operation reads
	idempotent bool   // a retry with the same (client id, seq) takes effect once
	fanout     bool   // clients send to every node (fanout.go)
	hasLeader  bool   // the protocol has a leader to watch (failover.go)
	atomic     bool   // the protocol applies atomic groups
	sessions   bool   // the protocol keeps client sessions (sessions.go)
}

// nsProps returns namespace ns's properties for a request of ops. Unknown
// namespaces and services count as writes without deduplication, leader or
// fanout (the node will refuse an unknown namespace anyway).
func (c *GRPC) nsProps(ctx context.Context, ns string, ops ...service.Op) (nsProps, error) {
	nss, err := c.Namespaces(ctx)
	if err != nil {
		return nsProps{}, err
	}
	for i, n := range nss {
		if n.GetName() == ns || (ns == "" && i == 0) {
			p := nsProps{name: n.GetName(), idempotent: n.GetIdempotentRetry(), fanout: n.GetClientFanout(), hasLeader: n.GetHasLeader(), atomic: n.GetAtomicGroups(), sessions: n.GetSessions()}
			if svc, err := service.Lookup(n.GetService()); err == nil {
				p.read = true
				for _, op := range ops {
					p.read = p.read && svc.IsRead(op)
				}
			}
			return p, nil
		}
	}
	return nsProps{name: ns}, nil
}

// DoOp runs op on namespace ns ("" means Options.Namespace, and then the
// node's default). It returns the result and the operation's id: the
// option automaton.OptOpID as the node handed it to the protocol (o's, or
// the one the node assigned), "" when the protocol has no such option. A
// result of type service.ResultErr is a protocol- or service-level refusal
// and comes with a nil error, except TRYAGAIN (outcome unknown), which is
// also returned as a *Error wrapping ErrUnknownOutcome for writes. Errors
// from gRPC keep their status code (status.Code(err)).
func (c *GRPC) DoOp(ctx context.Context, ns string, op service.Op, o OpOptions) (service.Result, string, error) {
	return c.doOp(ctx, ns, op, o, c.opts.Pipeline)
}

// DoGroup runs ops on namespace ns as one atomic group: they take effect
// together, in order, all or none, with nothing interleaved. It needs a
// protocol that applies groups atomically (Namespace.atomic_groups); others
// refuse the group with FAILED_PRECONDITION before anything runs. It
// returns one result per operation (an operation's own error, such as INCR
// of a non-integer, is its result). A group the protocol refused or
// aborted as a whole is returned as a *Error, wrapping ErrUnknownOutcome
// for TRYAGAIN on a group that writes; retries follow DoOp's rules, the
// group counting as a read when all its operations read. o's options apply
// to the group as a whole.
func (c *GRPC) DoGroup(ctx context.Context, ns string, ops []service.Op, o OpOptions) ([]service.Result, error) {
	if len(ops) == 0 {
		return nil, errors.New("client: an atomic group needs at least one operation")
	}
	req, err := c.request(ns, o)
	if err != nil {
		return nil, err
	}
	for _, op := range ops {
		req.Ops = append(req.Ops, synodpb.FromOp(op))
	}
	resp, res, err := c.send(ctx, req, fmt.Sprintf("group of %d operations", len(ops)), ops...)
	if err != nil {
		return nil, err
	}
	if res.Type == service.ResultErr {
		return nil, replyError(res.Err)
	}
	if len(resp.GetResults()) != len(ops) {
		return nil, fmt.Errorf("client: group of %d operations answered with %d results", len(ops), len(resp.GetResults()))
	}
	out := make([]service.Result, len(ops))
	for i, m := range resp.GetResults() {
		if out[i], err = synodpb.ToResult(m); err != nil {
			return nil, fmt.Errorf("client: result %d of a group: %w", i+1, err)
		}
	}
	return out, nil
}

// request returns a request on ns with o's options and the next sequence
// number.
func (c *GRPC) request(ns string, o OpOptions) (*synodpb.Request, error) {
	if ns == "" {
		ns = c.opts.Namespace
	}
	read := o.Read
	if read == automaton.ReadDefault {
		read = c.opts.ReadMode
	}
	opts, err := o.options()
	if err != nil {
		return nil, err
	}
	return &synodpb.Request{
		Namespace: ns, ClientId: c.client, Seq: c.seq.Add(1),
		Read: synodpb.FromReadMode(read), Options: opts,
	}, nil
}

// send runs req (whose operations are ops), failing over as the package
// doc says. It returns the response and its result; a TRYAGAIN result of a
// write that may not be retried comes with a *Error wrapping
// ErrUnknownOutcome, other error results with a nil error.
func (c *GRPC) send(ctx context.Context, req *synodpb.Request, kind string, ops ...service.Op) (*synodpb.Response, service.Result, error) {
	p, err := c.nsProps(ctx, req.Namespace, ops...)
	if err != nil {
		return nil, service.Result{}, err
	}
	isRead, idem := p.read, p.idempotent
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, service.Result{}, ErrClosed
	}
	l := c.takeLane(req)
	defer c.lanes.put(l)
	if p.sessions {
		l.session(req, p.name, isRead) // sessions.go
	}
	what := reqName{kind: kind, req: req}
	switch {
	case p.fanout:
		return c.sendFanout(ctx, req, what, p)
	case p.hasLeader && !c.opts.NoLeaderWatch:
		st := c.leader(p.name)
		if isRead || idem {
			return c.sendLeader(ctx, req, what, p)
		}
		if idx, _ := st.target(); idx >= 0 {
			c.prefer(idx) // a write that may not be resubmitted starts at the leader
		}
	}
	return c.sendOne(ctx, req, what, p, -1, c.attempt)
}

// sendOne runs req at one address at a time, round robin from start (-1:
// the preferred one), each attempt made by try, with the package doc's
// retry rules.
func (c *GRPC) sendOne(ctx context.Context, req *synodpb.Request, what reqName, p nsProps, start int, try tryFunc) (*synodpb.Response, service.Result, error) {
	isRead, idem := p.read, p.idempotent
	if start < 0 {
		c.mu.Lock()
		start = c.cur
		c.mu.Unlock()
	}
	maySent := false // an earlier attempt may have taken effect
	var errs []error
	for i := range c.conns {
		idx := (start + i) % len(c.conns)
		g := c.conns[idx]
		resp, res, sent, err := try(ctx, g, req)
		if err == nil {
			if res.Type != service.ResultErr {
				c.prefer(idx)
				return resp, res, nil
			}
			e := replyError(res.Err)
			if e.Kind != synoderr.TryAgain {
				c.prefer(idx)
				return resp, res, nil
			}
			if !isRead && !idem {
				e.unknown = true
				return resp, res, e
			}
			maySent = maySent || !isRead
			errs = append(errs, fmt.Errorf("%s: %w", g.addr, e))
			continue
		}
		if definite(status.Code(err)) {
			return nil, service.Result{}, fmt.Errorf("client: %s at %s: %w", what, g.addr, err)
		}
		if !sent {
			// Certainly not executed: try the next address.
			if cerr := ctxDone(ctx); cerr != nil {
				return nil, service.Result{}, c.giveUp(what, isRead, maySent, fmt.Errorf("%w (last error: %w)", cerr, err))
			}
			errs = append(errs, fmt.Errorf("%s: %w", g.addr, err))
			continue
		}
		if !isRead {
			maySent = true
		}
		if cerr := ctxDone(ctx); cerr != nil {
			return nil, service.Result{}, c.giveUp(what, isRead, maySent, fmt.Errorf("%w (last error: %w)", cerr, err))
		}
		if !isRead && !idem {
			return nil, service.Result{}, fmt.Errorf("client: %s at %s failed after it was sent: %w: %w", what, g.addr, err, ErrUnknownOutcome)
		}
		errs = append(errs, fmt.Errorf("%s: %w", g.addr, err))
	}
	return nil, service.Result{}, c.giveUp(what, isRead, maySent, fmt.Errorf("failed at every address: %w", errors.Join(errs...)))
}

// reqName names a request in errors; it is spelled (String) only when an
// error needs it, not once per request.
type reqName struct {
	text  string           // the whole name, when set
	kind  string           // else the operation's kind,
	req   *synodpb.Request // with the request's identity (a Do call's),
	piped bool             // or as a pipelined call (the stream's identity)
}

func (n reqName) String() string {
	switch {
	case n.text != "":
		return n.text
	case n.piped:
		return "pipelined " + n.kind
	}
	return fmt.Sprintf("%s (request %x:%d)", n.kind, n.req.GetClientId(), n.req.GetSeq())
}

// tryFunc makes one attempt of req at g (GRPC.attempt: a Do call;
// attemptStream: a call on g's Pipeline stream). sent reports whether the
// request may have reached the node; an error with sent false means it
// certainly did not.
type tryFunc func(ctx context.Context, g *gconn, req *synodpb.Request) (resp *synodpb.Response, res service.Result, sent bool, err error)

func (c *GRPC) giveUp(what reqName, isRead, maySent bool, err error) error {
	if !isRead && maySent {
		return fmt.Errorf("client: %s: %w: %w", what, err, ErrUnknownOutcome)
	}
	return fmt.Errorf("client: %s: %w", what, err)
}

func (c *GRPC) prefer(idx int) {
	c.mu.Lock()
	c.cur = idx
	c.mu.Unlock()
}

// --- typed methods (the same as Client's) ----------------------------------

func (c *GRPC) do(ctx context.Context, kind, key string, args ...[]byte) (service.Result, error) {
	res, _, err := c.DoOp(ctx, "", service.Op{Kind: kind, Key: key, Args: args}, OpOptions{})
	if err != nil {
		return res, err
	}
	if res.Type == service.ResultErr {
		return res, replyError(res.Err)
	}
	return res, nil
}

func unexpectedResult(kind string, r service.Result) error {
	return fmt.Errorf("client: unexpected result to %s: %v", kind, r)
}

// Get returns key's value; found is false when the key does not exist.
func (c *GRPC) Get(ctx context.Context, key string) (value []byte, found bool, err error) {
	r, err := c.do(ctx, "get", key)
	if err != nil {
		return nil, false, err
	}
	switch r.Type {
	case service.ResultNil:
		return nil, false, nil
	case service.ResultBytes:
		return r.Bytes, true, nil
	}
	return nil, false, unexpectedResult("get", r)
}

// Set stores value under key.
func (c *GRPC) Set(ctx context.Context, key string, value []byte) error {
	r, err := c.do(ctx, "set", key, value)
	if err != nil {
		return err
	}
	if r.Type != service.ResultOK {
		return unexpectedResult("set", r)
	}
	return nil
}

// SetNX stores value under key if the key does not exist, and reports
// whether it did.
func (c *GRPC) SetNX(ctx context.Context, key string, value []byte) (bool, error) {
	r, err := c.do(ctx, "set", key, value, []byte("nx"))
	if err != nil {
		return false, err
	}
	switch r.Type {
	case service.ResultOK:
		return true, nil
	case service.ResultNil:
		return false, nil
	}
	return false, unexpectedResult("set nx", r)
}

func (c *GRPC) intOp(ctx context.Context, kind, key string, args ...[]byte) (int64, error) {
	r, err := c.do(ctx, kind, key, args...)
	if err != nil {
		return 0, err
	}
	if r.Type != service.ResultInt {
		return 0, unexpectedResult(kind, r)
	}
	return r.Int, nil
}

func (c *GRPC) sumKeys(ctx context.Context, kind string, keys []string) (int64, error) {
	if len(keys) == 0 {
		return 0, fmt.Errorf("client: %s needs at least one key", kind)
	}
	var sum int64
	for _, k := range keys {
		n, err := c.intOp(ctx, kind, k)
		if err != nil {
			return sum, err
		}
		sum += n
	}
	return sum, nil
}

// Del deletes keys and returns how many existed. Keys are deleted one by
// one, not atomically; on error, the count so far is returned with it.
func (c *GRPC) Del(ctx context.Context, keys ...string) (int64, error) {
	return c.sumKeys(ctx, "del", keys)
}

// Exists returns how many of keys exist.
func (c *GRPC) Exists(ctx context.Context, keys ...string) (int64, error) {
	return c.sumKeys(ctx, "exists", keys)
}

// Incr adds one to key's integer value and returns the new value.
func (c *GRPC) Incr(ctx context.Context, key string) (int64, error) {
	return c.IncrBy(ctx, key, 1)
}

// IncrBy adds delta to key's integer value and returns the new value.
func (c *GRPC) IncrBy(ctx context.Context, key string, delta int64) (int64, error) {
	return c.intOp(ctx, "incr", key, []byte(strconv.FormatInt(delta, 10)))
}

// Append appends value to key's value and returns the new length.
func (c *GRPC) Append(ctx context.Context, key string, value []byte) (int64, error) {
	return c.intOp(ctx, "append", key, value)
}

// --- interactive transactions ----------------------------------------------

// ErrTxnAborted is wrapped by the error of a Commit whose transaction the
// node aborted (another transaction or write committed first, or a failure
// lost it): nothing of it took effect, and it may be run again from Begin.
var ErrTxnAborted = errors.New("transaction aborted: nothing of it took effect")

// ErrTxnDone is returned by a step of a transaction already committed or
// aborted.
var ErrTxnDone = errors.New("client: the transaction has ended (committed or aborted)")

// Txn is an interactive transaction (automaton/txn.go; the Grid Services thesis VI.A.4's
// shape): each Do is answered before the commit, with the transaction's own
// writes visible to its later reads and invisible to everyone else until
// Commit. Only namespaces with Namespace.interactive_transactions serve them
// (unreplicated, pbpaxos, and sharded namespaces over a protocol with atomic
// groups, whose nodes run them); others refuse Begin with FAILED_PRECONDITION.
//
// An open transaction lives at the node that serves it, so every step is
// sent to the node that served Begin, and never fails over: if that node
// fails or restarts, the transaction is lost (its steps answer "ERR no
// such transaction", its Commit ErrTxnAborted) and the caller begins
// again. A Commit that failed without an answer (the node went away) is of
// unknown outcome (ErrUnknownOutcome). Steps of one Txn run one at a time;
// a Txn is safe for concurrent use, but its operations then run in an
// order the caller does not choose.
type Txn struct {
	c  *GRPC
	g  *gconn // the node that served Begin
	ns string
	id automaton.RequestID // the Begin request's: names the transaction

	mu   sync.Mutex
	done bool
}

// Begin opens an interactive transaction on namespace ns ("" means
// Options.Namespace, and then the node's default). It tries the addresses
// in the usual order, moving on only when the request certainly was not
// sent.
func (c *GRPC) Begin(ctx context.Context, ns string) (*Txn, error) {
	req, err := c.request(ns, OpOptions{})
	if err != nil {
		return nil, err
	}
	req.Txn = &synodpb.TxnStep{Action: synodpb.TxnStep_BEGIN}
	c.mu.Lock()
	start, closed := c.cur, c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	id := automaton.RequestID{Client: req.ClientId, Seq: req.Seq}
	var errs []error
	for i := range c.conns {
		idx := (start + i) % len(c.conns)
		g := c.conns[idx]
		_, res, sent, err := c.attempt(ctx, g, req)
		if err == nil {
			if res.Type == service.ResultErr {
				return nil, replyError(res.Err)
			}
			c.prefer(idx)
			return &Txn{c: c, g: g, ns: req.Namespace, id: id}, nil
		}
		if sent || definite(status.Code(err)) || ctxDone(ctx) != nil {
			return nil, fmt.Errorf("client: begin (request %v) at %s: %w", id, g.addr, err)
		}
		errs = append(errs, fmt.Errorf("%s: %w", g.addr, err))
	}
	return nil, fmt.Errorf("client: begin (request %v) failed at every address: %w", id, errors.Join(errs...))
}

// testHookAttempt, when set (by tests), is called at each attempt's start.
var testHookAttempt func()

// attempt sends req once to g. sent reports whether it may have reached
// the node.
func (c *GRPC) attempt(ctx context.Context, g *gconn, req *synodpb.Request) (*synodpb.Response, service.Result, bool, error) {
	if testHookAttempt != nil {
		testHookAttempt()
	}
	if g.h2 != nil {
		return c.attemptDirect(ctx, g, req, nil)
	}
	actx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	if err := g.ready(actx); err != nil {
		return nil, service.Result{}, false, err
	}
	var pr peer.Peer // set only if the request got onto a connection
	resp, err := g.stub.Do(c.withAuth(actx), req, grpc.Peer(&pr))
	if err != nil {
		return nil, service.Result{}, pr.Addr != nil, statusError(err)
	}
	return attempted(resp)
}

// attemptDirect is attempt on the direct transport: the call's time limit
// is a deadline the transport enforces (a timer of the call's), not a
// context of its own, and the call goes to the transport without the
// generated stub and grpc's call options (issue 28 item 6; docs/costs/
// s51-grpc51.md). It also ends, CANCELED, when also (if not nil) ends.
func (c *GRPC) attemptDirect(ctx context.Context, g *gconn, req *synodpb.Request, also context.Context) (*synodpb.Response, service.Result, bool, error) {
	deadline := time.Now().Add(c.opts.Timeout)
	if !g.h2.up() {
		actx, cancel := context.WithDeadline(ctx, deadline)
		err := g.ready(actx)
		cancel()
		if err != nil {
			return nil, service.Result{}, false, err
		}
	}
	msg, sent, err := g.h2.unary(ctx, deadline, also, synodpb.Synod_Do_FullMethodName, req, c.auth)
	var resp *synodpb.Response
	if err == nil {
		resp, err = decodeResponse(msg) // respcodec.go
	}
	if err != nil {
		return nil, service.Result{}, sent, statusError(err)
	}
	return attempted(resp)
}

// attempted is an attempt's outcome for the response resp.
func attempted(resp *synodpb.Response) (*synodpb.Response, service.Result, bool, error) {
	if resp.GetSilent() {
		return resp, service.Result{}, true, nil // a fanout's "not mine to answer"
	}
	res, err := synodpb.ToResult(resp.GetResult())
	return resp, res, true, err
}

// ID is the transaction's name: the RequestID of its Begin.
func (t *Txn) ID() automaton.RequestID { return t.id }

// step sends one step of the transaction to the node that served Begin.
// A Commit or Abort ends the transaction whatever its outcome.
func (t *Txn) step(ctx context.Context, action synodpb.TxnStep_Action, op *service.Op) (service.Result, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return service.Result{}, ErrTxnDone
	}
	if action != synodpb.TxnStep_OP {
		t.done = true
	}
	c := t.c
	req := &synodpb.Request{Namespace: t.ns, ClientId: c.client, Seq: c.seq.Add(1),
		Txn: &synodpb.TxnStep{TxnClient: t.id.Client, TxnSeq: t.id.Seq, Action: action}}
	if op != nil {
		req.Op = synodpb.FromOp(*op)
	}
	what := fmt.Sprintf("transaction %v: %s (request %x:%d) at %s", t.id, strings.ToLower(action.String()), req.ClientId, req.Seq, t.g.addr)
	_, res, sent, err := c.attempt(ctx, t.g, req)
	if err != nil {
		if action == synodpb.TxnStep_COMMIT && sent && !definite(status.Code(err)) {
			return res, fmt.Errorf("client: %s: %w: %w", what, err, ErrUnknownOutcome)
		}
		return res, fmt.Errorf("client: %s: %w", what, err)
	}
	return res, nil
}

// Do runs op inside the transaction and returns its result as the
// transaction sees it. An error result is also returned as a *Error.
func (t *Txn) Do(ctx context.Context, op service.Op) (service.Result, error) {
	res, err := t.step(ctx, synodpb.TxnStep_OP, &op)
	if err == nil && res.Type == service.ResultErr {
		err = replyError(res.Err)
	}
	return res, err
}

// Commit makes the transaction's writes visible, all together. An error
// wrapping ErrTxnAborted means nothing took effect (first committer wins:
// another write committed since Begin, or the node lost the transaction);
// one wrapping ErrUnknownOutcome that the commit may or may not have taken
// effect.
func (t *Txn) Commit(ctx context.Context) error {
	res, err := t.step(ctx, synodpb.TxnStep_COMMIT, nil)
	if err != nil || res.Type != service.ResultErr {
		return err
	}
	e := replyError(res.Err)
	switch {
	case e.Kind == synoderr.Aborted, strings.HasPrefix(res.Err, automaton.ErrNoSuchTxn):
		return fmt.Errorf("client: commit of transaction %v: %s: %w", t.id, res.Err, ErrTxnAborted)
	case e.Kind == synoderr.TryAgain:
		e.unknown = true
	}
	return e
}

// Abort discards the transaction.
func (t *Txn) Abort(ctx context.Context) error {
	res, err := t.step(ctx, synodpb.TxnStep_ABORT, nil)
	if err == nil && res.Type == service.ResultErr {
		err = replyError(res.Err)
	}
	return err
}
