package gateway

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	_ "github.com/synod-dev/synod/protocol/abd"
	_ "github.com/synod-dev/synod/protocol/paxos"
	"github.com/synod-dev/synod/protocol/unreplicated"
	"github.com/synod-dev/synod/service"
)

// atomicBackends are live single-node protocols that apply groups
// atomically: the gateway's MULTI runs through their real code.
func atomicBackends(t *testing.T) map[string]*gatewaytest.AutomatonBackend {
	return map[string]*gatewaytest.AutomatonBackend{
		pxName:            gatewaytest.MustAutomaton(t, pxName, "kv"),
		unreplicated.Name: gatewaytest.MustAutomaton(t, unreplicated.Name, "kv"),
	}
}

// groups returns the atomic groups the backend received.
func groups(b *gatewaytest.AutomatonBackend) [][]string {
	var out [][]string
	for _, r := range b.Log() {
		if len(r.Ops) == 0 {
			continue
		}
		var g []string
		for _, op := range r.Ops {
			g = append(g, op.Kind+" "+op.Key)
		}
		out = append(out, g)
	}
	return out
}

func TestMultiExecIsOneAtomicGroup(t *testing.T) {
	for name, b := range atomicBackends(t) {
		t.Run(name, func(t *testing.T) {
			_, addr := startServer(t, b, ServerOptions{})
			c := dial(t, addr)
			run(t, c, []step{
				cmd("SET b x", "OK"),
				cmd("MULTI", "OK"),
				cmd("SET a 1", "QUEUED"),
				cmd("INCRBY a 41", "QUEUED"),
				cmd("PING", "QUEUED"),
				cmd("DEL b c", "QUEUED"),
				cmd("MGET a b", "QUEUED"),
				cmd("SETNX a 2", "QUEUED"),
				cmd("EXEC", "1) OK\n2) (integer) 42\n3) PONG\n4) (integer) 1\n5) 1) \"42\"\n   2) (nil)\n6) (integer) 0"),
				cmd("GET a", `"42"`),
				cmd("EXEC", "(error) ERR EXEC without MULTI"),
				cmd("DISCARD", "(error) ERR DISCARD without MULTI"),
			})
			g := groups(b)
			want := "set a|incr a|del b|del c|get a|get b|set a"
			if len(g) != 1 || strings.Join(g[0], "|") != want {
				t.Fatalf("groups sent: %q, want one: %s", g, want)
			}
		})
	}
}

// Redis's error semantics inside a transaction.
func TestMultiErrors(t *testing.T) {
	b := gatewaytest.MustAutomaton(t, pxName, "kv")
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	run(t, c, []step{
		cmd("SET s hello", "OK"),
		// A queuing error: nothing applied, EXECABORT.
		cmd("MULTI", "OK"),
		cmd("SET q 1", "QUEUED"),
		cmd("NOSUCH x", "(error) ERR unknown command 'NOSUCH', with args beginning with: 'x' "),
		cmd("EXEC", "(error) "+execAbort),
		cmd("MULTI", "OK"),
		cmd("SET q 1", "QUEUED"),
		cmd("GET", "(error) ERR wrong number of arguments for 'get' command"),
		cmd("EXEC", "(error) "+execAbort),
		cmd("MULTI", "OK"),
		cmd("SET q 1", "QUEUED"),
		cmd("SYNOD NS default", "(error) ERR Command not allowed inside a transaction"),
		cmd("EXEC", "(error) "+execAbort),
		cmd("EXISTS q", "(integer) 0"),
		// SAVE and SHUTDOWN are not allowed inside MULTI (Redis's no-multi).
		cmd("MULTI", "OK"),
		cmd("SET q 1", "QUEUED"),
		cmd("SAVE", "(error) ERR Command not allowed inside a transaction"),
		cmd("EXEC", "(error) "+execAbort),
		cmd("MULTI", "OK"),
		cmd("SHUTDOWN", "(error) ERR Command not allowed inside a transaction"),
		cmd("DISCARD", "OK"),
		// CONFIG is queued and answers in its place at EXEC; its error is
		// that entry's, the rest applies ("MULTI with config error").
		cmd("MULTI", "OK"),
		cmd("SET q 1", "QUEUED"),
		cmd("CONFIG SET maxmemory bla", "QUEUED"),
		cmd("CONFIG SET list-compress-depth 3", "QUEUED"),
		cmd("CONFIG GET list-compress-depth", "QUEUED"),
		cmd("EXEC", "1) OK\n2) (error) ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value\n3) OK\n4) 1) \"list-compress-depth\"\n   2) \"3\""),
		cmd("GET q", `"1"`),
		cmd("DEL q", "(integer) 1"),
		// Nested MULTI and WATCH inside MULTI do not mark the transaction.
		cmd("MULTI", "OK"),
		cmd("MULTI", "(error) ERR MULTI calls can not be nested"),
		cmd("WATCH s", "(error) ERR WATCH inside MULTI is not allowed"),
		// Runtime errors: that command's error, the others applied.
		cmd("INCR s", "QUEUED"),
		cmd("SET q 1", "QUEUED"),
		cmd("INCRBY q x", "QUEUED"),
		cmd("SET q 2 BADOPT", "QUEUED"),
		cmd("INCR q", "QUEUED"),
		cmd("EXEC", "1) (error) ERR value is not an integer or out of range\n2) OK\n3) (error) ERR value is not an integer or out of range\n4) (error) ERR syntax error\n5) (integer) 2"),
		cmd("GET q", `"2"`),
		// DISCARD drops the queue.
		cmd("MULTI", "OK"),
		cmd("SET q 99", "QUEUED"),
		cmd("DISCARD", "OK"),
		cmd("GET q", `"2"`),
		// An empty transaction.
		cmd("MULTI", "OK"),
		cmd("EXEC", "(empty array)"),
		// MSETNX leads a group: its keys are all new, so it sets them.
		cmd("MULTI", "OK"),
		cmd("PING", "QUEUED"),
		cmd("MSETNX x 1 w 1", "QUEUED"),
		cmd("MSET x 2 y 3", "QUEUED"),
		cmd("EXEC", "1) PONG\n2) (integer) 1\n3) OK"),
		cmd("MGET x y w", "1) \"2\"\n2) \"3\"\n3) \"1\""),
		// One of its keys exists: MSETNX answers 0 and sets nothing, and
		// the rest of the transaction applies (Redis's semantics).
		cmd("MULTI", "OK"),
		cmd("MSETNX v 1 y 9", "QUEUED"),
		cmd("INCR y", "QUEUED"),
		cmd("EXEC", "1) (integer) 0\n2) (integer) 4"),
		cmd("MGET v y", "1) (nil)\n2) \"4\""),
		// After another command's operation, MSETNX's check could no
		// longer lead the group.
		cmd("MULTI", "OK"),
		cmd("DEL y", "QUEUED"),
		cmd("MSETNX y 1", "QUEUED"),
		cmd("EXEC", "1) (integer) 1\n2) (error) ERR MSETNX inside MULTI is supported by Synod only before the transaction's other writes and reads (its check must lead the transaction's group); use WATCH and MSET"),
		// A failed WATCH still aborts everything, MSETNX included.
		cmd("WATCH y", "OK"),
	})
	other := dial(t, addr)
	if got := other.do("SET", "y", "theirs"); got != "OK" {
		t.Fatal(got)
	}
	run(t, c, []step{
		cmd("MULTI", "OK"),
		cmd("MSETNX u 1", "QUEUED"),
		cmd("SET t 1", "QUEUED"),
		cmd("EXEC", "(nil)"),
		cmd("MGET u t y", "1) (nil)\n2) (nil)\n3) \"theirs\""),
	})
}

// On a namespace whose protocol cannot apply a group atomically, MULTI
// names the protocols and namespaces that can, and nothing queued after it
// is ever applied, even when the client pipelines MULTI, SET, EXEC.
func TestMultiRefusedWithoutAtomicGroups(t *testing.T) {
	m := gatewaytest.New(
		config.Namespace{Name: "regs", Protocol: "abd", Service: "kv"},
		config.Namespace{Name: "main", Protocol: pxName, Service: "kv"},
	)
	_, addr := startServer(t, m, ServerOptions{})
	c := dial(t, addr)
	c.send("MULTI")
	c.send("SET", "k", "v")
	c.send("INCR", "n")
	c.send("EXEC")
	multi, set, incr, exec := c.reply(), c.reply(), c.reply(), c.reply()
	msg := string(multi.Str)
	if !strings.HasPrefix(msg, "ERR MULTI needs a protocol that applies a group of operations atomically; namespace 'regs' uses abd") {
		t.Errorf("MULTI on abd: %s", msg)
	}
	for _, want := range []string{pxName, unreplicated.Name, "'main' (paxos)", "SYNOD NS"} {
		if !strings.Contains(msg, want) {
			t.Errorf("MULTI's refusal does not name %q: %s", want, msg)
		}
	}
	_, can, _ := strings.Cut(msg, "protocols that can: ")
	can, _, _ = strings.Cut(can, ")")
	for _, p := range automaton.Names() {
		if !automaton.TransactionsOf(p).Atomic && strings.Contains(", "+can+",", ", "+p+",") {
			t.Errorf("MULTI's refusal names %s, which cannot: %s", p, msg)
		}
	}
	if !strings.HasPrefix(string(set.Str), "ERR command not queued") || !strings.HasPrefix(string(incr.Str), "ERR command not queued") {
		t.Errorf("commands after a refused MULTI: %q, %q", set.Str, incr.Str)
	}
	if string(exec.Str) != execAbort {
		t.Errorf("EXEC after a refused MULTI: %q", exec.Str)
	}
	if n := len(m.Log()); n != 0 {
		t.Fatalf("%d requests reached the backend after a refused MULTI", n)
	}
	// DISCARD after a refused MULTI: there is no transaction to discard
	// (Redis's words), and the refusal's guard ends, so that a later
	// command runs.
	run(t, c, []step{
		cmd("MULTI", "(error) "+msg),
		cmd("SET k 1", "(error) ERR command not queued: MULTI was refused on this namespace ("+strings.TrimPrefix(msg, "ERR ")+"); EXEC or DISCARD ends it, and nothing is applied"),
		cmd("DISCARD", "(error) ERR DISCARD without MULTI"),
		cmd("DISCARD", "(error) ERR DISCARD without MULTI"),
	})
	if n := len(m.Log()); n != 0 {
		t.Fatalf("%d requests reached the backend after a refused MULTI and DISCARD", n)
	}
	if got := c.do("WATCH", "k"); !strings.HasPrefix(got, "(error) ERR WATCH needs a protocol") {
		t.Errorf("WATCH on abd: %s", got)
	}
	// INCR on a register says where it can run, and how.
	got := c.do("INCR", "n")
	for _, want := range []string{"'main' (paxos)", "SYNOD NS", "cluster file", pxName} {
		if !strings.Contains(got, want) {
			t.Errorf("INCR on abd does not name %q: %s", want, got)
		}
	}
	before := len(m.Log())
	if got := c.do("MSETNX", "a", "1", "b", "2"); !strings.HasPrefix(got, "(error) ") {
		t.Errorf("MSETNX on abd: %s", got)
	}
	if n := len(m.Log()) - before; n != 0 {
		t.Errorf("the refused MSETNX sent %d requests", n)
	}
	run(t, c, []step{cmd("MSET a 1 b 2", "OK"), cmd("MGET a b", "1) \"1\"\n2) \"2\"")})
	for _, r := range m.Log()[before:] {
		if len(r.Req.Ops) > 0 {
			t.Errorf("MSET on abd sent a group: %+v", r.Req)
		}
	}
	run(t, c, []step{cmd("SYNOD NS main", "OK"), cmd("MULTI", "OK"), cmd("SET k v", "QUEUED"), cmd("EXEC", "1) OK")})
}

// MULTI and interactive transactions do not mix.
func TestMultiAndInteractiveTransactions(t *testing.T) {
	b := gatewaytest.MustAutomaton(t, unreplicated.Name, "kv")
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	run(t, c, []step{
		cmd("SYNOD BEGIN", "OK"),
		cmd("MULTI", "(error) ERR MULTI is not allowed while a transaction is open (SYNOD COMMIT or SYNOD ABORT it first)"),
		cmd("SYNOD ABORT", "OK"),
		cmd("MULTI", "OK"),
		cmd("SYNOD BEGIN", "(error) ERR Command not allowed inside a transaction"),
		cmd("EXEC", "(error) "+execAbort),
	})
}

const pxName = "paxos"

// WATCH: a watched key changed by another client makes EXEC answer a null
// array and apply nothing; unchanged, EXEC applies.
func TestWatch(t *testing.T) {
	for name, b := range atomicBackends(t) {
		t.Run(name, func(t *testing.T) {
			_, addr := startServer(t, b, ServerOptions{})
			c, other := dial(t, addr), dial(t, addr)
			run(t, c, []step{
				cmd("SET k 1", "OK"),
				cmd("WATCH k nope", "OK"),
				cmd("MULTI", "OK"),
				cmd("SET k mine", "QUEUED"),
				cmd("SET side x", "QUEUED"),
			})
			run(t, other, []step{cmd("SET k theirs", "OK")})
			run(t, c, []step{
				cmd("EXEC", "(nil)"),
				cmd("GET k", `"theirs"`),
				cmd("EXISTS side", "(integer) 0"),
				// EXEC forgot the watched keys.
				cmd("MULTI", "OK"), cmd("SET k again", "QUEUED"), cmd("EXEC", "1) OK"),
				// Unchanged: applied.
				cmd("WATCH k", "OK"), cmd("MULTI", "OK"), cmd("INCR n", "QUEUED"), cmd("EXEC", "1) (integer) 1"),
				// A missing key created meanwhile.
				cmd("WATCH fresh", "OK"),
			})
			run(t, other, []step{cmd("SET fresh 1", "OK")})
			run(t, c, []step{
				cmd("MULTI", "OK"), cmd("INCR n", "QUEUED"), cmd("EXEC", "(nil)"),
				// UNWATCH and DISCARD forget them.
				cmd("WATCH k", "OK"), cmd("UNWATCH", "OK"),
			})
			run(t, other, []step{cmd("SET k changed", "OK")})
			run(t, c, []step{
				cmd("MULTI", "OK"), cmd("INCR n", "QUEUED"), cmd("EXEC", "1) (integer) 2"),
				cmd("WATCH k", "OK"), cmd("MULTI", "OK"), cmd("DISCARD", "OK"),
			})
			run(t, other, []step{cmd("SET k again", "OK")})
			run(t, c, []step{cmd("MULTI", "OK"), cmd("INCR n", "QUEUED"), cmd("EXEC", "1) (integer) 3")})
		})
	}
}

// Concurrent check-and-set with WATCH loses no update: clients increment
// one key by WATCH, GET, MULTI, SET, EXEC, retrying on a null EXEC.
func TestWatchConcurrentIncrements(t *testing.T) {
	b := gatewaytest.MustAutomaton(t, pxName, "kv")
	_, addr := startServer(t, b, ServerOptions{})
	const clients, each = 4, 15
	var wg sync.WaitGroup
	conflicts := make([]int, clients)
	for i := 0; i < clients; i++ {
		c := dial(t, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < each; {
				c.send("WATCH", "counter")
				c.send("GET", "counter")
				w, g := c.reply(), c.reply()
				if string(w.Str) != "OK" {
					t.Errorf("WATCH: %+v", w)
					return
				}
				v := 0
				if g.Str != nil {
					v, _ = strconv.Atoi(string(g.Str))
				}
				c.send("MULTI")
				c.send("SET", "counter", strconv.Itoa(v+1))
				c.send("EXEC")
				c.reply()
				c.reply()
				if r := c.reply(); len(r.Elems) == 1 {
					n++
				} else {
					conflicts[i]++
				}
			}
		}()
	}
	wg.Wait()
	c := dial(t, addr)
	if got, want := c.do("GET", "counter"), fmt.Sprintf("%q", strconv.Itoa(clients*each)); got != want {
		t.Fatalf("counter = %s after %d WATCHed increments, want %s (conflicts per client %v)", got, clients*each, want, conflicts)
	}
	t.Logf("conflicts retried per client: %v", conflicts)
}

// hooked runs before on every request before the protocol sees it.
type hooked struct {
	*gatewaytest.AutomatonBackend
	before func(req automaton.Request)
}

func (h *hooked) Do(ctx context.Context, ns string, req automaton.Request) (automaton.Response, error) {
	if h.before != nil {
		h.before(req)
	}
	return h.AutomatonBackend.Do(ctx, ns, req)
}

// TestMultiMSetNXRaces: a leading MSETNX whose existing key vanishes
// before the group that answers 0 is tried again (and then sets its keys);
// keys that keep changing end in TRYAGAIN with nothing applied.
func TestMultiMSetNXRaces(t *testing.T) {
	h := &hooked{AutomatonBackend: gatewaytest.MustAutomaton(t, pxName, "kv")}
	_, addr := startServer(t, h, ServerOptions{})
	c := dial(t, addr)
	seq := uint64(0)
	write := func(kind, key string, args ...string) {
		seq++
		op := service.Op{Kind: kind, Key: key}
		for _, a := range args {
			op.Args = append(op.Args, []byte(a))
		}
		if _, err := h.AutomatonBackend.Do(context.Background(), "default", automaton.Request{ID: automaton.RequestID{Client: 7, Seq: seq}, Op: op}); err != nil {
			t.Error(err)
		}
	}
	guardOf := func(req automaton.Request) string {
		if len(req.Ops) == 0 || req.Ops[0].Kind != service.GuardKind {
			return ""
		}
		return string(req.Ops[0].Args[0]) + " " + string(req.Ops[0].Args[1])
	}
	run(t, c, []step{cmd("SET k old", "OK")})
	deleted := false
	h.before = func(req automaton.Request) {
		if guardOf(req) == "exists 1" && !deleted {
			deleted = true
			write("del", "k") // k vanishes between EXEC's attempts
		}
	}
	run(t, c, []step{
		cmd("MULTI", "OK"),
		cmd("MSETNX k new j new", "QUEUED"),
		cmd("EXEC", "1) (integer) 1"),
		cmd("MGET k j", "1) \"new\"\n2) \"new\""),
	})
	if !deleted {
		t.Fatal("EXEC never sent the group answering 0")
	}
	// Keys that change before every attempt.
	tries := 0
	h.before = func(req automaton.Request) {
		switch guardOf(req) {
		case "exists 1":
			tries++
			write("del", "k")
		case "exists 0":
			tries++
			write("set", "k", "again")
		}
	}
	run(t, c, []step{
		cmd("MULTI", "OK"),
		cmd("MSETNX k x", "QUEUED"),
		cmd("SET z 1", "QUEUED"),
		cmd("EXEC", "(error) TRYAGAIN the keys of MSETNX kept changing while EXEC ran; nothing was applied"),
	})
	h.before = nil
	if tries != maxLeadTries {
		t.Errorf("%d attempts, want %d", tries, maxLeadTries)
	}
	run(t, c, []step{cmd("EXISTS z", "(integer) 0")})
}
