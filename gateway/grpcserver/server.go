// Package grpcserver serves Synod's gRPC API (api/synod.proto, service
// synod.v1.Synod) on top of a gateway.Backend: the node runtime, or
// gatewaytest.MemBackend in tests.
//
// Every request is checked before it reaches the backend: the namespace must
// exist (NOT_FOUND); an atomic group (Request.ops) needs a protocol that
// applies groups atomically (automaton.TransactionsOf(protocol).Atomic,
// FAILED_PRECONDITION with automaton.ErrNoAtomic's text otherwise); every
// operation must pass the namespace's Service.Validate
// (automaton.ValidateRequest), and the read mode and the request options
// must be valid (INVALID_ARGUMENT). Such refusals executed nothing. This is
// the request's one validation (the backend does not check again:
// gateway.Backend.Do). Every refusal is an error of a synoderr.Kind, whose
// gRPC code the status takes (refusal: Invalid is INVALID_ARGUMENT,
// Unsupported FAILED_PRECONDITION, NotFound NOT_FOUND, NoAuth
// UNAUTHENTICATED, NoPerm PERMISSION_DENIED, TryAgain UNAVAILABLE), its
// message keeping a Redis code other than ERR ("NOPERM User ...").
//
// Request options are the ones the namespace's protocol declares
// (automaton.RequestOptions); the server knows none by meaning. It checks
// them with automaton.ValidateOptions, which normalises values and fills in
// assigned ones, and returns in Response.options what it handed to the
// protocol.
//
// Choices where the issue is silent:
//
//   - Request identity. The client chooses (client_id, seq); a retry of the
//     same request carries the same pair, so protocols with replicated
//     deduplication answer it once. client_id 0 makes the server pick a
//     random client id with seq 1 for that one request (convenient for
//     grpcurl; such a request cannot be retried safely). A non-zero client_id
//     needs seq >= 1.
//   - Option aliases. The Request fields op_id, prev and strict predate the
//     options map; they spell the options automaton.OptOpID, OptPrev and
//     OptStrict and are merged into the map (an empty op_id or prev, or a
//     false strict, is absent). A request that gives an alias and the same
//     map entry is refused rather than one silently winning. Aliases are
//     refused like any option when the protocol does not declare them:
//     silently dropping strict would weaken what the client asked for.
//     Response.op_id echoes
//     options["opid"], which a protocol that declares it (ESDS) assigns as
//     "<client id as 16 hex>-<seq>" when absent, so a retry with the same
//     (client_id, seq) gets the same op id.
//   - Interactive transactions (Request.txn): a step needs client_id (the
//     BEGIN's (client_id, seq) names the transaction, so the client must
//     know it); a namespace without them (gateway.InteractiveTransactions:
//     neither its protocol nor, for a sharded namespace, its nodes run
//     them) is refused with FAILED_PRECONDITION and
//     automaton.ErrNoInteractive's text before anything is applied; BEGIN,
//     COMMIT and ABORT carry no op. The server keeps no transaction state:
//     the protocol does, at the node it runs on.
//   - Atomic groups: options apply to the group as a whole (one request, one
//     RequestID); Response.results answers each operation when the group
//     was applied, and Response.result is then the protocol's group result.
//   - Outcomes. A request that timed out at the node (Options.RequestTimeout,
//     or the caller's deadline if earlier) fails with DEADLINE_EXCEEDED; one
//     cut short by shutdown or a backend failure with UNAVAILABLE; one the
//     caller cancelled with CANCELED. All three messages say that the
//     outcome is unknown. Protocol-level errors are results, not statuses,
//     with the same upper-case code the Redis gateway replies ("ERR ...",
//     "TRYAGAIN ...").
//   - Leader notifications (WatchLeader; the Grid Services thesis, chapter III's fail-over
//     notification): served when the backend is a gateway.LeaderWatcher
//     (UNIMPLEMENTED otherwise) for namespaces whose protocol has a leader
//     (FAILED_PRECONDITION otherwise). The stream sends the current leader
//     at once, then each change of the leader's node id, including to ""
//     (an election: the node knows none); a change quickly undone may be
//     skipped. Each event carries the sending node's id (from), so that
//     clients behind proxies learn which address is which node.
//   - Fanout (automaton.FanoutProtocol): Request.fanout is handed to the
//     protocol as automaton.Request.Fanout; a Silent response is answered
//     with silent set and no result (its options are still echoed).
//     Namespace.client_fanout and has_leader tell clients which to use.
//   - Size limits: messages up to synodpb.MaxMessageSize in both directions.
//   - Transports: this package's own HTTP/2 server (the default) or
//     grpc-go's (Options.Transport, the cluster file's grpc_server;
//     h2server.go says what the own one serves and what it refuses). Both
//     serve the same service, interceptors and reflection.
//   - Users: the cluster file's password and users, as on the Redis port,
//     with the password in metadata or a client certificate naming the user
//     (auth.go). Without Options.TLS, like Redis AUTH, the password crosses
//     the network in clear; with it the server speaks only TLS
//     (docs/SECURITY.md).
package grpcserver

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/internal/ratelog"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// Options configure a Server. Zero values take the defaults noted.
type Options struct {
	// Password is the default user's password and Users the cluster file's
	// users (auth.go); with either, every call must log in.
	Password string
	Users    []config.User
	// Cluster is the cluster's name: a client certificate naming a user
	// must be of this cluster (auth.go). Empty: not checked.
	Cluster string
	// RequestTimeout bounds each Backend.Do call (default 10 s).
	RequestTimeout time.Duration
	// Logger receives authentication failures and backend errors (default: discard).
	Logger *slog.Logger
	// TLS, when set, makes the server speak TLS only (docs/SECURITY.md).
	TLS *tls.Config
	// Transport is TransportGRPCGo (grpc-go's server) or TransportDirect
	// (this package's own HTTP/2 server, h2server.go); empty:
	// DefaultTransport.
	Transport string
}

// Server implements synod.v1.Synod.
type Server struct {
	synodpb.UnimplementedSynodServer

	b    gateway.Backend
	opts Options
	log  *slog.Logger
	g    *grpc.Server // TransportGRPCGo
	h    *h2server    // TransportDirect

	nss     []config.Namespace
	nsNames []string // nss' names (reqcodec.go)
	svcs    map[string]service.Service

	users   *gateway.Users
	defUser *gateway.User    // users.Default(), made once (a User does not change)
	lim     *ratelog.Limiter // refusals (auth.go)

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
}

// New returns a server for b. Namespaces are read once, here: a node's
// namespaces do not change while it runs.
func New(b gateway.Backend, opts Options) *Server {
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 10 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Transport == "" {
		opts.Transport = DefaultTransport
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{b: b, opts: opts, log: log, svcs: map[string]service.Service{}, ctx: ctx, cancel: cancel, lim: ratelog.New(0)}
	users, err := gateway.NewUsers(b, opts.Password, opts.Users)
	if err != nil {
		// config.Validate checks every hash; one that slips through locks
		// its user out rather than the server.
		log.Error("gRPC users refused", "err", err)
	}
	s.users, s.defUser = users, users.Default()
	for _, ns := range b.Namespaces() {
		svc, err := service.Lookup(ns.Service)
		if err != nil {
			log.Error("namespace has an unknown service; its requests will be refused", "namespace", ns.Name, "err", err)
		}
		s.nss = append(s.nss, ns)
		s.nsNames = append(s.nsNames, ns.Name)
		s.svcs[ns.Name] = svc
	}
	sopts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(synodpb.MaxMessageSize),
		grpc.MaxSendMsgSize(synodpb.MaxMessageSize),
		grpc.MaxConcurrentStreams(1024),
		grpc.StaticStreamWindowSize(synodpb.StreamWindow), // no BDP pings: synodpb.StreamWindow
		grpc.StaticConnWindowSize(synodpb.ConnWindow),
		grpc.UnaryInterceptor(s.authenticate),
		grpc.StreamInterceptor(s.authenticateStream),
	}
	var reg reflection.GRPCServer
	switch opts.Transport {
	case TransportDirect:
		s.h = newH2Server(opts.TLS, s.authenticate, s.authenticateStream, log)
		reg = s.h
	default:
		if opts.Transport != TransportGRPCGo {
			log.Error("unknown gRPC server transport; serving with grpc-go's", "transport", opts.Transport)
		}
		if opts.TLS != nil {
			sopts = append(sopts, grpc.Creds(credentials.NewTLS(opts.TLS)))
		}
		s.g = grpc.NewServer(sopts...)
		reg = s.g
	}
	synodpb.RegisterSynodServer(reg, s)
	if _, ok := b.(gateway.ReplyBackend); ok && s.h != nil {
		s.h.methods[synodpb.Synod_Do_FullMethodName].async = s.doReply // doreply.go
	}
	if s.h != nil {
		// A lone Pipeline message is read by the stream's receiver (h2sconn's
		// Read turn); the pipe keeps its promise (pipe.receive).
		s.h.methods[synodpb.Synod_Pipeline_FullMethodName].turn = true
		// So is a Phases message (phases.go, phaser.work keeps the promise).
		s.h.methods[synodpb.Synod_Phases_FullMethodName].turn = true
	}
	// Server reflection, so that grpcurl and GUI clients list and call the
	// API without the .proto file (behind the same authentication).
	reflection.Register(reg)
	return s
}

// Serve accepts connections on l until Close (it then returns nil) or until
// l fails.
func (s *Server) Serve(l net.Listener) error {
	var err error
	if s.h != nil {
		err = s.h.serve(l)
	} else {
		err = s.g.Serve(l)
	}
	if s.ctx.Err() != nil {
		return nil
	}
	return err
}

// Close cancels requests in flight (their callers see UNAVAILABLE, outcome
// unknown), stops accepting, and waits up to 2 s for handlers to return
// before closing connections.
func (s *Server) Close() {
	s.cancel()
	if s.h != nil {
		s.h.close()
		return
	}
	done := make(chan struct{})
	go func() { s.g.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		s.g.Stop()
		<-done
	}
}

// namespace resolves a request's namespace ("" is the default).
func (s *Server) namespace(name string) (config.Namespace, service.Service, error) {
	if len(s.nss) == 0 {
		return config.Namespace{}, nil, refusal(synoderr.Unsupported, "%s", "this node serves no namespace")
	}
	if name == "" {
		return s.nss[0], s.svcs[s.nss[0].Name], nil
	}
	for _, ns := range s.nss {
		if ns.Name == name {
			return ns, s.svcs[name], nil
		}
	}
	names := make([]string, len(s.nss))
	for i, ns := range s.nss {
		names[i] = ns.Name
	}
	return config.Namespace{}, nil, refusal(synoderr.NotFound, "unknown namespace %q (namespaces: %s)", name, strings.Join(names, ", "))
}

// Do implements synod.v1.Synod.
func (s *Server) Do(ctx context.Context, in *synodpb.Request) (*synodpb.Response, error) {
	ns, req, err := s.prepareDo(ctx, in)
	if err != nil {
		return nil, err
	}
	return s.run(ctx, ns, req, in.GetTerse())
}

// prepareDo is Do's request: its namespace and in prepared.
func (s *Server) prepareDo(ctx context.Context, in *synodpb.Request) (string, automaton.Request, error) {
	ns, _, err := s.namespace(in.GetNamespace())
	if err != nil {
		return "", automaton.Request{}, err
	}
	if in.GetEndSession() {
		req, err := s.endSession(ctx, ns, in) // sessions.go
		return ns.Name, req, err
	}
	id, err := requestID(in)
	if err != nil {
		return "", automaton.Request{}, err
	}
	req, err := s.prepare(ctx, ns, id, in)
	return ns.Name, req, err
}

// prepare checks in, a request on namespace ns identified as id, and
// converts it (the package doc's checks; every error is a status, and
// nothing was executed).
func (s *Server) prepare(ctx context.Context, ns config.Namespace, id automaton.RequestID, in *synodpb.Request) (automaton.Request, error) {
	svc := s.svcs[ns.Name]
	if svc == nil {
		return automaton.Request{}, refusal(synoderr.Unsupported, "namespace %q has service %q, which this node does not know", ns.Name, ns.Service)
	}
	var err error
	req := automaton.Request{ID: id, Fanout: in.GetFanout()}
	if in.GetUnanswered() != 0 || in.GetEndSession() {
		if err := sessionFields(in, id, &req); err != nil { // sessions.go
			return req, err
		}
	}
	if req.Txn, err = synodpb.ToTxnStep(in.GetTxn(), id); err != nil {
		return req, refusal(synoderr.Invalid, "%s", err.Error())
	}
	switch {
	case req.Txn != nil && in.GetClientId() == 0:
		return req, refusal(synoderr.Invalid, "%s", "a transaction step needs client_id and seq (the BEGIN's name the transaction)")
	case len(in.GetOps()) > 0 && in.GetOp() != nil:
		return req, refusal(synoderr.Invalid, "%s", "request has both op and ops: an atomic group goes in ops alone")
	case len(in.GetOps()) > 0 && req.Txn != nil:
		return req, refusal(synoderr.Invalid, "%s", "request has both ops and txn: a request is an atomic group or a transaction step, not both")
	case req.Txn != nil && req.Txn.Action != automaton.TxnOp:
		if in.GetOp() != nil {
			return req, refusal(synoderr.Invalid, "a transaction %v step carries no op", req.Txn.Action)
		}
	case len(in.GetOps()) > 0:
		for _, m := range in.GetOps() {
			req.Ops = append(req.Ops, synodpb.ToOp(m))
		}
	case in.GetOp() != nil:
		req.Op = synodpb.ToOp(in.GetOp())
	default:
		return req, refusal(synoderr.Invalid, "%s", "request has no op")
	}
	if err := s.permit(ctx, ns.Name, req); err != nil {
		return req, err
	}
	// RefuseUnsupported refuses only groups and transaction steps; a
	// single operation skips its registry lookup.
	if len(req.Ops) > 0 || req.Txn != nil && !gateway.InteractiveTransactions(ns) {
		if res, refused := automaton.RefuseUnsupported(ns.Protocol, req); refused {
			return req, refusal(synoderr.Unsupported, "%s", res.Err)
		}
	}
	if err := automaton.ValidateRequest(svc, req); err != nil {
		return req, refusal(synoderr.Invalid, "namespace %q (service %s): %v", ns.Name, ns.Service, err)
	}
	req.Checked = true // validated once: the protocol does not again
	read, err := synodpb.ToReadMode(in.GetRead())
	if err != nil {
		return req, refusal(synoderr.Invalid, "%s", err.Error())
	}
	req.Opts, err = requestOptions(ns, id, read, in)
	if err != nil {
		return req, err
	}
	return req, nil
}

// run executes a prepared request on namespace ns and converts its
// response (without op id and options when terse: Request.terse).
func (s *Server) run(ctx context.Context, ns string, req automaton.Request, terse bool) (*synodpb.Response, error) {
	rctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	return s.execute(ctx, rctx, ns, req, terse)
}

// runWithin is run for a caller whose ctx already ends when the server
// closes (a Pipeline stream's: one AfterFunc per stream, not per call).
func (s *Server) runWithin(ctx context.Context, ns string, req automaton.Request, terse bool) (*synodpb.Response, error) {
	rctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
	defer cancel()
	return s.execute(ctx, rctx, ns, req, terse)
}

// execute runs req within rctx (ctx's, bounded by the request timeout)
// and converts its response.
func (s *Server) execute(ctx, rctx context.Context, ns string, req automaton.Request, terse bool) (*synodpb.Response, error) {
	res, err := s.b.Do(rctx, ns, req)
	return s.response(ctx, rctx, req, res, err, terse)
}

// response converts the Backend's answer to req (res, or err) made within
// rctx (ctx's, bounded by the request timeout).
func (s *Server) response(ctx, rctx context.Context, req automaton.Request, res automaton.Response, err error, terse bool) (*synodpb.Response, error) {
	if err != nil {
		return nil, s.doError(ctx, rctx, req.ID, err)
	}
	out := &synodpb.Response{}
	if !terse {
		out.OpId, out.Options = req.Opts.String(automaton.OptOpID), synodpb.FromOptions(req.Opts.Ext)
	}
	if res.Silent {
		out.Silent = true
		return out, nil
	}
	out.Result = fromResult(res.Result)
	for _, r := range res.Results {
		out.Results = append(out.Results, fromResult(r))
	}
	return out, nil
}

// fromResult converts a result, giving errors a Redis-style code.
func fromResult(r service.Result) *synodpb.Result {
	if r.Type == service.ResultErr {
		r.Err = synoderr.Text(r.Err)
	}
	return synodpb.FromResult(r)
}

// requestID returns the request's identity, picking a fresh random client
// id with seq 1 when client_id is 0.
func requestID(in *synodpb.Request) (automaton.RequestID, error) {
	id := automaton.RequestID{Client: in.GetClientId(), Seq: in.GetSeq()}
	switch {
	case id.Client == 0:
		var b [8]byte
		for id.Client == 0 {
			rand.Read(b[:])
			id.Client = binary.LittleEndian.Uint64(b[:])
		}
		id.Seq = 1
	case id.Seq == 0:
		return id, refusal(synoderr.Invalid, "%s", "seq must be at least 1 when client_id is set")
	}
	return id, nil
}

// aliases are the Request fields that spell the eventually-serializable
// model's options (api/synod.proto).
var aliases = []struct {
	field, option string
	get           func(*synodpb.Request) []string
}{
	{"op_id", automaton.OptOpID, func(in *synodpb.Request) []string {
		if in.GetOpId() == "" {
			return nil
		}
		return []string{in.GetOpId()}
	}},
	{"prev", automaton.OptPrev, func(in *synodpb.Request) []string {
		if len(in.GetPrev()) == 0 {
			return nil
		}
		return in.GetPrev()
	}},
	{"strict", automaton.OptStrict, func(in *synodpb.Request) []string { return automaton.BoolOption(in.GetStrict()) }},
}

// requestOptions merges the alias fields into the request's options,
// validates them against the namespace protocol's specs and fills in
// assigned values. Every error is INVALID_ARGUMENT and names the option.
func requestOptions(ns config.Namespace, id automaton.RequestID, read automaton.ReadMode, in *synodpb.Request) (automaton.Options, error) {
	// o.Ext is this request's own map (ToOptions makes it): changed in
	// place, not copied per option as Options.Set does.
	o := automaton.Options{Read: read, Ext: synodpb.ToOptions(in.GetOptions())}
	set := func(name string, vals []string) {
		switch {
		case vals == nil:
			delete(o.Ext, name)
		case o.Ext == nil:
			o.Ext = map[string][]string{name: vals}
		default:
			o.Ext[name] = vals
		}
	}
	for _, a := range aliases {
		vals := a.get(in)
		if vals == nil {
			continue
		}
		if _, dup := o.Ext[a.option]; dup {
			return o, refusal(synoderr.Invalid, "option %s given twice: in options and as the %s field (its alias); give one", a.option, a.field)
		}
		set(a.option, vals)
	}
	// What automaton.ValidateOptions does, with the specs cached per
	// protocol instead of its registry lookups per option per request.
	specs := gateway.RequestOptionSpecs(ns.Protocol)
	for _, name := range o.Names() {
		i := slices.IndexFunc(specs, func(s automaton.OptionSpec) bool { return s.Name == name })
		if i < 0 {
			_, err := automaton.FindOption(ns.Protocol, name)
			return o, refusal(synoderr.Invalid, "namespace %q: option %q refused: %v", ns.Name, name, err)
		}
		vals, err := specs[i].Parse(o.Ext[name])
		if err != nil {
			return o, refusal(synoderr.Invalid, "namespace %q: %v", ns.Name, err)
		}
		set(name, vals)
	}
	if len(o.Ext) == 0 {
		o.Ext = nil // as Options.Set leaves it
	}
	return automaton.AssignOptions(specs, id, o), nil
}

// doError maps a Backend.Do error to a status. Every such error leaves the
// outcome unknown: the request may have been submitted.
func (s *Server) doError(ctx, rctx context.Context, id automaton.RequestID, err error) error {
	switch {
	case errors.Is(err, gateway.ErrShuttingDown) || s.ctx.Err() != nil:
		return refusal(synoderr.TryAgain, "node is shutting down; the outcome of request %v is unknown", id)
	case ctx.Err() == context.Canceled:
		return status.Errorf(codes.Canceled, "request %v cancelled by the caller; its outcome is unknown", id)
	case errors.Is(err, context.DeadlineExceeded) || rctx.Err() != nil:
		return status.Errorf(codes.DeadlineExceeded, "request %v timed out; its outcome is unknown (a write may or may not have taken effect)", id)
	}
	s.log.Warn("backend failed a gRPC request", "request", id.String(), "err", err)
	return refusal(synoderr.TryAgain, "request %v failed at the node (%v); its outcome is unknown", id, err)
}

// Namespaces implements synod.v1.Synod.
func (s *Server) Namespaces(ctx context.Context, _ *synodpb.NamespacesRequest) (*synodpb.NamespacesResponse, error) {
	out := &synodpb.NamespacesResponse{}
	for _, ns := range s.nss {
		if !s.users.MayAccess(userOf(ctx), ns.Name) {
			continue
		}
		m := &synodpb.Namespace{
			Name: ns.Name, Protocol: ns.Protocol, Service: ns.Service,
			Options:                 synodpb.FromOptionSpecs(automaton.RequestOptions(ns.Protocol)),
			AtomicGroups:            automaton.TransactionsOf(ns.Protocol).Atomic,
			InteractiveTransactions: gateway.InteractiveTransactions(ns),
			ClientFanout:            automaton.ClientFanoutOf(ns.Protocol),
			Sessions:                automaton.SupportsSessions(ns.Protocol),
		}
		if lw, ok := s.b.(gateway.LeaderWatcher); ok {
			m.HasLeader = lw.HasLeader(ns.Name)
		}
		if p, err := automaton.LookupAny(ns.Protocol); err == nil { // a broken variant runs under allow_broken
			m.IdempotentRetry = p.IdempotentRetry()
			if c, err := automaton.ConsistencyOf(ns.Protocol); err == nil {
				m.Consistency = string(c)
			}
		}
		out.Namespaces = append(out.Namespaces, m)
	}
	return out, nil
}

// WatchLeader implements synod.v1.Synod: the current leader at once, then
// every change (gateway.LeaderWatcher), until the caller cancels or the
// server closes.
func (s *Server) WatchLeader(in *synodpb.WatchLeaderRequest, stream synodpb.Synod_WatchLeaderServer) error {
	ns, _, err := s.namespace(in.GetNamespace())
	if err != nil {
		return err
	}
	if err := s.mayAccess(stream.Context(), ns.Name); err != nil {
		return err
	}
	lw, ok := s.b.(gateway.LeaderWatcher)
	if !ok {
		return status.Error(codes.Unimplemented, "this server cannot watch leaders")
	}
	if !lw.HasLeader(ns.Name) {
		return refusal(synoderr.Unsupported, "namespace %q: protocol %s has no leader (every node serves it alike)", ns.Name, ns.Protocol)
	}
	ctx := stream.Context()
	var last *synodpb.LeaderEvent
	for {
		h, changed, err := lw.WatchLeader(ns.Name)
		if err != nil {
			return refusal(synoderr.Unsupported, "namespace %q: %v", ns.Name, err)
		}
		ev := &synodpb.LeaderEvent{Namespace: ns.Name, NodeId: string(h.ID), ClientAddr: h.Client, GrpcAddr: h.GRPC, From: string(h.From)}
		if last == nil || last.GetNodeId() != ev.GetNodeId() {
			if err := stream.Send(ev); err != nil {
				return err
			}
			last = ev
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-s.ctx.Done():
			return refusal(synoderr.TryAgain, "%s", "node is shutting down")
		}
	}
}

// Info implements synod.v1.Synod.
func (s *Server) Info(ctx context.Context, _ *synodpb.InfoRequest) (*synodpb.InfoResponse, error) {
	out := &synodpb.InfoResponse{Sections: map[string]*synodpb.InfoSection{}}
	for name, fields := range s.b.Info() {
		sec := &synodpb.InfoSection{Fields: map[string]string{}}
		for k, v := range fields {
			sec.Fields[k] = v
		}
		out.Sections[name] = sec
	}
	names := make([]string, len(s.nss))
	for i, ns := range s.nss {
		names[i] = ns.Name
	}
	grpcSec := out.Sections["grpc"]
	if grpcSec == nil {
		grpcSec = &synodpb.InfoSection{Fields: map[string]string{}}
		out.Sections["grpc"] = grpcSec
	}
	grpcSec.Fields["namespaces"] = strings.Join(names, ",")
	grpcSec.Fields["request_timeout_ms"] = fmt.Sprint(s.opts.RequestTimeout.Milliseconds())
	grpcSec.Fields["max_message_bytes"] = fmt.Sprint(synodpb.MaxMessageSize)
	return out, nil
}

// refusal is the status of an error of kind k (synoderr.Of of the
// formatted text): the kind's gRPC code, and its message with the Redis
// code unless that is ERR (synoderr.Error.GRPCMessage).
func refusal(k synoderr.Kind, format string, a ...any) error {
	return kindStatus(k, format, a...).Err()
}

// kindStatus is refusal's status.
func kindStatus(k synoderr.Kind, format string, a ...any) *status.Status {
	e := synoderr.Of(k, fmt.Sprintf(format, a...))
	return status.New(codes.Code(k.GRPCCode()), e.GRPCMessage())
}
