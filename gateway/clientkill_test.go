package gateway

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// TestClientKill: CLIENT KILL's argument errors as Redis 7.0 words them,
// the old ip:port form, the ID filter, and SKIPME: the killed connections
// are closed, the one that kills itself gets its count first.
func TestClientKill(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	r, a, b := dial(t, addr), dial(t, addr), dial(t, addr)
	run(t, r, []step{
		cmd("CLIENT KILL", "(error) ERR wrong number of arguments for 'client|kill' command"),
		cmd("CLIENT KILL id 10 wrong_arg", "(error) ERR syntax error"),
		cmd("CLIENT KILL id str", "(error) ERR client-id should be greater than 0"),
		cmd("CLIENT KILL id 0", "(error) ERR client-id should be greater than 0"),
		cmd("CLIENT KILL type wrong_type", "(error) ERR Unknown client type 'wrong_type'"),
		cmd("CLIENT KILL user wrong_user", "(error) ERR No such user 'wrong_user'"),
		cmd("CLIENT KILL skipme yes_or_no", "(error) ERR syntax error"),
		cmd("CLIENT KILL 127.0.0.1:1", "(error) ERR No such client"),
		cmd("CLIENT KILL id 999999", "(integer) 0"),
		cmd("CLIENT KILL type replica", "(integer) 0"),
	})
	// By ID: only a.
	aid := strings.TrimPrefix(a.do("CLIENT", "ID"), "(integer) ")
	run(t, r, []step{{[]string{"CLIENT", "KILL", "ID", aid}, "(integer) 1"}})
	a.send("PING")
	a.expectClosed()
	if got := b.do("PING"); got != "PONG" {
		t.Fatalf("another connection got %s after a's kill", got)
	}
	// The old form: b by its address.
	info := b.do("CLIENT", "INFO")
	_, rest, _ := strings.Cut(info, "addr=")
	baddr, _, _ := strings.Cut(rest, " ")
	run(t, r, []step{{[]string{"CLIENT", "KILL", baddr}, "OK"}})
	b.send("PING")
	b.expectClosed()
	// SKIPME yes spares r; SKIPME no closes r after its reply.
	c, d := dial(t, addr), dial(t, addr)
	c.do("PING")
	d.do("PING")
	run(t, r, []step{cmd("CLIENT KILL SKIPME yes", "(integer) 2")})
	c.send("PING")
	c.expectClosed()
	d.send("PING")
	d.expectClosed()
	run(t, r, []step{cmd("CLIENT KILL SKIPME no", "(integer) 1")})
	r.send("PING")
	r.expectClosed()
}
