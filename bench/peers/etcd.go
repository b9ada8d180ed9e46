package peers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/synod-dev/synod/bench"
	"github.com/synod-dev/synod/service"
)

// EtcdOptions configure NewEtcdTarget.
type EtcdOptions struct {
	// Timeout bounds dialing and each operation (0: DefaultConfig's OpTimeout).
	Timeout time.Duration
}

// EtcdFactory returns a bench.TargetFactory connecting to etcd v3 members. addr is
// one member's client address, host:port (an http:// URL is accepted too).
func EtcdFactory(o EtcdOptions) bench.TargetFactory {
	return func(ctx context.Context, addr string, _ int) (bench.Target, error) {
		t, err := NewEtcdTarget(ctx, addr, o)
		if err != nil {
			return nil, err
		}
		return t, nil
	}
}

// NewEtcdTarget opens one etcd v3 client (one gRPC connection) to the member
// at addr and waits until the connection is up.
//
// Operations: set is a Put; get is a Range with the client's default
// consistency, which is linearizable (Serializable is not set: the member
// confirms with the leader's commit index, etcd's ReadIndex, before it
// answers); del is a Delete answering the number of keys removed. A missing
// key reads as nil. Errors etcd itself reports (rpctypes.EtcdError, e.g.
// "etcdserver: request timed out") are error replies; anything else (deadline,
// connection lost) is a transport failure. The client's own retry policy is
// left as it is: it retries a Range that failed before reaching a member, and
// never a Put that may have been sent.
func NewEtcdTarget(ctx context.Context, addr string, o EtcdOptions) (*EtcdTarget, error) {
	if o.Timeout <= 0 {
		o.Timeout = bench.DefaultConfig().OpTimeout
	}
	// The client's context lives as long as the client; ctx only bounds the dial.
	life, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{addr},
		DialTimeout: o.Timeout,
		DialOptions: []grpc.DialOption{grpc.WithBlock()},
		Context:     life,
		Logger:      zap.NewNop(),
	})
	if !stop() || err != nil {
		cancel()
		if err == nil {
			cli.Close()
			err = ctx.Err()
		}
		return nil, fmt.Errorf("etcd %s: %w", addr, err)
	}
	return &EtcdTarget{cli: cli, cancel: cancel, timeout: o.Timeout}, nil
}

// EtcdTarget is a Target on one etcd v3 client.
type EtcdTarget struct {
	cli     *clientv3.Client
	cancel  context.CancelFunc
	timeout time.Duration
}

// Close implements Target.
func (t *EtcdTarget) Close() error {
	err := t.cli.Close()
	t.cancel()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// Do implements Target for get, set and del.
func (t *EtcdTarget) Do(ctx context.Context, op service.Op) (service.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	switch op.Kind {
	case "get":
		if len(op.Args) != 0 {
			break
		}
		resp, err := t.cli.Get(ctx, op.Key)
		if err != nil {
			return etcdError(err)
		}
		if len(resp.Kvs) == 0 {
			return service.Nil(), nil
		}
		return service.Bytes(resp.Kvs[0].Value), nil
	case "set":
		if len(op.Args) != 1 {
			break
		}
		// string(...) copies: the driver reuses the value buffer.
		if _, err := t.cli.Put(ctx, op.Key, string(op.Args[0])); err != nil {
			return etcdError(err)
		}
		return service.OK(), nil
	case "del":
		if len(op.Args) != 0 {
			break
		}
		resp, err := t.cli.Delete(ctx, op.Key)
		if err != nil {
			return etcdError(err)
		}
		return service.Int(resp.Deleted), nil
	}
	return service.Errorf("etcd target: unsupported operation %s with %d arguments (supported: get K, set K V, del K)", op.Kind, len(op.Args)), nil
}

// etcdError sorts an etcd client error into an error reply or a transport failure.
func etcdError(err error) (service.Result, error) {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return service.Result{Type: service.ResultErr, Err: ee.Error()}, nil
	}
	return service.Result{}, err
}
