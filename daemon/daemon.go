// Package daemon assembles a Synod node process: the runtime (package node)
// with every client-facing server it offers. The runtime itself serves the
// Redis protocol and metrics; the gRPC API (gateway/grpcserver) is built
// here, above the runtime, so that node does not depend on gRPC's server.
// So is the gRPC peer transport (transport/grpcpeer) that namespaces with
// transport grpc-unary or grpc-stream use.
package daemon

import (
	"crypto/tls"
	"log/slog"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/gateway/grpcserver"
	"github.com/synod-dev/synod/node"
	_ "github.com/synod-dev/synod/protocol/all" // every protocol
	"github.com/synod-dev/synod/transport/grpcpeer"
)

// GRPC builds the gRPC API server (node.Options.GRPC) with the password
// alone; New gives it the cluster file's users too (grpcServer).
func GRPC(b gateway.Backend, password string, log *slog.Logger) node.ClientServer {
	return grpcserver.New(b, grpcserver.Options{Password: password, Logger: log})
}

// grpcServer builds the gRPC API server for cfg: the same password and
// users as the Redis-protocol port, client certificates of cfg's cluster,
// TLS with tc when not nil, cfg's server transport (grpc_server).
func grpcServer(cfg *config.Cluster, tc *tls.Config) func(gateway.Backend, string, *slog.Logger) node.ClientServer {
	return func(b gateway.Backend, password string, log *slog.Logger) node.ClientServer {
		return grpcserver.New(b, grpcserver.Options{Password: password, Users: cfg.Users, Cluster: cfg.Cluster, Logger: log, TLS: tc, Transport: cfg.GRPCServer})
	}
}

// PeerGRPC builds the gRPC peer transport (node.Options.PeerGRPC).
func PeerGRPC(o node.PeerGRPCOptions) (node.PeerGRPC, error) {
	return grpcpeer.New(grpcpeer.Options{Cluster: o.Cluster, Self: o.Self, Listener: o.Listener,
		Addr: o.Addr, Peers: o.Peers, Handler: o.Handler, Logger: o.Logger, Stream: o.Stream})
}

// New creates node id of cfg with every server wired in, including the
// cluster file's security settings (security.go).
func New(cfg *config.Cluster, id string, opts node.Options) (*node.Node, error) {
	live, cleanup, err := secure(cfg, id, &opts)
	if err != nil {
		cleanup()
		return nil, err
	}
	if opts.GRPC == nil {
		opts.GRPC = grpcServer(cfg, nil)
	}
	if opts.PeerGRPC == nil {
		opts.PeerGRPC = PeerGRPC
	}
	n, err := node.New(cfg, id, opts)
	if err != nil {
		cleanup()
		return nil, err
	}
	if live != nil {
		lives.Store(n, live)
	}
	return n, nil
}
