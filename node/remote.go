package node

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/resp"
	"github.com/synod-dev/synod/service"
)

// Nested calls to a namespace of another Synod cluster (config.Remote;
// docs/NESTED.md "Callees in another cluster"). A Call whose Namespace is
// "CLUSTER/NS" goes to the remote cluster's client ports as
//
//	SYNOD CALL client seq kind [key [arg ...]]
//
// on a connection prepared with AUTH (when the remote lists credentials)
// and SYNOD NS NS (gateway/call.go), TLS when the remote has tls. The id is
// the caller's (every caller replica and every re-issue sends the same),
// so the remote namespace's protocol executes the request once and
// answers every copy alike, as for a callee of this cluster.
//
// An attempt that fails (no connection, a broken one, no reply within
// remoteAttempt) or is answered "not now" (automaton.RetryableAnswer) is
// repeated with the same id at the next address, round robin, until one
// answers or Remote.CallTimeout has passed since the call began. Then the
// call is answered with an error that says whether the request may have
// reached the remote cluster: the calling request fails with it, and is
// never answered OK without its call. Any other answer, error results
// included, is the call's outcome. A refusal (an error reply: the remote
// namespace does not serve nested requests, wrong credentials, no such
// namespace) is the outcome too: re-sending would get the same.

// remoteAttempt bounds one attempt; remoteBackoff separates attempts.
const (
	remoteAttempt = 5 * time.Second
	remoteBackoff = 50 * time.Millisecond
)

// remoteCluster calls one remote cluster: a pool of idle connections per
// (address, namespace).
type remoteCluster struct {
	r       config.Remote
	timeout time.Duration
	tls     map[string]*tls.Config // per address; nil without TLS

	mu   sync.Mutex
	cur  int
	idle map[string][]*remoteConn
}

type remoteConn struct {
	key string
	nc  net.Conn
	rd  *resp.Reader
	wr  *resp.Writer
}

// newRemotes prepares a caller for each remote cluster of cfg.
func newRemotes(cfg *config.Cluster) (map[string]*remoteCluster, error) {
	out := map[string]*remoteCluster{}
	for _, r := range cfg.Remotes {
		rc := &remoteCluster{r: r, timeout: r.CallTimeout(), tls: map[string]*tls.Config{}, idle: map[string][]*remoteConn{}}
		for _, a := range r.Nodes {
			t, err := r.TLSConfig(a)
			if err != nil {
				return nil, fmt.Errorf("remote cluster %q: %w", r.Name, err)
			}
			rc.tls[a] = t
		}
		out[r.Name] = rc
	}
	return out, nil
}

// close closes the idle connections.
func (rc *remoteCluster) close() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for k, cs := range rc.idle {
		for _, c := range cs {
			c.nc.Close()
		}
		delete(rc.idle, k)
	}
}

// call carries req to namespace ns of the remote cluster (see above). ok
// is false when the node stopped first (the answer is lost with the
// incarnation, as for a local call).
func (rc *remoteCluster) call(stopping <-chan struct{}, ns string, req automaton.Request) (resp automaton.Response, err error, ok bool) {
	start := time.Now()
	mayHaveRun := false
	var last error
	for attempt := 0; ; attempt++ {
		rc.mu.Lock()
		addr := rc.r.Nodes[(rc.cur+attempt)%len(rc.r.Nodes)]
		rc.mu.Unlock()
		res, sent, aerr := rc.attempt(addr, ns, req, start)
		mayHaveRun = mayHaveRun || sent
		switch {
		case aerr == nil && !(res.IsErr() && automaton.RetryableAnswer(res.Err)):
			rc.mu.Lock()
			rc.cur = (rc.cur + attempt) % len(rc.r.Nodes)
			rc.mu.Unlock()
			return automaton.Response{ID: req.ID, Result: res}, nil, true
		case aerr != nil:
			var refused *remoteRefusal
			if errors.As(aerr, &refused) {
				return automaton.Response{}, fmt.Errorf("cluster %q refused the call to %s at %s: %s", rc.r.Name, ns, addr, refused.msg), true
			}
			last = fmt.Errorf("%s: %w", addr, aerr)
		default:
			last = fmt.Errorf("%s answered %s", addr, res.Err)
		}
		if time.Since(start) >= rc.timeout {
			outcome := "it did not reach the cluster, so it was not executed"
			if mayHaveRun {
				outcome = "it may have been executed there"
			}
			return automaton.Response{}, fmt.Errorf("cluster %q did not answer nested request %v to %s within %v (%s; last attempt: %v)",
				rc.r.Name, req.ID, ns, rc.timeout, outcome, last), true
		}
		select {
		case <-stopping:
			return automaton.Response{}, nil, false
		case <-time.After(remoteBackoff):
		}
	}
}

// remoteRefusal is an error reply to SYNOD CALL or to a connection's
// preparation: the remote refused the call itself.
type remoteRefusal struct{ msg string }

func (e *remoteRefusal) Error() string { return e.msg }

// attempt sends req once to addr. sent reports whether the command may
// have reached the remote node.
func (rc *remoteCluster) attempt(addr, ns string, req automaton.Request, start time.Time) (res service.Result, sent bool, err error) {
	deadline := time.Now().Add(remoteAttempt)
	if end := start.Add(rc.timeout); end.Before(deadline) && end.After(time.Now().Add(remoteBackoff)) {
		deadline = end
	}
	c, err := rc.conn(addr, ns, deadline)
	if err != nil {
		return service.Result{}, false, err
	}
	keep := false
	defer func() {
		if keep {
			rc.put(c)
		} else {
			c.nc.Close()
		}
	}()
	c.nc.SetDeadline(deadline)
	cmd := [][]byte{[]byte("SYNOD"), []byte("CALL"),
		strconv.AppendUint(nil, req.ID.Client, 10), strconv.AppendUint(nil, req.ID.Seq, 10),
		[]byte(req.Op.Kind), []byte(req.Op.Key)}
	cmd = append(cmd, req.Op.Args...)
	c.wr.WriteCommand(cmd)
	if err := c.wr.Flush(); err != nil {
		return service.Result{}, true, err
	}
	rep, err := c.rd.ReadReply()
	if err != nil {
		return service.Result{}, true, err
	}
	c.nc.SetDeadline(time.Time{})
	switch rep.Kind {
	case resp.Error:
		keep = true
		msg := string(rep.Str)
		if automaton.RetryableAnswer(msg) {
			return service.Result{Type: service.ResultErr, Err: msg}, true, nil
		}
		return service.Result{}, true, &remoteRefusal{msg: msg}
	case resp.Bulk:
		r, derr := service.DecodeResultBytes(rep.Str)
		if derr != nil {
			return service.Result{}, true, fmt.Errorf("undecodable SYNOD CALL reply: %v", derr)
		}
		keep = true
		return r, true, nil
	}
	return service.Result{}, true, &remoteRefusal{msg: fmt.Sprintf("unexpected %s reply to SYNOD CALL (is it a Synod node of this version?): %s", rep.Kind, rep)}
}

// conn returns an idle connection to addr prepared for ns, or dials one.
func (rc *remoteCluster) conn(addr, ns string, deadline time.Time) (*remoteConn, error) {
	key := addr + "\x00" + ns
	rc.mu.Lock()
	if cs := rc.idle[key]; len(cs) > 0 {
		c := cs[len(cs)-1]
		rc.idle[key] = cs[:len(cs)-1]
		rc.mu.Unlock()
		return c, nil
	}
	rc.mu.Unlock()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var nc net.Conn
	var err error
	if t := rc.tls[addr]; t != nil {
		d := tls.Dialer{Config: t}
		nc, err = d.DialContext(ctx, "tcp", addr)
	} else {
		var d net.Dialer
		nc, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	c := &remoteConn{key: key, nc: nc, rd: resp.NewReader(bufio.NewReaderSize(nc, 16<<10), resp.Limits{}), wr: resp.NewWriter(nc)}
	var setup [][][]byte
	switch {
	case rc.r.User != "":
		setup = append(setup, [][]byte{[]byte("AUTH"), []byte(rc.r.User), []byte(rc.r.Password)})
	case rc.r.Password != "":
		setup = append(setup, [][]byte{[]byte("AUTH"), []byte(rc.r.Password)})
	}
	setup = append(setup, [][]byte{[]byte("SYNOD"), []byte("NS"), []byte(ns)})
	nc.SetDeadline(deadline)
	for _, cmd := range setup {
		c.wr.WriteCommand(cmd)
	}
	if err := c.wr.Flush(); err != nil {
		nc.Close()
		return nil, err
	}
	for range setup {
		rep, err := c.rd.ReadReply()
		if err != nil {
			nc.Close()
			return nil, err
		}
		if rep.Kind == resp.Error {
			nc.Close()
			msg := string(rep.Str)
			if automaton.RetryableAnswer(msg) {
				return nil, errors.New(msg)
			}
			return nil, &remoteRefusal{msg: msg}
		}
	}
	nc.SetDeadline(time.Time{})
	return c, nil
}

// put returns c to the idle pool (at most 8 per address and namespace).
func (rc *remoteCluster) put(c *remoteConn) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.idle[c.key]) >= 8 {
		c.nc.Close()
		return
	}
	rc.idle[c.key] = append(rc.idle[c.key], c)
}
