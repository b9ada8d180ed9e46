package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/service"
)

// peerLink carries one node's pub/sub peer messages to another node, each
// on its own goroutine, as the transport does.
type peerLink struct{ peer *Server }

func (l peerLink) PublishPeers(m []byte)         { go l.peer.receivePeer(append([]byte(nil), m...)) }
func (l peerLink) ReceivePeers(func(msg []byte)) {}

// TestKillRemote: SCRIPT KILL at a node whose replica does not run the
// script it sent (pbpaxos: the leader executes, the backups install its
// state) asks the other nodes; the node whose replica runs it kills it and
// answers, UNKILLABLE when it wrote first; with no run anywhere the asker
// answers NOTBUSY when its wait ends.
func TestKillRemote(t *testing.T) {
	asker, runner := &Server{}, &Server{}
	asker.scr.peers, runner.scr.peers = peerLink{runner}, peerLink{asker}

	if got := asker.scr.killRemote(true, "eval\x00return 2\x000", 100*time.Millisecond); !strings.Contains(got.Err, "NOTBUSY") {
		t.Fatalf("no run anywhere: %v", got)
	}
	for _, tc := range []struct{ mode, body, want, ends string }{
		// Bodies no other test runs: a kill another test handed to this
		// process names its script by its command line.
		{"eval", "local killremote = 1 while true do end", "", "Script killed by user"},
		{"eval", "redis.call('set','killremote','y') while true do end", "UNKILLABLE", ""},
		{"fcall:killremote_spin", "", "", "Script killed by user"},
	} {
		// A run ends by itself at its instruction budget (~1 s quiet); on
		// a loaded machine that can come before the kill: then it is
		// tried again.
		for attempt := 1; ; attempt++ {
			// The mode as the gateway sends it: with the report prefix
			// (scriptReports), which the run's name leaves out.
			op := service.Op{Kind: "eval", Args: [][]byte{[]byte(service.ScriptCounts + tc.mode + "|1000"), []byte(tc.body), []byte("0")}}
			cmdline := strings.Join(service.RunCommand(op), "\x00")
			st := service.KV{}.NewState()
			if r := st.Apply(service.Op{Kind: "fnload", Args: [][]byte{[]byte("append"), []byte("#!lua name=killremote\nredis.register_function('killremote_spin', function() while true do end end)")}}); r.Err != "" {
				t.Fatal(r.Err)
			}
			done := make(chan service.Result, 1)
			go func() { done <- st.Apply(op) }()
			for deadline := time.Now().Add(30 * time.Second); !busyRun(cmdline); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: never busy", tc.body)
				}
			}
			got := asker.scr.killRemote(tc.mode == "eval", cmdline, 10*time.Second)
			r := <-done
			if strings.Contains(got.Err, "NOTBUSY") && strings.Contains(r.String(), "exceeded its budget") && attempt < 5 {
				t.Logf("%s: the run reached its budget first (attempt %d)", tc.body, attempt)
				continue
			}
			if (tc.want == "" && got.Err != "") || !strings.HasPrefix(got.Err, tc.want) {
				t.Fatalf("%s: SCRIPT KILL through the peer answered %v, want %q (the run ended with %v)", tc.body, got, tc.want, r)
			}
			if !strings.Contains(r.String(), tc.ends) {
				t.Errorf("%s: the run ended with %v", tc.body, r)
			}
			break
		}
	}
	// A kill naming another script kills nothing.
	op := service.Op{Kind: "eval", Args: [][]byte{[]byte("eval|1000"), []byte("local killremote = 2 while true do end"), []byte("0")}}
	done := make(chan service.Result, 1)
	go func() { done <- service.KV{}.NewState().Apply(op) }()
	for !busyRun(strings.Join(service.RunCommand(op), "\x00")) {
		time.Sleep(time.Millisecond)
	}
	if got := asker.scr.killRemote(true, "eval\x00return 1\x000", 100*time.Millisecond); !strings.Contains(got.Err, "NOTBUSY") {
		t.Fatalf("a kill naming another script answered %v", got)
	}
	time.Sleep(20 * time.Millisecond) // the runner's killLater gave up at once: nothing ended
	if !busyRun(strings.Join(service.RunCommand(op), "\x00")) {
		t.Fatal("a kill naming another script ended the run")
	}
	for _, r := range service.RunningScripts() {
		r.Kill()
	}
	if r := <-done; !strings.Contains(r.String(), "killed by user") {
		t.Fatalf("the run ended with %v", r)
	}
}

// TestBusyElsewhere: while a script this node sent is overdue and its run
// is at another node's replica only (paxos with another leader, pbpaxos),
// FUNCTION KILL of an EVAL (SCRIPT KILL of an FCALL) answers BUSY at once,
// as Redis does, and FUNCTION STATS answers the running function from the
// flight, with the library counts of this node's replica, read without the
// log (which waits behind the run).
func TestBusyElsewhere(t *testing.T) {
	srv, addr := startServer(t, gatewaytest.MustAutomaton(t, pxName, "kv"), ServerOptions{})
	c := dial(t, addr)
	run(t, c, []step{{[]string{"FUNCTION", "LOAD", "#!lua name=elsewhere\nredis.register_function('f', function() return 1 end)\nredis.register_function('g', function() return 2 end)"}, `"elsewhere"`}})
	// Flights only: no replica of this process runs them.
	ev := srv.scr.sending(service.Op{Kind: "eval", Args: [][]byte{[]byte("eval|20"), []byte("while true do end"), []byte("0")}})
	start := time.Now()
	if got := srv.scr.killScript(false); !strings.Contains(got.Err, "BUSY Redis is busy running a script. You can only call SCRIPT KILL") || time.Since(start) > time.Second {
		t.Errorf("FUNCTION KILL while an EVAL runs elsewhere: %v after %v", got, time.Since(start))
	}
	ev()
	fc := srv.scr.sending(service.Op{Kind: "eval", Args: [][]byte{[]byte(service.ScriptCounts + "fcall:f|20"), nil, []byte("0")}})
	defer fc()
	time.Sleep(5 * time.Millisecond)
	if got := srv.scr.killScript(true); !strings.Contains(got.Err, "BUSY Redis is busy running a script. You can only call FUNCTION KILL") {
		t.Errorf("SCRIPT KILL while an FCALL runs elsewhere: %v", got)
	}
	got := c.do("FUNCTION", "STATS")
	for _, want := range []string{`"running_script"`, `"name"`, `"f"`, `"fcall"`, `"duration_ms"`, `"libraries_count"`, "(integer) 1", `"functions_count"`, "(integer) 2"} {
		if !strings.Contains(got, want) {
			t.Errorf("FUNCTION STATS lacks %s:\n%s", want, got)
		}
	}
}

// busyRun says whether this process has a busy run of cmdline.
func busyRun(cmdline string) bool {
	for _, r := range service.RunningScripts() {
		if r.Busy() && strings.Join(r.Command, "\x00") == cmdline {
			return true
		}
	}
	return false
}
