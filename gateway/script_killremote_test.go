package gateway

import (
	"strings"
	"testing"
	"time"

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
	for _, tc := range []struct{ body, want, ends string }{
		{"while true do end", "", "Script killed by user"},
		{"redis.call('set','x','y') while true do end", "UNKILLABLE", ""},
	} {
		op := service.Op{Kind: "eval", Args: [][]byte{[]byte("eval|1000"), []byte(tc.body), []byte("0")}}
		done := make(chan service.Result, 1)
		go func() { done <- service.KV{}.NewState().Apply(op) }()
		for deadline := time.Now().Add(30 * time.Second); service.BusyScript() == nil; time.Sleep(2 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: never busy", tc.body)
			}
		}
		// Another script's name kills nothing.
		if got := asker.scr.killRemote(true, "eval\x00return 1\x000", 200*time.Millisecond); !strings.Contains(got.Err, "NOTBUSY") {
			t.Fatalf("%s: a kill naming another script answered %v", tc.body, got)
		}
		got := asker.scr.killRemote(true, strings.Join(service.RunCommand(op), "\x00"), 10*time.Second)
		if (tc.want == "" && got.Err != "") || !strings.HasPrefix(got.Err, tc.want) {
			t.Fatalf("%s: SCRIPT KILL through the peer answered %v, want %q", tc.body, got, tc.want)
		}
		select {
		case r := <-done:
			if !strings.Contains(r.Err, tc.ends) {
				t.Errorf("%s: the run ended with %v", tc.body, r)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: the run did not end", tc.body)
		}
	}
}
