package peers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/synod-dev/synod/bench"
	"github.com/synod-dev/synod/service"
)

// ZooKeeperOptions configure NewZooKeeperTarget.
type ZooKeeperOptions struct {
	// Root is the znode under which keys live, one child znode per key
	// (default DefaultZooKeeperRoot). It is created if missing.
	Root string
	// Timeout bounds connecting and each operation (0: DefaultConfig's
	// OpTimeout). The session timeout is twice this, at least 4 s.
	Timeout time.Duration
}

// DefaultZooKeeperRoot is the default parent znode of the benchmark's keys.
const DefaultZooKeeperRoot = "/synod-bench"

// ZooKeeperFactory returns a bench.TargetFactory connecting to ZooKeeper servers.
// addr is one server's client address, host:port.
func ZooKeeperFactory(o ZooKeeperOptions) bench.TargetFactory {
	return func(ctx context.Context, addr string, _ int) (bench.Target, error) {
		t, err := NewZooKeeperTarget(ctx, addr, o)
		if err != nil {
			return nil, err
		}
		return t, nil
	}
}

// NewZooKeeperTarget opens one ZooKeeper session on one connection to the
// server at addr (that server only: the client does not fail over), waits for
// the session, and creates the root znode if it is missing.
//
// Key K is the znode Root/K, so K must be a valid znode name (no "/", not "."
// or ".."). Operations:
//
//   - set is SetData(Root/K, value, any version); when the znode does not exist
//     yet, Create(Root/K, value, persistent, world ACL), and SetData again if
//     another client created it in between.
//   - get is Sync(Root/K) then GetData(Root/K). ZooKeeper reads are served by
//     the connected server from its own, possibly lagging, copy; sync makes
//     that server catch up with the leader first, which is ZooKeeper's
//     documented way to read the latest committed value. (It is not strictly
//     linearizable: the leader does not confirm its leadership with a quorum
//     for a sync, so a deposed leader could answer one. It is the strongest
//     read ZooKeeper offers, and the usual counterpart of etcd's and Synod's
//     linearizable reads in comparisons.) A missing znode reads as nil.
//   - del is Delete(Root/K, any version), answering 1, or 0 when it was missing.
//
// The go-zookeeper client takes no context, so an operation that outlives its
// timeout or its context closes the connection: the pending request then
// returns, the operation counts as a transport failure, and the driver
// reconnects. Any error other than "no node" / "node exists" where expected is
// treated as a transport failure too (a session or connection problem, the
// usual cause).
func NewZooKeeperTarget(ctx context.Context, addr string, o ZooKeeperOptions) (*ZooKeeperTarget, error) {
	if o.Timeout <= 0 {
		o.Timeout = bench.DefaultConfig().OpTimeout
	}
	if o.Root == "" {
		o.Root = DefaultZooKeeperRoot
	}
	if err := checkZnodePath(o.Root); err != nil {
		return nil, fmt.Errorf("zookeeper root: %w", err)
	}
	session := max(2*o.Timeout, 4*time.Second)
	conn, events, err := zk.Connect([]string{addr}, session, zk.WithLogger(zkQuiet{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, fmt.Errorf("zookeeper %s: %w", addr, err)
	}
	fail := func(err error) (*ZooKeeperTarget, error) {
		go conn.Close() // Close may wait up to a second for the server
		return nil, fmt.Errorf("zookeeper %s: %w", addr, err)
	}
	wait := time.NewTimer(o.Timeout)
	defer wait.Stop()
	for conn.State() != zk.StateHasSession {
		select {
		case <-events:
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-wait.C:
			return fail(fmt.Errorf("no session within %v (last state %v)", o.Timeout, conn.State()))
		}
	}
	t := &ZooKeeperTarget{conn: conn, root: o.Root, timeout: o.Timeout}
	if err := t.ensureRoot(ctx); err != nil {
		return fail(err)
	}
	return t, nil
}

// ZooKeeperTarget is a Target on one ZooKeeper session.
type ZooKeeperTarget struct {
	conn    *zk.Conn
	root    string
	timeout time.Duration
}

// zkQuiet discards the client library's log lines (it logs every reconnect).
type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}

// Close implements Target.
func (t *ZooKeeperTarget) Close() error {
	t.conn.Close()
	return nil
}

// ensureRoot creates every component of the root znode that is missing.
func (t *ZooKeeperTarget) ensureRoot(ctx context.Context) error {
	path := ""
	for _, part := range strings.Split(strings.TrimPrefix(t.root, "/"), "/") {
		path += "/" + part
		err := t.bounded(ctx, func() error {
			_, err := t.conn.Create(path, nil, 0, zk.WorldACL(zk.PermAll))
			if errors.Is(err, zk.ErrNodeExists) {
				return nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("creating %s: %w", path, err)
		}
	}
	return nil
}

// bounded runs f, closing the connection if ctx ends or the timeout passes
// first (which makes f's pending request return).
func (t *ZooKeeperTarget) bounded(ctx context.Context, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { go t.conn.Close() })
	err := f()
	if !stop() {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

// Do implements Target for get, set and del.
func (t *ZooKeeperTarget) Do(ctx context.Context, op service.Op) (service.Result, error) {
	if err := checkZnodeName(op.Key); err != nil {
		return service.Errorf("zookeeper target: key %q: %v", op.Key, err), nil
	}
	path := t.root + "/" + op.Key
	var res service.Result
	var err error
	switch {
	case op.Kind == "get" && len(op.Args) == 0:
		err = t.bounded(ctx, func() error {
			if _, err := t.conn.Sync(path); err != nil {
				return err
			}
			b, _, err := t.conn.Get(path)
			switch {
			case errors.Is(err, zk.ErrNoNode):
				res = service.Nil()
			case err == nil:
				res = service.Bytes(b)
			}
			if errors.Is(err, zk.ErrNoNode) {
				return nil
			}
			return err
		})
	case op.Kind == "set" && len(op.Args) == 1:
		v := op.Args[0]
		err = t.bounded(ctx, func() error {
			_, err := t.conn.Set(path, v, -1)
			if errors.Is(err, zk.ErrNoNode) {
				_, err = t.conn.Create(path, v, 0, zk.WorldACL(zk.PermAll))
				if errors.Is(err, zk.ErrNodeExists) {
					_, err = t.conn.Set(path, v, -1)
				}
			}
			res = service.OK()
			return err
		})
	case op.Kind == "del" && len(op.Args) == 0:
		err = t.bounded(ctx, func() error {
			err := t.conn.Delete(path, -1)
			res = service.Int(1)
			if errors.Is(err, zk.ErrNoNode) {
				res, err = service.Int(0), nil
			}
			return err
		})
	default:
		return service.Errorf("zookeeper target: unsupported operation %s with %d arguments (supported: get K, set K V, del K)", op.Kind, len(op.Args)), nil
	}
	if err != nil {
		return service.Result{}, err
	}
	return res, nil
}

// checkZnodeName checks that s can be one component of a znode path.
func checkZnodeName(s string) error {
	switch {
	case s == "":
		return errors.New("empty")
	case s == "." || s == "..":
		return errors.New(`"." and ".." are not znode names`)
	case strings.ContainsAny(s, "/\x00"):
		return errors.New(`contains "/" or NUL`)
	}
	return nil
}

// checkZnodePath checks an absolute znode path other than "/".
func checkZnodePath(p string) error {
	if !strings.HasPrefix(p, "/") || p == "/" || strings.HasSuffix(p, "/") {
		return fmt.Errorf("%q: want an absolute path like /synod-bench, not / and without a trailing /", p)
	}
	for _, part := range strings.Split(p[1:], "/") {
		if err := checkZnodeName(part); err != nil {
			return fmt.Errorf("%q: component %q: %v", p, part, err)
		}
	}
	return nil
}
