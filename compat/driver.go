package compat

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Target is one server a command goes to: redis-server's database DB, or a
// Synod node's namespace NS.
type Target struct {
	Addr string
	DB   int    // redis-server only
	NS   string // Synod only
}

// Driver sends raw commands through one client library.
type Driver interface {
	// Do runs args on t and returns the answer as Render takes it; err is a
	// transport failure (not an error answer).
	Do(t Target, args []string) (any, error)
	Close()
}

// GoRedis drives servers through go-redis v9 (RESP3), one single-connection
// client per target.
type GoRedis struct {
	mu      sync.Mutex
	clients map[Target]*redis.Client
	pubsubs map[Target]*redis.PubSub
}

// NewGoRedis returns a go-redis driver.
func NewGoRedis() *GoRedis {
	return &GoRedis{clients: map[Target]*redis.Client{}, pubsubs: map[Target]*redis.PubSub{}}
}

// subscribe runs a (P)(UN)SUBSCRIBE through go-redis's PubSub (Do cannot:
// in RESP3 the answer is a push message) and answers the first channel's
// confirmation, as the other commands answer one reply.
func (g *GoRedis) subscribe(ctx context.Context, t Target, args []string) (any, error) {
	g.mu.Lock()
	ps, ok := g.pubsubs[t]
	g.mu.Unlock()
	if !ok {
		ps = g.client(t).Subscribe(ctx)
		g.mu.Lock()
		g.pubsubs[t] = ps
		g.mu.Unlock()
	}
	chans := args[1:]
	var err error
	switch strings.ToLower(args[0]) {
	case "subscribe":
		err = ps.Subscribe(ctx, chans...)
	case "psubscribe":
		err = ps.PSubscribe(ctx, chans...)
	case "unsubscribe":
		err = ps.Unsubscribe(ctx, chans...)
	case "punsubscribe":
		err = ps.PUnsubscribe(ctx, chans...)
	}
	if err != nil {
		var re redis.Error
		if errors.As(err, &re) {
			return ErrorReply(re.Error()), nil
		}
		return nil, err
	}
	var first any
	for range max(len(chans), 1) {
		m, err := ps.ReceiveTimeout(ctx, 5*time.Second)
		if err != nil {
			var re redis.Error
			if errors.As(err, &re) {
				return ErrorReply(re.Error()), nil
			}
			return nil, err
		}
		sub, ok := m.(*redis.Subscription)
		if !ok {
			return nil, fmt.Errorf("compat: %s answered %T", args[0], m)
		}
		if first == nil {
			first = []any{sub.Kind, sub.Channel, int64(sub.Count)}
		}
	}
	return first, nil
}

func (g *GoRedis) client(t Target) *redis.Client {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.clients[t]; ok {
		return c
	}
	opts := &redis.Options{Addr: t.Addr, DB: t.DB, Protocol: 3, PoolSize: 1, MaxRetries: -1,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	if t.NS != "" {
		ns := t.NS
		opts.OnConnect = func(ctx context.Context, cn *redis.Conn) error {
			return cn.Do(ctx, "synod", "ns", ns).Err()
		}
	}
	c := redis.NewClient(opts)
	g.clients[t] = c
	return c
}

// Do implements Driver.
func (g *GoRedis) Do(t Target, args []string) (any, error) {
	a := make([]any, len(args))
	for i, s := range args {
		a[i] = s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	switch strings.ToLower(args[0]) {
	case "subscribe", "psubscribe", "unsubscribe", "punsubscribe":
		return g.subscribe(ctx, t, args)
	}
	v, err := g.client(t).Do(ctx, a...).Result()
	if strings.EqualFold(args[0], "quit") {
		// The server closes the connection; go-redis would hand the dead
		// connection out again: start a new client next time.
		g.mu.Lock()
		if c, ok := g.clients[t]; ok {
			c.Close()
			delete(g.clients, t)
		}
		g.mu.Unlock()
	}
	switch {
	case errors.Is(err, redis.Nil):
		return Nil{}, nil
	case err != nil:
		var re redis.Error
		if errors.As(err, &re) {
			return ErrorReply(re.Error()), nil
		}
		return nil, err
	}
	return fromGoRedis(v), nil
}

func fromGoRedis(v any) any {
	switch x := v.(type) {
	case nil:
		return Nil{}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fromGoRedis(e)
		}
		return out
	case map[any]any:
		out := make(map[any]any, len(x))
		for k, e := range x {
			out[fromGoRedis(k)] = fromGoRedis(e)
		}
		return out
	case redis.Error:
		return ErrorReply(x.Error())
	case error:
		return ErrorReply(x.Error())
	}
	return v
}

// Close implements Driver.
func (g *GoRedis) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, ps := range g.pubsubs {
		ps.Close()
	}
	for _, c := range g.clients {
		c.Close()
	}
}

// PyRedis drives servers through redis-py (RESP2) by way of compat/py/driver.py,
// one JSON request and answer per line.
type PyRedis struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	outf *os.File // out's pipe, for a read deadline (nil: none)
	wait time.Duration
}

// pyAnswerWait bounds the wait for one answer of the driver. redis-py's own
// socket timeout (15 s, driver.py) should answer first; this bound turns a
// driver that hangs anyway (seen once in 9 whole-package runs at load ~25,
// on a pb namespace whose primary had moved) into a failed command that
// names it, instead of a suite that hangs until CI's limit.
const pyAnswerWait = 90 * time.Second

// StartPyRedis starts python running script (compat/py/driver.py).
func StartPyRedis(python, script string) (*PyRedis, error) {
	cmd := exec.Command(python, script)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("compat: starting %s %s: %w", python, script, err)
	}
	p := &PyRedis{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20), wait: pyAnswerWait}
	if f, ok := out.(*os.File); ok {
		p.outf = f
	}
	return p, nil
}

type pyRequest struct {
	Addr string   `json:"addr"`
	DB   int      `json:"db"`
	NS   string   `json:"ns,omitempty"`
	Args []string `json:"args"` // base64
}

// pyValue is the driver's encoding of an answer: exactly one field is set.
type pyValue struct {
	S *string     `json:"s,omitempty"` // base64 bytes
	I *int64      `json:"i,omitempty"`
	D *float64    `json:"d,omitempty"`
	B *bool       `json:"b,omitempty"`
	N bool        `json:"n,omitempty"`
	E *string     `json:"e,omitempty"`
	A []pyValue   `json:"a,omitempty"`
	M [][]pyValue `json:"m,omitempty"`
	X string      `json:"x,omitempty"` // a driver failure
}

// Do implements Driver.
func (p *PyRedis) Do(t Target, args []string) (any, error) {
	req := pyRequest{Addr: t.Addr, DB: t.DB, NS: t.NS}
	for _, a := range args {
		req.Args = append(req.Args, base64.StdEncoding.EncodeToString([]byte(a)))
	}
	b, _ := json.Marshal(req)
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("compat: redis-py driver: %w", err)
	}
	if p.outf != nil {
		p.outf.SetReadDeadline(time.Now().Add(p.wait))
	}
	line, err := p.out.ReadBytes('\n')
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The driver's state is unknown now: stop it, so that later
		// commands fail at once rather than read this command's answer.
		p.cmd.Process.Kill()
		return nil, fmt.Errorf("compat: redis-py driver gave no answer to %q at %s (namespace %q) in %v; driver stopped", args, t.Addr, t.NS, p.wait)
	}
	if err != nil {
		return nil, fmt.Errorf("compat: redis-py driver: %w", err)
	}
	var v pyValue
	if err := json.Unmarshal(line, &v); err != nil {
		return nil, fmt.Errorf("compat: redis-py driver answered %q: %w", line, err)
	}
	if v.X != "" {
		return nil, fmt.Errorf("compat: redis-py driver: %s", v.X)
	}
	return v.value(), nil
}

func (v pyValue) value() any {
	switch {
	case v.S != nil:
		b, _ := base64.StdEncoding.DecodeString(*v.S)
		return string(b)
	case v.I != nil:
		return *v.I
	case v.D != nil:
		return *v.D
	case v.B != nil:
		return *v.B
	case v.E != nil:
		return ErrorReply(*v.E)
	case v.A != nil:
		out := make([]any, len(v.A))
		for i, e := range v.A {
			out[i] = e.value()
		}
		return out
	case v.M != nil:
		out := map[any]any{}
		for _, kv := range v.M {
			if len(kv) == 2 {
				out[kv[0].value()] = kv[1].value()
			}
		}
		return out
	}
	return Nil{}
}

// Close implements Driver: it closes the driver's stdin and waits for it.
func (p *PyRedis) Close() {
	p.in.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}
