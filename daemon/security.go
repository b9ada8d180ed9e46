package daemon

import (
	"fmt"

	"github.com/synod-dev/synod/certs"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/node"
)

// secure applies the cluster file's secret and tls settings to opts: the
// peer transport authenticates with the secret and, with tls, uses mutual
// TLS with the node's certificate (docs/SECURITY.md).
func secure(cfg *config.Cluster, id string, opts *node.Options) error {
	opts.Transport.Secret = cfg.Secret
	if cfg.TLS == nil {
		return nil
	}
	cert, key := cfg.TLS.NodeFiles(id)
	tc, err := certs.LoadTLS(cfg.TLS.CAFile(), cert, key)
	if err != nil {
		return fmt.Errorf("node %s: tls (cluster file field tls.dir %s): %w", id, cfg.TLS.Dir, err)
	}
	opts.Transport.TLS = tc
	return nil
}
