package gateway

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CLIENT LIST and CLIENT INFO lines (issue 34) in Redis 7.0's format
// (networking.c, catClientInfoString), then Redis 7.2's lib-name and
// lib-ver, then Synod's own fields (synod-client, ns, read):
//
//	id addr laddr fd name age idle flags db sub psub ssub multi qbuf
//	qbuf-free argv-mem multi-mem rbs rbp obl oll omem tot-mem events cmd
//	user redir resp
//
// What each field shows in Synod:
//   - flags: N, or x (inside MULTI), P (subscribed), b (blocked), O
//     (MONITOR), as in Redis; db is always 0 (SELECT 0 only).
//   - qbuf, argv-mem: the connection's own line counts the running
//     command's bytes (its RESP encoding) and what is buffered after it, as
//     Redis's query buffer still holds the running command; other
//     connections' lines show the query buffer as 0 (their reader is
//     theirs to read). qbuf-free is the reader's free space, rbs and rbp
//     its size (a fixed 16 KiB reader: no peak to track).
//   - obl: the bytes of replies not yet written to the socket (Synod has
//     one output buffer, not Redis's fixed buffer and reply list: oll and
//     omem are 0). tot-mem adds the reader, the running command and obl.
//   - cmd: the last command, with its subcommand (client|list) for
//     Redis's container commands; redir is -1 (no client-side caching).

// listState is what CLIENT LIST shows of a connection that only its own
// goroutine may read, noted under c.mu by that goroutine.
type listState struct {
	fd       int
	cmd      string    // the last command, container|subcommand
	last     time.Time // when it started
	argvMem  int       // the running command's argument bytes
	wireSize int       // its RESP encoding's size
	multi    int       // commands queued in MULTI, -1 outside it
	sub      int       // channels, patterns and shard channels subscribed
	psub     int
	ssub     int
}

// containers are Redis 7.0's commands with subcommands (CLIENT LIST's
// cmd=name|sub).
var containers = map[string]bool{"acl": true, "client": true, "cluster": true, "command": true,
	"config": true, "function": true, "latency": true, "memory": true, "module": true, "object": true,
	"pubsub": true, "script": true, "slowlog": true, "xgroup": true, "xinfo": true}

// noteCommand notes the command c starts. Under c.mu.
func (c *conn) noteCommand(name string, args [][]byte) { c.noteCommandAt(name, args, time.Now()) }

// noteCommandAt is noteCommand at time now (a pipelined batch reads the
// clock once for all its commands, as Redis caches its clock per event
// loop turn).
func (c *conn) noteCommandAt(name string, args [][]byte, now time.Time) {
	full := name
	if containers[name] && len(args) > 1 {
		full = name + "|" + strings.ToLower(string(args[1]))
	}
	argv, wire := 0, 3+decimalLen(len(args)) // *N\r\n
	for _, a := range args {
		argv += len(a)
		wire += 3 + decimalLen(len(a)) + len(a) + 2 // $N\r\n, the bytes, \r\n
	}
	c.list.cmd, c.list.last, c.list.argvMem, c.list.wireSize = full, now, argv, wire
}

// decimalLen is the number of digits of n >= 0 in base 10 (the length
// fmt's %d gives it, without formatting: noteCommand runs for every
// command).
func decimalLen(n int) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// noteState notes c's MULTI and subscription state after a command.
// Connection goroutine.
func (c *conn) noteState() {
	multi := -1
	if c.multi.open {
		multi = len(c.multi.queue)
	}
	sub, psub, ssub := len(c.sub.chans), len(c.sub.pats), len(c.sub.shards)
	c.mu.Lock()
	c.list.multi, c.list.sub, c.list.psub, c.list.ssub = multi, sub, psub, ssub
	c.list.argvMem, c.list.wireSize = 0, 0 // the command is done
	c.mu.Unlock()
}

// socketFD is nc's file descriptor, -1 when it has none.
func socketFD(nc any) int {
	if t, ok := nc.(*tls.Conn); ok {
		nc = t.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	_ = raw.Control(func(f uintptr) { fd = int(f) })
	return fd
}

// pending is the bytes of replies not yet written to the socket.
func (o *outBuf) pending() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.buf) + o.writing
}

// infoLine is a CLIENT INFO / CLIENT LIST line; self: it is the running
// connection's own line. proto 0 omits resp= (another connection's writer
// is not ours to read).
func (c *conn) infoLine(proto int, self bool) string {
	flags := ""
	if c.s.mon.has(c) {
		flags += "O"
	}
	if c.blk.w.Load() != nil {
		flags += "b"
	}
	obl := c.out.pending()
	rbs := c.br.Size()
	qbuf := 0
	if self {
		qbuf = c.br.Buffered()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.list
	if st.multi >= 0 {
		flags += "x"
	}
	if st.sub+st.psub+st.ssub > 0 {
		flags += "P"
	}
	if flags == "" {
		flags = "N"
	}
	argv := 0
	if self {
		qbuf += st.wireSize // the running command, read out of br already
		argv = st.argvMem
	}
	events := "r"
	if obl > 0 {
		events = "rw"
	}
	user := "default"
	if c.user != nil {
		user = c.user.name
	}
	idle := 0
	if !st.last.IsZero() {
		idle = int(time.Since(st.last).Seconds())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "id=%d addr=%s laddr=%s fd=%d name=%s age=%d idle=%d flags=%s db=0 sub=%d psub=%d ssub=%d multi=%d qbuf=%d qbuf-free=%d argv-mem=%d multi-mem=0 rbs=%d rbp=%d obl=%d oll=0 omem=0 tot-mem=%d events=%s cmd=%s user=%s redir=-1",
		c.id, c.nc.RemoteAddr(), c.nc.LocalAddr(), st.fd, c.name, int(time.Since(c.created).Seconds()), idle, flags,
		st.sub, st.psub, st.ssub, st.multi, qbuf, rbs-qbuf, argv, rbs, rbs, obl, rbs+argv+obl, events, st.cmd, user)
	if proto != 0 {
		fmt.Fprintf(&b, " resp=%d", proto)
	}
	fmt.Fprintf(&b, " lib-name=%s lib-ver=%s synod-client=%016x ns=%s read=%s", c.libName, c.libVer, c.client, c.ns.Name, c.read)
	return b.String()
}

// clientListFilter answers CLIENT LIST's [TYPE normal|master|replica|pubsub]
// [ID id [id ...]] as Redis 7.0's clientListCommand: the connections in id
// order, or the error reply. No connection is a master or replica.
func (c *conn) clientListFilter(args [][]byte) ([]*conn, string) {
	var typ string
	var ids map[int64]bool
	switch {
	case len(args) == 0:
	case len(args) == 2 && lower(args[0]) == "type":
		switch typ = lower(args[1]); typ {
		case "normal", "pubsub", "master", "replica", "slave":
		default:
			return nil, fmt.Sprintf("ERR Unknown client type '%s'", args[1])
		}
	case len(args) > 1 && lower(args[0]) == "id":
		ids = map[int64]bool{}
		for _, a := range args[1:] {
			n, err := strconv.ParseInt(string(a), 10, 64)
			if err != nil || n <= 0 {
				return nil, "ERR Invalid client ID"
			}
			ids[n] = true
		}
	default:
		return nil, "ERR syntax error"
	}
	var out []*conn
	for _, o := range c.s.connList() {
		switch {
		case ids != nil && !ids[o.id],
			typ == "master" || typ == "replica" || typ == "slave",
			typ == "pubsub" && !o.isPubsub(),
			typ == "normal" && o.isPubsub():
			continue
		}
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b *conn) int { return cmp.Compare(a.id, b.id) })
	return out, ""
}

// isPubsub reports whether o was subscribed after its last command (CLIENT
// LIST and CLIENT KILL's TYPE pubsub).
func (o *conn) isPubsub() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.list.sub+o.list.psub+o.list.ssub > 0
}

// confirmSub writes a (un)subscribe confirmation after noting the
// connection's subscription counts for CLIENT LIST / CLIENT INFO, so a client
// that has read the confirmation sees the subscription from any connection,
// as in Redis, whose state changes before the reply is written. Connection
// goroutine (it reads c.sub).
func (c *conn) confirmSub(elems ...any) {
	sub, psub, ssub := len(c.sub.chans), len(c.sub.pats), len(c.sub.shards)
	c.mu.Lock()
	c.list.sub, c.list.psub, c.list.ssub = sub, psub, ssub
	c.mu.Unlock()
	c.pushFrame(elems...)
}
