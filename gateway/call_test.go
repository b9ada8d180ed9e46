package gateway

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/gateway/gatewaytest"
	_ "github.com/synod-dev/synod/protocol/abd"
	_ "github.com/synod-dev/synod/protocol/paxos"
	"github.com/synod-dev/synod/service"
)

// SYNOD CALL (call.go): a nested request under the caller's id, answered
// with the encoded result; a copy of the id gets the first answer; a
// namespace whose protocol does not serve nested requests refuses it with
// the reason, and runs nothing.
func TestSynodCall(t *testing.T) {
	_, addr := startServer(t, gatewaytest.MustAutomaton(t, "paxos", "kv"), ServerOptions{})
	c := dial(t, addr)
	call := func(args ...string) service.Result {
		t.Helper()
		c.send(append([]string{"SYNOD", "CALL"}, args...)...)
		rep := c.reply()
		r, err := service.DecodeResultBytes(rep.Str)
		if err != nil {
			t.Fatalf("SYNOD CALL %q: reply %s does not decode: %v", args, rep, err)
		}
		return r
	}
	if r := call("9", "1", "incr", "k", "1"); r.Type != service.ResultInt || r.Int != 1 {
		t.Fatalf("first call: %v", r)
	}
	if r := call("9", "1", "incr", "k", "1"); r.Type != service.ResultInt || r.Int != 1 {
		t.Fatalf("a copy of id 9:1 answered %v, want the first answer 1", r)
	}
	if r := call("9", "2", "incr", "k", "1"); r.Int != 2 {
		t.Fatalf("id 9:2 answered %v, want 2", r)
	}
	if r := call("9", "3", "get", "k"); r.Type != service.ResultBytes || string(r.Bytes) != "2" {
		t.Fatalf("nested read answered %v", r)
	}
	if r := call("9", "4", "incr"); !r.IsErr() {
		t.Fatalf("an invalid operation answered %v, want its error result", r)
	}
	run(t, c, []step{
		cmd("SYNOD CALL 9 1", "(error) ERR wrong number of arguments for 'synod|call' command"),
		cmd("SYNOD CALL 0 1 get k", "(error) ERR SYNOD CALL: client and seq must be unsigned integers, client not 0"),
		cmd("SYNOD CALL x 1 get k", "(error) ERR SYNOD CALL: client and seq must be unsigned integers, client not 0"),
		cmd("GET k", `"2"`),
	})

	_, addr = startServer(t, gatewaytest.MustAutomaton(t, "abd", "kv"), ServerOptions{})
	u := dial(t, addr)
	if got := u.do("SYNOD", "CALL", "9", "1", "set", "k", "v"); !strings.Contains(got, "runs abd, which does not serve nested requests") {
		t.Fatalf("abd: %s", got)
	}
	if got := u.do("GET", "k"); got != "(nil)" {
		t.Fatalf("a refused call ran: k = %s", got)
	}
}
