package gateway

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/protocol/unreplicated"
)

// newUnreplicatedBackend really runs the unreplicated protocol.
func newUnreplicatedBackend(t *testing.T) *gatewaytest.AutomatonBackend {
	return gatewaytest.MustAutomaton(t, unreplicated.Name, "kv")
}

func TestTxnIsolationAndCommit(t *testing.T) {
	b := newUnreplicatedBackend(t)
	_, addr := startServer(t, b, ServerOptions{})
	c1, c2 := dial(t, addr), dial(t, addr)
	run(t, c2, []step{cmd("SET a 0", "OK")})
	run(t, c1, []step{
		cmd("SYNOD TXN", `"none"`),
		cmd("SYNOD BEGIN", "OK"),
		cmd("SYNOD BEGIN", "(error) ERR a transaction is already open on this connection (SYNOD COMMIT or SYNOD ABORT it first); transactions do not nest"),
		cmd("SET a 1", "OK"),
		cmd("INCR n", "(integer) 1"),
		cmd("GET a", `"1"`), // the transaction reads its own writes
		cmd("MGET a n missing", "1) \"1\"\n2) \"1\"\n3) (nil)"),
		cmd("SYNOD OP append a x", "(integer) 2"),
		cmd("SYNOD NS default", "(error) ERR SYNOD NS is not allowed while a transaction is open (SYNOD COMMIT or SYNOD ABORT it first)"),
	})
	if got := c1.do("SYNOD", "TXN"); !strings.HasPrefix(got, `"open `) || !strings.HasSuffix(got, ` in namespace default"`) {
		t.Fatalf("SYNOD TXN in a transaction: %s", got)
	}
	// Isolation: another connection sees none of the uncommitted writes.
	run(t, c2, []step{cmd("GET a", `"0"`), cmd("EXISTS n", "(integer) 0")})
	run(t, c1, []step{cmd("SYNOD COMMIT", "OK"), cmd("SYNOD TXN", `"none"`), cmd("SYNOD COMMIT", "(error) ERR SYNOD COMMIT without SYNOD BEGIN")})
	// The commit makes all of them visible.
	run(t, c2, []step{cmd("GET a", `"1x"`), cmd("GET n", `"1"`)})
	// MGET ran one TxnOp per key, in order.
	want := []string{"begin  ", "op set a", "op incr n", "op get a", "op get a", "op get n", "op get missing", "op append a", "commit  "}
	if got := b.TxnSteps(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("transaction steps:\n got %q\nwant %q", got, want)
	}
}

func TestTxnConflictAbortsAndAppliesNothing(t *testing.T) {
	b := newUnreplicatedBackend(t)
	_, addr := startServer(t, b, ServerOptions{})
	c1, c2 := dial(t, addr), dial(t, addr)
	run(t, c1, []step{cmd("SYNOD BEGIN", "OK"), cmd("GET k", "(nil)"), cmd("SET k mine", "OK"), cmd("SET other 1", "OK")})
	// A write commits in between: first committer wins.
	run(t, c2, []step{cmd("SET k theirs", "OK")})
	run(t, c1, []step{
		cmd("SYNOD COMMIT", "(error) EXECABORT transaction aborted"),
		cmd("GET k", `"theirs"`), // no longer in the transaction: the committed state
		cmd("EXISTS other", "(integer) 0"),
	})
	// Two transactions racing: the first to commit wins, the second aborts.
	run(t, c1, []step{cmd("SYNOD BEGIN", "OK"), cmd("INCR x", "(integer) 1")})
	run(t, c2, []step{cmd("SYNOD BEGIN", "OK"), cmd("INCRBY x 10", "(integer) 10")})
	run(t, c2, []step{cmd("SYNOD COMMIT", "OK")})
	run(t, c1, []step{cmd("SYNOD COMMIT", "(error) EXECABORT transaction aborted"), cmd("GET x", `"10"`)})
}

func TestTxnAbortDiscards(t *testing.T) {
	b := newUnreplicatedBackend(t)
	_, addr := startServer(t, b, ServerOptions{})
	c1, c2 := dial(t, addr), dial(t, addr)
	run(t, c1, []step{
		cmd("SYNOD ABORT", "(error) ERR SYNOD ABORT without SYNOD BEGIN"),
		cmd("SYNOD BEGIN", "OK"),
		cmd("SET k v", "OK"),
		cmd("DEL k k", "(integer) 1"), // one TxnOp per key, in order: the second finds nothing
		cmd("SET k w", "OK"),
		cmd("SYNOD ABORT", "OK"),
		cmd("GET k", "(nil)"),
		cmd("SYNOD NS default", "OK"), // allowed again
	})
	run(t, c2, []step{cmd("GET k", "(nil)")})
	st := b.TxnSteps()
	if st[len(st)-1] != "abort  " {
		t.Fatalf("last step %q, want the abort", st[len(st)-1])
	}
}

// A connection closed with a transaction open aborts it at the node.
func TestTxnAbortedWhenConnectionCloses(t *testing.T) {
	b := newUnreplicatedBackend(t)
	s, addr := startServer(t, b, ServerOptions{})
	c1 := dial(t, addr)
	run(t, c1, []step{cmd("SYNOD BEGIN", "OK"), cmd("SET k v", "OK")})
	c1.do("QUIT")
	s.Close() // waits for the connection's goroutine, hence for its abort
	st := b.TxnSteps()
	if len(st) != 3 || st[2] != "abort  " {
		t.Fatalf("steps %q, want begin, the set, then an abort", st)
	}
	c2 := dial(t, addr2(t, b))
	run(t, c2, []step{cmd("GET k", "(nil)")})
}

// addr2 serves b on a fresh server (the first was closed).
func addr2(t *testing.T, b Backend) string {
	_, addr := startServer(t, b, ServerOptions{})
	return addr
}

// BEGIN on a protocol without interactive transactions is refused at the
// gateway, before anything reaches the backend; data commands then run
// outside any transaction.
func TestTxnBeginRefusedWithoutInteractiveTransactions(t *testing.T) {
	m := gatewaytest.KV() // protocol "memory"
	_, addr := startServer(t, m, ServerOptions{})
	c := dial(t, addr)
	got := c.do("SYNOD", "BEGIN")
	want := "(error) " + fmt.Sprintf(automaton.ErrNoInteractive, "memory")
	if !strings.HasPrefix(got, want) || !strings.Contains(got, unreplicated.Name) {
		t.Fatalf("BEGIN on memory: %s\nwant %s (naming %s)", got, want, unreplicated.Name)
	}
	if n := len(m.Log()); n != 0 {
		t.Fatalf("the refused BEGIN reached the backend: %d requests", n)
	}
	run(t, c, []step{cmd("SYNOD TXN", `"none"`), cmd("SET k v", "OK"), cmd("SYNOD COMMIT", "(error) ERR SYNOD COMMIT without SYNOD BEGIN")})
	for _, r := range m.Log() {
		if r.Req.Txn != nil {
			t.Fatalf("a request carried a transaction step: %+v", r.Req)
		}
	}
}

func TestTxnHelp(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	got := dial(t, addr).do("SYNOD", "HELP")
	for _, w := range []string{"SYNOD BEGIN", "SYNOD COMMIT", "SYNOD ABORT", "SYNOD TXN"} {
		if !strings.Contains(got, w) {
			t.Errorf("SYNOD HELP lacks %s", w)
		}
	}
}

// A transaction the node no longer holds (evicted, lost to a failure):
// its operations are refused, and its commit answers EXECABORT.
func TestTxnLostAtTheNode(t *testing.T) {
	b := newUnreplicatedBackend(t)
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	run(t, c, []step{cmd("SYNOD BEGIN", "OK"), cmd("SET k v", "OK")})
	begin := b.Log()[0]
	if _, err := b.Do(context.Background(), "default", automaton.Request{ID: automaton.RequestID{Client: 99, Seq: 1},
		Txn: &automaton.TxnStep{Txn: begin.ID, Action: automaton.TxnAbort}}); err != nil {
		t.Fatal(err)
	}
	run(t, c, []step{
		cmd("GET k", "(error) "+automaton.ErrNoSuchTxn),
		cmd("SYNOD COMMIT", "(error) EXECABORT transaction aborted (the node no longer held it: a failure or eviction aborted it)"),
		cmd("GET k", "(nil)"),
	})
}
