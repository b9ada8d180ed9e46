package gateway

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Fail-over notifications over RESP (the Grid Services thesis, chapter III.A: "each client
// registers with each backup as a sink for the failover notification that
// tells it to switch to a different primary").
//
// A client that wants them subscribes, with Redis pub/sub framing, to the
// channel of a namespace's leader:
//
//	SUBSCRIBE synod:leader:<namespace> [...]
//	UNSUBSCRIBE [channel ...]
//
// SUBSCRIBE confirms each channel as ["subscribe", channel, count]; then a
// message ["message", channel, "<node id> <client addr>"] names the leader
// this node knows at once (when it knows one), and again each time that
// changes. Every redis-cli and Redis library reads this as ordinary pub/sub.
// Over RESP3 (HELLO 3) the confirmations and messages are push frames ('>'),
// as Redis 6 sends them, and every command stays usable while subscribed;
// over RESP2 a subscribed connection accepts only SUBSCRIBE, UNSUBSCRIBE,
// PING (answered ["pong", arg]) and QUIT, as in Redis.
//
// Choices the seed leaves open:
//
//   - Level, not edge: a message names the leader at that moment; a change
//     quickly undone may be skipped, and a node that knows no leader (an
//     election) sends nothing until it knows one. The seed's notification
//     carries the new primary and nothing else; so does ours.
//   - Which nodes announce: every node announces what it believes, not only
//     the backups. A client subscribes at every node it knows, as the seed's
//     stub registers with every backup; the first message naming a new
//     leader is the fail-over notification.
//   - Channels: synod:leader:<namespace>, only for protocols with a leader
//     (LeaderWatcher.HasLeader). Every other channel is a user's channel
//     (pubsub.go: PUBLISH, PSUBSCRIBE, SSUBSCRIBE, PUBSUB); PUBLISH to a
//     leader channel is refused.
//   - Pushes are written between replies, never inside one: a push that
//     becomes due while a command of the same connection runs (RESP3 only)
//     is written right after that command's reply.
//   - RESP clients need not subscribe to be served across a fail-over: the
//     node they reach forwards to the current leader.

// LeaderChannelPrefix starts the name of a namespace's leader channel.
const LeaderChannelPrefix = "synod:leader:"

func init() {
	for _, c := range []*command{
		{name: "subscribe", arity: -2, flags: []string{"pubsub", "noscript", "loading", "stale"}, fn: cmdSubscribe},
		{name: "unsubscribe", arity: -1, flags: []string{"pubsub", "noscript", "loading", "stale"}, fn: cmdUnsubscribe},
		{name: "psubscribe", arity: -2, flags: []string{"pubsub", "noscript", "loading", "stale"}, fn: cmdPSubscribe},
		{name: "punsubscribe", arity: -1, flags: []string{"pubsub", "noscript", "loading", "stale"}, fn: cmdPUnsubscribe},
		{name: "ssubscribe", arity: -2, flags: []string{"pubsub", "noscript", "loading", "stale"}, fn: cmdSSubscribe},
		{name: "sunsubscribe", arity: -1, flags: []string{"pubsub", "noscript", "loading", "stale"}, fn: cmdSUnsubscribe},
		{name: "publish", arity: 3, flags: []string{"pubsub", "loading", "stale", "fast"}, fn: cmdPublish},
		{name: "spublish", arity: 3, flags: []string{"pubsub", "loading", "stale", "fast"}, fn: cmdSPublish},
		{name: "pubsub", arity: -2, flags: []string{"pubsub", "loading", "stale"}, fn: cmdPubSub},
		{name: "monitor", arity: 1, flags: []string{"admin", "noscript", "loading", "stale"}, fn: cmdMonitor},
	} {
		commands[c.name] = c
	}
}

// subConn is a connection's subscriptions. The map is touched only by the
// connection's goroutine; each subscription's pusher goroutine writes under
// conn.wmu and stops when its channel closes.
type subConn struct {
	stops map[string]chan struct{} // leader channel name -> closed on unsubscribe
	order []string                 // leader channel names in subscription order
	// users' channels, patterns and sharded channels (pubsub.go)
	chans, pats, shards map[string]struct{}
}

func (s *subConn) count() int { return len(s.stops) }

// subscribed reports whether the connection is in RESP2 subscribed mode.
func (c *conn) subscribed() bool {
	return c.dataSubs()+int64(len(c.sub.shards)) > 0 && c.w.Protocol() == 2
}

// refuseSubscribed refuses, in RESP2 subscribed mode, the commands Redis
// refuses there. Connection goroutine, before running name.
func (c *conn) refuseSubscribed(name string) bool {
	if !c.subscribed() {
		return false
	}
	switch name {
	case "subscribe", "unsubscribe", "psubscribe", "punsubscribe", "ssubscribe", "sunsubscribe", "ping", "quit":
		return false
	}
	c.writeError(fmt.Sprintf("ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT are allowed in this context", name))
	return true
}

// pingSubscribed answers PING in RESP2 subscribed mode: ["pong", arg].
func (c *conn) pingSubscribed(args [][]byte) bool {
	if !c.subscribed() || len(args) > 2 {
		return false
	}
	arg := ""
	if len(args) == 2 {
		arg = string(args[1])
	}
	c.pushFrame("pong", arg)
	return true
}

// cmdSubscribe subscribes to channels: leader channels (this file) and
// users' channels (pubsub.go). The leader channels are checked first: one
// refused channel refuses the command, and nothing changes.
func cmdSubscribe(c *conn, args [][]byte) {
	var lw LeaderWatcher
	for _, a := range args[1:] {
		ch := string(a)
		ns, ok := strings.CutPrefix(ch, LeaderChannelPrefix)
		if !ok {
			continue
		}
		if lw == nil {
			if lw, ok = c.s.b.(LeaderWatcher); !ok {
				c.writeError("ERR this server does not announce leaders")
				return
			}
		}
		known := false
		for _, n := range c.s.b.Namespaces() {
			known = known || n.Name == ns
		}
		switch {
		case !known:
			c.writeError(fmt.Sprintf("ERR channel '%s': unknown namespace '%s'", ch, ns))
			return
		case !lw.HasLeader(ns):
			c.writeError(fmt.Sprintf("ERR channel '%s': namespace '%s' has no leader to announce (its protocol serves at every node alike)", ch, ns))
			return
		}
	}
	if c.sub.stops == nil {
		c.sub.stops = map[string]chan struct{}{}
	}
	for _, a := range args[1:] {
		ch := string(a)
		if !strings.HasPrefix(ch, LeaderChannelPrefix) {
			c.subscribeData(ch)
		} else if _, dup := c.sub.stops[ch]; !dup {
			stop := make(chan struct{})
			c.sub.stops[ch] = stop
			c.sub.order = append(c.sub.order, ch)
			go c.pushLeader(lw, ch, strings.TrimPrefix(ch, LeaderChannelPrefix), stop)
		}
		c.confirmSub("subscribe", ch, c.dataSubs())
	}
}

// cmdUnsubscribe ends the named subscriptions, or all of them.
func cmdUnsubscribe(c *conn, args [][]byte) {
	chans := names(args[1:])
	if len(chans) == 0 {
		chans = append(chans, c.sub.order...)
		chans = append(chans, slices.Sorted(maps.Keys(c.sub.chans))...)
	}
	if len(chans) == 0 {
		c.confirmSub("unsubscribe", nil, c.dataSubs())
		return
	}
	for _, ch := range chans {
		if !c.unsubscribeData(ch) {
			c.unsubscribe(ch)
		}
		c.confirmSub("unsubscribe", ch, c.dataSubs())
	}
}

func (c *conn) unsubscribe(ch string) {
	stop, ok := c.sub.stops[ch]
	if !ok {
		return
	}
	close(stop)
	delete(c.sub.stops, ch)
	for i, o := range c.sub.order {
		if o == ch {
			c.sub.order = append(c.sub.order[:i], c.sub.order[i+1:]...)
			break
		}
	}
}

// unsubscribeAll stops every pusher. Connection goroutine, when it ends.
func (c *conn) unsubscribeAll() {
	c.stopMonitor()
	c.unsubscribeAllData()
	for _, ch := range append([]string(nil), c.sub.order...) {
		c.unsubscribe(ch)
	}
}

// pushLeader announces namespace ns's leader on channel ch: the current
// one at once if known, then each change, until stop closes, the server
// closes or a write fails.
func (c *conn) pushLeader(lw LeaderWatcher, ch, ns string, stop chan struct{}) {
	var last string
	for {
		h, changed, err := lw.WatchLeader(ns)
		if err != nil {
			c.s.log.Warn("leader watch failed; subscription ends", "id", c.id, "channel", ch, "err", err)
			return
		}
		if h.ID != "" && string(h.ID) != last {
			last = string(h.ID)
			c.wmu.Lock()
			select {
			case <-stop:
				c.wmu.Unlock()
				return
			default:
			}
			err := c.pushFrame("message", ch, fmt.Sprintf("%s %s", h.ID, h.Client))
			c.wmu.Unlock()
			if err != nil {
				return
			}
		}
		select {
		case <-changed:
		case <-stop:
			return
		case <-c.s.ctx.Done():
			return
		}
	}
}

// pushFrame writes a pub/sub frame: an array (RESP2) or a push (RESP3) of
// bulk strings (string), nulls (nil) and integers (int64). It flushes the
// buffered replies before it, so frames and replies keep their order, and
// writes the frame at once. Caller holds c.wmu (the connection goroutine
// does while it runs a command).
func (c *conn) pushFrame(elems ...any) error {
	proto := c.w.Protocol()
	b := make([]byte, 0, 64)
	head := byte('*')
	if proto == 3 {
		head = '>'
	}
	b = append(b, head)
	b = strconv.AppendInt(b, int64(len(elems)), 10)
	b = append(b, "\r\n"...)
	for _, e := range elems {
		switch v := e.(type) {
		case string:
			b = append(b, '$')
			b = strconv.AppendInt(b, int64(len(v)), 10)
			b = append(b, "\r\n"...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		case int64:
			b = append(b, ':')
			b = strconv.AppendInt(b, v, 10)
			b = append(b, "\r\n"...)
		case nil:
			if proto == 3 {
				b = append(b, "_\r\n"...)
			} else {
				b = append(b, "$-1\r\n"...)
			}
		}
	}
	if err := c.w.Flush(); err != nil {
		return err
	}
	_, err := c.out.Write(b)
	return err
}
