package grpcserver

import (
	"context"
	"crypto/x509"
	"log/slog"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/synoderr"
)

// Users and permissions on the gRPC API, the same as on the Redis-protocol
// port (gateway.Users, built from the same cluster file fields): each call
// is made as one user, found in this order:
//
//  1. metadata synodpb.PasswordKey (with synodpb.UserKey naming the user;
//     absent or "default": the cluster password's default user), checked
//     as RESP's AUTH user password. A wrong pair is UNAUTHENTICATED even
//     when the caller also has a certificate.
//  2. a client certificate, verified against the cluster CA during the TLS
//     handshake (tls.clients on), that names a user, as etcd takes the
//     user from the certificate's common name: the name of its Synod
//     identity synod://<cluster>/client/<name> (certs.IdentityOf, written
//     by `synod certs --client <name>`), or its common name when it has no
//     Synod identity. A node certificate is not a user (it is refused);
//     nor is a client certificate of another cluster, or one naming no
//     configured user.
//  3. nobody: allowed as the default user when neither a password nor users
//     are configured, UNAUTHENTICATED otherwise.
//
// Do checks the user's access to the namespace and, for a read-only user,
// that every operation is a read (Service.IsRead), as RESP does;
// WatchLeader needs access to its namespace, Namespaces lists the
// accessible ones, Info and reflection any logged-in user. A refusal is
// PERMISSION_DENIED with RESP's NOPERM text. Every refusal is logged, at
// most once per ten seconds for each kind and remote host (package
// ratelog).

type userKey struct{}

// userOf is the user a call was authenticated as.
func userOf(ctx context.Context) *gateway.User {
	u, _ := ctx.Value(userKey{}).(*gateway.User)
	return u
}

func (s *Server) authenticate(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	u, err := s.login(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return handler(context.WithValue(ctx, userKey{}, u), req)
}

func (s *Server) authenticateStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	u, err := s.login(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return handler(srv, &userStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), userKey{}, u)})
}

type userStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (u *userStream) Context() context.Context { return u.ctx }

// remote is the caller's address, for logs.
func remote(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return "unknown"
}

// refused logs a refusal once per kind and remote host, and returns st.
func (s *Server) refused(ctx context.Context, kind string, st *status.Status, attrs ...any) error {
	attrs = append(attrs, "reason", st.Message())
	s.lim.Log(s.log, slog.LevelWarn, kind, remote(ctx), "gRPC call refused", attrs...)
	return st.Err()
}

// login finds the user a call is made as (see above).
func (s *Server) login(ctx context.Context, method string) (*gateway.User, error) {
	// The two keys only: FromIncomingContext would copy the whole
	// metadata (five allocations per call).
	pws, names := metadata.ValueFromIncomingContext(ctx, synodpb.PasswordKey), metadata.ValueFromIncomingContext(ctx, synodpb.UserKey)
	pw, name := "", ""
	if len(pws) > 0 {
		pw = pws[0]
	}
	if len(names) > 0 {
		name = names[0]
	}
	return s.loginWith(ctx, method, pw, len(pws), name, len(names))
}

// loginWith is login given the password metadata's first value and
// number of values (npw), and the user's (a unary call's own headers:
// doReply).
func (s *Server) loginWith(ctx context.Context, method, pw string, npw int, name string, nname int) (*gateway.User, error) {
	if npw > 1 || nname > 1 {
		return nil, s.refused(ctx, "auth", kindStatus(synoderr.NoAuth, "%q and %q may be given once each", synodpb.PasswordKey, synodpb.UserKey), "method", method)
	}
	if nname == 0 {
		name = ""
	}
	if npw == 1 {
		u, ok := s.users.Login(name, pw)
		if !ok {
			return nil, s.refused(ctx, "auth", kindStatus(synoderr.NoAuth, "%s", "WRONGPASS invalid username-password pair or user is disabled"), "method", method, "user", orDefault(name))
		}
		return u, nil
	}
	if nname == 1 {
		return nil, s.refused(ctx, "auth", kindStatus(synoderr.NoAuth, "user %q given without a password (%q)", name, synodpb.PasswordKey), "method", method)
	}
	if cert := verifiedCert(ctx); cert != nil {
		name, err := s.certUser(cert)
		if err != nil {
			return nil, s.refused(ctx, "cert", kindStatus(synoderr.NoAuth, "%s", err.Error()), "method", method)
		}
		u, ok := s.users.Named(name)
		if !ok {
			return nil, s.refused(ctx, "cert", kindStatus(synoderr.NoAuth, "the client certificate names user %q, which is not configured", name), "method", method)
		}
		return u, nil
	}
	if s.users.Required() {
		return nil, s.refused(ctx, "auth", kindStatus(synoderr.NoAuth, "authentication required: send a password in the %q metadata (and a user in %q), or a client certificate naming a user", synodpb.PasswordKey, synodpb.UserKey), "method", method)
	}
	return s.defUser, nil
}

func orDefault(name string) string {
	if name == "" {
		return "default"
	}
	return name
}

// verifiedCert is the caller's certificate when the TLS handshake verified
// its chain against the cluster CA, else nil.
func verifiedCert(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.PeerCertificates) == 0 {
		return nil
	}
	return ti.State.PeerCertificates[0]
}

// certUser is the user a verified client certificate names
// (gateway.CertUser, the same rule as on the Redis-protocol port).
func (s *Server) certUser(c *x509.Certificate) (string, error) {
	return gateway.CertUser(c, s.opts.Cluster)
}

// permit checks that the call's user may submit req to namespace ns.
func (s *Server) permit(ctx context.Context, ns string, req automaton.Request) error {
	u := userOf(ctx)
	cmd := "txn"
	switch {
	case len(req.Ops) > 0:
		cmd = strings.ToLower(req.Ops[0].Kind)
	case req.Op.Kind != "":
		cmd = strings.ToLower(req.Op.Kind)
	}
	if msg := s.users.Permit(u, ns, req, cmd); msg != "" {
		return s.refused(ctx, "noperm", kindStatus(synoderr.NoPerm, "%s", msg), "user", u.Name(), "namespace", ns)
	}
	return nil
}

// mayAccess checks that the call's user may access namespace ns.
func (s *Server) mayAccess(ctx context.Context, ns string) error {
	u := userOf(ctx)
	if !s.users.MayAccess(u, ns) {
		return s.refused(ctx, "noperm", kindStatus(synoderr.NoPerm, "NOPERM User %s has no permissions to access the '%s' namespace", u.Name(), ns), "user", u.Name(), "namespace", ns)
	}
	return nil
}
