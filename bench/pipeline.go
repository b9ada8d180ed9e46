package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/synod-dev/synod/service"
)

// PipelinedRedis is a RESP connection several clients use at once, as a
// client library pipelines: each Do buffers its command and waits; a
// flusher writes whatever has been buffered in one write whenever the
// connection is free, so commands issued while a write is under way leave
// together; a reader matches replies to commands in order (RESP answers in
// order on a connection). It is safe for concurrent use; ShareConns gives
// each connection to at most the pipelining depth of clients
// (ConnSpec{Depth: P}), so up to P commands are outstanding on it.
//
// A transport failure or a timeout of any command fails the connection:
// every command outstanding on it then fails too (a write's outcome is
// unknown), and the clients reconnect.
type PipelinedRedis struct {
	t       *RedisTarget // after its setup; br is the reader's, bw is guarded by mu
	timeout time.Duration

	mu      sync.Mutex
	pending []chan pipeReply // in the order their commands were buffered
	err     error            // set once the connection failed or closed

	kick chan struct{} // wakes the flusher (capacity 1)
	done chan struct{} // closed by fail
}

type pipeReply struct {
	res service.Result
	err error
}

// errPipeClosed is the failure of commands outstanding at Close.
var errPipeClosed = errors.New("pipelined connection closed")

// PipelinedRedisFactory returns a TargetFactory of pipelined RESP
// connections with o's setup (AUTH, SYNOD NS/READ, leader), for
// ShareConns.
func PipelinedRedisFactory(o RedisOptions) TargetFactory {
	return func(ctx context.Context, addr string, _ int) (Target, error) {
		t, err := NewPipelinedRedis(ctx, addr, o)
		if err != nil {
			return nil, err
		}
		return t, nil
	}
}

// NewPipelinedRedis connects as NewRedisTarget does, then starts the
// connection's flusher and reader.
func NewPipelinedRedis(ctx context.Context, addr string, o RedisOptions) (*PipelinedRedis, error) {
	t, err := NewRedisTarget(ctx, addr, o)
	if err != nil {
		return nil, err
	}
	t.conn.SetDeadline(time.Time{}) // commands are bounded one by one in Do
	p := &PipelinedRedis{t: t, timeout: o.Timeout, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go p.flusher()
	go p.reader()
	return p, nil
}

// Do implements Target.
func (p *PipelinedRedis) Do(ctx context.Context, op service.Op) (service.Result, error) {
	name := strings.ToUpper(op.Kind)
	if op.Kind == "incr" {
		name = "INCRBY"
	}
	args := make([][]byte, 0, 2+len(op.Args))
	args = append(args, []byte(name))
	if op.Key != "" {
		args = append(args, []byte(op.Key))
	}
	args = append(args, op.Args...)
	ch := make(chan pipeReply, 1)
	p.mu.Lock()
	err := p.err
	if err == nil {
		// encode copies the arguments into the buffer (or writes them), so
		// op.Args is not retained.
		err = p.t.encode(args)
		if err == nil {
			p.pending = append(p.pending, ch)
		}
	}
	p.mu.Unlock()
	if err != nil {
		p.fail(err)
		return service.Result{}, err
	}
	select {
	case p.kick <- struct{}{}:
	default: // the flusher is already due to run
	}
	var expire <-chan time.Time
	if p.timeout > 0 {
		tm := time.NewTimer(p.timeout)
		defer tm.Stop()
		expire = tm.C
	}
	select {
	case r := <-ch:
		return r.res, r.err
	case <-ctx.Done():
		err = ctx.Err()
	case <-expire:
		err = fmt.Errorf("pipelined command timed out after %v", p.timeout)
	}
	p.fail(err) // the reply may still come: the order of replies is lost
	return service.Result{}, err
}

// flusher writes the buffered commands whenever it is woken.
func (p *PipelinedRedis) flusher() {
	for {
		select {
		case <-p.done:
			return
		case <-p.kick:
		}
		p.mu.Lock()
		err := p.err
		if err == nil {
			err = p.t.bw.Flush()
		}
		p.mu.Unlock()
		if err != nil {
			p.fail(err)
			return
		}
	}
}

// reader answers the oldest outstanding command with each reply.
func (p *PipelinedRedis) reader() {
	for {
		res, err := p.t.readReply()
		if err != nil {
			p.fail(err)
			return
		}
		p.mu.Lock()
		if len(p.pending) == 0 {
			p.mu.Unlock()
			p.fail(fmt.Errorf("%w: a reply to no command", errProtocol))
			return
		}
		ch := p.pending[0]
		p.pending[0] = nil
		p.pending = p.pending[1:]
		p.mu.Unlock()
		ch <- pipeReply{res: res}
	}
}

// fail closes the connection once and fails every outstanding command.
func (p *PipelinedRedis) fail(err error) {
	p.mu.Lock()
	if p.err != nil {
		p.mu.Unlock()
		return
	}
	p.err = err
	pend := p.pending
	p.pending = nil
	close(p.done)
	p.mu.Unlock()
	p.t.conn.Close()
	for _, ch := range pend {
		ch <- pipeReply{err: err}
	}
}

// Close implements Target.
func (p *PipelinedRedis) Close() error {
	p.fail(errPipeClosed)
	return nil
}
