package gateway

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Pub/sub for users' channels (issue 34): SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE,
// their UNSUBSCRIBE forms, PUBLISH, SPUBLISH and PUBSUB, with Redis's
// framing (subscribe.go's pushFrame: arrays in RESP2, push frames in RESP3).
//
// Decisions for a replicated setting (none of the five seeds has pub/sub;
// Redis Cluster is the model, as for sharding):
//
//   - A message is not data: it does not go through any namespace's log and
//     is not stored. PUBLISH at one node delivers to that node's
//     subscribers at once and hands the message to every other node of the
//     cluster over the peer transport (PubSubBackend), which delivers it to
//     its own subscribers, as Redis Cluster propagates PUBLISH to every node.
//     So a subscriber at any node receives a message published at any node.
//   - At most once, no order across publishers: a message is sent once per
//     peer and is lost if that peer is down or its queue is full (the
//     transport drops, protocols tolerate loss; pub/sub does too, as Redis's
//     does when a subscriber is disconnected). Messages from one publishing
//     connection reach one subscriber in the order they were published (one
//     peer queue per node pair, one push queue per subscriber).
//   - PUBLISH answers the number of subscribers of this node that received
//     it, as Redis Cluster's PUBLISH does (it cannot wait for the others);
//     PUBSUB CHANNELS/NUMSUB/NUMPAT/SHARDCHANNELS/SHARDNUMSUB also count this
//     node only, as in Redis Cluster.
//   - Channels belong to the cluster, not to a namespace, as Redis's
//     channels ignore SELECT. SSUBSCRIBE/SPUBLISH (Redis 7's sharded
//     channels) are separate channels with the same delivery: Synod has no
//     shard of a channel to keep them in, so they go to every node.
//   - The leader channels synod:leader:<namespace> (subscribe.go) stay the
//     node's to announce: SUBSCRIBE to one is a leader subscription, and
//     PUBLISH to one is refused so no client can forge a fail-over notice.
//   - A subscriber that does not read: its queued messages count against
//     client-output-buffer-limit (limits.go) and the client is closed when
//     they pass it, as Redis's pubsub class limit closes it.

// PubSubBackend is a Backend that carries published messages to the other
// nodes of its cluster.
type PubSubBackend interface {
	// PublishPeers hands msg to every other node, once, without waiting;
	// a peer that cannot take it now loses it.
	PublishPeers(msg []byte)
	// ReceivePeers registers f, which the backend calls with every msg
	// another node's gateway published (from any goroutine).
	ReceivePeers(f func(msg []byte))
}

// Channel kinds: a message of one kind reaches the subscribers of that kind.
const (
	psChannel byte = 1 // SUBSCRIBE / PSUBSCRIBE
	psShard   byte = 2 // SSUBSCRIBE
	// psScriptKill is not a message: SCRIPT KILL or FUNCTION KILL at
	// another node, which every node applies to its own replica's run of
	// the same operation (script.go, killPeers). Channel: "eval" or
	// "fcall"; message: the run's ID (service.RunningScript.ID, may be
	// empty), "|" and its command line.
	psScriptKill byte = 3
	// psScriptKillAny: SCRIPT KILL or FUNCTION KILL at a node that holds
	// no run of the script it sent, because its replica does not execute
	// it (pbpaxos: the leader executes, the others install its state).
	// Channel: "eval" or "fcall"; message: the asking node's request id,
	// "|" and the run's command line. A node whose replica holds that run
	// kills it and answers with psScriptKillResult (script.go,
	// killRemote).
	psScriptKillAny byte = 4
	// psScriptKillResult answers psScriptKillAny. Channel: the request
	// id; message: "killed" or "unkillable".
	psScriptKillResult byte = 5
)

// hub is a server's subscribers by channel and pattern.
type hub struct {
	mu     sync.RWMutex
	chans  map[string]map[*conn]struct{}
	pats   map[string]map[*conn]struct{}
	shards map[string]map[*conn]struct{}
	peers  PubSubBackend // nil: this server is the only node
}

func (s *Server) initPubSub() {
	s.ps.chans = map[string]map[*conn]struct{}{}
	s.ps.pats = map[string]map[*conn]struct{}{}
	s.ps.shards = map[string]map[*conn]struct{}{}
	if pb, ok := s.b.(PubSubBackend); ok {
		s.ps.peers = pb
		s.scr.peers = pb
		pb.ReceivePeers(s.receivePeer)
	}
	if ab, ok := s.b.(AnnounceBackend); ok {
		ab.ReceiveAnnounce(s.receiveAnnounce)
	}
}

func (h *hub) add(m map[string]map[*conn]struct{}, name string, c *conn) {
	h.mu.Lock()
	set := m[name]
	if set == nil {
		set = map[*conn]struct{}{}
		m[name] = set
	}
	set[c] = struct{}{}
	h.mu.Unlock()
}

func (h *hub) remove(m map[string]map[*conn]struct{}, name string, c *conn) {
	h.mu.Lock()
	if set := m[name]; set != nil {
		delete(set, c)
		if len(set) == 0 {
			delete(m, name)
		}
	}
	h.mu.Unlock()
}

// deliver queues the message for this server's subscribers of its kind and
// returns how many received it (a client subscribed to the channel and to
// a matching pattern counts twice, as in Redis).
func (s *Server) deliver(kind byte, ch, msg string) int {
	h := &s.ps
	h.mu.RLock()
	defer h.mu.RUnlock()
	n := 0
	if kind == psShard {
		for c := range h.shards[ch] {
			c.queuePush("smessage", ch, msg)
			n++
		}
		return n
	}
	for c := range h.chans[ch] {
		c.queuePush("message", ch, msg)
		n++
	}
	for p, set := range h.pats {
		if !service.GlobMatch([]byte(p), []byte(ch)) {
			continue
		}
		for c := range set {
			c.queuePush("pmessage", p, ch, msg)
			n++
		}
	}
	return n
}

// publish delivers here and hands the message to the other nodes.
func (s *Server) publish(kind byte, ch, msg string) int {
	n := s.deliver(kind, ch, msg)
	if s.ps.peers != nil {
		e := wire.Encoder{}
		e.Byte(kind)
		e.String(ch)
		e.String(msg)
		s.ps.peers.PublishPeers(e.B)
	}
	return n
}

// receivePeer delivers a message another node published.
func (s *Server) receivePeer(b []byte) {
	d := wire.NewDecoder(b)
	kind, ch, msg := d.Byte(), d.String(), d.String()
	if d.Done() == nil && kind == psScriptKill {
		if id, cmdline, _ := strings.Cut(msg, "|"); id != "" {
			service.EndRun(id, cmdline)
		} else {
			go s.scr.killLater(ch == "eval", cmdline, "")
		}
		return
	}
	if d.Done() == nil && kind == psScriptKillAny {
		id, cmdline, _ := strings.Cut(msg, "|")
		go s.scr.killLater(ch == "eval", cmdline, id)
		return
	}
	if d.Done() == nil && kind == psScriptKillResult {
		s.scr.killResult(ch, msg)
		return
	}
	if d.Done() != nil || (kind != psChannel && kind != psShard) {
		s.log.Warn("bad pub/sub message from a peer; dropped")
		return
	}
	s.deliver(kind, ch, msg)
}

// pushQueue is a subscriber's messages not yet written. Publishers append
// (any goroutine); the connection's pusher goroutine writes them under
// conn.wmu, between replies.
type pushQueue struct {
	mu      sync.Mutex
	frames  [][]any
	bytes   int64
	wake    chan struct{} // one token: frames were added
	done    chan struct{} // closed when the connection ends
	started bool
}

// queuePush adds a frame for the pusher; past the output limit the client is
// closed.
func (c *conn) queuePush(elems ...any) {
	q := &c.push
	size := int64(16)
	for _, e := range elems {
		if s, ok := e.(string); ok {
			size += int64(len(s)) + 16
		}
	}
	q.mu.Lock()
	if !q.started {
		q.mu.Unlock()
		return // ended
	}
	if limit := c.s.lim.outLimit.Load(); q.bytes+size > limit {
		q.frames, q.bytes = nil, 0
		q.mu.Unlock()
		c.s.ov.outputClosed.Add(1)
		c.s.log.Warn("closing client: pub/sub messages past the output buffer limit", "id", c.id, "client_output_buffer_limit", limit)
		c.nc.Close()
		return
	}
	q.frames = append(q.frames, elems)
	q.bytes += size
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// startPusher starts the connection's pusher once. Connection goroutine.
func (c *conn) startPusher() {
	q := &c.push
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.started || q.done != nil {
		return
	}
	q.started = true
	q.wake = make(chan struct{}, 1)
	q.done = make(chan struct{})
	go c.pusher()
}

// stopPusher ends the pusher. Connection goroutine, when it ends.
func (c *conn) stopPusher() {
	q := &c.push
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.started {
		q.started = false
		q.frames = nil
		close(q.done)
	}
}

func (c *conn) pusher() {
	q := &c.push
	for {
		select {
		case <-q.wake:
		case <-q.done:
			return
		}
		q.mu.Lock()
		frames := q.frames
		q.frames, q.bytes = nil, 0
		q.mu.Unlock()
		if len(frames) == 0 {
			continue
		}
		c.wmu.Lock()
		for _, f := range frames {
			var err error
			if l, ok := f[0].(statusLine); ok && len(f) == 1 { // MONITOR (monitor.go)
				if err = c.w.Flush(); err == nil {
					_, err = c.out.Write([]byte("+" + string(l) + "\r\n"))
				}
			} else {
				err = c.pushFrame(f...)
			}
			if err != nil {
				break
			}
		}
		c.wmu.Unlock()
	}
}

// dataSubs counts channels and patterns (what SUBSCRIBE and PSUBSCRIBE
// report, leader channels included).
func (c *conn) dataSubs() int64 {
	return int64(c.sub.count() + len(c.sub.chans) + len(c.sub.pats))
}

// cmdPSubscribe subscribes to patterns.
func cmdPSubscribe(c *conn, args [][]byte) {
	if c.sub.pats == nil {
		c.sub.pats = map[string]struct{}{}
	}
	c.startPusher()
	for _, a := range args[1:] {
		p := string(a)
		if _, dup := c.sub.pats[p]; !dup {
			c.sub.pats[p] = struct{}{}
			c.s.ps.add(c.s.ps.pats, p, c)
		}
		c.confirmSub("psubscribe", p, c.dataSubs())
	}
}

// cmdPUnsubscribe ends the named pattern subscriptions, or all of them.
func cmdPUnsubscribe(c *conn, args [][]byte) {
	pats := names(args[1:])
	if len(pats) == 0 {
		pats = slices.Sorted(maps.Keys(c.sub.pats))
	}
	if len(pats) == 0 {
		c.confirmSub("punsubscribe", nil, c.dataSubs())
		return
	}
	for _, p := range pats {
		if _, ok := c.sub.pats[p]; ok {
			delete(c.sub.pats, p)
			c.s.ps.remove(c.s.ps.pats, p, c)
		}
		c.confirmSub("punsubscribe", p, c.dataSubs())
	}
}

// subscribeData subscribes to a user's channel. Connection goroutine.
func (c *conn) subscribeData(ch string) {
	if c.sub.chans == nil {
		c.sub.chans = map[string]struct{}{}
	}
	c.startPusher()
	if _, dup := c.sub.chans[ch]; !dup {
		c.sub.chans[ch] = struct{}{}
		c.s.ps.add(c.s.ps.chans, ch, c)
	}
}

// unsubscribeData ends a user's channel subscription; false when there was none.
func (c *conn) unsubscribeData(ch string) bool {
	if _, ok := c.sub.chans[ch]; !ok {
		return false
	}
	delete(c.sub.chans, ch)
	c.s.ps.remove(c.s.ps.chans, ch, c)
	return true
}

// cmdSSubscribe subscribes to sharded channels.
func cmdSSubscribe(c *conn, args [][]byte) {
	if c.sub.shards == nil {
		c.sub.shards = map[string]struct{}{}
	}
	c.startPusher()
	for _, a := range args[1:] {
		ch := string(a)
		if _, dup := c.sub.shards[ch]; !dup {
			c.sub.shards[ch] = struct{}{}
			c.s.ps.add(c.s.ps.shards, ch, c)
		}
		c.confirmSub("ssubscribe", ch, int64(len(c.sub.shards)))
	}
}

// cmdSUnsubscribe ends the named sharded subscriptions, or all of them.
func cmdSUnsubscribe(c *conn, args [][]byte) {
	chans := names(args[1:])
	if len(chans) == 0 {
		chans = slices.Sorted(maps.Keys(c.sub.shards))
	}
	if len(chans) == 0 {
		c.confirmSub("sunsubscribe", nil, int64(0))
		return
	}
	for _, ch := range chans {
		if _, ok := c.sub.shards[ch]; ok {
			delete(c.sub.shards, ch)
			c.s.ps.remove(c.s.ps.shards, ch, c)
		}
		c.confirmSub("sunsubscribe", ch, int64(len(c.sub.shards)))
	}
}

// unsubscribeAllData ends every data subscription. Connection goroutine,
// when it ends.
func (c *conn) unsubscribeAllData() {
	h := &c.s.ps
	for ch := range c.sub.chans {
		h.remove(h.chans, ch, c)
	}
	for p := range c.sub.pats {
		h.remove(h.pats, p, c)
	}
	for ch := range c.sub.shards {
		h.remove(h.shards, ch, c)
	}
	c.sub.chans, c.sub.pats, c.sub.shards = nil, nil, nil
	c.stopPusher()
}

func cmdPublish(c *conn, args [][]byte) {
	ch := string(args[1])
	if strings.HasPrefix(ch, LeaderChannelPrefix) {
		c.writeError(fmt.Sprintf("ERR channel '%s' is the node's own leader announcement; it cannot be published to", ch))
		return
	}
	c.orderPublish() // arrived subscription commands first (order.go)
	c.w.WriteInt(int64(c.s.publish(psChannel, ch, string(args[2]))))
}

func cmdSPublish(c *conn, args [][]byte) {
	c.orderPublish()
	c.w.WriteInt(int64(c.s.publish(psShard, string(args[1]), string(args[2]))))
}

// cmdPubSub answers PUBSUB CHANNELS|NUMSUB|NUMPAT|SHARDCHANNELS|SHARDNUMSUB
// for this node's subscribers.
func cmdPubSub(c *conn, args [][]byte) {
	sub := strings.ToLower(string(args[1]))
	h := &c.s.ps
	switch sub {
	case "channels", "shardchannels":
		if len(args) > 3 {
			c.writeError(arityErr("pubsub|" + sub))
			return
		}
		m := h.chans
		if sub == "shardchannels" {
			m = h.shards
		}
		h.mu.RLock()
		var out []string
		for ch := range m {
			if len(args) == 2 || service.GlobMatch(args[2], []byte(ch)) {
				out = append(out, ch)
			}
		}
		h.mu.RUnlock()
		slices.Sort(out)
		c.w.WriteArray(len(out))
		for _, ch := range out {
			c.w.WriteBulkString(ch)
		}
	case "numsub", "shardnumsub":
		m := h.chans
		if sub == "shardnumsub" {
			m = h.shards
		}
		h.mu.RLock()
		c.w.WriteArray(2 * (len(args) - 2)) // an array in RESP3 too, as Redis 7.0 answers
		for _, a := range args[2:] {
			c.w.WriteBulk(a)
			c.w.WriteInt(int64(len(m[string(a)])))
		}
		h.mu.RUnlock()
	case "numpat":
		if len(args) != 2 {
			c.writeError(arityErr("pubsub|numpat"))
			return
		}
		h.mu.RLock()
		n := len(h.pats)
		h.mu.RUnlock()
		c.w.WriteInt(int64(n))
	case "help":
		lines := []string{
			"PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"CHANNELS [<pattern>]", "    Return the currently active channels matching a <pattern> (default: '*').",
			"NUMPAT", "    Return number of subscriptions to patterns.",
			"NUMSUB [<channel> ...]", "    Return the number of subscribers for the specified channels, excluding",
			"    pattern subscriptions(default: no channels).",
			"SHARDCHANNELS [<pattern>]", "    Return the currently active shard level channels matching a <pattern> (default: '*').",
			"SHARDNUMSUB [<shardchannel> ...]", "    Return the number of subscribers for the specified shard level channel(s)",
			"HELP", "    Prints this help.",
		}
		c.w.WriteArray(len(lines))
		for _, l := range lines {
			c.w.WriteSimple(l)
		}
	default:
		c.writeError(fmt.Sprintf("ERR unknown subcommand '%s'. Try PUBSUB HELP.", args[1]))
	}
}

func names(args [][]byte) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = string(a)
	}
	return out
}
