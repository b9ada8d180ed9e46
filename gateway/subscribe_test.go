package gateway

import (
	"bufio"
	"context"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/resp"
)

// leaderKV is a KV backend whose namespace "default" has a leader the test
// sets, and "plain" none.
type leaderKV struct {
	*gatewaytest.MemBackend
	mu      sync.Mutex
	hint    LeaderHint
	changed chan struct{}
}

func newLeaderKV() *leaderKV {
	return &leaderKV{
		MemBackend: gatewaytest.New(
			config.Namespace{Name: "default", Protocol: "memory", Service: "kv"},
			config.Namespace{Name: "plain", Protocol: "memory", Service: "kv"}),
		changed: make(chan struct{}),
	}
}

func (b *leaderKV) setLeader(id, client string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hint = LeaderHint{From: "n1", ID: automaton.NodeID(id), Client: client}
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *leaderKV) HasLeader(ns string) bool { return ns == "default" }

func (b *leaderKV) WatchLeader(ns string) (LeaderHint, <-chan struct{}, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.hint, b.changed, nil
}

// SUBSCRIBE over RESP2: confirmation, the current leader at once, each
// change; data commands refused while subscribed, PING answered as a
// pub/sub frame; UNSUBSCRIBE leaves subscribed mode.
func TestSubscribeLeaderRESP2(t *testing.T) {
	b := newLeaderKV()
	b.setLeader("n1", "10.0.0.1:6381")
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	run(t, c, []step{
		cmd("SUBSCRIBE synod:leader:plain", "(error) ERR channel 'synod:leader:plain': namespace 'plain' has no leader to announce (its protocol serves at every node alike)"),
		cmd("SUBSCRIBE synod:leader:nope", "(error) ERR channel 'synod:leader:nope': unknown namespace 'nope'"),
		// One refused leader channel refuses the whole command.
		cmd("SUBSCRIBE news synod:leader:plain", "(error) ERR channel 'synod:leader:plain': namespace 'plain' has no leader to announce (its protocol serves at every node alike)"),
		cmd("PUBLISH synod:leader:default n9", "(error) ERR channel 'synod:leader:default' is the node's own leader announcement; it cannot be published to"),
		cmd("UNSUBSCRIBE", "1) \"unsubscribe\"\n2) (nil)\n3) (integer) 0"),
		cmd("SUBSCRIBE synod:leader:default", "1) \"subscribe\"\n2) \"synod:leader:default\"\n3) (integer) 1"),
	})
	msg := "1) \"message\"\n2) \"synod:leader:default\"\n3) "
	if got := c.reply().String(); got != msg+`"n1 10.0.0.1:6381"` {
		t.Fatalf("first message: %s", got)
	}
	run(t, c, []step{
		cmd("GET k", "(error) ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT are allowed in this context"),
		cmd("PING", "1) \"pong\"\n2) \"\""),
		cmd("PING hi", "1) \"pong\"\n2) \"hi\""),
		// A second SUBSCRIBE of the same channel confirms, count unchanged.
		cmd("SUBSCRIBE synod:leader:default", "1) \"subscribe\"\n2) \"synod:leader:default\"\n3) (integer) 1"),
	})
	b.setLeader("n2", "10.0.0.2:6381")
	if got := c.reply().String(); got != msg+`"n2 10.0.0.2:6381"` {
		t.Fatalf("after a change: %s", got)
	}
	// No leader known (an election): nothing is announced; the next leader is.
	b.setLeader("", "")
	b.setLeader("n3", "10.0.0.3:6381")
	if got := c.reply().String(); got != msg+`"n3 10.0.0.3:6381"` {
		t.Fatalf("after an election: %s", got)
	}
	run(t, c, []step{
		cmd("UNSUBSCRIBE synod:leader:default", "1) \"unsubscribe\"\n2) \"synod:leader:default\"\n3) (integer) 0"),
		cmd("SET k v", "OK"),
	})
	// Unsubscribed: a change sends nothing; the next reply is PING's.
	b.setLeader("n1", "10.0.0.1:6381")
	run(t, c, []step{cmd("PING", "PONG")})
}

// Over RESP3 confirmations and messages are push frames, and commands run
// while subscribed.
func TestSubscribeLeaderRESP3(t *testing.T) {
	b := newLeaderKV()
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	c.send("HELLO", "3")
	if r := c.reply(); r.Kind != resp.Map {
		t.Fatalf("HELLO 3: %s", r)
	}
	c.send("SUBSCRIBE", "synod:leader:default")
	wantPush(t, c.reply(), "subscribe", "synod:leader:default", "1")
	// No leader yet: nothing pushed; a command answers normally.
	run(t, c, []step{cmd("SET k v", "OK"), cmd("GET k", `"v"`)})
	b.setLeader("n2", "10.0.0.2:6381")
	wantPush(t, c.reply(), "message", "synod:leader:default", "n2 10.0.0.2:6381")
	run(t, c, []step{cmd("PING", "PONG")})
	c.send("UNSUBSCRIBE")
	wantPush(t, c.reply(), "unsubscribe", "synod:leader:default", "0")
}

func wantPush(t *testing.T, r resp.Reply, elems ...string) {
	t.Helper()
	if r.Kind != resp.Push || len(r.Elems) != len(elems) {
		t.Fatalf("got %s (kind %v), want a push of %q", r, r.Kind, elems)
	}
	for i, e := range r.Elems {
		got := string(e.Str)
		if e.Kind == resp.Integer {
			got = e.String()
			got = strings.TrimPrefix(got, "(integer) ")
		}
		if got != elems[i] {
			t.Fatalf("push element %d = %q, want %q (push %s)", i, got, elems[i], r)
		}
	}
}

// A real redis-cli subscribes and prints the announcements, RESP2 and RESP3.
func TestSubscribeLeaderRedisCLI(t *testing.T) {
	cli := redisTool(t, "redis-cli")
	for _, proto := range []string{"-2", "-3"} {
		t.Run(proto, func(t *testing.T) {
			b := newLeaderKV()
			b.setLeader("n1", "10.0.0.1:6381")
			_, addr := startServer(t, b, ServerOptions{})
			host, port, _ := net.SplitHostPort(addr)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, cli, "-h", host, "-p", port, proto, "SUBSCRIBE", "synod:leader:default")
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			lines := bufio.NewScanner(out)
			next := func() string {
				t.Helper()
				if !lines.Scan() {
					t.Fatalf("redis-cli ended: %v", lines.Err())
				}
				return lines.Text()
			}
			expect := func(want ...string) {
				t.Helper()
				for _, w := range want {
					if got := next(); got != w {
						t.Fatalf("redis-cli printed %q, want %q", got, w)
					}
				}
			}
			expect("subscribe", "synod:leader:default", "1", "message", "synod:leader:default", "n1 10.0.0.1:6381")
			b.setLeader("n2", "10.0.0.2:6381")
			expect("message", "synod:leader:default", "n2 10.0.0.2:6381")
		})
	}
}
