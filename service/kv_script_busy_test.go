package service

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var envBase atomic.Int64

// freshEnvTime is an Env.Time no other test of this process used, with
// room for 1000 more after it. The registries of ended and answered runs
// (EndRun, RunAnswered) are the process's and keep a run for endedKeep, so
// a test run again in the same process (go test -count=2) would find its
// own earlier runs there: they would start ended or answered and never
// become busy ("no script became busy").
func freshEnvTime() int64 { return 1700000000000000000 + envBase.Add(1000) }

// waitBusy waits for a busy run of this process.
func waitBusy(t *testing.T) *RunningScript {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if r := BusyScript(); r != nil {
			return r
		}
	}
	t.Fatal("no script became busy")
	return nil
}

// TestScriptKill: a run with a busy mark becomes busy at its mark and is
// then killed by Kill, also from inside pcall; one without a mark never
// becomes busy and stops at its budget.
func TestScriptKill(t *testing.T) {
	for _, body := range []string{
		"while true do end",
		"local f = function() while 1 do end end while 1 do pcall(f) end",
	} {
		done := make(chan string, 1)
		go func() {
			done <- newKVState().Apply(op("eval", "", "eval|1000", body, "0")).String()
		}()
		r := waitBusy(t)
		if r.Name != "user_script" || !r.Eval || r.Command[0] != "eval" {
			t.Errorf("%s: registered as %+v", body, r)
		}
		if k := r.Kill(); k != KillDone {
			t.Fatalf("%s: Kill answered %d", body, k)
		}
		select {
		case got := <-done:
			if !strings.Contains(got, "Script killed by user with SCRIPT KILL...") {
				t.Errorf("%s: killed run answered %s", body, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the killed run did not stop", body)
		}
		if len(RunningScripts()) != 0 {
			t.Errorf("%s: the run stayed registered", body)
		}
	}
	// FCALL's run names its function and command.
	s := newKVState()
	if got := s.Apply(op("fnload", "", "append", "#!lua name=lib\nredis.register_function('spin', function() while true do end end)")).String(); got != `"lib"` {
		t.Fatalf("FUNCTION LOAD: %s", got)
	}
	done := make(chan string, 1)
	go func() { done <- s.Apply(op("eval", "", "fcall:spin|1000", "", "0")).String() }()
	r := waitBusy(t)
	if r.Eval || r.Name != "spin" || strings.Join(r.Command, " ") != "fcall spin 0" {
		t.Errorf("FCALL registered as %+v", r)
	}
	r.Kill()
	if got := <-done; !strings.Contains(got, "killed by user") {
		t.Errorf("killed FCALL answered %s", got)
	}
	// Without a mark nothing is registered and the budget ends the loop.
	go func() { done <- newKVState().Apply(op("eval", "", "eval", "while true do end", "0")).String() }()
	time.Sleep(50 * time.Millisecond)
	if n := len(RunningScripts()); n != 0 {
		t.Errorf("a run without a mark is registered (%d)", n)
	}
	if got := <-done; !strings.Contains(got, "exceeded its budget") {
		t.Errorf("unmarked loop: %s", got)
	}
	if got := newKVState().Apply(op("eval", "", "eval|x", "return 1", "0")).String(); !strings.Contains(got, "busy mark") {
		t.Errorf("a bad mark: %s", got)
	}
}

func TestBusyMark(t *testing.T) {
	if BusyMark(5000) != 0 || BusyMark(0) != 0 || BusyMark(10) != 10*InstructionsPerMs {
		t.Errorf("BusyMark: %d %d %d", BusyMark(5000), BusyMark(0), BusyMark(10))
	}
}

// TestKillableBudget: a run with a busy mark that writes nothing may run
// past ScriptBudget (a kill can end it: KillableBudget); one that wrote
// before its mark cannot be killed and ends at ScriptBudget.
func TestKillableBudget(t *testing.T) {
	testScriptCommands(t)
	loop := "local i = 0 while i < 7000000 do i = i + 1 end return i"
	if got := newKVState().Apply(op("eval", "", "eval", loop, "0")).String(); !strings.Contains(got, "exceeded its budget of 20000000") {
		t.Fatalf("the loop without a mark: %s (the test needs it past ScriptBudget)", got)
	}
	if got := newKVState().Apply(op("eval", "", "eval|1000", loop, "0")).String(); got != "(integer) 7000000" {
		t.Errorf("the loop with a mark: %s", got)
	}
	s := newKVState()
	if got := s.Apply(op("eval", "x", "eval|1000", "redis.call('set', 'x', 'y') "+loop, "1", "x")).String(); !strings.Contains(got, "exceeded its budget of 20000000") {
		t.Errorf("the loop after a write: %s", got)
	}
	if got := s.Apply(op("get", "x")).String(); got != `"y"` {
		t.Errorf("the write before the budget's end: %s", got)
	}
}

// TestEndedRun: a run killed at one replica ends at its mark at a replica
// that runs the same operation (same Env) later, with the state the killed
// run left; another operation of the same script (another Env) is not
// killed.
func TestEndedRun(t *testing.T) {
	env := Env{Time: freshEnvTime(), Seed: 42}
	spin := op("eval", "", "eval|1000", "while true do end", "0")
	done := make(chan string, 1)
	go func() { done <- newKVState().ApplyEnv(spin, env).String() }()
	r := waitBusy(t)
	if r.ID == "" || r.Kill() != KillDone {
		t.Fatalf("first run %+v not killed", r)
	}
	if got := <-done; !strings.Contains(got, "killed by user") {
		t.Fatalf("first run: %s", got)
	}
	start := time.Now()
	if got := newKVState().ApplyEnv(spin, env).String(); !strings.Contains(got, "killed by user") {
		t.Errorf("the same operation at a later replica: %s", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the later replica's run took %v", d)
	}
	// Another request of the same script is busy until killed.
	go func() { done <- newKVState().ApplyEnv(spin, Env{Time: env.Time + 1, Seed: 43}).String() }()
	r = waitBusy(t)
	if r.Kill() != KillDone {
		t.Fatal("the other request's run was not busy")
	}
	<-done
	// A kill at another node, handed over by ID, ends a run not yet
	// started and one running.
	env3 := Env{Time: env.Time + 2, Seed: 44}
	EndRun(runID(env3), "eval\x00while true do end\x000")
	if got := newKVState().ApplyEnv(spin, env3).String(); !strings.Contains(got, "killed by user") {
		t.Errorf("a run whose kill came first: %s", got)
	}
	env4 := Env{Time: env.Time + 3, Seed: 45}
	go func() { done <- newKVState().ApplyEnv(spin, env4).String() }()
	waitBusy(t)
	EndRun(runID(env4), "eval\x00while true do end\x000")
	if got := <-done; !strings.Contains(got, "killed by user") {
		t.Errorf("a busy run ended by another node's kill: %s", got)
	}
}

// TestAnsweredRun: a run whose request the node already answered (another
// replica ran it first) is not busy, and stops being busy when the answer
// comes while it runs; it still runs to its end, as the first run did.
func TestAnsweredRun(t *testing.T) {
	env := Env{Time: freshEnvTime(), Seed: 7}
	long := op("eval", "", "counts:eval|1000", "local i = 0 while i < 200000 do i = i + 1 end return i", "0")
	RunAnswered(runID(env))
	if got := newKVState().ApplyEnv(long, env).String(); !strings.HasSuffix(got, "(integer) 200000]") || !strings.Contains(got, `["i" "`+runID(env)+`"]`) {
		t.Errorf("the answered run: %s", got)
	}
	// Answered before it starts: never busy.
	env1 := Env{Time: env.Time + 10, Seed: 9}
	RunAnswered(runID(env1))
	done := make(chan string, 1)
	go func() {
		done <- newKVState().ApplyEnv(op("eval", "", "eval|1000", "while true do end", "0"), env1).String()
	}()
	var run *RunningScript
	for deadline := time.Now().Add(10 * time.Second); run == nil; time.Sleep(time.Millisecond) {
		for _, x := range RunningScripts() {
			if x.ID == runID(env1) {
				run = x
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the run never started")
		}
	}
	time.Sleep(100 * time.Millisecond) // far past its mark (1000 instructions)
	if run.Busy() || BusyScript() != nil {
		t.Error("a run answered before it started is busy")
	}
	run.killed.Store(true)
	<-done
	// Answered while busy.
	env2 := Env{Time: env.Time + 1, Seed: 8}
	go func() {
		done <- newKVState().ApplyEnv(op("eval", "", "eval|1000", "while true do end", "0"), env2).String()
	}()
	r := waitBusy(t)
	RunAnswered(r.ID)
	if r.Busy() || BusyScript() != nil {
		t.Error("an answered run stayed busy")
	}
	r.killed.Store(true) // end the test's run
	<-done
}
