package gateway

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/protocol/unreplicated"
)

// redisGlob turns a Tcl string-match pattern of Redis's test suite into a
// regexp (only * is used in these).
func redisGlob(p string) *regexp.Regexp {
	parts := strings.Split(p, "*")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	return regexp.MustCompile("(?s)^" + strings.Join(parts, ".*") + "$")
}

func (c *tconn) bulk(args ...string) string {
	c.t.Helper()
	c.send(args...)
	return string(c.reply().Str)
}

// TestClientListFormat: CLIENT LIST and CLIENT INFO lines in Redis 7.0's
// format, as Redis's introspection unit matches them (qbuf is the running
// command's 26 bytes), then Synod's fields; the ID and TYPE filters; the
// flags of a connection in MULTI (x, with its queue's length) and of a
// subscribed one (P, TYPE pubsub).
func TestClientListFormat(t *testing.T) {
	_, addr := startServer(t, gatewaytest.MustAutomaton(t, unreplicated.Name, "kv"), ServerOptions{})
	r, sub, m := dial(t, addr), dial(t, addr), dial(t, addr)
	pat := "id=* addr=*:* laddr=*:* fd=* name=* age=* idle=* flags=N db=* sub=0 psub=0 ssub=0 multi=-1 qbuf=26 qbuf-free=* argv-mem=* multi-mem=0 rbs=* rbp=* obl=0 oll=0 omem=0 tot-mem=* events=r cmd=client|%s user=* redir=-1 resp=2*"
	if got := r.bulk("CLIENT", "INFO"); !redisGlob(strings.ReplaceAll(pat, "%s", "info")).MatchString(got) {
		t.Errorf("CLIENT INFO:\n%s", got)
	}
	id := strings.TrimPrefix(r.do("CLIENT", "ID"), "(integer) ")
	mine := r.bulk("CLIENT", "LIST", "ID", id)
	if lines := strings.Split(strings.TrimSuffix(mine, "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "id="+id+" ") || !strings.Contains(lines[0], " cmd=client|list ") || !strings.Contains(lines[0], " argv-mem=13 ") {
		t.Errorf("CLIENT LIST ID %s:\n%s", id, mine)
	}
	sub.send("SUBSCRIBE", "news")
	sub.reply()
	mid := strings.TrimPrefix(m.do("CLIENT", "ID"), "(integer) ")
	m.do("MULTI")
	m.do("SET", "k", "v")
	m.do("GET", "k")
	list := r.bulk("CLIENT", "LIST")
	for _, line := range strings.Split(strings.TrimSuffix(list, "\n"), "\n") {
		switch {
		case strings.Contains(line, " cmd=subscribe "):
			if !strings.Contains(line, " flags=P ") || !strings.Contains(line, " sub=1 ") {
				t.Errorf("subscribed connection: %s", line)
			}
		case strings.Contains(line, " cmd=client|list "):
			if !redisGlob(strings.ReplaceAll(pat, "%s", "list")).MatchString(line) {
				t.Errorf("own line: %s", line)
			}
		default:
			if !strings.Contains(line, " flags=x ") || !strings.Contains(line, " multi=2 ") || !strings.Contains(line, " qbuf=0 ") {
				t.Errorf("connection in MULTI (%s): %s", mid, line)
			}
		}
	}
	if got := r.bulk("CLIENT", "LIST", "TYPE", "pubsub"); strings.Count(got, "\n") != 1 || !strings.Contains(got, " cmd=subscribe ") {
		t.Errorf("CLIENT LIST TYPE pubsub:\n%s", got)
	}
	if got := r.bulk("CLIENT", "LIST", "TYPE", "normal"); strings.Count(got, "\n") != 2 || strings.Contains(got, " cmd=subscribe ") {
		t.Errorf("CLIENT LIST TYPE normal:\n%s", got)
	}
	run(t, r, []step{
		cmd("CLIENT LIST TYPE master", `""`),
		cmd("CLIENT LIST TYPE nosuch", "(error) ERR Unknown client type 'nosuch'"),
		cmd("CLIENT LIST ID 0", "(error) ERR Invalid client ID"),
		cmd("CLIENT LIST ID", "(error) ERR syntax error"),
		cmd("CLIENT LIST bogus", "(error) ERR syntax error"),
		cmd("CLIENT KILL TYPE pubsub", "(integer) 1"),
	})
	sub.expectClosed()
}

// TestConfigResetStat: CONFIG RESETSTAT makes INFO's command and error
// statistics count from it; a command that answers an error counts as a
// failed call (Redis's failed_calls), an arity error as a rejected one.
func TestConfigResetStat(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	r := dial(t, addr)
	r.do("SET", "foo", "1")
	r.do("GET", "foo")
	run(t, r, []step{cmd("CONFIG RESETSTAT", "OK")})
	if got := r.bulk("INFO", "commandstats"); strings.Contains(got, "cmdstat_set") || strings.Contains(got, "cmdstat_get") {
		t.Errorf("after RESETSTAT:\n%s", got)
	}
	r.do("LPUSH", "foo", "x") // WRONGTYPE
	r.do("GET")               // arity
	got := r.bulk("INFO", "commandstats")
	if !regexp.MustCompile(`cmdstat_lpush:calls=1,usec=\d+,usec_per_call=[\d.]+,rejected_calls=0,failed_calls=1`).MatchString(got) ||
		!strings.Contains(got, "cmdstat_get:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0") {
		t.Errorf("INFO commandstats:\n%s", got)
	}
	if got := r.bulk("INFO", "errorstats"); !strings.Contains(got, "errorstat_WRONGTYPE:count=1") || !strings.Contains(got, "errorstat_ERR:count=1") {
		t.Errorf("INFO errorstats:\n%s", got)
	}
	run(t, r, []step{cmd("CONFIG RESETSTAT", "OK"), cmd("CONFIG RESETSTAT x", "(error) ERR wrong number of arguments for 'config|resetstat' command")})
	if got := r.bulk("INFO", "errorstats"); strings.Contains(got, "errorstat_WRONGTYPE") {
		t.Errorf("INFO errorstats after RESETSTAT:\n%s", got)
	}
}

// TestObjectIdletime: OBJECT IDLETIME counts from the last command that
// named the key through this node; TTL, TYPE, EXISTS and OBJECT do not
// count as an access, TOUCH and GET do; a key this node never saw counts
// from the table's start; a missing key answers nil; OBJECT FREQ answers
// Redis's no-LFU error.
func TestObjectIdletime(t *testing.T) {
	s, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	var clock atomic.Int64
	clock.Store(1000)
	s.acc.now = clock.Load
	s.acc.clear()
	r := dial(t, addr)
	r.do("SET", "foo", "bar")
	clock.Add(3)
	for _, c := range [][]string{{"TTL", "foo"}, {"TYPE", "foo"}, {"EXISTS", "foo"}, {"OBJECT", "ENCODING", "foo"}} {
		r.do(c...)
	}
	run(t, r, []step{cmd("OBJECT IDLETIME foo", "(integer) 3"), cmd("TOUCH foo nokey", "(integer) 1"), cmd("OBJECT IDLETIME foo", "(integer) 0")})
	clock.Add(5)
	run(t, r, []step{cmd("GET foo", `"bar"`), cmd("OBJECT IDLETIME foo", "(integer) 0"), cmd("OBJECT IDLETIME nokey", "(nil)"),
		cmd("OBJECT FREQ foo", "(error) ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."),
		cmd("OBJECT IDLETIME", "(error) ERR wrong number of arguments for 'object|idletime' command")})
	// Written through another node: this node's table never saw it.
	s.acc.clear()
	clock.Add(4)
	run(t, r, []step{cmd("OBJECT IDLETIME foo", "(integer) 4"), cmd("DEL foo", "(integer) 1"), cmd("SET foo x", "OK"), cmd("OBJECT IDLETIME foo", "(integer) 0")})
}

// TestServedSubcommands: every subcommand COMMAND LIST names is served
// (none answers the unknown-subcommand error); COMMAND LIST names them as
// container|sub, and FILTERBY ACLCAT and PATTERN filter them with the
// commands by Redis's categories, as Redis's introspection-2 unit checks.
func TestServedSubcommands(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	r := dial(t, addr)
	for name, subs := range servedSubcommands {
		if commands[name] == nil {
			t.Errorf("servedSubcommands names %s, which is no command", name)
		}
		for _, sub := range subs {
			if sub == "kill" && name == "client" {
				continue // CLIENT KILL with no filter: arity error, checked in TestClientKill
			}
			got := r.do(name, sub)
			if strings.Contains(got, "unknown subcommand '") {
				t.Errorf("%s %s is listed but answers %s", name, sub, got)
			}
			if redisCategories[name+"|"+sub] == nil {
				t.Errorf("%s|%s is no Redis 7.0 subcommand", name, sub)
			}
		}
	}
	list := func(args ...string) map[string]bool {
		r.send(append([]string{"COMMAND", "LIST"}, args...)...)
		out := map[string]bool{}
		for _, e := range r.reply().Elems {
			out[string(e.Str)] = true
		}
		return out
	}
	all := list()
	for _, want := range []string{"set", "client", "client|list", "config|get"} {
		if !all[want] {
			t.Errorf("COMMAND LIST lacks %s", want)
		}
	}
	if all["client|pause"] || all["acl|setuser"] {
		t.Errorf("COMMAND LIST names a subcommand Synod does not serve")
	}
	if s := list("FILTERBY", "ACLCAT", "scripting"); !s["eval"] || !s["script|kill"] || s["set"] {
		t.Errorf("FILTERBY ACLCAT scripting: %v", s)
	}
	if s := list("FILTERBY", "PATTERN", "config|*re*"); !s["config|resetstat"] || !s["config|rewrite"] || s["config|get"] {
		t.Errorf("FILTERBY PATTERN config|*re*: %v", s)
	}
	if s := list("FILTERBY", "PATTERN", "cl*help"); !s["client|help"] || !s["cluster|help"] {
		t.Errorf("FILTERBY PATTERN cl*help: %v", s)
	}
	if got := r.do("COMMAND", "INFO", "get"); !strings.Contains(got, "@read") || !strings.Contains(got, "@string") || !strings.Contains(got, "@fast") {
		t.Errorf("COMMAND INFO get: %s", got)
	}
	run(t, r, []step{cmd("CONFIG REWRITE", "(error) ERR The server is running without a config file")})
}

// TestConfigSetChecks: CONFIG SET's duplicate-parameter and immutable
// errors in Redis's words; a shown parameter Synod does not set accepts
// its own value only; nothing is applied when one argument fails.
func TestConfigSetChecks(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	r := dial(t, addr)
	run(t, r, []step{
		cmd("CONFIG SET maxmemory 10000001 maxmemory 10000002", "(error) ERR CONFIG SET failed (possibly related to argument 'maxmemory') - duplicate parameter"),
		cmd("CONFIG SET hash-max-ziplist-entries 64 hash-max-listpack-entries 32", "(error) ERR CONFIG SET failed (possibly related to argument 'hash-max-listpack-entries') - duplicate parameter"),
		cmd("CONFIG GET hash-max-ziplist-entries", `1) "hash-max-ziplist-entries"`+"\n"+`2) "128"`),
		cmd("CONFIG SET daemonize yes", "(error) ERR CONFIG SET failed (possibly related to argument 'daemonize') - can't set immutable config"),
		cmd("CONFIG SET maxmemory 0 timeout 0", "OK"),
		cmd("CONFIG SET port 1", "(error) ERR CONFIG SET failed (possibly related to argument 'port') - Synod sets only maxclients, client-output-buffer-limit, proto-max-bulk-len, max-pipeline, maxmemory, save, notify-keyspace-events and the encoding tunables (configure the cluster file for the rest)"),
		cmd("CONFIG SET nosuchparam 0", "(error) ERR CONFIG SET failed (possibly related to argument 'nosuchparam') - Synod sets only maxclients, client-output-buffer-limit, proto-max-bulk-len, max-pipeline, maxmemory, save, notify-keyspace-events and the encoding tunables (configure the cluster file for the rest)"),
	})
}

// TestConfigGetFacts: CONFIG GET answers several names and patterns once
// each, with the node's facts (replicaof and its alias slaveof, bind, the
// maxmemory family), as Redis's introspection unit asks.
func TestConfigGetFacts(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	r := dial(t, addr)
	r.send("CONFIG", "GET", "maxmemory", "maxmemory*", "bind", "*of")
	m := map[string]string{}
	el := r.reply().Elems
	for i := 0; i+1 < len(el); i += 2 {
		if _, dup := m[string(el[i].Str)]; dup {
			t.Errorf("CONFIG GET answers %s twice", el[i].Str)
		}
		m[string(el[i].Str)] = string(el[i+1].Str)
	}
	host, port, _ := strings.Cut(addr, ":")
	want := map[string]string{"maxmemory": "0", "maxmemory-policy": "noeviction", "maxmemory-clients": "0", "maxmemory-samples": "5",
		"bind": host, "replicaof": "", "slaveof": ""}
	for k, v := range want {
		if got, ok := m[k]; !ok || got != v {
			t.Errorf("CONFIG GET %s = %q (present %v), want %q", k, got, ok, v)
		}
	}
	run(t, r, []step{cmd("CONFIG GET port", "1) \"port\"\n2) \""+port+"\""), {[]string{"CONFIG", "SET", "port", port, "bind", host}, "OK"}})
}

// TestGetKeysAndFlags: COMMAND GETKEYSANDFLAGS as Redis's introspection-2
// unit checks it: key specs walked (MSET's range, LMOVE's two specs, EVAL's
// key count, XREAD's STREAMS keyword), SET's and SORT's own flags.
func TestGetKeysAndFlags(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	r := dial(t, addr)
	run(t, r, []step{
		cmd("COMMAND GETKEYSANDFLAGS set k1 v1", "1) 1) \"k1\"\n   2) 1) OW\n      2) update"),
		cmd("COMMAND GETKEYSANDFLAGS set k1 v1 get", "1) 1) \"k1\"\n   2) 1) RW\n      2) access\n      3) update"),
		cmd("COMMAND GETKEYSANDFLAGS mset k1 v1 k2 v2", "1) 1) \"k1\"\n   2) 1) OW\n      2) update\n2) 1) \"k2\"\n   2) 1) OW\n      2) update"),
		cmd("COMMAND GETKEYSANDFLAGS LMOVE k1 k2 left right", "1) 1) \"k1\"\n   2) 1) RW\n      2) access\n      3) delete\n2) 1) \"k2\"\n   2) 1) RW\n      2) insert"),
		cmd("COMMAND GETKEYSANDFLAGS sort k1 store k2", "1) 1) \"k1\"\n   2) 1) RO\n      2) access\n2) 1) \"k2\"\n   2) 1) OW\n      2) update"),
		cmd("COMMAND GETKEYSANDFLAGS eval x 2 a b c", "1) 1) \"a\"\n   2) 1) RW\n      2) access\n      3) update\n2) 1) \"b\"\n   2) 1) RW\n      2) access\n      3) update"),
		cmd("COMMAND GETKEYSANDFLAGS xread count 2 streams s1 s2 0 0", "1) 1) \"s1\"\n   2) 1) RO\n      2) access\n2) 1) \"s2\"\n   2) 1) RO\n      2) access"),
		cmd("COMMAND GETKEYSANDFLAGS eval x 0", "(empty array)"),
		cmd("COMMAND GETKEYSANDFLAGS ping", "(error) ERR The command has no key arguments"),
		cmd("COMMAND GETKEYSANDFLAGS nosuch a", "(error) ERR Invalid command specified"),
		cmd("COMMAND GETKEYSANDFLAGS", "(error) ERR wrong number of arguments for 'command|getkeysandflags' command"),
	})
}

// TestMaxmemory: with a maxmemory below the heap in use the node refuses
// denyoom commands (and commands queued in MULTI) with Redis's OOM error and
// serves the rest; 0 lifts the limit. maxmemory-policy, maxmemory-clients,
// save (memory durability here), repl-backlog-size and the hidden
// key-load-delay answer as maxmemory.go decides.
func TestMaxmemory(t *testing.T) {
	_, addr := startServer(t, gatewaytest.MustAutomaton(t, pxName, "kv"), ServerOptions{})
	r := dial(t, addr)
	run(t, r, []step{
		cmd("SET k v", "OK"),
		cmd("CONFIG SET maxmemory 1", "OK"),
		cmd("CONFIG GET maxmemory", `1) "maxmemory"`+"\n"+`2) "1"`),
		cmd("SET k w", "(error) OOM command not allowed when used memory > 'maxmemory'."),
		cmd("GET k", `"v"`),
		cmd("MULTI", "OK"),
		cmd("GET k", "(error) OOM command not allowed when used memory > 'maxmemory'."),
		cmd("EXEC", "(error) EXECABORT Transaction discarded because of previous errors."),
		cmd("DEL k", "(integer) 1"),
		cmd("CONFIG SET maxmemory 0", "OK"),
		cmd("SET k w", "OK"),
		cmd("CONFIG SET maxmemory-policy allkeys-lru", "(error) ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - Synod evicts no keys (which keys to evict would have to be a replicated decision): only noeviction, which refuses writes over maxmemory"),
		cmd("CONFIG SET maxmemory 5mb maxmemory-clients 200%", "(error) ERR CONFIG SET failed (possibly related to argument 'maxmemory-clients') - percentage argument must be less or equal to 100"),
		cmd("CONFIG GET maxmemory", `1) "maxmemory"`+"\n"+`2) "0"`),
		cmd("CONFIG SET maxmemory-clients 10%", "(error) ERR CONFIG SET failed (possibly related to argument 'maxmemory-clients') - Synod evicts no clients: only maxmemory-clients 0 is accepted"),
		step{[]string{"CONFIG", "SET", "save", "3000 5"}, "(error) ERR CONFIG SET failed (possibly related to argument 'save') - Synod takes no RDB snapshots and this node's durability (unknown, the cluster file's durability field) writes nothing to disk: only save \"\" is accepted"},
		cmd("CONFIG SET save 3000", "(error) ERR CONFIG SET failed (possibly related to argument 'save') - Invalid save parameters"),
		step{[]string{"CONFIG", "SET", "save", "", "repl-backlog-size", "10000002"}, "OK"},
		cmd("CONFIG GET repl-backlog-size", `1) "repl-backlog-size"`+"\n"+`2) "10000002"`),
		cmd("CONFIG GET key-load-delay", `1) "key-load-delay"`+"\n"+`2) "0"`),
		cmd("CONFIG GET key-load*", "(empty array)"),
		cmd("CONFIG SET key-load-delay 5", "(error) ERR CONFIG SET failed (possibly related to argument 'key-load-delay') - a debugging delay of Redis's RDB loading and saving; Synod loads and saves no RDB: only 0 is accepted"),
	})
}

// TestClientListSeesSubscriptionOnceConfirmed: once a client has read a
// SUBSCRIBE confirmation, CLIENT LIST from another connection counts that
// subscription (Redis changes the state before it writes the reply). The
// counts used to be noted only after the whole command, so while a
// 2,000-channel SUBSCRIBE was still confirming, another connection read
// sub=0 (and, in TestClientListFormat, 1 run in ~30 at load ~33, right
// after a one-channel SUBSCRIBE's confirmation).
func TestClientListSeesSubscriptionOnceConfirmed(t *testing.T) {
	_, addr := startServer(t, gatewaytest.MustAutomaton(t, unreplicated.Name, "kv"), ServerOptions{})
	r, sub := dial(t, addr), dial(t, addr)
	const n = 2000
	args := []string{"SUBSCRIBE"}
	for i := 0; i < n; i++ {
		args = append(args, fmt.Sprintf("chan-%d", i))
	}
	sub.send(args...)
	subCount := regexp.MustCompile(` sub=(\d+) `)
	read := 0
	for _, k := range []int{1, n / 2, n} {
		for ; read < k; read++ {
			sub.reply()
		}
		list := r.bulk("CLIENT", "LIST", "TYPE", "pubsub")
		m := subCount.FindStringSubmatch(list)
		if m == nil {
			t.Fatalf("after %d confirmations CLIENT LIST TYPE pubsub shows no subscribed connection:\n%s", k, list)
		}
		if got, _ := strconv.Atoi(m[1]); got < k {
			t.Fatalf("after %d confirmations CLIENT LIST shows sub=%d", k, got)
		}
	}
}
