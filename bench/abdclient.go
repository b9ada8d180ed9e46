package bench

import (
	"context"
	"errors"
	"time"

	synodclient "github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// Client-driven ABD target (the ABD report §3.1.2: the "ABD capable client").
//
// ABDClientFactory connects each simulated client to every replica of an
// abd namespace over gRPC (client.GRPC.ABD): the client runs ABD's query
// and store phases itself, one request per replica at once, a majority
// each, and the replicas never talk to each other. Config.UseABDClient
// selects it; Config.Addrs are then the replicas' gRPC addresses, all of
// them (a majority is counted over them), and every client uses all of
// them instead of one.

// TargetABDClient is the report's name of the client-driven ABD target.
const TargetABDClient = "abd-client"

// ABDClientOptions configure ABDClientFactory.
type ABDClientOptions struct {
	// Addrs are the gRPC addresses of every replica of the namespace.
	Addrs []string
	// Namespace ("" for the nodes' default) must use protocol abd.
	Namespace string
	// Timeout bounds each phase (a write whose store phase times out has
	// an unknown outcome).
	Timeout  time.Duration
	Password string
	// All asks every replica in every phase, as the ABD report's client
	// does (client.Options.ABDAll); by default a phase asks a majority
	// first.
	All bool
}

// ABDClientFactory returns a TargetFactory of client-driven ABD clients.
// Its addr argument is ignored: every client talks to every replica.
func ABDClientFactory(o ABDClientOptions) TargetFactory {
	return func(ctx context.Context, _ string, _ int) (Target, error) {
		c, err := synodclient.NewGRPC(o.Addrs, synodclient.Options{Namespace: o.Namespace, Timeout: o.Timeout, Password: o.Password, ABDAll: o.All})
		if err != nil {
			return nil, err
		}
		return &abdTarget{c: c, a: c.ABD(o.Namespace)}, nil
	}
}

// UseABDClient points c at client-driven ABD clients over the gRPC
// addresses c.Addrs, with c's namespace, password and operation timeout;
// all asks every replica in every phase (ABDClientOptions.All).
func (c *Config) UseABDClient(all bool) {
	c.NewTarget = ABDClientFactory(ABDClientOptions{Addrs: c.Addrs, Namespace: c.Namespace, Timeout: c.OpTimeout, Password: c.Password, All: all})
	c.TargetName = TargetABDClient
}

type abdTarget struct {
	c *synodclient.GRPC
	a *synodclient.ABD
}

// Do runs op's phases. A phase that found no majority is an error reply
// (the driver records a read as failed, a write as of unknown outcome), so
// that the client keeps its connections; only a closed client is a
// transport failure.
func (t *abdTarget) Do(ctx context.Context, op service.Op) (service.Result, error) {
	res, err := t.a.Do(ctx, op)
	if errors.Is(err, synodclient.ErrClosed) {
		return service.Result{}, err
	}
	if err != nil {
		return service.Fail(synoderr.TryAgain, "%v", err), nil
	}
	return res, nil
}

func (t *abdTarget) Close() error { return t.c.Close() }
