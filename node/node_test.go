package node

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/synod-dev/synod/transport"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	_ "github.com/synod-dev/synod/protocol/abd"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/storage"
)

func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// listeners for one node: peer, client, metrics.
type lns struct{ peer, client, metrics net.Listener }

// mkCluster builds a validated cluster config of size nodes whose addresses
// are those of freshly opened loopback listeners.
func mkCluster(t testing.TB, size int, durability string, nss ...config.Namespace) (*config.Cluster, []lns) {
	t.Helper()
	cfg := &config.Cluster{Cluster: "test", Durability: durability, Namespaces: nss}
	if durability == config.Fsync {
		cfg.DataDir = t.TempDir()
	}
	var ls []lns
	for i := 0; i < size; i++ {
		l := lns{listen(t), listen(t), listen(t)}
		ls = append(ls, l)
		cfg.Nodes = append(cfg.Nodes, config.Node{ID: fmt.Sprintf("n%d", i+1),
			Peer: l.peer.Addr().String(), Client: l.client.Addr().String(), Metrics: l.metrics.Addr().String()})
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg, ls
}

// startNode runs a node until the test ends.
func startNode(t testing.TB, cfg *config.Cluster, id string, l lns, opts Options) *Node {
	t.Helper()
	opts.PeerListener, opts.ClientListener, opts.MetricsListener = l.peer, l.client, l.metrics
	n, err := New(cfg, id, opts)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- n.Run(context.Background()) }()
	select {
	case <-n.Ready():
	case err := <-errc:
		t.Fatalf("node %s: %v", id, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("node %s not ready", id)
	}
	t.Cleanup(func() {
		n.Close()
		if err := <-errc; err != nil && opts.Fatal == nil {
			t.Errorf("node %s: Run: %v", id, err)
		}
	})
	return n
}

var clientSeq atomic.Uint64

func req(kind, key string, args ...string) automaton.Request {
	op := service.Op{Kind: kind, Key: key}
	for _, a := range args {
		op.Args = append(op.Args, []byte(a))
	}
	return automaton.Request{ID: automaton.RequestID{Client: 42, Seq: clientSeq.Add(1)}, Op: op}
}

func do(t testing.TB, n *Node, ns string, r automaton.Request) service.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := n.Do(ctx, ns, r)
	if err != nil {
		t.Fatalf("%s %s on %s: %v", ns, r.Op, n.ID(), err)
	}
	if resp.ID != r.ID {
		t.Fatalf("response for %v, want %v", resp.ID, r.ID)
	}
	return resp.Result
}

// eventually waits for cond. 30 s is only the bound past which the test
// fails: a passing run waits for the event, however soon it comes, and
// under CI's worst load (the race detector, two packages on 2 cores) an
// election or a gRPC stream can take longer than the 5 s this was, as
// TestFailoverStubOnPaxos's "the client knows the leader's address" did.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var (
	nsABD  = config.Namespace{Name: "default", Protocol: "abd", Service: "kv"}
	nsReg  = config.Namespace{Name: "reg", Protocol: "nodetest-reg", Service: "kv"}
	nsMisc = config.Namespace{Name: "misc", Protocol: "nodetest-misc", Service: "kv"}
)

func TestThreeNodeCluster(t *testing.T) {
	cfg, ls := mkCluster(t, 3, config.Fsync, nsABD, nsReg)
	var nodes []*Node
	for i, l := range ls {
		nodes = append(nodes, startNode(t, cfg, cfg.Nodes[i].ID, l, Options{}))
	}
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]

	// The test protocol: a write persists, broadcasts, answers; every node applies it.
	if r := do(t, n1, "reg", req("set", "k", "v1")); r.Type != service.ResultOK {
		t.Fatalf("set: %v", r)
	}
	for _, n := range nodes[1:] {
		eventually(t, "broadcast reaches "+string(n.ID()), func() bool {
			return do(t, n, "reg", req("get", "k")).Equal(service.Bytes([]byte("v1")))
		})
	}
	if c, _ := n2.Counters("reg"); c.MessagesIn != 1 || c.Persists != 1 || c.Fsyncs != 1 {
		t.Fatalf("n2 reg counters %+v", c)
	}
	if c, _ := n1.Counters("reg"); c.MessagesOut != 2 || c.Requests != 1 || c.Responses != 1 {
		t.Fatalf("n1 reg counters %+v", c)
	}

	// ABD: a write on n1 is seen by a linearizable read on n3 at once.
	if r := do(t, n1, "default", req("set", "x", "abd-value")); r.Type != service.ResultOK {
		t.Fatalf("abd set: %v", r)
	}
	if r := do(t, n3, "default", req("get", "x")); !r.Equal(service.Bytes([]byte("abd-value"))) {
		t.Fatalf("abd get on n3: %v", r)
	}

	// Both namespaces commit to the node's one WAL: INFO reports the
	// commits of both and the frames (writes and fdatasyncs) that carried
	// them, at most one per commit. (A replica may still be committing a
	// write whose quorum answered: the counts settle.)
	for _, n := range nodes {
		var last string
		eventually(t, string(n.ID())+" reports its WAL writes", func() bool {
			var fsyncs uint64
			for _, ns := range []string{"default", "reg"} {
				c, _ := n.Counters(ns)
				fsyncs += c.Fsyncs
			}
			syn := n.Info()["synod"]
			commits, _ := strconv.ParseUint(syn["wal_commits"], 10, 64)
			frames, _ := strconv.ParseUint(syn["wal_frames"], 10, 64)
			last = fmt.Sprintf("wal_commits %q, wal_frames %q, namespaces' commits %d", syn["wal_commits"], syn["wal_frames"], fsyncs)
			return commits == fsyncs && frames > 0 && frames <= commits
		})
		t.Logf("%s: %s", n.ID(), last)
	}

	// Unknown namespace.
	if _, err := n1.Do(context.Background(), "nope", req("get", "k")); err == nil || !strings.Contains(err.Error(), "unknown namespace") {
		t.Fatalf("unknown namespace: %v", err)
	}
	// An invalid operation that comes without an edge's validation
	// (gateway.Backend.Do: Do does not check again) is refused by the
	// protocol, which counts it as a request.
	if r := do(t, n1, "reg", req("frobnicate", "k")); !r.IsErr() {
		t.Fatalf("invalid op: %v", r)
	}

	// The gateway serves the Redis protocol on the client address; the first
	// namespace is the default.
	resp := func(n *Node, args ...string) string {
		c, err := net.Dial("tcp", n.ClientAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(c, "$%d\r\n%s\r\n", len(a), a)
		}
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "$") && line != "$-1\r\n" {
			v, _ := br.ReadString('\n')
			line += v
		}
		return line
	}
	if got := resp(n2, "SET", "foo", "bar"); got != "+OK\r\n" {
		t.Fatalf("RESP SET: %q", got)
	}
	if got := resp(n3, "GET", "foo"); got != "$3\r\nbar\r\n" {
		t.Fatalf("RESP GET: %q", got)
	}

	// INFO facts.
	info := n1.Info()
	if info["synod"]["node_id"] != "n1" || info["synod"]["cluster"] != "test" || info["synod"]["durability"] != "fsync" {
		t.Fatalf("info synod: %v", info["synod"])
	}
	if s := info["namespaces"]["reg"]; !strings.Contains(s, "protocol=nodetest-reg,service=kv,requests=2,responses=2,persists=1,fsyncs=1") {
		t.Fatalf("info reg: %q", s)
	}
	eventually(t, "peers connected in INFO", func() bool {
		p := n1.Info()["peers"]
		return strings.HasPrefix(p["n2"], "connected=1") && strings.HasPrefix(p["n3"], "connected=1")
	})

	// Metrics and pprof.
	get := func(path string) string {
		r, err := http.Get("http://" + n1.MetricsAddr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		if r.StatusCode != 200 {
			t.Fatalf("GET %s: %s", path, r.Status)
		}
		return string(b)
	}
	m := get("/metrics")
	for _, want := range []string{
		`synod_requests_total{namespace="reg",node="n1"} 2`, // the set and the invalid op (refused by the protocol)
		`synod_transport_dropped_total{node="n1",peer="n2"} 0`,
		`synod_storage_commit_duration_seconds_count{namespace="reg",node="n1"} 1`,
		`synod_request_duration_seconds_bucket`,
		`synod_batch_inputs_bucket`,
		`go_goroutines`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if p := get("/debug/pprof/"); !strings.Contains(p, "goroutine") {
		t.Errorf("pprof index: %.200s", p)
	}
}

func TestRestartRecoversDurableRecords(t *testing.T) {
	for _, d := range []string{config.Fsync, config.Memory} {
		t.Run(d, func(t *testing.T) {
			cfg, ls := mkCluster(t, 1, d, nsReg)
			n := startNode(t, cfg, "n1", ls[0], Options{})
			do(t, n, "reg", req("set", "k", "kept"))
			n.Close()
			// The same node again, on new listeners.
			n = startNode(t, cfg, "n1", lns{listen(t), listen(t), listen(t)}, Options{})
			r := do(t, n, "reg", req("get", "k"))
			want := service.Bytes([]byte("kept"))
			if d == config.Memory {
				want = service.Nil() // memory durability loses everything on restart
			}
			if !r.Equal(want) {
				t.Fatalf("after restart: %v, want %v", r, want)
			}
		})
	}
}

// gateEngine wraps the memory engine, records the order of commits, and can
// hold commits until released or make them fail.
type gateEngine struct {
	*storage.Memory
	block chan struct{} // Commit waits until it is closed (nil: never waits)
	// Commit takes one token per call when tokens is set (or goes on once
	// open is closed).
	tokens chan struct{}
	open   chan struct{}
	fail   error
	// only, when set, names the namespaces whose commits are gated (the
	// others commit at once).
	only map[string]bool

	mu      sync.Mutex
	events  []string
	batches []int
}

func (g *gateEngine) note(e string) {
	g.mu.Lock()
	g.events = append(g.events, e)
	g.mu.Unlock()
}

func (g *gateEngine) snapshot() ([]string, []int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.events...), append([]int(nil), g.batches...)
}

func (g *gateEngine) Durability() string { return config.Fsync }

func (g *gateEngine) Namespace(name string) (storage.Store, error) {
	s, err := g.Memory.Namespace(name)
	if err != nil || g.only != nil && !g.only[name] {
		return s, err
	}
	return &gateStore{Store: s, g: g}, nil
}

type gateStore struct {
	storage.Store
	g *gateEngine
}

func (s *gateStore) Commit(b []automaton.Persist) error {
	s.g.note("commit-start")
	if s.g.block != nil {
		<-s.g.block
	}
	if s.g.tokens != nil {
		select {
		case <-s.g.tokens:
		case <-s.g.open:
		}
	}
	if s.g.fail != nil {
		s.g.note("commit-failed")
		return s.g.fail
	}
	err := s.Store.Commit(b)
	s.g.mu.Lock()
	s.g.batches = append(s.g.batches, len(b))
	s.g.mu.Unlock()
	s.g.note("commit-done")
	return err
}

func TestResponseWaitsForCommit(t *testing.T) {
	cfg, ls := mkCluster(t, 1, config.Memory, nsReg)
	g := &gateEngine{Memory: storage.NewMemory(), block: make(chan struct{})}
	var openGate sync.Once
	release := func() { openGate.Do(func() { close(g.block) }) }
	n := startNode(t, cfg, "n1", ls[0], Options{Storage: g})
	t.Cleanup(release) // runs before the node's cleanup, so a failed test cannot hang in Commit

	first := make(chan service.Result, 1)
	go func() {
		r, _ := n.Do(context.Background(), "reg", req("set", "a", "1"))
		g.note("response")
		first <- r.Result
	}()
	eventually(t, "first commit started", func() bool { ev, _ := g.snapshot(); return len(ev) > 0 })
	// While the commit is in progress, more writes queue up.
	rest := make(chan service.Result, 5)
	for i := 0; i < 5; i++ {
		go func() {
			r, _ := n.Do(context.Background(), "reg", req("set", fmt.Sprint("b", i), "2"))
			rest <- r.Result
		}()
	}
	eventually(t, "requests queued", func() bool { c, _ := n.Counters("reg"); return c.Requests == 6 })
	select {
	case r := <-first:
		t.Fatalf("response %v released before its record was committed", r)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	if r := <-first; r.Type != service.ResultOK {
		t.Fatalf("first: %v", r)
	}
	for i := 0; i < 5; i++ {
		if r := <-rest; r.Type != service.ResultOK {
			t.Fatalf("rest: %v", r)
		}
	}
	ev, batches := g.snapshot()
	if len(ev) < 3 || ev[0] != "commit-start" || ev[1] != "commit-done" || ev[2] != "response" && ev[2] != "commit-start" {
		t.Fatalf("event order %v", ev)
	}
	// Group commit: the five writes that arrived during the first commit share one batch.
	if len(batches) != 2 || batches[0] != 1 || batches[1] != 5 {
		t.Fatalf("commit batches %v, want [1 5]", batches)
	}
	if c, _ := n.Counters("reg"); c.Fsyncs != 2 || c.Persists != 6 {
		t.Fatalf("counters %+v", c)
	}
}

// The pipelined loop steps new inputs while a commit is running, but releases
// each output only after the commit of the records emitted before it, in
// order. A read that has no records of its own still waits for the commit of
// the write it observed.
func TestPipelinedReleaseOrder(t *testing.T) {
	cfg, ls := mkCluster(t, 1, config.Memory, nsReg)
	g := &gateEngine{Memory: storage.NewMemory(), tokens: make(chan struct{}), open: make(chan struct{})}
	n := startNode(t, cfg, "n1", ls[0], Options{Storage: g})
	t.Cleanup(func() { close(g.open) }) // before the node's cleanup: never hang in Commit

	type answer struct {
		name string
		res  service.Result
	}
	answers := make(chan answer, 3)
	ask := func(name string, r automaton.Request) {
		go func() {
			resp, err := n.Do(context.Background(), "reg", r)
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			g.note("response " + name)
			answers <- answer{name, resp.Result}
		}()
	}
	stepped := func(want uint64) {
		t.Helper()
		eventually(t, fmt.Sprintf("%d inputs stepped", want), func() bool { c, _ := n.Counters("reg"); return c.Stepped >= want })
	}
	none := func(when string) {
		t.Helper()
		select {
		case a := <-answers:
			t.Fatalf("%s: %s answered (%v) before its commit", when, a.name, a.res)
		case <-time.After(50 * time.Millisecond):
		}
	}
	want := func(names ...string) {
		t.Helper()
		got := map[string]service.Result{}
		for range names {
			select {
			case a := <-answers:
				got[a.name] = a.res
			case <-time.After(5 * time.Second):
				t.Fatalf("answers %v, want %v", got, names)
			}
		}
		for _, name := range names {
			if _, ok := got[name]; !ok {
				t.Fatalf("answers %v, want %v", got, names)
			}
		}
		if r := got["get a"]; r.Type != 0 && string(r.Bytes) != "1" {
			t.Fatalf("get a = %v, want 1", r)
		}
	}

	stepped(1) // Start
	ask("set a", req("set", "a", "1"))
	eventually(t, "first commit started", func() bool { ev, _ := g.snapshot(); return len(ev) > 0 })
	ask("get a", req("get", "a")) // no record, but it saw a=1
	stepped(3)                    // stepped while the commit runs
	ask("set b", req("set", "b", "2"))
	stepped(4)
	none("commit 1 running")

	g.tokens <- struct{}{} // commit 1 returns
	want("set a", "get a")
	eventually(t, "second commit started", func() bool {
		ev, _ := g.snapshot()
		return slices.Index(ev[1:], "commit-start") >= 0
	})
	none("commit 2 running")

	g.tokens <- struct{}{}
	want("set b")
	ev, batches := g.snapshot()
	if len(batches) != 2 || batches[0] != 1 || batches[1] != 1 {
		t.Fatalf("commit batches %v, want [1 1]", batches)
	}
	done := 0
	for _, e := range ev {
		switch e {
		case "commit-done":
			done++
		case "response set a", "response get a":
			if done < 1 {
				t.Fatalf("%s before commit 1: %v", e, ev)
			}
		case "response set b":
			if done < 2 {
				t.Fatalf("%s before commit 2: %v", e, ev)
			}
		}
	}
}

// Outputs a step emits before its first Persist need no commit of their own:
// they leave at once when every record emitted before them is durable, and
// otherwise as soon as it is, while the records emitted after them are still
// being committed. A record no output waits for is held (lazy commit, loop.go
// committer) until an output needs it.
func TestOutputsBeforePersistLeaveEarly(t *testing.T) {
	cfg, ls := mkCluster(t, 1, config.Memory, nsMisc)
	g := &gateEngine{Memory: storage.NewMemory(), tokens: make(chan struct{}), open: make(chan struct{})}
	n := startNode(t, cfg, "n1", ls[0], Options{Storage: g})
	t.Cleanup(func() { close(g.open) })

	// Nothing queued: the answer leaves before its own record is committed,
	// and nothing waits for that record, so its commit is held.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r, err := n.Do(ctx, "misc", req("set", "early/a", "1")); err != nil || r.Result.Type != service.ResultOK {
		t.Fatalf("set early/a: %v %v", r, err)
	}
	time.Sleep(20 * time.Millisecond)
	if ev, _ := g.snapshot(); len(ev) != 0 {
		t.Fatalf("events %v: a record nobody waits for was committed at once", ev)
	}
	// A second early answer must wait for the first record, since the
	// automaton's state already depends on it: its commit starts now.
	second := make(chan error, 1)
	go func() {
		_, err := n.Do(context.Background(), "misc", req("set", "early/b", "2"))
		g.note("response b")
		second <- err
	}()
	eventually(t, "first commit started", func() bool { ev, _ := g.snapshot(); return len(ev) > 0 })
	if ev, _ := g.snapshot(); len(ev) != 1 || ev[0] != "commit-start" {
		t.Fatalf("events %v, want the commit still running", ev)
	}
	select {
	case err := <-second:
		t.Fatalf("second answer (%v) released before the earlier commit", err)
	case <-time.After(50 * time.Millisecond):
	}
	// Once the first record is durable, the second answer leaves although
	// the record its step emitted after it is not committed.
	g.tokens <- struct{}{}
	select {
	case err := <-second:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second answer still held although the record before it is durable")
	}
	ev, _ := g.snapshot()
	if i, j := slices.Index(ev, "commit-done"), slices.Index(ev, "response b"); i < 0 || j < i {
		t.Fatalf("events %v: response b before the first commit", ev)
	}
	// A third answer needs the second record (which the first commit may
	// or may not have covered, depending on when the loop queued it): it
	// leaves only once that record is durable.
	third := make(chan error, 1)
	go func() {
		_, err := n.Do(context.Background(), "misc", req("set", "early/c", "3"))
		third <- err
	}()
	given := false
	for done := false; !done; {
		select {
		case err := <-third:
			if err != nil {
				t.Fatal(err)
			}
			done = true
		case <-time.After(10 * time.Millisecond):
			if ev, _ := g.snapshot(); !given && strings.Count(strings.Join(ev, " "), "commit-start") == 2 {
				given = true
				g.tokens <- struct{}{} // the second record's commit
			}
		}
	}
	if _, b := g.snapshot(); b[0]+sum(b[1:]) < 2 {
		t.Fatalf("third answer released with %v records committed, want both earlier records", b)
	}
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

// scripted is an automaton that answers every input with the outputs the
// test put in next.
type scripted struct{ next []automaton.Output }

func (s *scripted) Step(automaton.Input) []automaton.Output {
	out := s.next
	s.next = nil
	return out
}

// The release rule output by output, driving the loop by hand: every Send or
// Respond waits exactly for the last Persist emitted before it (in its step
// or an earlier one), and outputs leave in emission order.
func TestReleaseFollowsPersistSequence(t *testing.T) {
	cfg, _ := mkCluster(t, 1, config.Memory, nsMisc)
	n, err := New(cfg, "n1", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer close(n.stopping)
	l := n.loop("misc")
	sa := &scripted{}
	l.a = sa
	// One channel for every request id: it receives the answers in the
	// order the loop releases them.
	released := make(chan automaton.Response, 32)
	for i := uint64(1); i <= 20; i++ {
		l.addWaiter(automaton.RequestID{Client: 7, Seq: i}, released)
	}
	r := func(i uint64) automaton.Output {
		return automaton.Respond{Resp: automaton.Response{ID: automaton.RequestID{Client: 7, Seq: i}}}
	}
	p := func(k string) automaton.Output { return automaton.Persist{Key: k, Value: []byte(k)} }
	step := func(outs ...automaton.Output) {
		sa.next = outs
		l.step(event{in: automaton.ClientRequest{}})
	}
	expect := func(when string, want ...uint64) {
		t.Helper()
		var got []uint64
		for len(released) > 0 {
			got = append(got, (<-released).ID.Seq)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: released %v, want %v", when, got, want)
		}
	}

	step(r(1), p("a"), r(2))     // 1 needs nothing; 2 needs a (#1)
	step(r(3), p("b"), r(4))     // 3 needs a; 4 needs b (#2)
	step(r(5))                   // needs b
	expect("nothing durable", 1) // only what needs no record
	l.setDurable(1, false, false)
	expect("a durable, b pending", 2, 3)
	step(r(6), p("c"), r(7)) // 6 needs b: waits behind 4 and 5; 7 needs c (#3)
	expect("b still pending")
	l.setDurable(2, false, false)
	expect("b durable", 4, 5, 6)
	step(r(8), p("d"), r(9)) // 8 needs c: waits behind 7
	expect("c pending")
	l.setDurable(3, false, false)
	expect("c durable", 7, 8)
	l.setDurable(4, false, false)
	expect("d durable", 9)
	// Nothing waits and d is durable: an output needing d leaves at step
	// time although a later record is pending, and the one after that
	// record waits for it.
	step(r(10), p("e"))        // 10 leaves at once
	step(r(11), r(12), p("f")) // both need e, from the step before
	expect("e, f pending", 10)
	l.setDurable(3, false, false) // stale reports change nothing
	expect("stale durable")
	l.setDurable(6, false, false) // one commit covering e and f
	expect("e, f durable", 11, 12)
	if n := l.rel.Held(); n != 0 {
		t.Fatalf("pending outputs left: %d", n)
	}
	// The records went into the batch, numbered in emission order.
	if got := len(l.cur.persists); got != 6 || l.cur.last != 6 {
		t.Fatalf("batch has %d records, last #%d; want 6, #6", got, l.cur.last)
	}
	// After a failed commit nothing is released any more, even what needs
	// no new record (the committer reports nothing durable after a failure).
	l.failed.Store(true)
	step(r(13))
	expect("after a failure")
	if n := l.rel.Held(); n != 1 {
		t.Fatalf("%d outputs wait after a failure, want 1", n)
	}
}

func TestCommitFailureStopsNodeWithoutReleasing(t *testing.T) {
	cfg, ls := mkCluster(t, 1, config.Memory, nsReg)
	g := &gateEngine{Memory: storage.NewMemory(), fail: errors.New("disk on fire")}
	fatal := make(chan error, 1)
	opts := Options{Storage: g, Fatal: func(err error) { fatal <- err }}
	opts.PeerListener, opts.ClientListener, opts.MetricsListener = ls[0].peer, ls[0].client, ls[0].metrics
	n, err := New(cfg, "n1", opts)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- n.Run(context.Background()) }()
	<-n.Ready()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := n.Do(ctx, "reg", req("set", "a", "1"))
	if err == nil {
		t.Fatalf("got response %v although the commit failed", resp)
	}
	if e := <-fatal; e == nil || e.Error() != "disk on fire" {
		t.Fatalf("Fatal got %v", e)
	}
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("Run returned %v", err)
	}
	if c, _ := n.Counters("reg"); c.Responses != 0 {
		t.Fatalf("responses released: %+v", c)
	}
}

func TestTimers(t *testing.T) {
	cfg, ls := mkCluster(t, 1, config.Memory, nsMisc)
	n := startNode(t, cfg, "n1", ls[0], Options{})
	set := func(key, arg string) { do(t, n, "misc", req("set", key, arg)) }
	set("arm/1", "30")    // fires
	set("arm/2", "300")   // cancelled below: never fires
	set("cancel/2", "x")  //
	set("arm/3", "5000")  // replaced by a short timer: fires once, early
	set("arm/3", "20")    //
	set("arm/4", "300")   // replaced by a long timer: does not fire in time
	set("arm/4", "60000") //
	set("arm/5", "0")     // zero duration fires
	set("cancel/9", "x")  // cancelling an unknown timer is harmless
	eventually(t, "timers 1, 3 and 5 fire", func() bool {
		return string(do(t, n, "misc", req("get", "fired")).Bytes) == "1,3,5"
	})
	// Past every short deadline, including the replaced ones. Those are
	// 300 ms, so that a loaded machine's gap between two requests cannot
	// let one fire before its cancellation or replacement arrives.
	time.Sleep(400 * time.Millisecond)
	if got := string(do(t, n, "misc", req("get", "fired")).Bytes); got != "1,3,5" {
		t.Fatalf("fired %q, want 1,3,5 (cancelled or replaced timers fired)", got)
	}
}

// Cancel/replace racing with the firing: a timer replaced right as it expires
// must still fire exactly once for the new generation.
func TestTimerReplaceRace(t *testing.T) {
	cfg, ls := mkCluster(t, 1, config.Memory, nsMisc)
	n := startNode(t, cfg, "n1", ls[0], Options{})
	for i := 0; i < 30; i++ {
		do(t, n, "misc", req("set", "arm/7", "1"))
		time.Sleep(time.Duration(i%3) * 300 * time.Microsecond)
		do(t, n, "misc", req("set", "cancel/7", "x"))
	}
	// Timer 8 may fire before its cancellation reaches the loop (a 1 ms
	// timer, and the cancellation is another request); once the loop has
	// stepped the cancellation it must never fire. The read after the
	// cancellation counts every firing that came before it.
	do(t, n, "misc", req("set", "arm/8", "1"))
	do(t, n, "misc", req("set", "cancel/8", "x"))
	count := func() int { return strings.Count(string(do(t, n, "misc", req("get", "fired")).Bytes), "8") }
	before := count()
	time.Sleep(50 * time.Millisecond)
	if after := count(); after != before {
		t.Fatalf("cancelled timer 8 fired %d times after its cancellation", after-before)
	}
}

// Re-arming a timer as it expires (the loop reuses a stopped timer, and
// replaces one whose callback may be running): after the last, long arming
// no earlier arming fires.
func TestTimerRearmRace(t *testing.T) {
	cfg, ls := mkCluster(t, 1, config.Memory, nsMisc)
	n := startNode(t, cfg, "n1", ls[0], Options{})
	for i := 0; i < 40; i++ {
		do(t, n, "misc", req("set", "arm/6", "1"))
		time.Sleep(time.Duration(i%4) * 300 * time.Microsecond)
	}
	do(t, n, "misc", req("set", "arm/6", "60000"))
	count := func() int { return strings.Count(string(do(t, n, "misc", req("get", "fired")).Bytes), "6") }
	before := count()
	time.Sleep(30 * time.Millisecond)
	if after := count(); after != before {
		t.Fatalf("timer 6 fired %d times after its 60 s arming", after-before)
	}
}

func TestWaitersShareRequestID(t *testing.T) {
	cfg, ls := mkCluster(t, 1, config.Memory, nsMisc)
	n := startNode(t, cfg, "n1", ls[0], Options{})
	r := req("get", "hold")
	results := make(chan string, 2)
	for i := 0; i < 2; i++ { // a client and its retry: same RequestID
		go func() {
			resp, err := n.Do(context.Background(), "misc", r)
			if err != nil {
				results <- err.Error()
				return
			}
			results <- string(resp.Result.Bytes)
		}()
	}
	eventually(t, "two waiters", func() bool { c, _ := n.Counters("misc"); return c.Waiting == 2 && c.Requests == 2 })
	do(t, n, "misc", req("set", "release", "x"))
	for i := 0; i < 2; i++ {
		if got := <-results; got != "released" {
			t.Fatalf("waiter %d got %q", i, got)
		}
	}

	// A caller whose context ends is removed; a late response goes nowhere.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := n.Do(ctx, "misc", req("get", "hold")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expired request: %v", err)
	}
	if c, _ := n.Counters("misc"); c.Waiting != 0 {
		t.Fatalf("waiter left behind: %+v", c)
	}
	do(t, n, "misc", req("set", "release", "x"))
	eventually(t, "orphan counted", func() bool { c, _ := n.Counters("misc"); return c.Orphans == 1 })
}

func TestSendToSelfDropped(t *testing.T) {
	cfg, ls := mkCluster(t, 1, config.Memory, nsMisc)
	n := startNode(t, cfg, "n1", ls[0], Options{})
	if r := do(t, n, "misc", req("set", "self", "x")); r.Type != service.ResultOK {
		t.Fatal(r)
	}
	if c, _ := n.Counters("misc"); c.BadSends != 1 || c.MessagesOut != 0 {
		t.Fatalf("counters %+v", c)
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	cfg, _ := mkCluster(t, 1, config.Memory, nsReg)
	if _, err := New(cfg, "n9", Options{}); err == nil || !strings.Contains(err.Error(), `node "n9" is not in cluster`) {
		t.Fatalf("unknown id: %v", err)
	}
	cfg.Namespaces[0].Params = map[string]string{"x": "1"}
	if _, err := New(cfg, "n1", Options{}); err == nil || !strings.Contains(err.Error(), "namespace reg") {
		t.Fatalf("bad params: %v", err)
	}
}

func TestShutdownFailsPendingRequests(t *testing.T) {
	cfg, ls := mkCluster(t, 1, config.Memory, nsMisc)
	n := startNode(t, cfg, "n1", ls[0], Options{})
	errc := make(chan error, 1)
	go func() {
		_, err := n.Do(context.Background(), "misc", req("get", "hold"))
		errc <- err
	}()
	eventually(t, "waiting", func() bool { c, _ := n.Counters("misc"); return c.Waiting == 1 })
	n.Close()
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("pending request after Close: %v", err)
	}
	if _, err := n.Do(context.Background(), "misc", req("get", "fired")); err == nil {
		t.Fatal("Do after Close succeeded")
	}
}

// A timer that fired (its event already queued) and was then cancelled or
// replaced must not reach the automaton: the loop drops the stale generation.
// This drives the loop by hand to make the race deterministic.
func TestStaleTimerFiringIgnored(t *testing.T) {
	cfg, _ := mkCluster(t, 1, config.Memory, nsMisc)
	n, err := New(cfg, "n1", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer close(n.stopping)
	l := n.loop("misc")
	defer l.stopTimers()
	client := func(kind, key string, args ...string) {
		l.step(event{in: automaton.ClientRequest{Req: req(kind, key, args...)}})
	}
	fired := func() event { // the node's timer heap delivers to l.fired (sched.go)
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			l.fmu.Lock()
			if len(l.fired) > 0 {
				ev := l.fired[0]
				l.fired = l.fired[1:]
				l.fmu.Unlock()
				return ev
			}
			l.fmu.Unlock()
		}
		t.Fatal("timer did not fire")
		return event{}
	}

	client("set", "arm/8", "0")
	stale := fired()
	client("set", "cancel/8", "x")
	l.step(stale) // cancelled after firing: dropped

	client("set", "arm/9", "0")
	stale = fired()
	client("set", "arm/9", "0") // replaced after firing
	fresh := fired()
	l.step(stale) // the old generation: dropped
	l.step(fresh) // the new one: delivered
	l.step(fresh) // delivered once only

	// As if a Persist were pending: the answer waits.
	if err := l.rel.Output(automaton.Persist{Key: "pending"}, loopIO{l}); err != nil {
		t.Fatal(err)
	}
	client("get", "fired")
	got := string(l.rel.Pending()[0].Output.(automaton.Respond).Resp.Result.Bytes)
	if got != "9" {
		t.Fatalf("automaton saw timers %q, want just one firing of 9", got)
	}
}

// Lazy commit (loop.go, committer) holds a record no output waits for; a
// clean shutdown still commits it, so nothing the automaton persisted is
// lost unless the process dies. The answer leaves before its step's batch
// reaches the committer, so Close races with that hand-off: a node once
// dropped the batch when it saw both ready (about 1 close in 20), hence the
// repetitions. And a committer that found the queue open and empty, then
// parked its held records just after end closed it, left them uncommitted
// (1 failure in go test -race -count=2 ./node at load ~30; a 5 ms pause
// before the parking failed it at the first close): end now commits
// records still held after the committers have returned.
func TestHeldRecordCommittedAtShutdown(t *testing.T) {
	for i := range 30 {
		cfg, ls := mkCluster(t, 1, config.Fsync, nsMisc)
		n := startNode(t, cfg, "n1", ls[0], Options{})
		do(t, n, "misc", req("set", "early/k", "kept")) // answered before its record
		n.Close()
		if got := heldRecord(t, cfg, "early/k"); got != "kept" {
			t.Fatalf("close %d: after shutdown the record holds %q, want kept", i, got)
		}
	}
}

// heldRecord reads key's durable record in n1's namespace misc.
func heldRecord(t *testing.T, cfg *config.Cluster, key string) string {
	t.Helper()
	e, err := storage.Open(cfg, "n1")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, err := e.Namespace("misc")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	return string(recs[key])
}

// recSender records what the loop hands to the transport.
type recSender struct{ calls []string }

func (r *recSender) Send(to automaton.NodeID, ns string, msg []byte) error {
	r.calls = append(r.calls, fmt.Sprintf("send %s %d bytes", to, len(msg)))
	return nil
}

func (r *recSender) SendFrames(to automaton.NodeID, frames []byte, n int) error {
	var msgs []string
	for len(frames) > 0 {
		size := binary.BigEndian.Uint32(frames)
		_, msg, err := transport.DecodePayload(frames[4 : 4+size])
		if err != nil {
			return err
		}
		msgs = append(msgs, string(msg))
		frames = frames[4+size:]
	}
	if len(msgs) != n {
		return fmt.Errorf("%d frames, told %d", len(msgs), n)
	}
	r.calls = append(r.calls, fmt.Sprintf("frames %s %s", to, strings.Join(msgs, ",")))
	return nil
}

// A loop pass's messages leave at its end, one SendFrames per destination
// holding that destination's messages in release order (issue 28 item 3;
// loops of protocols that step client batches);
// a message too large to buffer goes alone, after what was buffered for its
// peer; outside a turn a message goes at once.
func TestTurnCoalescesMessagesPerPeer(t *testing.T) {
	cfg, _ := mkCluster(t, 3, config.Memory, nsMisc)
	n, err := New(cfg, "n1", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer close(n.stopping)
	l := n.loop("misc")
	l.batches = true // as a protocol that steps client batches
	sa := &scripted{}
	l.a = sa
	rec := &recSender{}
	l.out, l.fs = rec, rec
	send := func(to, msg string) automaton.Output {
		return automaton.Send{To: automaton.NodeID(to), Msg: []byte(msg)}
	}
	step := func(outs ...automaton.Output) {
		sa.next = outs
		l.step(event{in: automaton.ClientRequest{}})
	}
	expect := func(when string, want ...string) {
		t.Helper()
		if !slices.Equal(rec.calls, want) {
			t.Fatalf("%s: %q, want %q", when, rec.calls, want)
		}
		rec.calls = nil
	}
	l.beginTurn()
	step(send("n2", "a1"), send("n3", "b1"), send("n2", "a2"))
	step(send("n2", "a3"))
	expect("during the turn")
	l.endTurn()
	expect("at the turn's end", "frames n2 a1,a2,a3", "frames n3 b1")
	l.endTurn()
	expect("an empty turn")
	big := make([]byte, maxTurnFrames)
	l.beginTurn()
	step(send("n2", "a4"), automaton.Send{To: "n2", Msg: big}, send("n3", "b2"))
	expect("a large message in a turn", "frames n2 a4", fmt.Sprintf("send n2 %d bytes", len(big)))
	l.endTurn()
	expect("the turn's end", "frames n3 b2")
	step(send("n3", "b3"))
	expect("outside a turn", "send n3 2 bytes")
}

// The committer's release of what a commit made durable (setDurable,
// outside a pass) is a turn of its own for every protocol on a FrameSender
// transport, Multi-Paxos included (whose passes do not buffer: a pass's
// messages still go at once): the held messages leave in one SendFrames per
// destination, in release order, instead of one write each (a follower's
// Accepteds of one commit). On the old path (one Send per message) this
// test fails at "released".
func TestCommitReleaseCoalescesPerPeer(t *testing.T) {
	cfg, _ := mkCluster(t, 3, config.Memory, nsMisc)
	n, err := New(cfg, "n1", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer close(n.stopping)
	l := n.loop("misc")
	l.batches = false // as Multi-Paxos: passes do not buffer
	sa := &scripted{}
	l.a = sa
	rec := &recSender{}
	l.out, l.fs = rec, rec
	send := func(to, msg string) automaton.Output {
		return automaton.Send{To: automaton.NodeID(to), Msg: []byte(msg)}
	}
	expect := func(when string, want ...string) {
		t.Helper()
		if !slices.Equal(rec.calls, want) {
			t.Fatalf("%s: %q, want %q", when, rec.calls, want)
		}
		rec.calls = nil
	}
	hold := func(outs ...automaton.Output) {
		t.Helper()
		for _, o := range append([]automaton.Output{automaton.Persist{Key: "k"}}, outs...) {
			if err := l.rel.Output(o, loopIO{l}); err != nil {
				t.Fatal(err)
			}
		}
	}
	hold(send("n2", "a1"), send("n3", "b1"), send("n2", "a2"))
	hold(send("n2", "a3"))
	expect("held")
	l.setDurable(l.rel.Last(), false, false)
	expect("released", "frames n2 a1,a2,a3", "frames n3 b1")
	l.setDurable(l.rel.Last(), false, false)
	expect("nothing to release")
	l.beginTurn()
	sa.next = []automaton.Output{send("n2", "a4")}
	l.step(event{in: automaton.ClientRequest{}})
	expect("a pass of a protocol that does not step client batches", "send n2 2 bytes")
	l.endTurn()
	expect("its end")
}
