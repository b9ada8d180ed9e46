package gateway

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// cmdClientKill is CLIENT KILL, as Redis 7.0's clientKillCommand (networking.c):
// the old form `CLIENT KILL ip:port` (OK, or "No such client"), and the
// filter form `CLIENT KILL <filter> <value> ...` with ID, ADDR, LADDR,
// TYPE (master, replica and slave match nothing here; pubsub is a
// connection subscribed after its last command, normal any other), USER, SKIPME and MAXAGE, which answers how many clients it closed. Only
// this node's connections are closed; a connection that kills itself gets
// its reply first.
func cmdClientKill(c *conn, args [][]byte) {
	if len(args) < 3 {
		c.writeError(arityErr("client|kill"))
		return
	}
	if len(args) == 3 { // the old form
		addr := string(args[2])
		for _, o := range c.s.connList() {
			if o.nc.RemoteAddr().String() == addr {
				c.w.WriteSimple("OK")
				c.kill(o)
				return
			}
		}
		c.writeError("ERR No such client")
		return
	}
	if len(args)%2 != 0 {
		c.writeError("ERR syntax error")
		return
	}
	var (
		id              int64
		addr, laddr     string
		typ, user       string // typ: normal, pubsub, or a replication type, which no connection has
		maxAge          int64
		skipMe          = true
		haveUser, typed bool
	)
	for i := 2; i < len(args); i += 2 {
		val := string(args[i+1])
		switch lower(args[i]) {
		case "id":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n <= 0 {
				c.writeError("ERR client-id should be greater than 0")
				return
			}
			id = n
		case "addr":
			addr = val
		case "laddr":
			laddr = val
		case "type":
			switch t := strings.ToLower(val); t {
			case "master", "replica", "slave", "normal", "pubsub": // no replication clients here
				typ, typed = t, true
			default:
				c.writeError(fmt.Sprintf("ERR Unknown client type '%s'", val))
				return
			}
		case "user":
			if val != "default" && (c.s.acl == nil || c.s.acl.users[val] == nil) {
				c.writeError(fmt.Sprintf("ERR No such user '%s'", val))
				return
			}
			user, haveUser = val, true
		case "skipme":
			switch strings.ToLower(val) {
			case "yes":
				skipMe = true
			case "no":
				skipMe = false
			default:
				c.writeError("ERR syntax error")
				return
			}
		case "maxage":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n <= 0 {
				c.writeError("ERR syntax error")
				return
			}
			maxAge = n
		default:
			c.writeError("ERR syntax error")
			return
		}
	}
	var victims []*conn
	for _, o := range c.s.connList() {
		switch {
		case id != 0 && o.id != id,
			addr != "" && o.nc.RemoteAddr().String() != addr,
			laddr != "" && o.nc.LocalAddr().String() != laddr,
			typed && (typ == "normal") == o.isPubsub(),
			typed && typ != "normal" && typ != "pubsub",
			haveUser && o.userName() != user,
			maxAge != 0 && time.Since(o.created) < time.Duration(maxAge)*time.Second,
			skipMe && o == c:
			continue
		}
		victims = append(victims, o)
	}
	c.w.WriteInt(int64(len(victims)))
	for _, o := range victims {
		c.kill(o)
	}
}

// connList is the server's connections.
func (s *Server) connList() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*conn, 0, len(s.conns))
	for o := range s.conns {
		out = append(out, o)
	}
	return out
}

// kill closes o: c itself after its reply is written (the serving loop
// stops after it, as after QUIT), another connection at once, as Server.Close
// does. Either leaves the connection list (CLIENT LIST, connected_clients)
// at once, as in Redis, not when its goroutine has finished.
func (c *conn) kill(o *conn) {
	c.s.mu.Lock()
	delete(c.s.conns, o)
	c.s.mu.Unlock()
	if o == c {
		c.quit = true
		return
	}
	o.nc.Close()
	o.out.fail(net.ErrClosed)
}

// userName is the user the connection is logged in as.
func (c *conn) userName() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.user == nil {
		return "default"
	}
	return c.user.name
}
