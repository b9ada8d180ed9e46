package daemon

import (
	"crypto/tls"
	"fmt"
	"net"

	"github.com/synod-dev/synod/certs"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/node"
)

// secure applies the cluster file's secret and tls settings to opts
// (docs/SECURITY.md): the peer transport authenticates with the secret and,
// with tls, uses mutual TLS with the node's certificate; with tls.clients
// the Redis-protocol listener is wrapped in TLS (gateway.TLSListener) and the
// gRPC server speaks TLS. It returns a cleanup for what it opened.
func secure(cfg *config.Cluster, id string, opts *node.Options) (cleanup func(), err error) {
	cleanup = func() {}
	opts.Transport.Secret = cfg.Secret
	if cfg.TLS == nil {
		return cleanup, nil
	}
	tc, err := certs.LoadNodeTLS(cfg.TLS.Dir, id)
	if err != nil {
		return cleanup, fmt.Errorf("node %s: tls (cluster file field tls.dir %s): %w", id, cfg.TLS.Dir, err)
	}
	opts.Transport.TLS = tc
	on, optional := cfg.ClientTLS()
	if !on {
		return cleanup, nil
	}
	// Clients need not present a certificate; one they present must be
	// signed by the cluster CA.
	ctc := tc.Clone()
	ctc.ClientAuth = tls.VerifyClientCertIfGiven
	ctc.MinVersion = tls.VersionTLS12 // redis-cli and older client libraries
	if opts.ClientListener == nil {
		self, err := cfg.Node(id)
		if err != nil {
			return cleanup, err
		}
		if opts.ClientListener, err = net.Listen("tcp", self.Client); err != nil {
			return cleanup, fmt.Errorf("node %s: listen for clients on %s: %w", id, self.Client, err)
		}
		l := opts.ClientListener
		cleanup = func() { l.Close() }
	}
	opts.ClientListener = gateway.TLSListener(opts.ClientListener, ctc, optional)
	if opts.GRPC == nil {
		gtc := ctc.Clone()
		gtc.NextProtos = []string{"h2"}
		opts.GRPC = grpcServer(cfg, gtc)
	}
	return cleanup, nil
}
