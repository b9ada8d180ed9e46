package sim

import (
	"bytes"
	"container/heap"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// scriptProto is a test protocol whose behaviour is the package variable
// script; every input an automaton receives is appended to inputs.
type scriptProto struct{}

var (
	script func(self automaton.NodeID, in automaton.Input) []automaton.Output
	inputs []string
)

func init() { automaton.Register(scriptProto{}) }

func (scriptProto) Name() string          { return "test-script" }
func (scriptProto) IdempotentRetry() bool { return true }
func (scriptProto) New(cfg automaton.Config) (automaton.Automaton, error) {
	return &scripted{self: cfg.Self}, nil
}

type scripted struct{ self automaton.NodeID }

func (a *scripted) Step(in automaton.Input) []automaton.Output {
	inputs = append(inputs, describeInput(a.self, in))
	if script == nil {
		return nil
	}
	return script(a.self, in)
}

func describeInput(self automaton.NodeID, in automaton.Input) string {
	switch in := in.(type) {
	case automaton.Start:
		var recs []string
		for _, k := range sortedKeys(in.Records) {
			recs = append(recs, k+"="+string(in.Records[k]))
		}
		return fmt.Sprintf("%s start [%s]", self, strings.Join(recs, " "))
	case automaton.PeerMessage:
		return fmt.Sprintf("%s msg %s from %s", self, in.Msg, in.From)
	case automaton.TimerFired:
		return fmt.Sprintf("%s timer %d", self, in.ID)
	case automaton.ClientRequest:
		return fmt.Sprintf("%s request %v", self, in.Req.Op)
	}
	return "?"
}

// newScripted builds a simulator over test-script with no clients issuing
// operations (Ops 0 is not used: the tests drive nodes directly), booted.
func newScripted(t *testing.T, nodes int, f func(self automaton.NodeID, in automaton.Input) []automaton.Output, mod func(*Config)) *simulator {
	t.Helper()
	script, inputs = f, nil
	t.Cleanup(func() { script, inputs = nil, nil })
	cfg := Config{Protocol: "test-script", Nodes: nodes, Clients: 1, Ops: 1, Seed: 1, Latency: "constant:1ms", Fsync: "constant:1ms"}
	if mod != nil {
		mod(&cfg)
	}
	s, err := newSimulator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range s.nodes {
		s.boot(n)
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s
}

// runUntil processes every event scheduled at or before t.
func (s *simulator) runUntil(t time.Duration) {
	for len(s.q) > 0 && s.q[0].at <= t && s.err == nil {
		e := heap.Pop(&s.q).(*event)
		s.now = e.at
		s.handle(e)
	}
	if s.now < t {
		s.now = t
	}
}

func (s *simulator) queued(kind evKind) int {
	k := 0
	for _, e := range s.q {
		if e.kind == kind {
			k++
		}
	}
	return k
}

func msgInputs() []string {
	var out []string
	for _, in := range inputs {
		if strings.Contains(in, " msg ") || strings.Contains(in, " start ") || strings.Contains(in, " timer ") {
			out = append(out, in)
		}
	}
	return out
}

func TestDeterminism(t *testing.T) {
	for _, proto := range []string{"test-leader", "test-leader-ackfirst"} {
		cfg := Config{Protocol: proto, Nodes: 3, Clients: 4, Ops: 300, Faults: "all", Latency: "pareto:1ms:1.5"}
		run := func(seed int64) *Result {
			c := cfg
			c.Seed = seed
			r, err := Run(c)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		a, b, c := run(7), run(7), run(8)
		if a.Digest != b.Digest {
			t.Errorf("%s: seed 7 gave digests %s and %s", proto, a.Digest, b.Digest)
		}
		ja, _ := json.Marshal(a.History)
		jb, _ := json.Marshal(b.History)
		if !bytes.Equal(ja, jb) || a.SimTime != b.SimTime || a.Stats != b.Stats {
			t.Errorf("%s: seed 7 gave different histories, times or stats", proto)
		}
		if a.Digest == c.Digest {
			t.Errorf("%s: seeds 7 and 8 gave the same digest", proto)
		}
		if a.Ops != 300 || a.Stats.Crashes == 0 || a.Stats.Partitions == 0 || a.Stats.MsgsDropped == 0 {
			t.Errorf("%s: expected 300 ops with crashes, partitions and drops: %+v", proto, a.Stats)
		}
	}
}

func TestCrashLosesUnsyncedKeepsSynced(t *testing.T) {
	s := newScripted(t, 1, func(self automaton.NodeID, in automaton.Input) []automaton.Output {
		if m, ok := in.(automaton.ClientRequest); ok {
			return []automaton.Output{automaton.Persist{Key: m.Req.Op.Key, Value: m.Req.Op.Args[0]}}
		}
		return nil
	}, nil)
	n := s.nodes[0]
	put := func(k, v string) {
		s.step(n, automaton.ClientRequest{Req: automaton.Request{Op: service.Op{Kind: "set", Key: k, Args: [][]byte{[]byte(v)}}}})
	}
	put("a", "1")
	put("b", "2") // same fsync window: group commit covers a; b waits for the next
	if len(n.durable) != 0 || len(n.buf) != 2 {
		t.Fatalf("before fsync: durable %v, buffered %d", n.durable, len(n.buf))
	}
	s.runUntil(1 * time.Millisecond) // first fsync (started by a) covers only a
	if string(n.durable["a"]) != "1" || n.durable["b"] != nil {
		t.Fatalf("after the first fsync: durable %q", n.durable)
	}
	s.crash(n) // b is unsynced: lost
	s.runUntil(10 * time.Millisecond)
	s.boot(n)
	want := "n1 start [a=1]"
	if got := inputs[len(inputs)-1]; got != want {
		t.Fatalf("restart saw %q, want %q", got, want)
	}
	put("c", "3")
	s.runUntil(20 * time.Millisecond)
	s.crash(n)
	s.boot(n)
	if got, want := inputs[len(inputs)-1], "n1 start [a=1 c=3]"; got != want {
		t.Fatalf("second restart saw %q, want %q", got, want)
	}
}

func TestHeldOutputsWaitForFsync(t *testing.T) {
	s := newScripted(t, 2, func(self automaton.NodeID, in automaton.Input) []automaton.Output {
		if self != "n1" {
			return nil
		}
		switch in := in.(type) {
		case automaton.TimerFired:
			switch in.ID {
			case 1:
				return []automaton.Output{
					automaton.Send{To: "n2", Msg: []byte("before")},
					automaton.Persist{Key: "x", Value: []byte("1")},
					automaton.Send{To: "n2", Msg: []byte("after")},
				}
			case 2: // a later step, while x is still unsynced
				return []automaton.Output{automaton.Send{To: "n2", Msg: []byte("later")}}
			}
		case automaton.Start:
			return []automaton.Output{automaton.SetTimer{ID: 1, After: time.Millisecond}, automaton.SetTimer{ID: 2, After: 1500 * time.Microsecond}}
		}
		return nil
	}, func(c *Config) { c.Fsync = "constant:10ms"; c.Latency = "constant:100us" })
	s.runUntil(5 * time.Millisecond)
	got := strings.Join(msgInputs(), "; ")
	if want := "n1 start []; n2 start []; n1 timer 1; n2 msg before from n1; n1 timer 2"; got != want {
		t.Fatalf("before the fsync:\n got %s\nwant %s", got, want)
	}
	if s.nodes[0].rel.Held() != 2 {
		t.Fatalf("want 2 held outputs, have %d", s.nodes[0].rel.Held())
	}
	s.runUntil(30 * time.Millisecond)
	got = strings.Join(msgInputs(), "; ")
	if want := "n1 start []; n2 start []; n1 timer 1; n2 msg before from n1; n1 timer 2; n2 msg after from n1; n2 msg later from n1"; got != want {
		t.Fatalf("after the fsync:\n got %s\nwant %s", got, want)
	}
}

func TestCrashDropsHeldOutputsTimersAndInflight(t *testing.T) {
	s := newScripted(t, 2, func(self automaton.NodeID, in automaton.Input) []automaton.Output {
		if _, ok := in.(automaton.Start); ok && self == "n1" {
			return []automaton.Output{
				automaton.SetTimer{ID: 9, After: 5 * time.Millisecond},
				automaton.Send{To: "n2", Msg: []byte("hello")},
				automaton.Persist{Key: "x", Value: []byte("1")},
				automaton.Send{To: "n2", Msg: []byte("held")},
			}
		}
		if _, ok := in.(automaton.Start); ok && self == "n2" {
			return []automaton.Output{automaton.Send{To: "n1", Msg: []byte("to-n1")}}
		}
		return nil
	}, func(c *Config) { c.Fsync = "constant:2ms"; c.Latency = "constant:1ms" })
	s.runUntil(500 * time.Microsecond)
	script = nil // the restarted n1 does nothing
	s.crash(s.nodes[0])
	s.boot(s.nodes[0])
	s.runUntil(50 * time.Millisecond)
	got := strings.Join(msgInputs(), "; ")
	// n2 gets "hello" (sent before the crash); "held" died with n1; the message
	// in flight to n1 and n1's timer died with the first incarnation.
	if want := "n1 start []; n2 start []; n1 start []; n2 msg hello from n1"; got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
}

func TestTimersCancelAndReplace(t *testing.T) {
	s := newScripted(t, 1, func(self automaton.NodeID, in automaton.Input) []automaton.Output {
		if _, ok := in.(automaton.Start); ok {
			return []automaton.Output{
				automaton.SetTimer{ID: 1, After: time.Millisecond},
				automaton.SetTimer{ID: 2, After: time.Millisecond},
				automaton.SetTimer{ID: 3, After: time.Millisecond},
				automaton.CancelTimer{ID: 2},
				automaton.SetTimer{ID: 3, After: 3 * time.Millisecond}, // replaces
			}
		}
		return nil
	}, nil)
	s.runUntil(2 * time.Millisecond)
	if got, want := strings.Join(msgInputs(), "; "), "n1 start []; n1 timer 1"; got != want {
		t.Fatalf("at 2ms: got %s, want %s", got, want)
	}
	s.runUntil(10 * time.Millisecond)
	if got, want := strings.Join(msgInputs(), "; "), "n1 start []; n1 timer 1; n1 timer 3"; got != want {
		t.Fatalf("at 10ms: got %s, want %s", got, want)
	}
}

func TestPartitionDropsAcrossGroupsAndHeals(t *testing.T) {
	s := newScripted(t, 3, func(self automaton.NodeID, in automaton.Input) []automaton.Output {
		if tf, ok := in.(automaton.TimerFired); ok && self == "n1" {
			m := []byte(fmt.Sprint("m", tf.ID))
			return []automaton.Output{automaton.Send{To: "n2", Msg: m}, automaton.Send{To: "n3", Msg: m}}
		}
		if _, ok := in.(automaton.Start); ok && self == "n1" {
			return []automaton.Output{automaton.SetTimer{ID: 1, After: time.Millisecond}, automaton.SetTimer{ID: 2, After: 5 * time.Millisecond}, automaton.SetTimer{ID: 3, After: 20 * time.Millisecond}}
		}
		return nil
	}, func(c *Config) { c.Latency = "constant:2ms" })
	// n3 is cut off; m1 is in flight to n3 when the partition starts (dropped
	// on arrival), m2 is sent during it, m3 after it heals.
	s.runUntil(2 * time.Millisecond)
	s.net.group = []int{0, 0, 1}
	s.net.partGen++
	s.schedule(10*time.Millisecond, &event{kind: evHealPartition, gen: s.net.partGen})
	s.runUntil(50 * time.Millisecond)
	got := strings.Join(msgInputs(), "; ")
	want := "n1 start []; n2 start []; n3 start []; n1 timer 1; n2 msg m1 from n1; n1 timer 2; n2 msg m2 from n1; n1 timer 3; n2 msg m3 from n1; n3 msg m3 from n1"
	if got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	if s.stats.MsgsDropped != 2 {
		t.Fatalf("want 2 dropped messages, got %d", s.stats.MsgsDropped)
	}
}

func TestPauseDelaysButDoesNotLose(t *testing.T) {
	s := newScripted(t, 2, func(self automaton.NodeID, in automaton.Input) []automaton.Output {
		if _, ok := in.(automaton.Start); ok {
			if self == "n1" {
				var out []automaton.Output
				for i := 0; i < 5; i++ {
					out = append(out, automaton.Send{To: "n2", Msg: []byte(fmt.Sprint("m", i))})
				}
				return out
			}
			return []automaton.Output{automaton.SetTimer{ID: 7, After: 2 * time.Millisecond}}
		}
		return nil
	}, func(c *Config) { c.Latency = "uniform:1ms:3ms" })
	s.pause(s.nodes[1])
	s.runUntil(100 * time.Millisecond)
	if got := len(msgInputs()); got != 2 {
		t.Fatalf("inputs delivered to a paused node: %v", msgInputs())
	}
	if len(s.nodes[1].pausedQ) != 6 {
		t.Fatalf("want 5 messages and 1 timer queued, have %d", len(s.nodes[1].pausedQ))
	}
	s.resume(s.nodes[1])
	s.runUntil(100 * time.Millisecond)
	got := msgInputs()[2:]
	if len(got) != 6 || !strings.Contains(strings.Join(got, ";"), "n2 timer 7") {
		t.Fatalf("after resume: %v", got)
	}
	for i := 0; i < 5; i++ {
		if !strings.Contains(strings.Join(got, ";"), fmt.Sprintf("n2 msg m%d from n1", i)) {
			t.Fatalf("m%d lost across the pause: %v", i, got)
		}
	}
}

func TestContractViolationsAreErrors(t *testing.T) {
	for name, out := range map[string]automaton.Output{
		"sent a message to itself": automaton.Send{To: "n1", Msg: []byte("x")},
		"unknown node":             automaton.Send{To: "n9", Msg: []byte("x")},
		"negative duration":        automaton.SetTimer{ID: 1, After: -1},
	} {
		script = func(self automaton.NodeID, in automaton.Input) []automaton.Output {
			if _, ok := in.(automaton.Start); ok {
				return []automaton.Output{out}
			}
			return nil
		}
		_, err := Run(Config{Protocol: "test-script", Nodes: 2, Clients: 1, Ops: 1, Seed: 1})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got error %v", name, err)
		}
	}
	script = nil
}

func TestBrokenTestProtocolIsCaught(t *testing.T) {
	// No del in the mix: an unknown (maybe applied) del could explain a lost value.
	cfg := Config{Nodes: 3, Clients: 6, Ops: 400, Faults: "crash", Keys: 1, Mix: "get:1,set:1,exists:1", Think: "uniform:1ms:10ms", RequestTimeout: 100 * time.Millisecond}
	for _, proto := range []string{"test-leader", "test-leader-volatile"} {
		cfg.Protocol = proto
		violations := 0
		for seed := int64(1); seed <= 10; seed++ {
			cfg.Seed = seed
			r, err := Run(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if r.Check.Result == "unknown" {
				t.Fatalf("%s seed %d: check undecided", proto, seed)
			}
			if r.Violation {
				violations++
			}
			if r.Completed < r.Ops/2 {
				t.Errorf("%s seed %d: only %d of %d operations completed", proto, seed, r.Completed, r.Ops)
			}
		}
		switch {
		case proto == "test-leader" && violations != 0:
			t.Errorf("%s: %d violations in 10 seeds, want 0", proto, violations)
		case proto == "test-leader-volatile" && violations == 0:
			t.Errorf("%s: no violation found in 10 seeds", proto)
		}
		t.Logf("%s: %d/10 seeds violate", proto, violations)
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]string{
		"constant:1ms":      "constant:1ms",
		"uniform:1ms:5ms":   "uniform:1ms:5ms",
		"normal:3ms:500us":  "normal:3ms:500µs",
		"pareto:1ms:1.5":    "pareto:1ms:1.5",
		"uniform:0s:0s":     "uniform:0s:0s",
		"pareto:250us:2.25": "pareto:250µs:2.25",
	} {
		d, err := ParseDist(in)
		if err != nil || d.String() != want {
			t.Errorf("ParseDist(%q) = %v, %v; want %s", in, d, err, want)
		}
	}
	for _, bad := range []string{"", "uniform:1ms", "uniform:5ms:1ms", "pareto:1ms:0", "pareto:0s:1", "normal:x:1ms", "gauss:1ms:1ms", "constant:-1ms"} {
		if _, err := ParseDist(bad); err == nil {
			t.Errorf("ParseDist(%q) succeeded", bad)
		}
	}
	for _, bad := range []string{"crash,fire", "everything"} {
		if _, err := ParseFaults(bad); err == nil {
			t.Errorf("ParseFaults(%q) succeeded", bad)
		}
	}
	if f, err := ParseFaults("crash, pause"); err != nil || !f.crash || !f.pause || f.loss {
		t.Errorf("ParseFaults: %+v %v", f, err)
	}
	// One parser over each world's kinds: power and dead are the sharded world's only.
	for _, k := range []string{"power", "dead"} {
		if _, err := ParseFaults(k); err == nil {
			t.Errorf("ParseFaults(%s) succeeded", k)
		}
	}
	if on, err := ParseFaultKinds("power,pause,reorder", ShardFaultKinds); err != nil || !on["power"] || !on["pause"] || !on["reorder"] || on["crash"] {
		t.Errorf("ParseFaultKinds: %v %v", on, err)
	}
	if on, _ := ParseFaultKinds("all", ShardFaultKinds); len(on) != len(FaultKinds)+2 || !on["dead"] {
		t.Errorf("ParseFaultKinds(all) = %v", on)
	}
	for _, bad := range []string{"get", "get:x", "incr:1", "get:0,set:0", "get:1,get:2"} {
		if _, _, err := parseMix(bad); err == nil {
			t.Errorf("parseMix(%q) succeeded", bad)
		}
	}
	if _, err := Run(Config{Protocol: "nope", Nodes: 1, Clients: 1}); err == nil || !strings.Contains(err.Error(), "unknown protocol") {
		t.Errorf("unknown protocol: %v", err)
	}
}

func TestDistributionsSample(t *testing.T) {
	s := newScripted(t, 1, nil, nil)
	for _, spec := range []string{"uniform:1ms:5ms", "normal:3ms:1ms", "pareto:1ms:1.5", "constant:2ms"} {
		d := MustParseDist(spec)
		var sum time.Duration
		min, max := time.Hour, time.Duration(0)
		const n = 20000
		for i := 0; i < n; i++ {
			v := d.Sample(s.rngNet)
			sum += v
			min, max = minDur(min, v), maxDur(max, v)
		}
		mean := sum / n
		switch d.Kind {
		case Uniform:
			if min < time.Millisecond || max > 5*time.Millisecond || mean < 2900*time.Microsecond || mean > 3100*time.Microsecond {
				t.Errorf("%s: min %v max %v mean %v", spec, min, max, mean)
			}
		case Normal:
			if min < 0 || mean < 2900*time.Microsecond || mean > 3100*time.Microsecond {
				t.Errorf("%s: min %v mean %v", spec, min, mean)
			}
		case Pareto: // mean of Pareto(1ms, 1.5) is 3ms; the cap trims it a little
			if min < time.Millisecond || max > ParetoCap*time.Millisecond || mean < 2*time.Millisecond || mean > 4*time.Millisecond {
				t.Errorf("%s: min %v max %v mean %v", spec, min, max, mean)
			}
		case Constant:
			if min != max || min != 2*time.Millisecond {
				t.Errorf("%s: min %v max %v", spec, min, max)
			}
		}
	}
}

func minDur(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}

func maxDur(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

func TestParseSeeds(t *testing.T) {
	for in, want := range map[string]string{
		"7":         "[7]",
		"1-3":       "[1 2 3]",
		"1-3,2,9":   "[1 2 3 9]",
		" 5 , 4-4 ": "[5 4]",
		"0":         "[0]",
		"-3":        "[-3]",
		"9223372036854775806-9223372036854775807": "[9223372036854775806 9223372036854775807]",
	} {
		got, err := ParseSeeds(in)
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("ParseSeeds(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "3-1", "1-", "1-2-3", "0-99999999"} {
		if _, err := ParseSeeds(bad); err == nil {
			t.Errorf("ParseSeeds(%q) succeeded", bad)
		}
	}
}

func TestCommandRendersSettings(t *testing.T) {
	c := Config{Protocol: "abd", Nodes: 3, Clients: 2, Ops: 10, Seed: 5, Keys: 2, Loss: 0.1,
		ReadMode: automaton.ReadRegular, Params: map[string]string{"b": "2", "a": "x y"}}
	want := "synod-lab sim --protocol abd --nodes 3 --clients 2 --ops 10 --faults none --latency uniform:1ms:5ms --read-mode regular --keys 2 --loss 0.1 --param 'a=x y' --param b=2 --seeds 5"
	if got := c.Command(); got != want {
		t.Errorf("Command:\n got %s\nwant %s", got, want)
	}
}

func TestLinkLatencyOverride(t *testing.T) {
	var got []time.Duration
	var s *simulator
	s = newScripted(t, 3, func(self automaton.NodeID, in automaton.Input) []automaton.Output {
		switch in.(type) {
		case automaton.Start:
			if self == "n1" {
				return []automaton.Output{automaton.Send{To: "n2", Msg: []byte("a")}, automaton.Send{To: "n3", Msg: []byte("b")}}
			}
			if self == "n2" {
				return []automaton.Output{automaton.Send{To: "n1", Msg: []byte("c")}}
			}
		case automaton.PeerMessage:
			got = append(got, s.now)
		}
		return nil
	}, func(c *Config) { c.LinkLatency = map[string]string{"n1->n2": "constant:7ms"} })
	s.runUntil(time.Second)
	// n2->n1 (c) and n1->n3 (b) take the default 1ms, n1->n2 (a) 7ms.
	if fmt.Sprint(got) != "[1ms 1ms 7ms]" {
		t.Fatalf("arrival times %v", got)
	}
	for _, bad := range []string{"n1->n1", "n1-n2", "n1->n9"} {
		_, err := newSimulator(Config{Protocol: "test-script", Nodes: 3, Clients: 1, LinkLatency: map[string]string{bad: "constant:1ms"}})
		if err == nil {
			t.Errorf("link %q accepted", bad)
		}
	}
}
