package gateway

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	_ "github.com/synod-dev/synod/protocol/esds" // the options under test are ESDS's
)

// lastReq returns the options of the backend's last n requests.
func lastRecords(t *testing.T, b *gatewaytest.MemBackend, n int) []gatewaytest.Record {
	t.Helper()
	log := b.Log()
	if len(log) < n {
		t.Fatalf("backend saw %d requests, want at least %d", len(log), n)
	}
	return log[len(log)-n:]
}

func TestESDSOptionsReachBackend(t *testing.T) {
	b := esdsBackend()
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)

	// Default: assigned op id "<client>-<seq>", no prev, not strict.
	if got := c.do("SET", "a", "1"); got != "OK" {
		t.Fatal(got)
	}
	r := lastRecords(t, b, 1)[0].Req
	want := fmt.Sprintf("%016x-%d", r.ID.Client, r.ID.Seq)
	if r.Opts.String("opid") != want || r.Opts.Bool("strict") || len(r.Opts.Get("prev")) != 0 {
		t.Fatalf("default options: %+v, want op id %s, not strict, no prev", r.Opts, want)
	}
	if got := c.do("SYNOD", "LASTID"); got != fmt.Sprintf("%q", want) {
		t.Fatalf("LASTID = %s, want %q", got, want)
	}
	first := want

	// PREV and OPID apply to the next data command only; PING in between
	// does not consume them.
	run(t, c, []step{
		cmd("SYNOD STRICT on", "OK"),
		cmd("SYNOD STRICT", `"on"`),
		{[]string{"SYNOD", "PREV", first, "other-op"}, "OK"},
		cmd("SYNOD OPID my-op-1", "OK"),
		cmd("SYNOD OPID", `"my-op-1"`),
		cmd("PING", "PONG"),
		cmd("INCR n", "(integer) 1"),
		cmd("SYNOD LASTID", `"my-op-1"`),
		cmd("SYNOD OPID", "(nil)"),
		cmd("SYNOD PREV", "(empty array)"),
		cmd("GET n", `"1"`),
	})
	recs := lastRecords(t, b, 2)
	incr, get := recs[0].Req, recs[1].Req
	if incr.Op.Kind != "incr" || incr.Opts.String("opid") != "my-op-1" || !incr.Opts.Bool("strict") || !slices.Equal(incr.Opts.Get("prev"), []string{first, "other-op"}) {
		t.Fatalf("INCR options: %+v", incr.Opts)
	}
	if get.Opts.String("opid") != fmt.Sprintf("%016x-%d", get.ID.Client, get.ID.Seq) || !get.Opts.Bool("strict") || len(get.Opts.Get("prev")) != 0 {
		t.Fatalf("GET after the pending options were consumed: %+v (strict stays on, prev and op id do not)", get.Opts)
	}

	// A multi-key command: every key's operation carries the prev set; LASTID
	// is the last key's operation.
	run(t, c, []step{
		cmd("SYNOD STRICT off", "OK"),
		cmd("SYNOD PREV my-op-1", "OK"),
		cmd("MGET a n x", "1) \"1\"\n2) \"1\"\n3) (nil)"),
	})
	recs = lastRecords(t, b, 3)
	var lastOp string
	for _, rec := range recs {
		if !slices.Equal(rec.Req.Opts.Get("prev"), []string{"my-op-1"}) || rec.Req.Opts.Bool("strict") {
			t.Errorf("MGET %s options: %+v", rec.Req.Op.Key, rec.Req.Opts)
		}
		if rec.Req.Op.Key == "x" {
			lastOp = rec.Req.Opts.String("opid")
			if want := fmt.Sprintf("%016x-%d", rec.Req.ID.Client, rec.Req.ID.Seq); lastOp != want {
				t.Errorf("MGET x op id %q, want %q", lastOp, want)
			}
		}
	}
	if got := c.do("SYNOD", "LASTID"); got != fmt.Sprintf("%q", lastOp) {
		t.Errorf("LASTID after MGET = %s, want %q (the last key's)", got, lastOp)
	}

	// SYNOD OP is a data command too.
	run(t, c, []step{
		cmd("SYNOD OPID op-x", "OK"),
		cmd("SYNOD OP append a z", "(integer) 2"),
	})
	if r := lastRecords(t, b, 1)[0].Req; r.Opts.String("opid") != "op-x" {
		t.Errorf("SYNOD OP op id %q, want op-x", r.Opts.String("opid"))
	}

	// Options are per connection.
	c2 := dial(t, addr)
	c.do("SYNOD", "STRICT", "on")
	c2.do("GET", "a")
	if r := lastRecords(t, b, 1)[0].Req; r.Opts.Bool("strict") {
		t.Errorf("strict leaked to another connection: %+v", r.Opts)
	}
	if got := c2.do("SYNOD", "LASTID"); got != fmt.Sprintf("%q", lastRecords(t, b, 1)[0].Req.Opts.String("opid")) {
		t.Errorf("second connection's LASTID = %s", got)
	}
}

func TestESDSBadInput(t *testing.T) {
	b := esdsBackend()
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	if got := c.do("SYNOD", "LASTID"); got != "(nil)" {
		t.Errorf("LASTID before any operation = %s", got)
	}
	for _, s := range []struct {
		args []string
		want string // prefix of the error
	}{
		{[]string{"SYNOD", "STRICT", "maybe"}, "(error) ERR option strict: \"maybe\" is not on or off"},
		{[]string{"SYNOD", "STRICT", "on", "off"}, "(error) ERR wrong number of arguments"},
		{[]string{"SYNOD", "OPID", "0123456789abcdef-7"}, "(error) ERR option opid: "},
		{[]string{"SYNOD", "OPID", "has space"}, "(error) ERR option opid: "},
		{[]string{"SYNOD", "OPID", strings.Repeat("x", 257)}, "(error) ERR option opid: "},
		{[]string{"SYNOD", "OPID", "a", "b"}, "(error) ERR wrong number of arguments"},
		{[]string{"SYNOD", "PREV", "ok", ""}, "(error) ERR option prev: "},
		{[]string{"SYNOD", "LASTID", "x"}, "(error) ERR wrong number of arguments"},
	} {
		if got := c.do(s.args...); !strings.HasPrefix(got, s.want) {
			t.Errorf("%q: got %s, want %s...", s.args, got, s.want)
		}
	}
	big := []string{"SYNOD", "PREV"}
	for i := 0; i <= 1024; i++ {
		big = append(big, fmt.Sprint("p", i))
	}
	if got := c.do(big...); !strings.HasPrefix(got, "(error) ERR option prev: ") {
		t.Errorf("oversized prev set: %s", got)
	}
	if n := len(b.Log()); n != 0 {
		t.Fatalf("refused options reached the backend: %d requests", n)
	}
	// An assigned id is fine in a prev set (that is what LASTID is for).
	run(t, c, []step{
		cmd("SYNOD PREV 0123456789abcdef-7", "OK"),
		cmd("SYNOD OPID mine", "OK"),
		// Several operations cannot share one op id: refused, options discarded.
		{[]string{"DEL", "a", "b"}, "(error) ERR option opid names one operation, but DEL with 2 keys runs one per key; the pending options were discarded"},
		cmd("SYNOD OPID", "(nil)"),
		cmd("SYNOD PREV", "(empty array)"),
		cmd("DEL a", "(integer) 0"),
	})
	if r := lastRecords(t, b, 1)[0].Req; r.Opts.String("opid") == "mine" || len(r.Opts.Get("prev")) != 0 {
		t.Errorf("discarded options reached the backend: %+v", r.Opts)
	}
	if n := len(b.Log()); n != 1 {
		t.Errorf("backend saw %d requests, want 1 (the refused DEL ran nothing)", n)
	}
	// A pending OPID with a single-key DEL is fine.
	run(t, c, []step{cmd("SYNOD OPID mine", "OK"), cmd("DEL a", "(integer) 0")})
	if r := lastRecords(t, b, 1)[0].Req; r.Opts.String("opid") != "mine" {
		t.Errorf("single-key DEL op id %q", r.Opts.String("opid"))
	}
}

// esdsBackend is an in-memory backend whose one namespace claims the esds
// protocol, so that the gateway offers ESDS's request options.
func esdsBackend() *gatewaytest.MemBackend {
	return gatewaytest.New(config.Namespace{Name: "default", Protocol: "esds", Service: "kv"})
}

func TestOptionsGeneric(t *testing.T) {
	b := esdsBackend()
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	run(t, c, []step{
		cmd("SYNOD OPT strict", `"off"`),
		cmd("SYNOD OPT strict on", "OK"),
		cmd("SYNOD OPT prev a b", "OK"),
		cmd("SYNOD OPT prev", "1) \"a\"\n2) \"b\""),
		cmd("SYNOD OPT nosuch 1", "(error) ERR protocol esds has no request option \"nosuch\" (it has: opid, prev, strict)"),
		cmd("SET k v", "OK"),
		cmd("SYNOD LASTOPT strict", `"on"`),
		cmd("SYNOD LASTOPT prev", "1) \"a\"\n2) \"b\""),
		cmd("SYNOD OPTRESET", "OK"),
		cmd("SET k w", "OK"),
		cmd("SYNOD LASTOPT strict", `"off"`),
		// Names are case-insensitive everywhere; a typo is refused, not ignored.
		cmd("SYNOD OPT STRICT on", "OK"),
		cmd("SYNOD OPTRESET STRICT", "OK"),
		cmd("SYNOD OPT strict", `"off"`),
		cmd("SYNOD OPTRESET nosuch", "(error) ERR protocol esds has no request option \"nosuch\" (it has: opid, prev, strict)"),
		cmd("SET k x", "OK"),
		cmd("SYNOD LASTOPT STRICT", `"off"`),
	})
	if r := lastRecords(t, b, 1)[0].Req; r.Opts.Bool("strict") || r.Opts.Get("prev") != nil {
		t.Fatalf("options after OPTRESET: %+v", r.Opts)
	}
	// A namespace whose protocol declares no options refuses them.
	b2 := gatewaytest.KV()
	_, addr2 := startServer(t, b2, ServerOptions{})
	c2 := dial(t, addr2)
	run(t, c2, []step{cmd("SYNOD OPT strict on", "(error) ERR protocol memory has no request options")})
}
