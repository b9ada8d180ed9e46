//go:build linux

package gateway

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/resp"
)

// batchRounds is a pipelined client's script in rounds of 2 to 16
// commands (SET, GET, INCR, APPEND on 12 keys, and an INCR of a string,
// which fails and must answer its own command only), and serial
// execution's replies to it.
func batchRounds(t *testing.T, ns config.Namespace, rounds int) (script [][][]string, want [][]string) {
	r := rand.New(rand.NewPCG(51, 28))
	setup := []string{"SET", "str", "abc"}
	for range rounds {
		n := 2 + r.IntN(15)
		var round [][]string
		for range n {
			k := fmt.Sprint("key", r.IntN(12))
			switch r.IntN(5) {
			case 0:
				round = append(round, []string{"SET", k, fmt.Sprint(r.IntN(100))})
			case 1:
				round = append(round, []string{"GET", k})
			case 2:
				round = append(round, []string{"INCR", k})
			case 3:
				round = append(round, []string{"APPEND", k, "7"})
			default:
				round = append(round, []string{"INCR", "str"})
			}
		}
		script = append(script, round)
	}
	return script, serialReplies(t, gatewaytest.New(ns), append([][][]string{{setup}}, script...))[1:]
}

// writeRound writes a round's commands in one write.
func writeRound(t *testing.T, c *tconn, round [][]string) {
	t.Helper()
	if err := sendRound(c, round); err != nil {
		t.Fatal(err)
	}
}

// sendRound is writeRound for any goroutine.
func sendRound(c *tconn, round [][]string) error {
	var sb strings.Builder
	for _, args := range round {
		fmt.Fprintf(&sb, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&sb, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	_, err := io.WriteString(c.nc, sb.String())
	return err
}

// TestEvLoopServesBatches: a client that pipelines a round of commands
// and waits for its replies before the next (redis-benchmark -P N) is
// served by the event loop: each round is one batch handed over in one
// request (SubmitReply), its replies are serial execution's, in order (a
// failing INCR answers its own command only), and the connection never
// goes to a goroutine. Fails without evBatch (the connection goes to its
// goroutine at its first batch: a hand-off) and with evBatchWait's
// "flushing" flag set after the flush instead of before (a round sent as
// soon as the previous replies arrive finds that batch neither answered
// nor flushing and goes to the goroutine: hand-offs, under load).
func TestEvLoopServesBatches(t *testing.T) {
	b := newReplyBackend()
	ns := b.Namespaces()[0]
	const rounds = 300
	script, want := batchRounds(t, ns, rounds)
	s, addr := startServer(t, b, ServerOptions{EventLoop: true})
	dial(t, addr) // not alone (evAlone)
	waitReplyFn(t, "the idle connection", func() bool { return s.ord.conns.Load() == 1 })
	c := dial(t, addr)
	if got := c.do("SET", "str", "abc"); got != "OK" {
		t.Fatal(got)
	}
	sub0, h0 := b.Submitted.Load(), s.ev.handoffs.Load()
	for i, round := range script {
		writeRound(t, c, round)
		for j := range round {
			if got := c.reply().String(); got != want[i][j] {
				t.Fatalf("round %d command %d %q: %s, serial %s", i, j, round[j], got, want[i][j])
			}
		}
	}
	if h := s.ev.handoffs.Load() - h0; h != 0 {
		t.Errorf("%d hand-offs to a goroutine, want 0", h)
	}
	if sub := b.Submitted.Load() - sub0; sub != rounds {
		t.Errorf("%d requests through SubmitReply for %d rounds, want one per round", sub, rounds)
	}
	t.Logf("steps %d, wakes %d, hand-offs %d", s.ev.steps.Load(), s.ev.wakes.Load(), s.ev.handoffs.Load())
}

// TestEvLoopBatchesAhead: a client that pipelines ahead of its replies
// (TestPipelineBatchReplyFn's script, chunks written without waiting,
// the Backend answering each batch after a random while) with the event
// loop on: its replies are still exactly serial execution's, no client
// id has two requests in flight, and no batch is handed over while an
// earlier one on its keys is unanswered, while the connection moves
// between the loop (one batch in flight) and its goroutine (several).
func TestEvLoopBatchesAhead(t *testing.T) {
	ns := config.Namespace{Name: "default", Protocol: pxName, Service: "kv"}
	chunks, script, want := inFlightScript(t, ns)
	b := &replySubmitBackend{submitBackend: newSubmitBackend(ns)}
	s, addr := startServer(t, b, ServerOptions{EventLoop: true})
	dial(t, addr) // not alone (evAlone)
	waitReplyFn(t, "the idle connection", func() bool { return s.ord.conns.Load() == 1 })
	c := dial(t, addr)
	go writeChunks(t, c, chunks, rand.New(rand.NewPCG(5, 51)))
	expectSerial(t, c, script, want)
	b.checkInFlight(t, len(script))
	t.Logf("steps %d, hand-offs %d, hand-backs %d", s.ev.steps.Load(), s.ev.handoffs.Load(), s.ev.backs.Load())
}

// TestEvLoopBatchRounds: batchRounds' client on the Backend that answers
// each batch after a random while (replySubmitBackend), several clients
// at once: the loop parks a connection whose next round arrives while
// its batch's replies are being flushed, and every reply is serial
// execution's (each client its own keys' prefix).
func TestEvLoopBatchRounds(t *testing.T) {
	ns := config.Namespace{Name: "default", Protocol: pxName, Service: "kv"}
	script, want := batchRounds(t, ns, 150)
	b := &replySubmitBackend{submitBackend: newSubmitBackend(ns)}
	s, addr := startServer(t, b, ServerOptions{EventLoop: true})
	const clients = 4
	errs := make(chan error, clients)
	for id := range clients {
		c := dial(t, addr)
		pre := fmt.Sprintf("c%d:", id)
		if got := c.do("SET", pre+"str", "abc"); got != "OK" {
			t.Fatalf("client %d: SET: %s", id, got)
		}
		go func() {
			errs <- func() error {
				for i, round := range script {
					var mine [][]string
					for _, args := range round {
						a := append([]string(nil), args...)
						a[1] = pre + a[1]
						mine = append(mine, a)
					}
					if err := sendRound(c, mine); err != nil {
						return err
					}
					for j := range mine {
						c.deadline()
						rep, err := c.r.ReadReply()
						if err != nil {
							return fmt.Errorf("client %d round %d: %v", id, i, err)
						}
						if got := rep.String(); got != want[i][j] {
							return fmt.Errorf("client %d round %d command %d %q: %s, serial %s", id, i, j, mine[j], got, want[i][j])
						}
					}
				}
				return nil
			}()
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("steps %d, wakes %d, hand-offs %d, hand-backs %d", s.ev.steps.Load(), s.ev.wakes.Load(), s.ev.handoffs.Load(), s.ev.backs.Load())
}

// TestEvLoopBatchPlanOnce: a pipelined command whose plan is not one the
// loop hands over (a SET with a bad EX: an error plan) goes to the
// connection's goroutine with the plan the loop made, so it is noted once:
// MONITOR shows it once, then the commands behind it, and the replies are
// the error, then theirs. Fails when the loop hands over only the
// command's arguments (the goroutine's pipelineRule notes it again: the
// monitor shows it twice).
func TestEvLoopBatchPlanOnce(t *testing.T) {
	b := newReplyBackend()
	s, addr := startServer(t, b, ServerOptions{EventLoop: true})
	mon := dial(t, addr)
	if got := mon.do("MONITOR"); got != "OK" {
		t.Fatal(got)
	}
	c := dial(t, addr)
	if got := c.do("SET", "a", "0"); got != "OK" {
		t.Fatal(got)
	}
	waitReplyFn(t, "c with the loop", func() bool { return s.ev.backs.Load() >= 1 })
	writeRound(t, c, [][]string{{"SET", "k", "v", "EX", "x"}, {"SET", "a", "1"}, {"GET", "a"}})
	if got := c.reply().String(); !strings.Contains(got, "ERR") {
		t.Fatalf("SET EX x: %q", got)
	}
	if got := c.reply().String(); got != "OK" {
		t.Fatalf("SET a 1: %q", got)
	}
	c.deadline()
	if rep, err := c.r.ReadReply(); err != nil || rep.String() != `"1"` {
		t.Fatalf("GET a: %q %v", rep.String(), err)
	}
	c.do("PING", "end")
	var lines []string
	for {
		r := mon.reply()
		if r.Kind != resp.SimpleString {
			t.Fatalf("monitor: %v", r)
		}
		line := string(r.Str)
		lines = append(lines, line)
		if strings.Contains(line, `"PING" "end"`) {
			break
		}
		if len(lines) > 10 {
			break
		}
	}
	n := 0
	for _, l := range lines {
		if strings.Contains(l, `"EX" "x"`) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the monitor saw SET k v EX x %d times, want 1: %q", n, lines)
	}
}

// TestEvLoopCloseNoGoConn: a connection the loop owns whose client
// closes is ended with the error the loop's read met, without a Go
// connection made for its goroutine to read the end again (a dozen system
// calls per closed connection: dup, net.FileConn's getsockopt,
// getsockname, getpeername, epoll_ctl, then two closes). Fails when the
// loop leaves the error for the goroutine's read (1 Go connection).
func TestEvLoopCloseNoGoConn(t *testing.T) {
	b := newReplyBackend()
	s, addr := startServer(t, b, ServerOptions{EventLoop: true})
	dial(t, addr) // not alone (evAlone)
	waitReplyFn(t, "the idle connection", func() bool { return s.ord.conns.Load() == 1 })
	c := dial(t, addr)
	if got := c.do("SET", "k", "v"); got != "OK" {
		t.Fatal(got)
	}
	var e *evNetConn
	s.mu.Lock()
	for sc := range s.conns {
		if en, ok := sc.nc.(*evNetConn); ok && sc.id == 2 {
			e = en
		}
	}
	s.mu.Unlock()
	if e == nil {
		t.Fatal("the connection is not the loop's")
	}
	c.nc.Close()
	waitReplyFn(t, "the connection ended", func() bool { return s.ord.conns.Load() == 1 })
	if g := e.gcs.Load(); g != 0 {
		t.Errorf("%d Go connections made to end a closed connection, want 0", g)
	}
}
