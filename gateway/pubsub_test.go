package gateway

import (
	"strings"
	"sync"
	"testing"

	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/resp"
	"github.com/synod-dev/synod/service"
)

// TestPubSubRESP2: SUBSCRIBE, PSUBSCRIBE, PUBLISH's count, the message and
// pmessage frames, UNSUBSCRIBE with and without channels, PUBSUB's counts.
func TestPubSubRESP2(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	pub, sub, sub2 := dial(t, addr), dial(t, addr), dial(t, addr)
	run(t, sub, []step{
		cmd("UNSUBSCRIBE", "1) \"unsubscribe\"\n2) (nil)\n3) (integer) 0"),
		cmd("PUNSUBSCRIBE", "1) \"punsubscribe\"\n2) (nil)\n3) (integer) 0"),
	})
	sub.send("SUBSCRIBE", "chan1", "chan2", "chan1")
	for i, want := range []string{"chan1 1", "chan2 2", "chan1 2"} {
		if got := frame(sub.reply()); got != "subscribe "+want {
			t.Fatalf("confirmation %d: %s, want subscribe %s", i, got, want)
		}
	}
	run(t, sub, []step{cmd("GET k", "(error) ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT are allowed in this context")})
	run(t, pub, []step{
		cmd("PUBLISH chan1 hello", "(integer) 1"),
		cmd("PUBLISH chan2 world", "(integer) 1"),
		cmd("PUBLISH other x", "(integer) 0"),
	})
	wantFrames(t, sub, "message chan1 hello", "message chan2 world")

	sub2.send("PSUBSCRIBE", "chan*", "foo.*")
	wantFrames(t, sub2, "psubscribe chan* 1", "psubscribe foo.* 2")
	run(t, pub, []step{
		cmd("PUBLISH chan1 again", "(integer) 2"),
		cmd("PUBLISH foo.1 x", "(integer) 1"),
		cmd("PUBLISH foo1 x", "(integer) 0"),
		cmd("PUBSUB NUMSUB chan1 chan2 none", "1) \"chan1\"\n2) (integer) 1\n3) \"chan2\"\n4) (integer) 1\n5) \"none\"\n6) (integer) 0"),
		cmd("PUBSUB NUMPAT", "(integer) 2"),
		cmd("PUBSUB CHANNELS", "1) \"chan1\"\n2) \"chan2\""),
		cmd("PUBSUB CHANNELS *2", "1) \"chan2\""),
	})
	wantFrames(t, sub, "message chan1 again")
	wantFrames(t, sub2, "pmessage chan* chan1 again", "pmessage foo.* foo.1 x")

	sub.send("UNSUBSCRIBE", "chan1", "nope")
	wantFrames(t, sub, "unsubscribe chan1 1", "unsubscribe nope 1")
	run(t, pub, []step{cmd("PUBLISH chan1 gone", "(integer) 1")}) // sub2's pattern only
	wantFrames(t, sub2, "pmessage chan* chan1 gone")
	sub.send("UNSUBSCRIBE")
	wantFrames(t, sub, "unsubscribe chan2 0")
	run(t, sub, []step{cmd("SET k v", "OK")}) // no longer subscribed
	sub2.send("PUNSUBSCRIBE")
	wantFrames(t, sub2, "punsubscribe chan* 1", "punsubscribe foo.* 0")
	run(t, pub, []step{
		cmd("PUBLISH chan1 none", "(integer) 0"),
		cmd("PUBSUB NUMPAT", "(integer) 0"),
		cmd("PUBSUB CHANNELS", "(empty array)"),
	})
	// A connection that closes leaves no subscription behind.
	sub.send("SUBSCRIBE", "bye")
	wantFrames(t, sub, "subscribe bye 1")
	run(t, pub, []step{cmd("PUBSUB NUMSUB bye", "1) \"bye\"\n2) (integer) 1")})
	sub.nc.Close()
	waitFor(t, "the closed subscriber gone", func() bool { return pub.do("PUBSUB", "NUMSUB", "bye") == "1) \"bye\"\n2) (integer) 0" })
}

// TestPubSubRESP3: push frames, commands usable while subscribed, a
// message published by the subscriber itself, sharded channels.
func TestPubSubRESP3(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	c, pub := dial(t, addr), dial(t, addr)
	c.send("HELLO", "3")
	if r := c.reply(); r.Kind != resp.Map {
		t.Fatalf("HELLO 3: %s", r)
	}
	c.send("SUBSCRIBE", "news")
	wantPush(t, c.reply(), "subscribe", "news", "1")
	run(t, c, []step{cmd("SET k v", "OK")})
	run(t, pub, []step{cmd("PUBLISH news hi", "(integer) 1")})
	wantPush(t, c.reply(), "message", "news", "hi")
	c.send("SSUBSCRIBE", "s1", "s2")
	wantPush(t, c.reply(), "ssubscribe", "s1", "1")
	wantPush(t, c.reply(), "ssubscribe", "s2", "2")
	run(t, pub, []step{
		cmd("SPUBLISH s2 there", "(integer) 1"),
		cmd("PUBLISH s2 plain", "(integer) 0"), // sharded channels are apart
		cmd("PUBSUB SHARDNUMSUB s1 s3", "1) \"s1\"\n2) (integer) 1\n3) \"s3\"\n4) (integer) 0"),
		cmd("PUBSUB SHARDCHANNELS", "1) \"s1\"\n2) \"s2\""),
	})
	wantPush(t, c.reply(), "smessage", "s2", "there")
	c.send("SUNSUBSCRIBE")
	wantPush(t, c.reply(), "sunsubscribe", "s1", "1")
	wantPush(t, c.reply(), "sunsubscribe", "s2", "0")
	// Publishing to one's own channel: the reply, then the push.
	run(t, c, []step{cmd("PUBLISH news self", "(integer) 1")})
	wantPush(t, c.reply(), "message", "news", "self")
}

// peerKV is one node of a cluster of in-process backends sharing one
// store: what a node publishes reaches the others' gateways through bus.
type peerKV struct {
	*gatewaytest.MemBackend
	bus  *pubBus
	self int
}

type pubBus struct {
	mu    sync.Mutex
	recv  []func([]byte)
	drops bool // drop every message (a partition)
}

func (p *peerKV) PublishPeers(msg []byte) {
	p.bus.mu.Lock()
	defer p.bus.mu.Unlock()
	if p.bus.drops {
		return
	}
	for i, f := range p.bus.recv {
		if i != p.self {
			f(msg)
		}
	}
}

func (p *peerKV) ReceivePeers(f func([]byte)) {
	p.bus.mu.Lock()
	defer p.bus.mu.Unlock()
	p.self = len(p.bus.recv)
	p.bus.recv = append(p.bus.recv, f)
}

// TestPubSubAcrossNodes: a message published at one node reaches the
// subscribers of every node; PUBLISH counts this node's subscribers; a lost
// peer message is lost (at most once).
func TestPubSubAcrossNodes(t *testing.T) {
	mem := gatewaytest.KV()
	bus := &pubBus{}
	var addrs []string
	for range 3 {
		_, a := startServer(t, &peerKV{MemBackend: mem, bus: bus}, ServerOptions{})
		addrs = append(addrs, a)
	}
	s0, s1, s2 := dial(t, addrs[0]), dial(t, addrs[1]), dial(t, addrs[2])
	s1.send("SUBSCRIBE", "ch")
	wantFrames(t, s1, "subscribe ch 1")
	s2.send("PSUBSCRIBE", "c*")
	wantFrames(t, s2, "psubscribe c* 1")
	p := dial(t, addrs[0])
	run(t, p, []step{cmd("PUBLISH ch one", "(integer) 0")}) // node 0 has no subscriber
	wantFrames(t, s1, "message ch one")
	wantFrames(t, s2, "pmessage c* ch one")
	s0.send("SUBSCRIBE", "ch")
	wantFrames(t, s0, "subscribe ch 1")
	run(t, dial(t, addrs[1]), []step{cmd("PUBLISH ch two", "(integer) 1")})
	wantFrames(t, s0, "message ch two")
	wantFrames(t, s1, "message ch two")
	wantFrames(t, s2, "pmessage c* ch two")
	bus.mu.Lock()
	bus.drops = true
	bus.mu.Unlock()
	run(t, p, []step{cmd("PUBLISH ch lost", "(integer) 1")})
	bus.mu.Lock()
	bus.drops = false
	bus.mu.Unlock()
	run(t, p, []step{cmd("PUBLISH ch three", "(integer) 1")})
	wantFrames(t, s0, "message ch lost", "message ch three")
	wantFrames(t, s1, "message ch three") // "lost" never reached node 1
	wantFrames(t, s2, "pmessage c* ch three")
}

// TestPubSubSlowSubscriber: a subscriber that does not read is closed when
// its queued messages pass client-output-buffer-limit; the publisher is
// not held up.
func TestPubSubSlowSubscriber(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	pub, sub := dial(t, addr), dial(t, addr)
	if got := pub.do("CONFIG", "SET", "client-output-buffer-limit", "normal 65536 0 0"); got != "OK" {
		t.Fatalf("CONFIG SET: %s", got)
	}
	sub.send("SUBSCRIBE", "flood")
	wantFrames(t, sub, "subscribe flood 1")
	big := strings.Repeat("x", 4096)
	closed := false
	for i := 0; i < 2000 && !closed; i++ {
		closed = pub.do("PUBLISH", "flood", big) == "(integer) 0"
	}
	if !closed {
		t.Fatal("the subscriber that does not read was never dropped")
	}
	run(t, pub, []step{cmd("PUBSUB NUMSUB flood", "1) \"flood\"\n2) (integer) 0")})
}

// frame renders a pub/sub frame (array or push) as its elements joined by
// spaces.
func frame(r resp.Reply) string {
	parts := make([]string, len(r.Elems))
	for i, e := range r.Elems {
		if e.Kind == resp.Integer {
			parts[i] = strings.TrimPrefix(e.String(), "(integer) ")
		} else {
			parts[i] = string(e.Str)
		}
	}
	return strings.Join(parts, " ")
}

func wantFrames(t *testing.T, c *tconn, want ...string) {
	t.Helper()
	for i, w := range want {
		if got := frame(c.reply()); got != w {
			t.Fatalf("frame %d: %q, want %q", i, got, w)
		}
	}
}

// TestKeyspaceNotifications: CONFIG SET notify-keyspace-events and the
// events of writes served by this node, masked by class, fired only when
// the write changed something (notify.go).
func TestKeyspaceNotifications(t *testing.T) {
	_, addr := startServer(t, gatewaytest.MustAutomaton(t, pxName, "kv"), ServerOptions{})
	c, sub := dial(t, addr), dial(t, addr)
	run(t, c, []step{
		cmd("CONFIG GET notify-keyspace-events", "1) \"notify-keyspace-events\"\n2) \"\""),
		cmd("CONFIG SET notify-keyspace-events KA", "OK"),
		cmd("CONFIG GET notify-keyspace-events", "1) \"notify-keyspace-events\"\n2) \"AK\""),
		cmd("CONFIG SET notify-keyspace-events $lshzxeKE", "OK"),
		cmd("CONFIG GET notify-keyspace-events", "1) \"notify-keyspace-events\"\n2) \"$lshzxeKE\""),
		cmd("CONFIG SET notify-keyspace-events Kq", "(error) ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'."),
		cmd("CONFIG SET notify-keyspace-events KEgl", "OK"),
	})
	sub.send("PSUBSCRIBE", "*")
	wantFrames(t, sub, "psubscribe * 1")
	run(t, c, []step{
		cmd("SET foo bar", "OK"), // string class: masked
		cmd("EXPIRE foo 100", "(integer) 1"),
		cmd("EXPIRE nokey 100", "(integer) 0"), // nothing changed: no event
		cmd("LPUSH l a b", "(integer) 2"),
		cmd("RPOP nolist", "(nil)"),
		cmd("DEL foo", "(integer) 1"),
	})
	wantFrames(t, sub,
		"pmessage * __keyspace@0__:foo expire", "pmessage * __keyevent@0__:expire foo",
		"pmessage * __keyspace@0__:l lpush", "pmessage * __keyevent@0__:lpush l",
		"pmessage * __keyspace@0__:foo del", "pmessage * __keyevent@0__:del foo")
	// Inside MULTI, each queued write fires from its own reply.
	run(t, c, []step{
		cmd("CONFIG SET notify-keyspace-events Ks", "OK"),
		cmd("MULTI", "OK"),
		cmd("SADD s x", "QUEUED"),
		cmd("SREM s nope", "QUEUED"),
		cmd("EXEC", "1) (integer) 1\n2) (integer) 0"),
	})
	if got := c.do("CONFIG", "SET", "notify-keyspace-events", ""); got != "OK" {
		t.Fatalf("turning notifications off: %s", got)
	}
	run(t, c, []step{cmd("SADD s y", "(integer) 1")})
	wantFrames(t, sub, "pmessage * __keyspace@0__:s sadd")
	run(t, c, []step{cmd("PUBLISH last x", "(integer) 1")})
	wantFrames(t, sub, "pmessage * last x") // nothing from the SADD after notifications were turned off
}

// TestClientReply: OFF silences replies until ON (which answers OK), SKIP
// the next command's only; pub/sub pushes are written either way.
func TestClientReply(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	c, pub := dial(t, addr), dial(t, addr)
	c.send("CLIENT", "REPLY", "OFF")
	c.send("SET", "k", "1")
	c.send("SUBSCRIBE", "ch") // its confirmation is a push: written
	wantFrames(t, c, "subscribe ch 1")
	run(t, pub, []step{cmd("PUBLISH ch hi", "(integer) 1")})
	wantFrames(t, c, "message ch hi")
	c.send("UNSUBSCRIBE")
	wantFrames(t, c, "unsubscribe ch 0")
	c.send("GET", "k")
	run(t, c, []step{
		cmd("CLIENT REPLY ON", "OK"),
		cmd("GET k", `"1"`),
	})
	c.send("CLIENT", "REPLY", "SKIP")
	c.send("SET", "k", "2") // skipped
	run(t, c, []step{
		cmd("GET k", `"2"`),
		cmd("CLIENT REPLY maybe", "(error) ERR syntax error"),
	})
}

// TestMonitor: a monitor sees the other clients' commands in order, with
// arguments quoted and AUTH's redacted, MULTI's queued commands between
// MULTI and EXEC, and no unknown command.
func TestMonitor(t *testing.T) {
	_, addr := startServer(t, gatewaytest.MustAutomaton(t, pxName, "kv"), ServerOptions{})
	mon, c := dial(t, addr), dial(t, addr)
	run(t, mon, []step{cmd("MONITOR", "OK")})
	c.send("SET", "foo", "a b\"\n")
	c.reply()
	run(t, c, []step{
		cmd("GET foo", "\"a b\\\"\\n\""),
		cmd("MULTI", "OK"),
		cmd("NOSUCH x", "(error) ERR unknown command 'NOSUCH', with args beginning with: 'x' "),
		cmd("INCR n", "QUEUED"),
		cmd("EXEC", "(error) EXECABORT Transaction discarded because of previous errors."),
		cmd("AUTH secret", "(error) ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"),
		// The commands a script runs show as lua lines after it, those
		// before an error included.
		{[]string{"EVAL", "redis.call('set', KEYS[1], ARGV[1]); redis.call('incr', KEYS[1])", "1", "foo", "bar"}, "(error) ERR value is not an integer or out of range"},
	})
	for _, want := range []string{`"SET" "foo" "a b\"\n"`, `"GET" "foo"`, `"MULTI"`, `"INCR" "n"`, `"EXEC"`, `"AUTH" "(redacted)"`, `"EVAL"`, `[0 lua] "set" "foo" "bar"`, `[0 lua] "incr" "foo"`} {
		r := mon.reply()
		line := string(r.Str)
		client := strings.Contains(line, " [0 127.0.0.1:")
		if r.Kind != resp.SimpleString || !strings.Contains(line, want) || (client == strings.Contains(want, "lua")) {
			t.Fatalf("monitor line %q (kind %v), want one with %s", line, r.Kind, want)
		}
	}
}

// TestScriptCommandStats: the commands a script runs count in INFO
// commandstats (Redis's "command stats for scripts").
func TestScriptCommandStats(t *testing.T) {
	_, addr := startServer(t, gatewaytest.MustAutomaton(t, pxName, "kv"), ServerOptions{})
	c := dial(t, addr)
	run(t, c, []step{
		cmd("CONFIG RESETSTAT", "OK"),
		cmd("SET mykey myval", "OK"),
		{[]string{"EVAL", "redis.call('set', KEYS[1], 0); redis.call('expire', KEYS[1], 0); redis.call('geoadd', KEYS[1], 0, 0, 'bar')", "1", "mykey"}, "(nil)"},
	})
	got := c.bulk("INFO", "commandstats")
	for _, want := range []string{"cmdstat_eval:calls=1,", "cmdstat_set:calls=2,", "cmdstat_expire:calls=1,", "cmdstat_geoadd:calls=1,"} {
		if !strings.Contains(got, want) {
			t.Errorf("INFO commandstats lacks %s:\n%s", want, got)
		}
	}
}

// TestLibraryName: FUNCTION LOAD's "#!lua name=..." line, as Redis reads it.
func TestLibraryName(t *testing.T) {
	for line, want := range map[string]string{
		"#!lua name=lib":          "lib",
		`#!lua name="foo"`:        "foo",
		"#! name=test":            "ERR Engine '' not found",
		"#!js name=x":             "ERR Engine 'js' not found",
		"#!lua name=foo name=bar": "ERR Invalid metadata value, name argument was given multiple times",
		"#!lua name=foo x=1":      "ERR Invalid metadata value given: x=1",
		"return 1":                "ERR Missing library metadata",
	} {
		name, msg := service.LibraryName([]byte(line + "\nredis.register_function('f', function() end)"))
		if got := name + msg; got != want {
			t.Errorf("%q: %q, want %q", line, got, want)
		}
	}
}
