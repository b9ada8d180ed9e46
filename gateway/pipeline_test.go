package gateway

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// pipelineScript is a random mix of single-key commands on a few keys,
// with multi-key and connection commands (which drain the pipeline) among
// them.
func pipelineScript(r *rand.Rand, n int) [][]string {
	keys := []string{"k", "j", "i"}
	var out [][]string
	for range n {
		k := keys[r.IntN(len(keys))]
		switch x := r.IntN(20); {
		case x < 5:
			out = append(out, []string{"SET", k, fmt.Sprint(r.IntN(100))})
		case x < 10:
			out = append(out, []string{"GET", k})
		case x < 14:
			out = append(out, []string{"INCR", k})
		case x < 16:
			out = append(out, []string{"APPEND", k, "7"})
		case x < 17:
			out = append(out, []string{"DEL", k})
		case x < 18:
			out = append(out, []string{"MGET", "k", "j", "i"})
		case x < 19:
			out = append(out, []string{"INCR", k, "extra"}) // an arity error: no operation
		default:
			out = append(out, []string{"PING"})
		}
	}
	return out
}

// TestPipelinedMatchesSerial: a pipeline of SET/GET/INCR/APPEND/DEL on a
// few keys, with MGET and PING among them, written in one go to a backend
// that delays each request a random little while, returns exactly what
// the same commands return one at a time, while several of the pipeline's
// requests were in flight at once and no client id ever had two.
func TestPipelinedMatchesSerial(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 18))
	script := pipelineScript(r, 1500)

	serial := gatewaytest.KV()
	_, saddr := startServer(t, serial, ServerOptions{})
	sc := dial(t, saddr)
	want := make([]string, len(script))
	for i, args := range script {
		want[i] = sc.do(args...)
	}

	b := gatewaytest.KV()
	var mu sync.Mutex
	inFlight, most := 0, 0
	byClient := map[uint64]bool{}
	var twice []automaton.RequestID
	b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		if byClient[req.ID.Client] {
			twice = append(twice, req.ID)
		}
		byClient[req.ID.Client] = true
		d := time.Duration(r.IntN(100)) * time.Microsecond
		mu.Unlock()
		time.Sleep(d)
		mu.Lock()
		inFlight--
		byClient[req.ID.Client] = false
		mu.Unlock()
		return nil
	})
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	go writeScript(t, c, script)
	expectSerial(t, c, script, want)
	mu.Lock()
	defer mu.Unlock()
	if most < 2 {
		t.Errorf("at most %d request in flight at once: the pipeline ran serially", most)
	}
	if len(twice) > 0 {
		t.Errorf("client ids with two requests in flight: %v", twice[:min(len(twice), 5)])
	}
	t.Logf("%d commands, at most %d requests in flight", len(script), most)
}

// TestPipelineKeepsSerialCommandsSerial: inside MULTI, and with a WATCHed
// key, commands run one at a time (each queued or run in order).
func TestPipelineKeepsSerialCommandsSerial(t *testing.T) {
	b := gatewaytest.MustAutomaton(t, pxName, "kv")
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	var sb strings.Builder
	for _, cmd := range []string{"WATCH w", "SET a 1", "INCR a", "MULTI", "INCR a", "GET a", "EXEC", "GET a"} {
		sb.WriteString(cmd + "\r\n")
	}
	io.WriteString(c.nc, sb.String())
	want := []string{"OK", "OK", "(integer) 2", "OK", "QUEUED", "QUEUED", "1) (integer) 3\n2) \"3\"", `"3"`}
	expectReplies(t, c, want, false)
}

// TestPipelineBatches: where the protocol applies atomic groups, a
// pipeline written in one go returns exactly what the same commands return
// one at a time, and reaches the backend as batches: fewer requests than
// commands, several holding many operations.
func TestPipelineBatches(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 28))
	script := pipelineScript(r, 1500)
	ns := config.Namespace{Name: "default", Protocol: pxName, Service: "kv"}

	_, saddr := startServer(t, gatewaytest.New(ns), ServerOptions{})
	sc := dial(t, saddr)
	want := make([]string, len(script))
	for i, args := range script {
		want[i] = sc.do(args...)
	}

	b := gatewaytest.New(ns)
	var mu sync.Mutex
	requests, grouped, most := 0, 0, 0
	b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
		mu.Lock()
		defer mu.Unlock()
		requests++
		if len(req.Ops) > 1 {
			grouped++
			most = max(most, len(req.Ops))
		}
		return nil
	})
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	writeScript(t, c, script)
	expectSerial(t, c, script, want)
	mu.Lock()
	defer mu.Unlock()
	if grouped == 0 || most < 4 || requests >= len(script)/2 {
		t.Errorf("%d requests for %d commands, %d groups of at most %d operations: the pipeline was not batched", requests, len(script), grouped, most)
	}
	t.Logf("%d commands, %d requests, %d groups of at most %d operations", len(script), requests, grouped, most)
}

// TestPipelineBatchErrors: in a batch an operation's error answers its own
// command only, and a failure of the whole group (here a timeout) answers
// each command that had an operation, not the error replies computed
// without one.
func TestPipelineBatchErrors(t *testing.T) {
	ns := config.Namespace{Name: "default", Protocol: pxName, Service: "kv"}
	b := gatewaytest.New(ns)
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	writeScript(t, c, [][]string{{"SET", "a", "x"}, {"INCR", "a"}, {"GET", "a"}, {"SET", "b", "2"}, {"INCRBY", "b", "y"}, {"GET", "b"}})
	want := []string{"OK", "(error) ERR value is not an integer or out of range", `"x"`, "OK", "(error) ERR value is not an integer or out of range", `"2"`}
	expectReplies(t, c, want, false)
	b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
		if len(req.Ops) > 1 {
			return context.DeadlineExceeded
		}
		return nil
	})
	writeScript(t, c, [][]string{{"SET", "a", "1"}, {"INCRBY", "b", "y"}, {"GET", "a"}})
	expectReplies(t, c, []string{"(error) TRYAGAIN", "(error) ERR value is not an integer", "(error) TRYAGAIN"}, true)
}

// writeScript writes every command of script to c in one write.
func writeScript(t *testing.T, c *tconn, script [][]string) {
	var sb strings.Builder
	for _, args := range script {
		fmt.Fprintf(&sb, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&sb, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if _, err := io.WriteString(c.nc, sb.String()); err != nil {
		t.Error(err) // t.Error: may run on a goroutine of its own
	}
}

// expectSerial reads a reply per command of script and requires each to
// be the serial execution's (want).
func expectSerial(t *testing.T, c *tconn, script [][]string, want []string) {
	t.Helper()
	for i := range script {
		c.deadline()
		rep, err := c.r.ReadReply()
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if got := rep.String(); got != want[i] {
			t.Fatalf("command %d %q: pipelined %s, serial %s", i, script[i], got, want[i])
		}
	}
}

// expectReplies reads len(want) replies and requires each to be want's
// (to begin with it, when prefix).
func expectReplies(t *testing.T, c *tconn, want []string, prefix bool) {
	t.Helper()
	for i, w := range want {
		c.deadline()
		rep, err := c.r.ReadReply()
		if err != nil {
			t.Fatal(err)
		}
		if got := rep.String(); got != w && !(prefix && strings.HasPrefix(got, w)) {
			t.Errorf("reply %d: %s, want %s", i, got, w)
		}
	}
}

// TestPipelineBatchAndMulti: a batch ends at MULTI, whose queue and EXEC
// run serially after it and see its writes; a batch's write to a key
// another connection WATCHes aborts that connection's EXEC.
func TestPipelineBatchAndMulti(t *testing.T) {
	b := gatewaytest.MustAutomaton(t, pxName, "kv")
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	writeScript(t, c, [][]string{{"SET", "a", "1"}, {"INCR", "a"}, {"MULTI"}, {"INCR", "a"}, {"GET", "a"}, {"EXEC"}, {"INCR", "a"}, {"GET", "a"}})
	expectReplies(t, c, []string{"OK", "(integer) 2", "OK", "QUEUED", "QUEUED", "1) (integer) 3\n2) \"3\"", "(integer) 4", `"4"`}, false)

	w := dial(t, addr)
	if got := w.do("WATCH", "a"); got != "OK" {
		t.Fatalf("WATCH: %s", got)
	}
	writeScript(t, c, [][]string{{"SET", "a", "5"}, {"INCR", "a"}})
	expectReplies(t, c, []string{"OK", "(integer) 6"}, false)
	w.do("MULTI")
	w.do("SET", "a", "0")
	if got := w.do("EXEC"); got != "(nil)" {
		t.Errorf("EXEC after a batch wrote the watched key: %s, want (nil)", got)
	}
	if got := w.do("GET", "a"); got != `"6"` {
		t.Errorf("GET a: %s, want \"6\"", got)
	}
}

// TestPipelineBatchBytes: a batch stops at about maxBatchBytes of
// arguments (it becomes one log command and one peer message), so a
// pipeline of large SETs goes as several groups, every reply in order.
func TestPipelineBatchBytes(t *testing.T) {
	ns := config.Namespace{Name: "default", Protocol: pxName, Service: "kv"}
	b := gatewaytest.New(ns)
	var mu sync.Mutex
	var sizes []int
	b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
		mu.Lock()
		defer mu.Unlock()
		sizes = append(sizes, opBytes(append(req.Ops, req.Op)))
		return nil
	})
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	big := strings.Repeat("v", 300<<10)
	var script [][]string
	var want []string
	for i := range 12 {
		script = append(script, []string{"SET", fmt.Sprintf("k%d", i), big})
		want = append(want, "OK")
	}
	go writeScript(t, c, script)
	expectReplies(t, c, want, false)
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, n := range sizes {
		total += n
		if n > maxBatchBytes+len(big)+16 {
			t.Errorf("a request of %d bytes of arguments: the batch passed its bound", n)
		}
	}
	if len(sizes) < 3 || total < 12*len(big) {
		t.Errorf("%d requests carrying %d bytes for 12 SETs of %d bytes", len(sizes), total, len(big))
	}
	t.Logf("12 SETs of %d KiB in %d requests", len(big)>>10, len(sizes))
}

// TestPipelineIndependentBatches: where the protocol steps client batches
// without atomic groups (abd), a pipeline written in one go returns
// exactly what the same commands return one at a time; its batches'
// requests are in flight together (they reach the node in one pass), one
// per key at a time (a batch ends at a key it already holds) and never two
// of one client id.
func TestPipelineIndependentBatches(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 38))
	script := pipelineScript(r, 1500)
	ns := config.Namespace{Name: "default", Protocol: "abd", Service: "kv"}

	_, saddr := startServer(t, gatewaytest.New(ns), ServerOptions{})
	sc := dial(t, saddr)
	want := make([]string, len(script))
	for i, args := range script {
		want[i] = sc.do(args...)
	}

	b := gatewaytest.New(ns)
	var mu sync.Mutex
	inFlight, most := 0, 0
	byKey := map[string]bool{}
	byClient := map[uint64]bool{}
	var clash []string
	b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
		if len(req.Ops) > 0 {
			clash = append(clash, "an atomic group")
			return nil
		}
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		if byKey[req.Op.Key] {
			clash = append(clash, "key "+req.Op.Key)
		}
		if byClient[req.ID.Client] {
			clash = append(clash, fmt.Sprint("client ", req.ID))
		}
		byKey[req.Op.Key], byClient[req.ID.Client] = true, true
		d := time.Duration(r.IntN(200)) * time.Microsecond
		mu.Unlock()
		time.Sleep(d)
		mu.Lock()
		inFlight--
		byKey[req.Op.Key], byClient[req.ID.Client] = false, false
		mu.Unlock()
		return nil
	})
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	writeScript(t, c, script)
	expectSerial(t, c, script, want)
	mu.Lock()
	defer mu.Unlock()
	if len(clash) > 0 {
		t.Errorf("in flight together: %v", clash[:min(len(clash), 5)])
	}
	if most < 2 {
		t.Errorf("at most %d request in flight: the pipeline ran serially", most)
	}
	t.Logf("%d commands, at most %d requests in flight", len(script), most)
}
