package service

import (
	"strings"
	"testing"
	"time"
)

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
