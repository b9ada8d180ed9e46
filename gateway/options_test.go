package gateway

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/synod-dev/synod/gateway/gatewaytest"
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
	b := gatewaytest.KV()
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)

	// Default: assigned op id "<client>-<seq>", no prev, not strict.
	if got := c.do("SET", "a", "1"); got != "OK" {
		t.Fatal(got)
	}
	r := lastRecords(t, b, 1)[0].Req
	want := fmt.Sprintf("%016x-%d", r.ID.Client, r.ID.Seq)
	if r.Opts.OpID != want || r.Opts.Strict || len(r.Opts.Prev) != 0 {
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
	if incr.Op.Kind != "incr" || incr.Opts.OpID != "my-op-1" || !incr.Opts.Strict || !slices.Equal(incr.Opts.Prev, []string{first, "other-op"}) {
		t.Fatalf("INCR options: %+v", incr.Opts)
	}
	if get.Opts.OpID != fmt.Sprintf("%016x-%d", get.ID.Client, get.ID.Seq) || !get.Opts.Strict || len(get.Opts.Prev) != 0 {
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
	var maxSeq uint64
	var lastOp string
	for _, rec := range recs {
		if !slices.Equal(rec.Req.Opts.Prev, []string{"my-op-1"}) || rec.Req.Opts.Strict {
			t.Errorf("MGET %s options: %+v", rec.Req.Op.Key, rec.Req.Opts)
		}
		if rec.Req.ID.Seq > maxSeq {
			maxSeq, lastOp = rec.Req.ID.Seq, rec.Req.Opts.OpID
		}
	}
	if got := c.do("SYNOD", "LASTID"); got != fmt.Sprintf("%q", lastOp) || !strings.HasSuffix(lastOp, fmt.Sprintf("-%d", maxSeq)) {
		t.Errorf("LASTID after MGET = %s, want %q (sequence %d)", got, lastOp, maxSeq)
	}

	// SYNOD OP is a data command too.
	run(t, c, []step{
		cmd("SYNOD OPID op-x", "OK"),
		cmd("SYNOD OP append a z", "(integer) 2"),
	})
	if r := lastRecords(t, b, 1)[0].Req; r.Opts.OpID != "op-x" {
		t.Errorf("SYNOD OP op id %q, want op-x", r.Opts.OpID)
	}

	// Options are per connection.
	c2 := dial(t, addr)
	c.do("SYNOD", "STRICT", "on")
	c2.do("GET", "a")
	if r := lastRecords(t, b, 1)[0].Req; r.Opts.Strict {
		t.Errorf("strict leaked to another connection: %+v", r.Opts)
	}
	if got := c2.do("SYNOD", "LASTID"); got != fmt.Sprintf("%q", lastRecords(t, b, 1)[0].Req.Opts.OpID) {
		t.Errorf("second connection's LASTID = %s", got)
	}
}

func TestESDSBadInput(t *testing.T) {
	b := gatewaytest.KV()
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	if got := c.do("SYNOD", "LASTID"); got != "(nil)" {
		t.Errorf("LASTID before any operation = %s", got)
	}
	for _, s := range []struct {
		args []string
		want string // prefix of the error
	}{
		{[]string{"SYNOD", "STRICT", "maybe"}, "(error) ERR SYNOD STRICT takes 'on' or 'off'"},
		{[]string{"SYNOD", "STRICT", "on", "off"}, "(error) ERR wrong number of arguments"},
		{[]string{"SYNOD", "OPID", "0123456789abcdef-7"}, "(error) ERR op id \"0123456789abcdef-7\" has the form of an assigned id"},
		{[]string{"SYNOD", "OPID", "has space"}, "(error) ERR op id \"has space\": only printable"},
		{[]string{"SYNOD", "OPID", strings.Repeat("x", MaxOpIDLen+1)}, "(error) ERR op id too long"},
		{[]string{"SYNOD", "OPID", "a", "b"}, "(error) ERR wrong number of arguments"},
		{[]string{"SYNOD", "PREV", "ok", ""}, "(error) ERR prev: op id is empty"},
		{[]string{"SYNOD", "LASTID", "x"}, "(error) ERR wrong number of arguments"},
	} {
		if got := c.do(s.args...); !strings.HasPrefix(got, s.want) {
			t.Errorf("%q: got %s, want %s...", s.args, got, s.want)
		}
	}
	big := []string{"SYNOD", "PREV"}
	for i := 0; i <= MaxPrevIDs; i++ {
		big = append(big, fmt.Sprint("p", i))
	}
	if got := c.do(big...); !strings.HasPrefix(got, "(error) ERR prev set too large") {
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
		{[]string{"DEL", "a", "b"}, "(error) ERR SYNOD OPID names one operation, but DEL with 2 keys runs one per key; the pending op id and prev set were discarded"},
		cmd("SYNOD OPID", "(nil)"),
		cmd("SYNOD PREV", "(empty array)"),
		cmd("DEL a", "(integer) 0"),
	})
	if r := lastRecords(t, b, 1)[0].Req; r.Opts.OpID == "mine" || len(r.Opts.Prev) != 0 {
		t.Errorf("discarded options reached the backend: %+v", r.Opts)
	}
	if n := len(b.Log()); n != 1 {
		t.Errorf("backend saw %d requests, want 1 (the refused DEL ran nothing)", n)
	}
	// A pending OPID with a single-key DEL is fine.
	run(t, c, []step{cmd("SYNOD OPID mine", "OK"), cmd("DEL a", "(integer) 0")})
	if r := lastRecords(t, b, 1)[0].Req; r.Opts.OpID != "mine" {
		t.Errorf("single-key DEL op id %q", r.Opts.OpID)
	}
}
