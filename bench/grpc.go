package bench

import (
	"context"
	"errors"
	"time"

	"github.com/synod-dev/synod/automaton"
	synodclient "github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// TargetGRPC is the report's name of the Synod gRPC target.
const TargetGRPC = "grpc"

// GRPCOptions configure GRPCFactory.
type GRPCOptions struct {
	// Addrs are the nodes' gRPC addresses; every client made by the factory
	// knows all of them (the Go client sends to the leader it is told of
	// and fails over).
	Addrs []string
	// Namespace ("" for the nodes' default) and ReadMode ("" for the
	// protocol's default) of every request.
	Namespace, ReadMode string
	// Timeout bounds each attempt; Password is sent when set.
	Timeout  time.Duration
	Password string
	// Pipeline sends every request on the client's Pipeline streams
	// (client.Options.Pipeline): the clients sharing one target
	// (ShareConns) pipeline their requests on its connections, and the
	// node runs what arrives together as one atomic group where the
	// protocol applies groups.
	Pipeline bool
}

// GRPCFactory returns a TargetFactory of Synod gRPC clients (client.GRPC:
// one HTTP/2 connection per address, requests multiplexed on it). Its addr
// argument is ignored. The targets are safe for concurrent use, so
// ShareConns(n, GRPCFactory(o)) multiplexes many clients over n clients'
// connections.
func GRPCFactory(o GRPCOptions) TargetFactory {
	return func(ctx context.Context, _ string, _ int) (Target, error) {
		rm, err := automaton.ParseReadMode(o.ReadMode)
		if err != nil {
			return nil, err
		}
		c, err := synodclient.NewGRPC(o.Addrs, synodclient.Options{Namespace: o.Namespace, ReadMode: rm, Timeout: o.Timeout, Password: o.Password, Pipeline: o.Pipeline})
		if err != nil {
			return nil, err
		}
		return &grpcTarget{c: c, ns: o.Namespace}, nil
	}
}

type grpcTarget struct {
	c  *synodclient.GRPC
	ns string
}

// Do implements Target. Errors other than a closed client are error
// replies (a write's outcome then unknown): gRPC reconnects by itself, so
// the connection stays in use.
func (t *grpcTarget) Do(ctx context.Context, op service.Op) (service.Result, error) {
	res, _, err := t.c.DoOp(ctx, t.ns, op, synodclient.OpOptions{})
	if errors.Is(err, synodclient.ErrClosed) {
		return service.Result{}, err
	}
	if err != nil {
		return service.Fail(synoderr.TryAgain, "%v", err), nil
	}
	return res, nil
}

func (t *grpcTarget) Close() error { return t.c.Close() }
