package daemon

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/synod-dev/synod/certs"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/internal/ratelog"
	"github.com/synod-dev/synod/node"
)

// secure applies the cluster file's secret, tls and metrics_token settings
// to opts (docs/SECURITY.md): the peer transport authenticates with the
// secret and, with tls, uses mutual TLS with the node's certificate; with
// tls.clients the Redis-protocol listener is wrapped in TLS
// (gateway.TLSListener) and the gRPC server speaks TLS; with tls.metrics
// the metrics listener speaks TLS; with metrics_token the metrics port asks
// for it. Every TLS listener and the peer transport read the node's
// certificates through one certs.Live, which Reload (on SIGHUP:
// ReloadOnSIGHUP) replaces for new handshakes. It returns that Live (nil
// without tls) and a cleanup for what it opened.
func secure(cfg *config.Cluster, id string, opts *node.Options) (live *certs.Live, cleanup func(), err error) {
	var closers []func()
	cleanup = func() {
		for _, c := range closers {
			c()
		}
	}
	opts.Transport.Secret = cfg.Secret
	if cfg.MetricsToken != "" {
		opts.MetricsAuth = bearer(cfg.MetricsToken, opts.Logger)
	}
	if cfg.TLS == nil {
		return nil, cleanup, nil
	}
	live, err = certs.LoadLive(cfg.TLS.Dir, id)
	if err != nil {
		return nil, cleanup, fmt.Errorf("node %s: tls (cluster file field tls.dir %s): %w", id, cfg.TLS.Dir, err)
	}
	opts.Transport.TLS = live.Current()
	opts.Transport.TLSSource = live.Current
	listen := func(given *net.Listener, addr, what string) error {
		if *given != nil {
			return nil
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("node %s: listen for %s on %s: %w", id, what, addr, err)
		}
		closers = append(closers, func() { l.Close() })
		*given = l
		return nil
	}
	self, err := cfg.Node(id)
	if err != nil {
		return nil, cleanup, err
	}
	if cfg.MetricsTLS() && (opts.MetricsListener != nil || self.Metrics != "") {
		if err := listen(&opts.MetricsListener, self.Metrics, "metrics"); err != nil {
			return nil, cleanup, err
		}
		opts.MetricsListener = tls.NewListener(opts.MetricsListener, live.Server(func(c *tls.Config) *tls.Config {
			c.ClientAuth = tls.VerifyClientCertIfGiven
			c.MinVersion = tls.VersionTLS12 // Prometheus and curl
			return c
		}))
	}
	on, optional := cfg.ClientTLS()
	if !on {
		return live, cleanup, nil
	}
	// Clients need not present a certificate; one they present must be
	// signed by the cluster CA (and may name the gRPC user).
	clientTLS := func(c *tls.Config) *tls.Config {
		c.ClientAuth = tls.VerifyClientCertIfGiven
		c.MinVersion = tls.VersionTLS12 // redis-cli and older client libraries
		return c
	}
	if err := listen(&opts.ClientListener, self.Client, "clients"); err != nil {
		return nil, cleanup, err
	}
	opts.ClientListener = gateway.TLSListener(opts.ClientListener, live.Server(clientTLS), optional)
	if opts.GRPC == nil {
		opts.GRPC = grpcServer(cfg, live.Server(func(c *tls.Config) *tls.Config {
			c = clientTLS(c)
			c.NextProtos = []string{"h2"}
			return c
		}))
	}
	return live, cleanup, nil
}

// bearer wraps the metrics handler: every path but /healthz (which load
// balancers and orchestrators probe) needs "Authorization: Bearer <token>",
// else 401. Refusals are logged once per ten seconds per remote host.
func bearer(token string, log *slog.Logger) func(http.Handler) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lim := ratelog.New(0)
	want := []byte("Bearer " + token)
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/healthz" && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
				reason := "wrong bearer token"
				if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
					reason = "no bearer token"
				}
				lim.Log(log, slog.LevelWarn, "metrics", r.RemoteAddr, "metrics request refused", "path", r.URL.Path, "reason", reason)
				w.Header().Set("WWW-Authenticate", `Bearer realm="synod metrics"`)
				http.Error(w, "401 unauthorized: send the cluster file's metrics_token as Authorization: Bearer <token>", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
}

// lives are the reloadable certificates of the nodes New made, for Reload.
var lives sync.Map // *node.Node -> *certs.Live

// Reload reads node n's certificates, keys and CA again (n made by New
// with tls): new TLS handshakes on its client, gRPC, metrics and peer ports
// use them; established connections keep theirs. On error (a file missing
// or unreadable, a key that does not match, a certificate the CA did not
// sign or that is not valid now) the old ones stay in use. Without tls it
// does nothing.
func Reload(n *node.Node) error {
	l, ok := lives.Load(n)
	if !ok {
		return nil
	}
	return l.(*certs.Live).Reload()
}

// ReloadOnSIGHUP reloads n's certificates (Reload) on every SIGHUP until
// ctx ends, logging the outcome. `synod node` runs it.
func ReloadOnSIGHUP(ctx context.Context, n *node.Node, log *slog.Logger) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	defer signal.Stop(ch)
	defer lives.Delete(n)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
			if _, ok := lives.Load(n); !ok {
				log.Info("SIGHUP: no tls configured; nothing to reload")
				continue
			}
			if err := Reload(n); err != nil {
				log.Error("SIGHUP: certificates not reloaded; the old ones stay in use", "err", err)
				continue
			}
			log.Info("SIGHUP: certificates reloaded; new connections use them")
		}
	}
}
