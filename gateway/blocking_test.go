package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// blockedCount reads INFO's blocked_clients.
func blockedCount(t *testing.T, c *tconn) string {
	t.Helper()
	info := c.do("INFO", "clients")
	if _, v, ok := strings.Cut(info, "blocked_clients:"); ok {
		v, _, _ = strings.Cut(v, `\r`)
		return v
	}
	t.Fatalf("INFO clients has no blocked_clients: %s", info)
	return ""
}

// waitBlocked waits until n clients are blocked.
func waitBlocked(t *testing.T, c *tconn, n string) {
	t.Helper()
	for i := 0; ; i++ {
		if got := blockedCount(t, c); got == n {
			return
		}
		if i == 500 {
			t.Fatalf("blocked_clients is %s, want %s", blockedCount(t, c), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBlockingPops runs the blocking list and sorted-set commands on the
// live atomic protocols: a blocked client is served by a later write, in
// the order the clients blocked, a key of another type leaves it blocked,
// a timeout answers a null array, and a client that disconnects while
// blocked is unblocked (nothing is popped for it).
func TestBlockingPops(t *testing.T) {
	for name, b := range atomicBackends(t) {
		t.Run(name, func(t *testing.T) {
			_, addr := startServer(t, b, ServerOptions{})
			r, c1, c2 := dial(t, addr), dial(t, addr), dial(t, addr)
			run(t, r, []step{
				cmd("RPUSH l a b", "(integer) 2"),
				cmd("BLPOP nope l 0", "1) \"l\"\n2) \"a\""),
				cmd("BRPOP l 0", "1) \"l\"\n2) \"b\""),
				cmd("BLPOP l 0.01", "(nil)"),
				cmd("BLPOP l -1", "(error) ERR timeout is negative"),
				cmd("BLPOP l x", "(error) ERR timeout is not a float or out of range"),
				cmd("LPOP l 1", "(nil)"),
				cmd("SET s v", "OK"),
				cmd("BLPOP s 0", "(error) WRONGTYPE Operation against a key holding the wrong kind of value"),
				cmd("LMPOP 1 l left", "(nil)"),
				cmd("LMPOP 0 l left", "(error) ERR numkeys should be greater than 0"),
				cmd("LMPOP 1 l left COUNT 0", "(error) ERR count should be greater than 0"),
				cmd("LMPOP 1 l up", "(error) ERR syntax error"),
				cmd("ZADD z 1 a 2 b 3 c", "(integer) 3"),
				cmd("ZMPOP 1 z MAX COUNT 2", "1) \"z\"\n2) 1) 1) \"c\"\n      2) \"3\"\n   2) 1) \"b\"\n      2) \"2\""),
				cmd("BZPOPMIN nope z 0", "1) \"z\"\n2) \"a\"\n3) \"1\""),
				cmd("MULTI", "OK"),
				cmd("BLPOP l 0", "QUEUED"),
				cmd("EXEC", "1) (nil)"),
			})
			// Two clients block on l; one write serves the first, the
			// next the second.
			c1.send("BLPOP", "l", "0")
			c1.w.Flush()
			waitBlocked(t, r, "1")
			c2.send("BLMPOP", "0", "2", "l", "m", "right", "COUNT", "5")
			c2.w.Flush()
			waitBlocked(t, r, "2")
			run(t, r, []step{
				cmd("SET l x", "OK"), // another type: both stay blocked
				cmd("DEL l", "(integer) 1"),
				cmd("RPUSH l x y z", "(integer) 3"),
			})
			if got := c1.reply().String(); got != "1) \"l\"\n2) \"x\"" {
				t.Errorf("first blocked client got %s", got)
			}
			if got := c2.reply().String(); got != "1) \"l\"\n2) 1) \"z\"\n   2) \"y\"" {
				t.Errorf("second blocked client got %s", got)
			}
			waitBlocked(t, r, "0")
			// BLMOVE: the wrong destination type ends it with an error,
			// leaving the source alone.
			c1.send("BLMOVE", "src", "s", "left", "right", "0")
			c1.w.Flush()
			waitBlocked(t, r, "1")
			run(t, r, []step{cmd("RPUSH src e", "(integer) 1")})
			if got := c1.reply().String(); !strings.HasPrefix(got, "(error) WRONGTYPE") {
				t.Errorf("BLMOVE to a string got %s", got)
			}
			run(t, r, []step{cmd("LRANGE src 0 -1", "1) \"e\""), cmd("DEL src", "(integer) 1")})
			// A client that goes away while blocked is unblocked.
			c2.send("BLPOP", "gone", "0")
			c2.w.Flush()
			waitBlocked(t, r, "1")
			c2.nc.Close()
			waitBlocked(t, r, "0")
			run(t, r, []step{cmd("RPUSH gone v", "(integer) 1"), cmd("LLEN gone", "(integer) 1")})
			// CLIENT UNBLOCK.
			id := c1.do("CLIENT", "ID")
			c1.send("BZPOPMAX", "zz", "0")
			c1.w.Flush()
			waitBlocked(t, r, "1")
			run(t, r, []step{{[]string{"CLIENT", "UNBLOCK", strings.TrimPrefix(id, "(integer) "), "ERROR"}, "(integer) 1"}})
			if got := c1.reply().String(); got != "(error) UNBLOCKED client unblocked via CLIENT UNBLOCK" {
				t.Errorf("unblocked client got %s", got)
			}
		})
	}
}

// TestBlockingPollsOtherWrites: a write that reaches the namespace without
// passing this gateway (another node's) serves a blocked client by the
// poll.
func TestBlockingPollsOtherWrites(t *testing.T) {
	b := gatewaytest.MustAutomaton(t, pxName, "kv")
	_, addr := startServer(t, b, ServerOptions{})
	_, other := startServer(t, b, ServerOptions{}) // another node's gateway
	r, c := dial(t, addr), dial(t, other)
	c.send("BRPOPLPUSH", "q", "done", "5")
	c.w.Flush()
	waitBlocked(t, dial(t, other), "1")
	run(t, r, []step{cmd("LPUSH q job", "(integer) 1")})
	if got := c.reply().String(); got != `"job"` {
		t.Errorf("blocked client got %s", got)
	}
	run(t, r, []step{cmd("LRANGE done 0 -1", `1) "job"`)})
}

// TestBlockingWriteAnsweredAfterWoken: a write is answered after the
// clients blocked at this node that it woke, and those their pops woke,
// have been served (Redis's "Linked LMOVEs"): the element went l1 -> l2
// -> l3 before RPUSH's reply, though every blocked attempt is slow (a
// replicated write under load), so a LRANGE sent right after the reply
// finds it in l3.
func TestBlockingWriteAnsweredAfterWoken(t *testing.T) {
	b := gatewaytest.KV()
	b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
		if req.Op.Kind == "blmove" {
			time.Sleep(30 * time.Millisecond)
		}
		return nil
	})
	_, addr := startServer(t, b, ServerOptions{})
	r, c1, c2 := dial(t, addr), dial(t, addr), dial(t, addr)
	c1.send("BLMOVE", "l1", "l2", "RIGHT", "LEFT", "0")
	c1.w.Flush()
	waitBlocked(t, r, "1")
	c2.send("BLMOVE", "l2", "l3", "LEFT", "RIGHT", "0")
	c2.w.Flush()
	waitBlocked(t, r, "2")
	run(t, r, []step{
		cmd("RPUSH l1 foo", "(integer) 1"),
		cmd("LRANGE l1 0 -1", "(empty array)"),
		cmd("LRANGE l2 0 -1", "(empty array)"),
		cmd("LRANGE l3 0 -1", `1) "foo"`),
	})
	for _, c := range []*tconn{c1, c2} {
		if got := c.reply().String(); got != `"foo"` {
			t.Errorf("linked BLMOVE client got %s", got)
		}
	}
}
