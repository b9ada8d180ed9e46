package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/resp"
	"github.com/synod-dev/synod/service"
)

func startServer(t *testing.T, b Backend, opts ServerOptions) (*Server, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(b, opts)
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve returned %v after Close", err)
		}
	})
	return s, l.Addr().String()
}

type tconn struct {
	t  *testing.T
	nc net.Conn
	r  *resp.Reader
	w  *resp.Writer
}

func dial(t *testing.T, addr string) *tconn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(20 * time.Second)) // renewed at each reply (deadline)
	t.Cleanup(func() { nc.Close() })
	return &tconn{t: t, nc: nc, r: resp.NewReader(bufio.NewReader(nc), resp.Limits{}), w: resp.NewWriter(nc)}
}

func (c *tconn) send(args ...string) {
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	c.w.WriteCommand(b)
}

func (c *tconn) reply() resp.Reply {
	c.t.Helper()
	c.deadline()
	if err := c.w.Flush(); err != nil {
		c.t.Fatal(err)
	}
	r, err := c.r.ReadReply()
	if err != nil {
		c.t.Fatalf("reading reply: %v", err)
	}
	return r
}

// deadline bounds the next reply's wait: 60 s for each reply, not for the
// connection's whole life (a script test of many commands, each slow under
// -race on a loaded machine, outlived a connection-wide deadline). 60 s:
// the endless-loop script alone (ScriptBudget Lua instructions) came close
// to 20 s under -race at load 30-38.
func (c *tconn) deadline() { c.nc.SetDeadline(time.Now().Add(60 * time.Second)) }

// budgetReply reads the reply of a command whose script runs to its
// instruction budget (service.ScriptBudget, 20 million Lua instructions,
// at every replica that runs it). That run is CPU-bound: about 20 s under
// -race at load 30, and past deadline's 60 s in go test -race -count=3
// ./gateway/... at load ~40 (TestScripts/unreplicated, TestScriptBusy,
// session 44). What the tests assert is that the run ends, with the
// budget's error, not how soon: the wait is bounded only against a run
// that never ends (10 minutes; the reply's time is logged).
func (c *tconn) budgetReply() resp.Reply {
	c.t.Helper()
	start := time.Now()
	if err := c.w.Flush(); err != nil {
		c.t.Fatal(err)
	}
	c.nc.SetDeadline(time.Now().Add(10 * time.Minute))
	r, err := c.r.ReadReply()
	if err != nil {
		c.t.Fatalf("reading the reply of a run to the script budget (after %v): %v", time.Since(start).Round(time.Millisecond), err)
	}
	c.t.Logf("a run to the script budget answered %v after this read began", time.Since(start).Round(time.Millisecond))
	return r
}

// do sends one command and returns its reply in redis-cli's rendering.
func (c *tconn) do(args ...string) string {
	c.t.Helper()
	c.send(args...)
	return c.reply().String()
}

// expectClosed checks that the server closes the connection.
func (c *tconn) expectClosed() {
	c.t.Helper()
	c.deadline()
	c.w.Flush()
	if r, err := c.r.ReadReply(); err == nil {
		c.t.Fatalf("expected the server to close the connection, got reply %s", r)
	}
}

type step struct {
	args []string
	want string
}

func run(t *testing.T, c *tconn, steps []step) {
	t.Helper()
	for _, s := range steps {
		if got := c.do(s.args...); got != s.want {
			t.Errorf("%q:\n got %s\nwant %s", s.args, got, s.want)
		}
	}
}

func cmd(s string, want string) step { return step{strings.Fields(s), want} }

func TestKVCommands(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	c := dial(t, addr)
	run(t, c, []step{
		cmd("GET k", "(nil)"),
		cmd("SET k v1", "OK"),
		cmd("get k", `"v1"`),
		cmd("SET k v2 NX", "(nil)"),
		cmd("SET k v2 xx", "OK"),
		cmd("SET n 1 XX", "(nil)"),
		cmd("SET n 1 NX", "OK"),
		cmd("TOUCH k nope n k", "(integer) 3"),
		cmd("TOUCH", "(error) ERR wrong number of arguments for 'touch' command"),
		cmd("SET k v NX XX", "(error) ERR syntax error"),
		cmd("SET k v FOO", "(error) ERR syntax error"),
		cmd("SET k v EX", "(error) ERR syntax error"),
		cmd("SET k v EX x", "(error) ERR value is not an integer or out of range"),
		cmd("SET k v EX 0", "(error) ERR invalid expire time in 'set' command"),
		cmd("SET k v EX 1 PX 1", "(error) ERR syntax error"),
		cmd("SET k v KEEPTTL EX 1", "(error) ERR syntax error"),
		cmd("GET k", `"v2"`),
		cmd("SETNX k x", "(integer) 0"),
		cmd("SETNX fresh x", "(integer) 1"),
		cmd("EXISTS k n missing k", "(integer) 3"),
		cmd("MGET k missing n", "1) \"v2\"\n2) (nil)\n3) \"1\""),
		cmd("INCR n", "(integer) 2"),
		cmd("INCRBY n 40", "(integer) 42"),
		cmd("DECR n", "(integer) 41"),
		cmd("DECRBY n 50", "(integer) -9"),
		cmd("INCRBY n x", "(error) ERR value is not an integer or out of range"),
		cmd("DECRBY n -9223372036854775808", "(error) ERR decrement would overflow"),
		cmd("INCR k", "(error) ERR value is not an integer or out of range"),
		cmd("SET big 9223372036854775807", "OK"),
		cmd("INCR big", "(error) ERR increment or decrement would overflow"),
		cmd("APPEND a hello", "(integer) 5"),
		cmd("APPEND a world", "(integer) 10"),
		cmd("GET a", `"helloworld"`),
		cmd("DEL k n missing", "(integer) 2"),
		cmd("EXISTS k n", "(integer) 0"),
		cmd("GET", "(error) ERR wrong number of arguments for 'get' command"),
		cmd("SET k", "(error) ERR wrong number of arguments for 'set' command"),
		cmd("INCRBY k", "(error) ERR wrong number of arguments for 'incrby' command"),
		cmd("FOO a b", "(error) ERR unknown command 'FOO', with args beginning with: 'a' 'b' "),
		cmd("XLEN s", "(integer) 0"),
	})
}

func TestConnectionCommands(t *testing.T) {
	b := gatewaytest.New(
		config.Namespace{Name: "main", Protocol: "p", Service: "kv"},
		config.Namespace{Name: "other", Protocol: "q", Service: "kv"},
	)
	_, addr := startServer(t, b, ServerOptions{MaxClients: 77})
	c := dial(t, addr)
	run(t, c, []step{
		cmd("PING", "PONG"),
		cmd("PING hi", `"hi"`),
		cmd("PING a b", "(error) ERR wrong number of arguments for 'ping' command"),
		cmd("ECHO x", `"x"`),
		cmd("SELECT 0", "OK"),
		cmd("SELECT 1", "(error) ERR DB index is out of range: Synod has no numbered databases; choose a namespace with SYNOD NS <name>"),
		cmd("SELECT x", "(error) ERR value is not an integer or out of range"),
		cmd("CONFIG GET save", "1) \"save\"\n2) \"\""),
		cmd("CONFIG GET appendonly", "1) \"appendonly\"\n2) \"no\""),
		cmd("CONFIG GET maxc*", "1) \"maxclients\"\n2) \"77\""),
		cmd("CONFIG GET nothing", "(empty array)"),
		cmd("CONFIG SET save x", "(error) ERR CONFIG SET failed (possibly related to argument 'save') - Invalid save parameters"),
		step{[]string{"CONFIG", "SET", "save", ""}, "OK"},
		cmd("CONFIG SET appendonly no", "OK"),
		cmd("CONFIG SET appendonly yes", "(error) ERR CONFIG SET failed (possibly related to argument 'appendonly') - Synod's persistence is its replicated log, set by the cluster file's durability field (this node: unknown, which is appendonly no); it cannot be changed by CONFIG SET"),
		cmd("CONFIG SET nosuch 1", "(error) ERR CONFIG SET failed (possibly related to argument 'nosuch') - Synod sets only maxclients, client-output-buffer-limit, proto-max-bulk-len, max-pipeline, maxmemory, save, notify-keyspace-events and the encoding tunables (configure the cluster file for the rest)"),
		cmd("CONFIG GET hash-max-ziplist-entries", "1) \"hash-max-ziplist-entries\"\n2) \"128\""),
		cmd("CONFIG SET hash-max-ziplist-entries 7 zset-max-listpack-value 1k", "OK"),
		cmd("CONFIG GET hash-max-listpack-entries", "1) \"hash-max-listpack-entries\"\n2) \"7\""),
		cmd("CONFIG GET zset-max-ziplist-value", "1) \"zset-max-ziplist-value\"\n2) \"1000\""),
		cmd("CONFIG SET list-compress-depth -1", "(error) ERR CONFIG SET failed (possibly related to argument 'list-compress-depth') - argument must be between 0 and 2147483647 inclusive"),
		cmd("CONFIG SET set-max-intset-entries 10 maxclients 0", "(error) ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument couldn't be parsed into an integer or is out of range: maxclients: 0 must be 1-1048576"),
		cmd("CONFIG GET set-max-intset-entries", "1) \"set-max-intset-entries\"\n2) \"512\""),
		cmd("CONFIG SET set-max-intset-entries x", "(error) ERR CONFIG SET failed (possibly related to argument 'set-max-intset-entries') - argument couldn't be parsed into an integer"),
		cmd("CONFIG SET maxclients 0", "(error) ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument couldn't be parsed into an integer or is out of range: maxclients: 0 must be 1-1048576"),
		cmd("CONFIG GET maxc*", "1) \"maxclients\"\n2) \"77\""),
		cmd("CONFIG SET maxclients 78 max-pipeline 0", "(error) ERR CONFIG SET failed (possibly related to argument 'max-pipeline') - argument couldn't be parsed into an integer or is out of range: max-pipeline: 0 must be 1-1048576"),
		cmd("CONFIG GET maxc*", "1) \"maxclients\"\n2) \"77\""),
		cmd("CONFIG SET maxclients 78 max-pipeline 2k", "OK"),
		cmd("CONFIG GET max*", " 1) \"max-pipeline\"\n 2) \"2000\"\n 3) \"maxclients\"\n 4) \"78\"\n 5) \"maxmemory\"\n 6) \"0\"\n 7) \"maxmemory-clients\"\n 8) \"0\"\n 9) \"maxmemory-policy\"\n10) \"noeviction\"\n11) \"maxmemory-samples\"\n12) \"5\""),
		step{[]string{"CONFIG", "SET", "client-output-buffer-limit", "normal 1mb 0 0"}, "OK"},
		cmd("CONFIG GET client-output-buffer-limit", "1) \"client-output-buffer-limit\"\n2) \"normal 1048576 0 0 replica 0 0 0 pubsub 1048576 0 0\""),
		step{[]string{"CONFIG", "SET", "client-output-buffer-limit", "normal 1mb 1mb 60"}, "(error) ERR CONFIG SET failed (possibly related to argument 'client-output-buffer-limit') - Synod has no soft output buffer limit: give soft limit and seconds as 0"},
		cmd("CONFIG SET proto-max-bulk-len 100", "(error) ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - argument couldn't be parsed into an integer or is out of range: proto-max-bulk-len: 100 must be 1024-8389632 bytes (the largest value Synod stores, plus 1kb)"),
		cmd("CONFIG SET maxclients 77", "OK"),
		cmd("CLIENT GETNAME", "(nil)"),
		cmd("CLIENT SETNAME worker-1", "OK"),
		cmd("CLIENT GETNAME", `"worker-1"`),
		step{[]string{"CLIENT", "SETNAME", "a b"}, "(error) ERR Client names cannot contain spaces, newlines or special characters."},
		cmd("CLIENT SETINFO LIB-NAME go-synod", "OK"),
		cmd("CLIENT SETINFO LIB-VER 1.0", "OK"),
		cmd("CLIENT SETINFO color red", "(error) ERR Unrecognized option 'color'"),
		cmd("CLIENT NOPE", "(error) ERR unknown subcommand 'NOPE'. Try CLIENT HELP."),
		cmd("CLIENT SETNAME", "(error) ERR wrong number of arguments for 'client|setname' command"),
		cmd("COMMAND DOCS nosuch", "(empty array)"),
		cmd("COMMAND DOCS hgetall", "1) \"hgetall\"\n2) 1) \"summary\"\n   2) \"Redis's HGETALL, mapped onto the namespace service's operations (see SYNOD HELP).\"\n   3) \"since\"\n   4) \"1.0.0\"\n   5) \"group\"\n   6) \"hash\""),
		cmd("COMMAND COUNT", fmt.Sprintf("(integer) %d", len(commands))),
		cmd("COMMAND INFO nope", "1) (nil)"),
		cmd("COMMAND GETKEYS ZUNIONSTORE dst 2 a b WEIGHTS 1 2", "1) \"dst\"\n2) \"a\"\n3) \"b\""),
		cmd("COMMAND GETKEYS ZINTER 1 a WITHSCORES", `1) "a"`),
		cmd("COMMAND GETKEYS ZDIFFSTORE dst 3 a", "(error) ERR Invalid arguments specified for command"),
		cmd("COMMAND LIST bad_arg", "(error) ERR syntax error"),
		cmd("COMMAND LIST FILTERBY bad_arg", "(error) ERR syntax error"),
		cmd("COMMAND LIST FILTERBY bad_arg bad_arg2", "(error) ERR syntax error"),
		cmd("COMMAND LIST FILTERBY PATTERN set", `1) "set"`),
		cmd("COMMAND LIST FILTERBY pattern HGETA*", `1) "hgetall"`),
		cmd("COMMAND LIST FILTERBY PATTERN nosuch*", "(empty array)"),
		cmd("COMMAND LIST FILTERBY MODULE nosuch", "(empty array)"),
		cmd("COMMAND LIST FILTERBY ACLCAT non_existing_category", "(empty array)"),
		cmd("SYNOD NS", `"main"`),
		cmd("SYNOD NS nope", "(error) ERR unknown namespace 'nope' (namespaces: main, other)"),
		cmd("SET k in-main", "OK"),
		cmd("SYNOD NS other", "OK"),
		cmd("SYNOD NS", `"other"`),
		cmd("GET k", "(nil)"),
		cmd("SYNOD NS main", "OK"),
		cmd("GET k", `"in-main"`),
		cmd("SYNOD READ", `"linearizable"`),
		cmd("SYNOD READ local", "OK"),
		cmd("SYNOD READ", `"local"`),
		cmd("SYNOD READ stale", `(error) ERR unknown read mode "stale" (want one of [linearizable regular local log quorum lease])`),
		cmd("SYNOD NAMESPACES", "1) 1) \"main\"\n   2) \"p\"\n   3) \"kv\"\n2) 1) \"other\"\n   2) \"q\"\n   3) \"kv\""),
		cmd("SYNOD OP cas k in-main swapped", "(integer) 1"),
		cmd("SYNOD OP cas k in-main again", "(integer) 0"),
		cmd("SYNOD OP frob k", `(error) ERR unknown kv operation "frob"`),
		cmd("SYNOD WHAT", "(error) ERR unknown subcommand 'WHAT'. Try SYNOD HELP."),
		cmd("GET k", `"swapped"`),
	})
	id := c.do("CLIENT", "ID")
	info := c.do("CLIENT", "INFO")
	for _, want := range []string{"id=" + strings.TrimPrefix(id, "(integer) ") + " ", "name=worker-1", "lib-name=go-synod", "ns=main", "read=local", "resp=2", "cmd=client"} {
		if !strings.Contains(info, want) {
			t.Errorf("CLIENT INFO %s lacks %q", info, want)
		}
	}
	// COMMAND INFO get: name, arity, flags, key positions.
	if got := c.do("COMMAND", "INFO", "get"); !strings.HasPrefix(got, "1)  1) \"get\"\n    2) (integer) 2\n    3) 1) readonly\n       2) fast\n    4) (integer) 1") {
		t.Errorf("COMMAND INFO get:\n%s", got)
	}
	// INFO: our sections, the backend's, and section selection.
	all := c.do("INFO")
	for _, want := range []string{"# Server", "redis_version:7.0.0", "# Clients", "connected_clients:1", "maxclients:77",
		"# Keyspace", "# Synod", "ns_other:protocol=q,service=kv", "client_namespace:main", "client_read_mode:local",
		"namespaces:main,other", "# Memory", "backend:memory"} {
		if !strings.Contains(all, want) {
			t.Errorf("INFO lacks %q:\n%s", want, all)
		}
	}
	if only := c.do("INFO", "synod"); strings.Contains(only, "# Server") || !strings.Contains(only, "# Synod") {
		t.Errorf("INFO synod:\n%s", only)
	}
	// Redis's standard sections, as its info-command unit checks them:
	// commandstats (rejected_calls) only in all/everything or by name.
	for _, tc := range []struct {
		args       []string
		has, lacks []string
	}{
		{[]string{"INFO"}, []string{"used_cpu_user:", "used_memory:", "cluster_enabled:0", "role:master", "master_repl_offset:"}, []string{"rejected_calls"}},
		{[]string{"INFO", "default"}, []string{"used_cpu_user:"}, []string{"rejected_calls"}},
		{[]string{"INFO", "all"}, []string{"used_cpu_user:", "used_memory:", "cmdstat_info:calls=", "rejected_calls"}, nil},
		{[]string{"INFO", "cpu"}, []string{"used_cpu_sys_children:"}, []string{"used_memory", "# Server"}},
		{[]string{"INFO", "commandSTATS"}, []string{"rejected_calls"}, []string{"used_memory"}},
		{[]string{"INFO", "cpu", "default"}, []string{"used_cpu_user:", "master_repl_offset"}, []string{"rejected_calls"}},
	} {
		got := c.do(tc.args...)
		for _, w := range tc.has {
			if !strings.Contains(got, w) {
				t.Errorf("%v lacks %q", tc.args, w)
			}
		}
		for _, w := range tc.lacks {
			if strings.Contains(got, w) {
				t.Errorf("%v has %q", tc.args, w)
			}
		}
		if strings.Count(got, "used_cpu_user_children") > 1 {
			t.Errorf("%v repeats a section", tc.args)
		}
	}
	// Requests carry the read mode and namespace chosen on this connection.
	c.do("SET", "x", "1")
	c.do("SYNOD", "NS", "other")
	c.do("GET", "x")
	log := b.Log()
	last := log[len(log)-1]
	if last.NS != "other" || last.Req.Opts.Read != automaton.ReadLocal || last.Req.Op.Kind != "get" {
		t.Errorf("last request %+v", last)
	}
	if got := c.do("QUIT"); got != "OK" {
		t.Errorf("QUIT: %s", got)
	}
	c.expectClosed()
}

func TestRequestIDs(t *testing.T) {
	b := gatewaytest.KV()
	_, addr := startServer(t, b, ServerOptions{})
	c1, c2 := dial(t, addr), dial(t, addr)
	c1.do("SET", "a", "1")
	c1.do("MGET", "a", "b", "c")
	c2.do("GET", "a")
	c1.do("DEL", "a", "b")
	byClient := map[uint64][]uint64{}
	for _, r := range b.Log() {
		byClient[r.Req.ID.Client] = append(byClient[r.Req.ID.Client], r.Req.ID.Seq)
	}
	// c1 and c2, and c1's three lanes of MGET (DEL's two reuse two of them).
	if len(byClient) != 5 {
		t.Fatalf("want 5 client ids, got %v", byClient)
	}
	for id, seqs := range byClient {
		for i, s := range seqs {
			if s != uint64(i+1) {
				t.Errorf("client %x: sequence numbers %v arrived, not 1..%d in order", id, seqs, len(seqs))
				break
			}
		}
	}
}

func TestCounterNamespace(t *testing.T) {
	b := gatewaytest.New(config.Namespace{Name: "hits", Protocol: "p", Service: "counter"})
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	run(t, c, []step{
		cmd("GET anything", `"0"`),
		cmd("INCR x", "(integer) 1"),
		cmd("INCRBY y 10", "(integer) 11"),
		cmd("DECR z", "(integer) 10"),
		cmd("DECRBY z 4", "(integer) 6"),
		cmd("GET other", `"6"`),
		cmd("SET k v", "(error) ERR 'set' is not supported in namespace 'hits' (service counter supports GET, INCR, INCRBY, DECR, DECRBY)"),
		cmd("MGET a", "(error) ERR 'mget' is not supported in namespace 'hits' (service counter supports GET, INCR, INCRBY, DECR, DECRBY)"),
		step{[]string{"SYNOD", "OP", "add", "", "5"}, "(integer) 11"},
	})
	for _, r := range b.Log() {
		if r.Req.Op.Key != "" || (r.Req.Op.Kind != "read" && r.Req.Op.Kind != "add") {
			t.Errorf("counter got op %v", r.Req.Op)
		}
	}
}

func TestPipelining(t *testing.T) {
	b := gatewaytest.KV()
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	const n = 2000
	// Everything in one write, replies read afterwards: the server must keep
	// order and answer every command.
	var sb strings.Builder
	for i := 0; i < n; i++ {
		if i%2 == 0 {
			fmt.Fprintf(&sb, "*2\r\n$4\r\nINCR\r\n$3\r\nctr\r\n")
		} else {
			fmt.Fprintf(&sb, "GET ctr\r\n") // inline commands mix with multibulk
		}
	}
	if _, err := io.WriteString(c.nc, sb.String()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		r, err := c.r.ReadReply()
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		want := fmt.Sprintf("(integer) %d", i/2+1)
		if i%2 == 1 {
			want = fmt.Sprintf("%q", fmt.Sprint(i/2+1))
		}
		if r.String() != want {
			t.Fatalf("reply %d = %s, want %s", i, r, want)
		}
	}
}

func TestRESP3(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	c := dial(t, addr)
	c.send("HELLO", "3", "SETNAME", "r3")
	h := c.reply()
	if h.Kind != resp.Map || len(h.Elems) != 14 || string(h.Elems[4].Str) != "proto" || h.Elems[5].Int != 3 {
		t.Fatalf("HELLO 3 reply: %v %s", h.Kind, h)
	}
	c.send("GET", "missing")
	if r := c.reply(); r.Kind != resp.Null {
		t.Errorf("RESP3 null: got %v", r.Kind)
	}
	c.send("CONFIG", "GET", "save")
	if r := c.reply(); r.Kind != resp.Map || len(r.Elems) != 2 {
		t.Errorf("RESP3 CONFIG GET: %v %s", r.Kind, r)
	}
	c.send("SET", "k", "v")
	c.send("MGET", "k", "nope")
	c.reply()
	if r := c.reply(); r.Kind != resp.Array || r.Elems[1].Kind != resp.Null {
		t.Errorf("RESP3 MGET: %s", r)
	}
	if got := c.do("CLIENT", "GETNAME"); got != `"r3"` {
		t.Errorf("name set by HELLO: %s", got)
	}
	if got := c.do("HELLO", "4"); got != "(error) NOPROTO unsupported protocol version" {
		t.Errorf("HELLO 4: %s", got)
	}
	// Back to RESP2.
	c.send("HELLO", "2")
	if r := c.reply(); r.Kind != resp.Array || len(r.Elems) != 14 {
		t.Errorf("HELLO 2 reply: %v", r.Kind)
	}
	if _, err := io.WriteString(c.nc, "GET missing\r\n"); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 5)
	if _, err := io.ReadFull(c.nc, line); err != nil || string(line) != "$-1\r\n" {
		t.Errorf("RESP2 null after HELLO 2: %q %v", line, err)
	}
}

func TestAuth(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{Password: "s3cret"})
	c := dial(t, addr)
	run(t, c, []step{
		cmd("GET k", "(error) NOAUTH Authentication required."),
		cmd("PING", "(error) NOAUTH Authentication required."),
		cmd("NOPE", "(error) ERR unknown command 'NOPE', with args beginning with: "),
		cmd("AUTH wrong", "(error) WRONGPASS invalid username-password pair or user is disabled."),
		cmd("AUTH bob s3cret", "(error) WRONGPASS invalid username-password pair or user is disabled."),
		cmd("HELLO 3", "(error) NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"),
		cmd("GET k", "(error) NOAUTH Authentication required."),
		cmd("AUTH s3cret", "OK"),
		cmd("SET k v", "OK"),
		cmd("AUTH default s3cret", "OK"),
	})
	c2 := dial(t, addr)
	c2.send("HELLO", "3", "AUTH", "default", "s3cret")
	if r := c2.reply(); r.Kind != resp.Map {
		t.Fatalf("HELLO 3 AUTH: %s", r)
	}
	if got := c2.do("GET", "k"); got != `"v"` {
		t.Errorf("after HELLO AUTH: %s", got)
	}
	// No password configured: AUTH is an error, commands need none.
	_, open := startServer(t, gatewaytest.KV(), ServerOptions{})
	c3 := dial(t, open)
	if got := c3.do("AUTH", "x"); !strings.HasPrefix(got, "(error) ERR AUTH <password> called without any password configured") {
		t.Errorf("AUTH without password: %s", got)
	}
	// ... while AUTH user pass answers as Redis 7's nopass default user:
	// any password for "default", WRONGPASS for anyone else.
	run(t, c3, []step{
		cmd("AUTH bob x", "(error) WRONGPASS invalid username-password pair or user is disabled."),
		cmd("AUTH default anything", "OK"),
		cmd("HELLO 2 AUTH bob x", "(error) WRONGPASS invalid username-password pair or user is disabled."),
	})
	c3.send("HELLO", "2", "AUTH", "default", "x")
	if r := c3.reply(); r.Kind != resp.Array {
		t.Errorf("HELLO 2 AUTH default x: %s", r)
	}
}

// TestHelloWithoutVersion: HELLO without a version answers the server's
// description in the protocol in use and does not switch it.
func TestHelloWithoutVersion(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	c := dial(t, addr)
	for _, want := range []struct {
		hello []string
		kind  resp.Kind // Redis's server description: a map, an array in RESP2
		proto int64
	}{
		{[]string{"HELLO"}, resp.Array, 2},
		{[]string{"HELLO", "3"}, resp.Map, 3},
		{[]string{"HELLO"}, resp.Map, 3},
		{[]string{"HELLO", "2"}, resp.Array, 2},
		{[]string{"HELLO"}, resp.Array, 2},
	} {
		c.send(want.hello...)
		r := c.reply()
		var proto int64
		for i := 0; i+1 < len(r.Elems); i += 2 {
			if string(r.Elems[i].Str) == "proto" {
				proto = r.Elems[i+1].Int
			}
		}
		if r.Kind != want.kind || proto != want.proto {
			t.Errorf("%v: want a %v with proto %d, got %s", want.hello, want.kind, want.proto, r)
		}
	}
}

func TestGarbageClosesOnlyThatConnection(t *testing.T) {
	logger, logs := testLogger()
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{Logger: logger})
	good := dial(t, addr)
	good.do("SET", "k", "v")
	for _, garbage := range []string{
		"*1\r\n:5\r\n",
		"*2\r\n$3\r\nGET\r\n$x\r\n",
		"*abc\r\n",
		"SET k \"unbalanced\r\n",
		"*1\r\n$3\r\nGETXX",
		"\x00\x01\x02\x03\r\n*1\r\n$-5\r\n",
	} {
		bad := dial(t, addr)
		if _, err := io.WriteString(bad.nc, garbage); err != nil {
			t.Fatal(err)
		}
		var replies []string
		for {
			r, err := bad.r.ReadReply()
			if err != nil {
				break
			}
			replies = append(replies, r.String())
		}
		if len(replies) == 0 || !strings.HasPrefix(replies[len(replies)-1], "(error) ERR Protocol error: ") {
			t.Errorf("%q: replies %q, want a final protocol error and close", garbage, replies)
		}
		if got := good.do("GET", "k"); got != `"v"` {
			t.Fatalf("after garbage on another connection: %s", got)
		}
	}
	if !strings.Contains(logs(), "protocol error") {
		t.Errorf("protocol errors were not logged:\n%s", logs())
	}
}

func TestOversizedValues(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	// A value over the service limit but within the RESP bulk limit is
	// refused by validation, and the connection stays usable.
	c := dial(t, addr)
	big := strings.Repeat("x", service.MaxValueSize+1)
	if got := c.do("SET", "k", big); got != fmt.Sprintf("(error) ERR value too large (%d bytes, limit %d)", len(big), service.MaxValueSize) {
		t.Errorf("SET of %d bytes: %s", len(big), got)
	}
	if got := c.do("SET", "k", big[:service.MaxValueSize]); got != "OK" {
		t.Errorf("SET of the largest value: %.80s", got)
	}
	if got := c.do("APPEND", "k", "y"); got != "(error) ERR string exceeds maximum allowed size" {
		t.Errorf("APPEND past the limit: %s", got)
	}
	// A bulk length beyond the RESP limit closes the connection before the
	// body is read.
	c2 := dial(t, addr)
	fmt.Fprintf(c2.nc, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n", resp.MaxBulk+1)
	r, err := c2.r.ReadReply()
	if err != nil || r.String() != "(error) ERR Protocol error: invalid bulk length" {
		t.Errorf("oversized bulk: %s %v", r, err)
	}
	c2.expectClosed()
}

func TestRequestTimeoutAndBackendErrors(t *testing.T) {
	b := gatewaytest.KV()
	_, addr := startServer(t, b, ServerOptions{RequestTimeout: 50 * time.Millisecond})
	c := dial(t, addr)
	b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
		switch string(req.Op.Key) {
		case "slow":
			<-ctx.Done()
			return ctx.Err()
		case "down":
			return fmt.Errorf("wrapped: %w", ErrShuttingDown)
		case "broken":
			return errors.New("disk on fire")
		case "noquorum":
			return nil
		}
		return nil
	})
	got := c.do("SET", "slow", "1")
	if !strings.HasPrefix(got, "(error) TRYAGAIN request ") || !strings.Contains(got, "timed out after 50ms; its outcome is unknown") {
		t.Errorf("timeout: %s", got)
	}
	if got := c.do("GET", "down"); !strings.HasPrefix(got, "(error) TRYAGAIN node is shutting down") {
		t.Errorf("shutdown: %s", got)
	}
	if got := c.do("GET", "broken"); got != "(error) ERR disk on fire" {
		t.Errorf("backend error: %s", got)
	}
	if got := c.do("DEL", "a", "broken"); got != "(error) ERR disk on fire (DEL is not atomic across keys: the other keys were processed)" {
		t.Errorf("partial DEL: %s", got)
	}
	if got := c.do("MGET", "a", "slow"); !strings.HasPrefix(got, "(error) TRYAGAIN") {
		t.Errorf("MGET with a timeout: %s", got)
	}
	if got := c.do("PING"); got != "PONG" {
		t.Errorf("connection unusable after errors: %s", got)
	}
}

func TestMaxClientsAndClose(t *testing.T) {
	s, addr := startServer(t, gatewaytest.KV(), ServerOptions{MaxClients: 2})
	c1, c2 := dial(t, addr), dial(t, addr)
	c1.do("PING")
	c2.do("PING")
	c3 := dial(t, addr)
	if r, err := c3.r.ReadReply(); err != nil || r.String() != "(error) ERR max number of clients reached" {
		t.Errorf("third client: %s %v", r, err)
	}
	c3.expectClosed()
	// Closing a client frees its slot.
	c1.nc.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c4 := dial(t, addr)
		c4.send("PING")
		c4.w.Flush()
		if r, err := c4.r.ReadReply(); err == nil && r.String() == "PONG" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("slot not freed after a client disconnected")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Close ends open connections.
	s.Close()
	c2.expectClosed()
}

func TestNoNamespaces(t *testing.T) {
	_, addr := startServer(t, gatewaytest.New(), ServerOptions{})
	c := dial(t, addr)
	run(t, c, []step{
		cmd("PING", "PONG"),
		cmd("GET k", "(error) ERR this node serves no namespace"),
		cmd("SYNOD NS x", "(error) ERR unknown namespace 'x' (namespaces: )"),
	})
}
