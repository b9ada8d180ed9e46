package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
)

func testConfig(addr string) Config {
	c := DefaultConfig()
	c.Addrs = []string{addr}
	c.OpTimeout = 5 * time.Second
	return c
}

func TestRunClosedLoopMixAndHistory(t *testing.T) {
	s := newFakeServer(t)
	cfg := testConfig(s.addr())
	cfg.Ops = 3000
	cfg.Clients = 8
	cfg.Keys = 200
	cfg.ReadRatio = 0.3
	cfg.Dist = "zipf:1.2"
	cfg.Preload = true
	cfg.DurabilityLabel = "in-memory fake"
	cfg.HistoryPath = filepath.Join(t.TempDir(), "h.json")
	var prog bytes.Buffer
	rep, err := Run(context.Background(), cfg, &prog)
	if err != nil {
		t.Fatal(err)
	}
	if rep.All.Count != 3000 || rep.All.Errors != 0 {
		t.Fatalf("completed %d ops with %d errors, want 3000 and 0", rep.All.Count, rep.All.Errors)
	}
	if rep.Reads.Count+rep.Writes.Count != rep.All.Count {
		t.Fatalf("reads %d + writes %d != all %d", rep.Reads.Count, rep.Writes.Count, rep.All.Count)
	}
	if f := float64(rep.Reads.Count) / 3000; math.Abs(f-0.3) > 0.04 {
		t.Fatalf("read fraction %.3f, want 0.30 ± 0.04", f)
	}
	if got := s.count("GET"); got != int(rep.Reads.Count) {
		t.Fatalf("server saw %d GETs, report says %d", got, rep.Reads.Count)
	}
	if got := s.count("SET"); got != int(rep.Writes.Count)+cfg.Keys {
		t.Fatalf("server saw %d SETs, want %d writes + %d preload", got, rep.Writes.Count, cfg.Keys)
	}
	if rep.All.P50Ms <= 0 || rep.All.P99Ms < rep.All.P50Ms || rep.All.MaxMs < rep.All.P99Ms {
		t.Fatalf("implausible latencies %+v", rep.All)
	}
	var seriesOps int64
	for _, s := range rep.Series {
		seriesOps += s.Ops
	}
	if seriesOps != rep.All.Count {
		t.Fatalf("series sums to %d, want %d", seriesOps, rep.All.Count)
	}

	h, err := history.Load(cfg.HistoryPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Ops) != 3000+cfg.Keys || rep.HistoryOps != len(h.Ops) {
		t.Fatalf("history has %d ops (report %d), want %d", len(h.Ops), rep.HistoryOps, 3000+cfg.Keys)
	}
	written := map[string]bool{}
	for _, op := range h.Ops {
		if op.Outcome != history.OK {
			t.Fatalf("op %+v not ok", op)
		}
		if op.Kind == "set" {
			if written[op.Args[0]] {
				t.Fatalf("value %q written twice", op.Args[0])
			}
			written[op.Args[0]] = true
			if len(op.Args[0]) != cfg.ValueSize {
				t.Fatalf("value size %d", len(op.Args[0]))
			}
		}
	}
	// Every key was preloaded, so every read returns a value that was written.
	for _, op := range h.Ops {
		if op.Kind == "get" && (op.Result.Type != "bytes" || !written[op.Result.Bytes]) {
			t.Fatalf("read %+v returned a value never written", op)
		}
	}
	if len(strings.TrimSpace(prog.String())) > 0 && !strings.Contains(prog.String(), "ops/s") {
		t.Fatalf("progress output %q", prog.String())
	}

	var out bytes.Buffer
	rep.Print(&out)
	for _, want := range []string{"durability: in-memory fake", "reads", "writes", "p99.9", "history: 3200 operations"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printed report lacks %q:\n%s", want, out.String())
		}
	}
	jp := filepath.Join(t.TempDir(), "r.json")
	if err := rep.WriteJSON(jp); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(jp)
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back["durability"] != "in-memory fake" || back["series"] == nil || back["config"].(map[string]any)["clients"] != 8.0 {
		t.Fatalf("JSON report lacks fields: %s", b)
	}
}

func TestRunErrorsCountedAndHistoryOutcomes(t *testing.T) {
	s := newFakeServer(t)
	s.inject = func(name string, n int) string {
		switch {
		case name == "GET" && n%10 == 0:
			return "-ERR injected read failure\r\n"
		case name == "SET" && n%13 == 0:
			return "close"
		case name == "SET" && n%7 == 0:
			return "-ERR injected write failure\r\n"
		}
		return ""
	}
	cfg := testConfig(s.addr())
	cfg.Ops = 2000
	cfg.Clients = 4
	cfg.ReadRatio = 0.5
	cfg.HistoryPath = filepath.Join(t.TempDir(), "h.json")
	rep, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	gets, sets := s.count("GET"), s.count("SET")
	wantReadErrs := int64(gets / 10)
	wantWriteErrs := int64(sets/13 + sets/7 - sets/91)
	if rep.Reads.Errors != wantReadErrs || rep.Writes.Errors != wantWriteErrs {
		t.Fatalf("errors reads %d writes %d, want %d and %d (server saw %d GETs, %d SETs)",
			rep.Reads.Errors, rep.Writes.Errors, wantReadErrs, wantWriteErrs, gets, sets)
	}
	if rep.All.Count+rep.All.Errors != 2000 || rep.All.Errors != wantReadErrs+wantWriteErrs {
		t.Fatalf("count %d + errors %d, want 2000 in all", rep.All.Count, rep.All.Errors)
	}
	if rep.Reconnects != wantWriteErrs {
		t.Fatalf("reconnects %d, want one per failed write (%d)", rep.Reconnects, wantWriteErrs)
	}
	if len(rep.ErrorSamples) == 0 {
		t.Fatal("no error samples")
	}
	h, err := history.Load(cfg.HistoryPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Ops) != 2000 {
		t.Fatalf("history has %d ops, want 2000", len(h.Ops))
	}
	var failed, unknown int64
	unknownProc := map[int]int64{} // process -> call time of its unknown op
	for _, op := range h.Ops {
		switch op.Outcome {
		case history.Failed:
			failed++
			if op.Kind != "get" {
				t.Fatalf("failed write %+v", op)
			}
		case history.Unknown:
			unknown++
			if op.Kind != "set" {
				t.Fatalf("unknown read %+v", op)
			}
			if _, dup := unknownProc[op.Process]; dup {
				t.Fatalf("process %d has two unknown ops", op.Process)
			}
			unknownProc[op.Process] = op.Call
		}
	}
	if failed != wantReadErrs || unknown != wantWriteErrs {
		t.Fatalf("history failed %d unknown %d, want %d and %d", failed, unknown, wantReadErrs, wantWriteErrs)
	}
	// A process issues nothing after an operation whose outcome is unknown.
	for _, op := range h.Ops {
		if c, ok := unknownProc[op.Process]; ok && op.Call > c {
			t.Fatalf("process %d issued %+v after its unknown op", op.Process, op)
		}
	}
}

func TestRunOpenLoop(t *testing.T) {
	s := newFakeServer(t)
	cfg := testConfig(s.addr())
	cfg.Ops = 300
	cfg.Rate = 2000
	cfg.Clients = 4
	rep, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Mode != "open" || rep.All.Count+rep.Dropped != 300 || rep.All.Errors != 0 {
		t.Fatalf("mode %s count %d dropped %d errors %d, want open and 300 arrivals", rep.Mode, rep.All.Count, rep.Dropped, rep.All.Errors)
	}
	// 300 arrivals at 2000/s take about 150 ms (sd about 9 ms).
	if rep.ElapsedSec < 0.1 || rep.ElapsedSec > 1.5 {
		t.Fatalf("open loop took %.3f s, want about 0.15 s", rep.ElapsedSec)
	}
}

// slowTarget answers after a fixed delay, to observe open-loop latency
// accounting from scheduled arrival times.
type slowTarget struct{ d time.Duration }

func (s slowTarget) Do(ctx context.Context, op service.Op) (service.Result, error) {
	time.Sleep(s.d)
	return service.OK(), nil
}
func (slowTarget) Close() error { return nil }

func TestOpenLoopChargesQueueing(t *testing.T) {
	// One client taking 5 ms per op against 1000 arrivals/s: the queue grows, and
	// latency measured from arrival must far exceed the 5 ms service time.
	cfg := testConfig("unused:1")
	cfg.NewTarget = func(context.Context, string, int) (Target, error) { return slowTarget{5 * time.Millisecond}, nil }
	cfg.TargetName = "slow"
	cfg.Clients = 1
	cfg.Rate = 1000
	cfg.Duration = 100 * time.Millisecond
	rep, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Late == 0 {
		t.Fatal("no late operations reported although the server is 5x too slow")
	}
	if rep.All.P99Ms < 50 {
		t.Fatalf("p99 %.1f ms: queueing delay not charged (service time is 5 ms)", rep.All.P99Ms)
	}
	if rep.Config.Target != "slow" {
		t.Fatalf("target name %q", rep.Config.Target)
	}
}

func TestRunDurationClosedLoop(t *testing.T) {
	s := newFakeServer(t)
	cfg := testConfig(s.addr())
	cfg.Duration = 300 * time.Millisecond
	cfg.Clients = 2
	start := time.Now()
	rep, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 300*time.Millisecond || el > 3*time.Second {
		t.Fatalf("run took %v for a 300ms duration", el)
	}
	if rep.All.Count == 0 || len(rep.Series) == 0 {
		t.Fatalf("nothing measured: %+v", rep.All)
	}
}

func TestRunInterrupted(t *testing.T) {
	s := newFakeServer(t)
	cfg := testConfig(s.addr())
	cfg.Duration = time.Hour
	// The interruption comes 200 ms into the measured phase, not 200 ms after
	// Run is called: on a loaded machine (CI's race pass) connecting 16
	// clients alone took longer, and the test then saw a failed dial instead
	// of an interrupted run.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg.OnMeasure = func() { time.AfterFunc(200*time.Millisecond, cancel) }
	start := time.Now()
	rep, err := Run(ctx, cfg, nil)
	t.Logf("Run returned after %v", time.Since(start))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Interrupted || rep.ElapsedSec > 5 {
		t.Fatalf("interrupted %v after %.1f s", rep.Interrupted, rep.ElapsedSec)
	}
}

func TestConnectionSetupCommands(t *testing.T) {
	s := newFakeServer(t)
	s.password = "pw"
	cfg := testConfig(s.addr())
	cfg.Ops = 20
	cfg.Clients = 3
	cfg.Password = "pw"
	cfg.Namespace = "kv1"
	cfg.ReadMode = "regular"
	if _, err := Run(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	setup := append([][]string(nil), s.setup...)
	s.mu.Unlock()
	if len(setup) != 3 {
		t.Fatalf("%d connections, want 3", len(setup))
	}
	for i, cmds := range setup {
		if strings.Join(cmds, "|") != "AUTH pw|SYNOD NS kv1|SYNOD READ regular" {
			t.Fatalf("connection %d setup %q", i, cmds)
		}
	}

	s.refuseSynod = true
	_, err := Run(context.Background(), cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "SYNOD NS") {
		t.Fatalf("refused SYNOD NS: err %v", err)
	}
	cfg.Namespace, cfg.ReadMode, cfg.Password = "", "", "wrong"
	_, err = Run(context.Background(), cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("bad password: err %v", err)
	}
}

// With Leader, every client moves to the server SYNOD LEADER names; a
// server that knows no leader keeps its clients; one that refuses SYNOD
// fails the run.
func TestLeaderOption(t *testing.T) {
	follower, leader := newFakeServer(t), newFakeServer(t)
	follower.leader = leader.addr()
	leader.leader = leader.addr()
	cfg := testConfig(follower.addr())
	cfg.Ops = 30
	cfg.Clients = 3
	cfg.Leader = true
	if _, err := Run(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	if f, l := follower.count("GET")+follower.count("SET"), leader.count("GET")+leader.count("SET"); f != 0 || l < 30 {
		t.Fatalf("operations at the follower %d, at the leader %d (want 0, >= 30)", f, l)
	}
	follower.leader = ""
	if _, err := Run(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	if f := follower.count("GET") + follower.count("SET"); f < 30 {
		t.Fatalf("with no leader known, %d operations stayed at the first server", f)
	}
	follower.refuseSynod = true
	if _, err := Run(context.Background(), cfg, nil); err == nil || !strings.Contains(err.Error(), "SYNOD LEADER") {
		t.Fatalf("a server refusing SYNOD LEADER: err %v", err)
	}
}

func TestPreloadFailureAborts(t *testing.T) {
	s := newFakeServer(t)
	s.inject = func(name string, n int) string {
		if name == "SET" && n == 5 {
			return "-ERR disk full\r\n"
		}
		return ""
	}
	cfg := testConfig(s.addr())
	cfg.Ops = 10
	cfg.Preload = true
	_, err := Run(context.Background(), cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "preload") || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("err %v", err)
	}
}

func TestConnectFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := testConfig(addr)
	cfg.Ops = 1
	if _, err := Run(context.Background(), cfg, nil); err == nil || !strings.Contains(err.Error(), "connecting") {
		t.Fatalf("err %v", err)
	}
}

func TestValidate(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"no addr":      func(c *Config) { c.Addrs = nil },
		"no bound":     func(c *Config) { c.Duration, c.Ops = 0, 0 },
		"clients":      func(c *Config) { c.Clients = 0 },
		"keys":         func(c *Config) { c.Keys = 0 },
		"value size":   func(c *Config) { c.ValueSize = 4 },
		"read ratio":   func(c *Config) { c.ReadRatio = 1.5 },
		"dist":         func(c *Config) { c.Dist = "zipf:0.9" },
		"rate":         func(c *Config) { c.Rate = -1 },
		"read mode":    func(c *Config) { c.ReadMode = "sloppy" },
		"timeout":      func(c *Config) { c.OpTimeout = 0 },
		"neg duration": func(c *Config) { c.Duration = -time.Second },
	} {
		c := DefaultConfig()
		c.Ops = 10
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c := DefaultConfig()
	c.Ops = 10
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := Preset("seed001")
	if err != nil || p.Keys != 1000 || p.ValueSize != 1024 || p.Dist != "zipf:1.345675" || p.ReadRatio != 0.9 || !p.Preload || p.Clients != 25 {
		t.Fatalf("seed001 preset %+v %v", p, err)
	}
	if _, err := Preset("ycsb-z"); err == nil {
		t.Fatal("unknown preset accepted")
	}
}

func TestRedisReplyParsing(t *testing.T) {
	for _, tc := range []struct {
		reply string
		want  service.Result
		bad   bool
	}{
		{reply: "+OK\r\n", want: service.OK()},
		{reply: "+PONG\r\n", want: service.Bytes([]byte("PONG"))},
		{reply: "-ERR no quorum\r\n", want: service.Result{Type: service.ResultErr, Err: "ERR no quorum"}},
		{reply: ":-42\r\n", want: service.Int(-42)},
		{reply: "$5\r\nhe\r\no\r\n", want: service.Bytes([]byte("he\r\no"))},
		{reply: "$0\r\n\r\n", want: service.Bytes([]byte{})},
		{reply: "$-1\r\n", want: service.Nil()},
		{reply: "*1\r\n$1\r\na\r\n", bad: true},
		{reply: ":x\r\n", bad: true},
		{reply: "$3\r\nabcd\r\n", bad: true},
		{reply: "+OK\n", bad: true},
	} {
		cli, srv := net.Pipe()
		go func() {
			_, _ = readCommand(bufioReader(srv))
			srv.Write([]byte(tc.reply))
			srv.Close()
		}()
		tg := &RedisTarget{conn: cli, br: bufioReader(cli), bw: bufioWriter(cli), timeout: time.Second}
		res, err := tg.Do(context.Background(), service.Op{Kind: "get", Key: "k"})
		tg.Close()
		if tc.bad {
			if err == nil {
				t.Errorf("%q: accepted as %v", tc.reply, res)
			}
			continue
		}
		if err != nil || !res.Equal(tc.want) {
			t.Errorf("%q: got %v, %v; want %v", tc.reply, res, err, tc.want)
		}
	}
}

// FollowerRedisFactory connects every client to a server that names
// another as the leader, starting from the address it is given, and fails
// when every server names itself or none.
func TestFollowerFactory(t *testing.T) {
	leader, follower := newFakeServer(t), newFakeServer(t)
	leader.leader, follower.leader = leader.addr(), leader.addr()
	cfg := testConfig(leader.addr())
	cfg.Addrs = append(cfg.Addrs, follower.addr())
	cfg.Ops = 30
	cfg.Clients = 4
	cfg.NewTarget = FollowerRedisFactory(RedisOptions{}, cfg.Addrs)
	if _, err := Run(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	if f, l := follower.count("GET")+follower.count("SET"), leader.count("GET")+leader.count("SET"); l != 0 || f < 30 {
		t.Fatalf("operations at the leader %d, at the follower %d (want 0, >= 30)", l, f)
	}
	follower.leader = ""
	if _, err := Run(context.Background(), cfg, nil); err == nil || !strings.Contains(err.Error(), "no follower") {
		t.Fatalf("no server names another as leader: err %v", err)
	}
}
