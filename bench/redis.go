package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/synod-dev/synod/service"
)

// RedisOptions configure NewRedisTarget.
type RedisOptions struct {
	// Password, when set, is sent with AUTH after connecting.
	Password string
	// Namespace and ReadMode, when set, are sent as SYNOD NS / SYNOD READ after
	// connecting (Synod only; Redis answers them with an error).
	Namespace string
	ReadMode  string
	// Leader, after the setup, asks the server for the namespace's leader
	// (SYNOD LEADER) and moves the connection there when it names another
	// server. The first server's connection is kept when it names none (an
	// election, or a protocol without a leader) or the leader cannot be
	// reached; an error reply (not a Synod server) fails the connection.
	Leader bool
	// Timeout bounds dialing and each operation (0: no bound beyond the context).
	Timeout time.Duration
}

// maxBulk bounds a bulk reply the parser accepts.
const maxBulk = 64 << 20

// RedisFactory returns a TargetFactory dialing Redis-protocol servers.
func RedisFactory(o RedisOptions) TargetFactory {
	return func(ctx context.Context, addr string, _ int) (Target, error) {
		t, err := NewRedisTarget(ctx, addr, o)
		if err != nil {
			return nil, err // not a typed nil inside the interface
		}
		return t, nil
	}
}

// NewRedisTarget connects to a Redis-protocol server and runs the per-connection
// setup (AUTH, SYNOD NS, SYNOD READ) that o asks for, then moves to the
// leader when o.Leader asks for it.
func NewRedisTarget(ctx context.Context, addr string, o RedisOptions) (*RedisTarget, error) {
	t, err := dialRedis(ctx, addr, o)
	if err != nil || !o.Leader {
		return t, err
	}
	leader, err := t.leader(ctx)
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	if leader == "" || leader == addr {
		return t, nil // no leader known, or this is it
	}
	lt, err := dialRedis(ctx, leader, o)
	if err != nil {
		return t, nil // keep the follower: it forwards
	}
	t.Close()
	return lt, nil
}

// FollowerRedisFactory returns a TargetFactory that connects each client
// to a server of addrs that is not the namespace's leader (SYNOD LEADER
// names another one), starting from the address it is given: a client of
// a follower, whose writes and linearizable reads the follower forwards
// to the leader. It fails when no server of addrs names another as leader
// (no leader known, or the leader is the only server).
func FollowerRedisFactory(o RedisOptions, addrs []string) TargetFactory {
	o.Leader = false
	return func(ctx context.Context, addr string, _ int) (Target, error) {
		start := 0
		for i, a := range addrs {
			if a == addr {
				start = i
			}
		}
		for k := range addrs {
			a := addrs[(start+k)%len(addrs)]
			t, err := dialRedis(ctx, a, o)
			if err != nil {
				return nil, err
			}
			leader, err := t.leader(ctx)
			if err != nil {
				t.Close()
				return nil, fmt.Errorf("%s: %w", a, err)
			}
			if leader != "" && leader != a {
				return t, nil
			}
			t.Close()
		}
		return nil, fmt.Errorf("no follower among %v: none names another server as the leader", addrs)
	}
}

func dialRedis(ctx context.Context, addr string, o RedisOptions) (*RedisTarget, error) {
	d := net.Dialer{Timeout: o.Timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	t := &RedisTarget{conn: c, br: bufio.NewReaderSize(c, 32<<10), bw: bufio.NewWriterSize(c, 32<<10), timeout: o.Timeout}
	setup := [][]string{}
	if o.Password != "" {
		setup = append(setup, []string{"AUTH", o.Password})
	}
	if o.Namespace != "" {
		setup = append(setup, []string{"SYNOD", "NS", o.Namespace})
	}
	if o.ReadMode != "" {
		setup = append(setup, []string{"SYNOD", "READ", o.ReadMode})
	}
	for _, cmd := range setup {
		args := make([][]byte, len(cmd))
		for i, a := range cmd {
			args[i] = []byte(a)
		}
		res, err := t.command(ctx, args)
		if err == nil && res.IsErr() {
			err = fmt.Errorf("server refused %s: %s", strings.Join(cmd[:len(cmd)-1], " "), res.Err)
		}
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("%s: %w", addr, err)
		}
	}
	return t, nil
}

// RedisTarget is a Target speaking RESP2 on one connection.
type RedisTarget struct {
	conn    net.Conn
	br      *bufio.Reader
	bw      *bufio.Writer
	timeout time.Duration
	scratch []byte
	args    [][]byte
}

// Close implements Target.
func (t *RedisTarget) Close() error { return t.conn.Close() }

// Do implements Target. The operation kind becomes the command name (get → GET,
// set → SET, ...), except incr, which becomes INCRBY with its delta.
func (t *RedisTarget) Do(ctx context.Context, op service.Op) (service.Result, error) {
	name := strings.ToUpper(op.Kind)
	if op.Kind == "incr" {
		name = "INCRBY"
	}
	args := append(t.args[:0], []byte(name))
	if op.Key != "" {
		args = append(args, []byte(op.Key))
	}
	args = append(args, op.Args...)
	t.args = args
	res, err := t.command(ctx, args)
	clear(t.args)
	return res, err
}

// leader asks SYNOD LEADER and returns the leader's client address ("" when
// the server knows none).
func (t *RedisTarget) leader(ctx context.Context) (string, error) {
	defer t.arm(ctx)()
	if err := t.write([][]byte{[]byte("SYNOD"), []byte("LEADER")}); err != nil {
		return "", err
	}
	line, err := readLine(t.br)
	if err != nil {
		return "", err
	}
	switch string(line) {
	case "*-1", "_":
		return "", nil
	case "*2":
		var parts [2]service.Result
		for i := range parts {
			if parts[i], err = t.readReply(); err != nil {
				return "", err
			}
			if parts[i].Type != service.ResultBytes {
				return "", fmt.Errorf("%w: SYNOD LEADER reply element %d is %v", errProtocol, i, parts[i])
			}
		}
		return string(parts[1].Bytes), nil
	}
	if len(line) > 0 && line[0] == '-' {
		return "", fmt.Errorf("server refused SYNOD LEADER: %s", line[1:])
	}
	return "", fmt.Errorf("%w: unexpected SYNOD LEADER reply %q", errProtocol, line)
}

// command writes one command and reads its reply, within the timeout and ctx.
func (t *RedisTarget) command(ctx context.Context, args [][]byte) (service.Result, error) {
	defer t.arm(ctx)()
	if err := t.write(args); err != nil {
		return service.Result{}, err
	}
	res, err := t.readReply()
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return res, err
}

// arm bounds one round trip on the connection: its deadline is the earlier
// of the timeout and ctx's deadline, and its I/O is unblocked at once if ctx
// ends (Ctrl-C) rather than at the deadline. Call the returned func when the
// round trip is over.
func (t *RedisTarget) arm(ctx context.Context) (stop func() bool) {
	dl, ok := ctx.Deadline()
	if t.timeout > 0 {
		if d := time.Now().Add(t.timeout); !ok || d.Before(dl) {
			dl, ok = d, true
		}
	}
	if ok {
		t.conn.SetDeadline(dl)
	} else {
		t.conn.SetDeadline(time.Time{})
	}
	return context.AfterFunc(ctx, func() { t.conn.SetDeadline(time.Unix(1, 0)) })
}

func (t *RedisTarget) write(args [][]byte) error {
	if err := t.encode(args); err != nil {
		return err
	}
	return t.bw.Flush()
}

// encode buffers one command in RESP2 without flushing it.
func (t *RedisTarget) encode(args [][]byte) error {
	b := t.scratch[:0]
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		if len(b)+len(a) > 4096 {
			if _, err := t.bw.Write(b); err != nil {
				return err
			}
			b = b[:0]
			if _, err := t.bw.Write(a); err != nil {
				return err
			}
		} else {
			b = append(b, a...)
		}
		b = append(b, '\r', '\n')
	}
	t.scratch = b[:0]
	_, err := t.bw.Write(b)
	return err
}

// errProtocol marks replies the parser does not understand.
var errProtocol = errors.New("RESP protocol error")

// readReply parses one RESP2 reply of the kinds GET, SET, DEL, EXISTS, INCRBY,
// APPEND, AUTH and SYNOD produce: simple string, error, integer, bulk string,
// null bulk. +OK maps to service.ResultOK, other simple strings to bytes.
func (t *RedisTarget) readReply() (service.Result, error) {
	line, err := readLine(t.br)
	if err != nil {
		return service.Result{}, err
	}
	if len(line) == 0 {
		return service.Result{}, fmt.Errorf("%w: empty reply line", errProtocol)
	}
	body := line[1:]
	switch line[0] {
	case '+':
		if string(body) == "OK" {
			return service.OK(), nil
		}
		return service.Bytes([]byte(string(body))), nil
	case '-':
		return service.Result{Type: service.ResultErr, Err: string(body)}, nil
	case ':':
		n, err := strconv.ParseInt(string(body), 10, 64)
		if err != nil {
			return service.Result{}, fmt.Errorf("%w: bad integer reply %q", errProtocol, body)
		}
		return service.Int(n), nil
	case '$':
		n, err := strconv.ParseInt(string(body), 10, 64)
		if err != nil || n < -1 || n > maxBulk {
			return service.Result{}, fmt.Errorf("%w: bad bulk length %q", errProtocol, body)
		}
		if n == -1 {
			return service.Nil(), nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(t.br, b); err != nil {
			return service.Result{}, err
		}
		if b[n] != '\r' || b[n+1] != '\n' {
			return service.Result{}, fmt.Errorf("%w: bulk string not terminated by CRLF", errProtocol)
		}
		return service.Bytes(b[:n:n]), nil
	}
	return service.Result{}, fmt.Errorf("%w: unsupported reply type %q", errProtocol, line[0])
}

// readLine returns one CRLF-terminated line without the terminator. The slice
// is valid until the next read.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("%w: reply line too long", errProtocol)
	}
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: line not terminated by CRLF", errProtocol)
	}
	return line[:len(line)-2], nil
}
