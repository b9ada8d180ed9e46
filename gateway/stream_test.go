package gateway

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// The stream commands through the gateway: arguments, node limits, group
// commands and reply shapes (RESP2).
func TestStreamCommands(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	c := dial(t, addr)
	run(t, c, []step{
		cmd("XGROUP CREATE s g $", "(error) ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."),
		cmd("XGROUP CREATE s g $ MKSTREAM", "OK"),
		cmd("XADD s 1-0 f 1", `"1-0"`),
		cmd("XADD s 2-0 f 2", `"2-0"`),
		cmd("XREADGROUP GROUP g alice COUNT 1 STREAMS s >", `1) 1) "s"`+"\n"+`   2) 1) 1) "1-0"`+"\n"+`         2) 1) "f"`+"\n"+`            2) "1"`),
	})
}

// A script's XADD (and PFADD) is planned without a node: the operation
// carries the default node limits, the same at every replica.
func TestStreamFromScript(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	c := dial(t, addr)
	run(t, c, []step{
		{[]string{"EVAL", "return redis.call('XADD', KEYS[1], '1-1', 'f', 'v')", "1", "s"}, `"1-1"`},
		{[]string{"EVAL", "return redis.call('PFADD', KEYS[1], 'a')", "1", "h"}, `(integer) 1`},
		{[]string{"EVAL", "return redis.call('XRANGE', KEYS[1], '-', '+')", "1", "s"}, `1) 1) "1-1"` + "\n" + `   2) 1) "f"` + "\n" + `      2) "v"`},
	})
}

// TestStreamBlocking: XREAD BLOCK with $ waits for an entry added later
// (not one added before it blocked), XREADGROUP BLOCK is served a new entry
// and ends with NOGROUP when its group is destroyed, a timeout answers a
// null array, and inside MULTI neither blocks. Replies in RESP2 and RESP3.
func TestStreamBlocking(t *testing.T) {
	for name, b := range atomicBackends(t) {
		t.Run(name, func(t *testing.T) {
			_, addr := startServer(t, b, ServerOptions{})
			r, c1, c2 := dial(t, addr), dial(t, addr), dial(t, addr)
			run(t, r, []step{
				cmd("XADD s 1-0 a 1", `"1-0"`),
				cmd("XREAD BLOCK 10 STREAMS s $", "(nil)"),
				cmd("XREAD BLOCK -1 STREAMS s $", "(error) ERR timeout is negative"),
				cmd("XREAD STREAMS s t 0", "(error) ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."),
				cmd("XREAD STREAMS s >", "(error) ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."),
				cmd("XGROUP CREATE s g $", "OK"),
				cmd("MULTI", "OK"),
				cmd("XREAD BLOCK 0 STREAMS s $", "QUEUED"),
				cmd("XREADGROUP GROUP g c BLOCK 0 STREAMS s >", "QUEUED"),
				cmd("EXEC", "1) (nil)\n2) (nil)"),
			})
			c1.send("XREAD", "BLOCK", "0", "STREAMS", "s", "$")
			c1.w.Flush()
			c2.send("XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0", "STREAMS", "s", ">")
			c2.w.Flush()
			waitBlocked(t, r, "2")
			run(t, r, []step{cmd("XADD s 2-0 b 2", `"2-0"`)})
			want := "1) 1) \"s\"\n   2) 1) 1) \"2-0\"\n         2) 1) \"b\"\n            2) \"2\""
			if got := c1.reply().String(); got != want {
				t.Errorf("blocked XREAD got %s, want %s", got, want)
			}
			if got := c2.reply().String(); got != want {
				t.Errorf("blocked XREADGROUP got %s, want %s", got, want)
			}
			run(t, r, []step{cmd("XPENDING s g", "1) (integer) 1\n2) \"2-0\"\n3) \"2-0\"\n4) 1) 1) \"alice\"\n      2) \"1\"")})
			c2.send("XREADGROUP", "GROUP", "g", "bob", "BLOCK", "0", "STREAMS", "s", ">")
			c2.w.Flush()
			waitBlocked(t, r, "1")
			run(t, r, []step{cmd("XGROUP DESTROY s g", "(integer) 1")})
			if got := c2.reply().String(); got != "(error) NOGROUP the consumer group this client was blocked on no longer exists" {
				t.Errorf("XREADGROUP blocked on a destroyed group got %s", got)
			}
			// RESP3: XREAD's reply is a map.
			run(t, r, []step{{[]string{"HELLO", "3"}, r.do("HELLO", "3")}})
			if got := r.do("XREAD", "COUNT", "1", "STREAMS", "s", "0"); !strings.HasPrefix(got, "1) \"s\" =>") {
				t.Errorf("RESP3 XREAD got %s", got)
			}
		})
	}
}

// Scripts may call XREAD and XREADGROUP without BLOCK, as in Redis, and
// are refused BLOCK.
func TestStreamReadFromScript(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	c := dial(t, addr)
	run(t, c, []step{
		cmd("XGROUP CREATE s g $ MKSTREAM", "OK"),
		{[]string{"EVAL", "return redis.pcall('xread','STREAMS','s','$')", "1", "s"}, "(nil)"},
		{[]string{"EVAL", "return redis.pcall('xread','BLOCK',0,'STREAMS','s','$')", "1", "s"}, "(error) ERR xread command is not allowed with BLOCK option from scripts"},
		{[]string{"EVAL", "return redis.pcall('xreadgroup','group','g','c','STREAMS','s','>')", "1", "s"}, "(nil)"},
		{[]string{"EVAL", "return redis.pcall('xreadgroup','group','g','c','BLOCK',0,'STREAMS','s','>')", "1", "s"}, "(error) ERR xreadgroup command is not allowed with BLOCK option from scripts"},
		cmd("XADD s 1-0 f v", `"1-0"`),
		// The reply nests deeper than a script's reply may (service's
		// MaxArrayDepth); the script reads into it.
		{[]string{"EVAL", "local r = redis.call('xread','STREAMS','s','0'); return {r[1][1], r[1][2][1][1], r[1][2][1][2][2]}", "1", "s"}, "1) \"s\"\n2) \"1-0\"\n3) \"v\""},
	})
}

// XADD, XDEL, XTRIM, XSETID and XGROUP fire their keyspace events (class t) when
// they changed the stream.
func TestStreamNotifications(t *testing.T) {
	_, addr := startServer(t, gatewaytest.MustAutomaton(t, pxName, "kv"), ServerOptions{})
	c, sub := dial(t, addr), dial(t, addr)
	run(t, c, []step{cmd("CONFIG SET notify-keyspace-events Kt", "OK")})
	sub.send("PSUBSCRIBE", "*")
	wantFrames(t, sub, "psubscribe * 1")
	run(t, c, []step{
		cmd("XADD none NOMKSTREAM 1-0 f v", "(nil)"), // nothing changed: no event
		cmd("XADD s 1-0 f v", `"1-0"`),
		cmd("XADD s 2-0 f v", `"2-0"`),
		cmd("XDEL s 9-0", "(integer) 0"),
		cmd("XDEL s 1-0", "(integer) 1"),
		cmd("XTRIM s MAXLEN 5", "(integer) 0"),
		cmd("XTRIM s MAXLEN 0", "(integer) 1"),
		cmd("XSETID s 5-0", "OK"),
		cmd("XGROUP CREATE s g $", "OK"),
		cmd("XGROUP CREATE s g $", "(error) BUSYGROUP Consumer Group name already exists"),
		cmd("XGROUP CREATECONSUMER s g Bob", "(integer) 1"),
		cmd("XGROUP CREATECONSUMER s g Bob", "(integer) 0"),
		cmd("XGROUP SETID s g 0", "OK"),
		cmd("XGROUP DESTROY s nosuch", "(integer) 0"),
		cmd("XGROUP DESTROY s g", "(integer) 1"),
	})
	wantFrames(t, sub,
		"pmessage * __keyspace@0__:s xadd", "pmessage * __keyspace@0__:s xadd",
		"pmessage * __keyspace@0__:s xdel", "pmessage * __keyspace@0__:s xtrim",
		"pmessage * __keyspace@0__:s xsetid", "pmessage * __keyspace@0__:s xgroup-create",
		"pmessage * __keyspace@0__:s xgroup-createconsumer", "pmessage * __keyspace@0__:s xgroup-setid",
		"pmessage * __keyspace@0__:s xgroup-destroy")

	// Consumers created by XREADGROUP, XCLAIM and XAUTOCLAIM, and deleted
	// by XGROUP DELCONSUMER (Redis's pubsub "stream events test"); none
	// for a consumer that existed or did not.
	run(t, c, []step{
		cmd("DEL s", "(integer) 1"),
		cmd("XGROUP CREATE s g $ MKSTREAM", "OK"),
		cmd("XGROUP CREATECONSUMER s g Bob", "(integer) 1"),
		cmd("XADD s 1-0 f A", `"1-0"`),
		cmd("XREADGROUP GROUP g Alice STREAMS s >", "1) 1) \"s\"\n   2) 1) 1) \"1-0\"\n         2) 1) \"f\"\n            2) \"A\""),
		cmd("XREADGROUP GROUP g Alice STREAMS s >", "(nil)"),
		cmd("XCLAIM s g Mike 0 1-0 FORCE JUSTID", `1) "1-0"`),
		cmd("XGROUP DELCONSUMER s g Lee", "(integer) 0"),
		cmd("XAUTOCLAIM s g Bob 0 0 JUSTID", "1) \"0-0\"\n2) 1) \"1-0\"\n3) (empty array)"),
		cmd("XGROUP DELCONSUMER s g Bob", "(integer) 1"),
	})
	wantFrames(t, sub,
		"pmessage * __keyspace@0__:s xgroup-create",
		"pmessage * __keyspace@0__:s xgroup-createconsumer", "pmessage * __keyspace@0__:s xadd",
		"pmessage * __keyspace@0__:s xgroup-createconsumer", "pmessage * __keyspace@0__:s xgroup-createconsumer",
		"pmessage * __keyspace@0__:s xgroup-delconsumer")
}
