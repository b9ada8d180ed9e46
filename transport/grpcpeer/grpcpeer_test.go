package grpcpeer

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/transport"
)

var modes = []string{config.TransportGRPCUnary, config.TransportGRPCStream}

// logBuf collects log output of one endpoint.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// inbox records delivered messages.
type inbox struct {
	mu   sync.Mutex
	msgs []string
}

func (in *inbox) handler(from automaton.NodeID, ns string, msg []byte) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.msgs = append(in.msgs, fmt.Sprintf("%s/%s/%s", from, ns, msg))
}

func (in *inbox) get() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.msgs...)
}

func listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	var err error
	for range 100 { // a restarted endpoint re-listens on its port
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal(err)
	return nil
}

type endpoint struct {
	t   *Transport
	in  *inbox
	log *logBuf
}

func (e endpoint) sender(mode string) transport.Sender {
	if mode == config.TransportGRPCStream {
		return e.t.Stream()
	}
	return e.t.Unary()
}

// start runs endpoint id of cluster on ln; addrs are every member's addresses.
func start(t *testing.T, cluster string, id automaton.NodeID, ln net.Listener, addrs map[automaton.NodeID]string, stream bool) endpoint {
	t.Helper()
	e := endpoint{in: &inbox{}, log: &logBuf{}}
	var err error
	e.t, err = New(Options{
		Cluster: cluster, Self: id, Listener: ln, Handler: e.in.handler, Stream: stream,
		Logger: slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Addr:   func(p automaton.NodeID) (string, bool) { a, ok := addrs[p]; return a, ok },
		Peers: func() []automaton.NodeID {
			var out []automaton.NodeID
			for p := range addrs {
				out = append(out, p)
			}
			return out
		},
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Resync: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.t.Close() })
	return e
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sendUntil sends msg until the receiver has it (loss is allowed while a
// connection comes up).
func sendUntil(t *testing.T, s transport.Sender, to automaton.NodeID, in *inbox, msg, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.Send(to, "ns", []byte(msg))
		wait := time.Now().Add(100 * time.Millisecond)
		for time.Now().Before(wait) {
			for _, m := range in.get() {
				if m == want {
					return
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q never delivered; got %v", want, in.get())
		}
	}
}

// TestModesDeliver: in each mode two endpoints exchange messages both
// ways, every message once and in the order sent.
func TestModesDeliver(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			l1, l2 := listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")
			addrs := map[automaton.NodeID]string{"n1": l1.Addr().String(), "n2": l2.Addr().String()}
			stream := mode == config.TransportGRPCStream
			e1, e2 := start(t, "c", "n1", l1, addrs, stream), start(t, "c", "n2", l2, addrs, stream)
			sendUntil(t, e1.sender(mode), "n2", e2.in, "hello", "n1/ns/hello")
			sendUntil(t, e2.sender(mode), "n1", e1.in, "hi", "n2/ns/hi")
			base := len(e2.in.get())
			const n = 200
			for i := range n {
				if err := e1.sender(mode).Send("n2", "ns", []byte(fmt.Sprint(i))); err != nil {
					t.Fatal(err)
				}
			}
			// sendUntil may have sent "hello" more than once, and a copy
			// sent before message 0 may land after base was read (grpc-unary
			// under load, session 60's trial CI): those copies are left out.
			numbered := func() []string {
				var out []string
				for _, m := range e2.in.get()[base:] {
					if m != "n1/ns/hello" {
						out = append(out, m)
					}
				}
				return out
			}
			eventually(t, "200 messages", func() bool { return len(numbered()) >= n })
			got := numbered()
			for i, m := range got {
				if want := fmt.Sprintf("n1/ns/%d", i); m != want {
					t.Fatalf("message %d is %q, want %q (FIFO per peer)", i, m, want)
				}
			}
			// A unary send is counted when its call returns, which may be
			// after the receiver has delivered it.
			var st transport.PeerStats
			eventually(t, "n1's stats for n2 to count every send", func() bool {
				u, s := e1.t.Stats()
				if st = u["n2"]; stream {
					st = s["n2"]
				}
				return st.Sent >= n+1 && st.Connected
			})
			if err := e1.sender(mode).Send("n9", "ns", []byte("x")); err == nil || !strings.Contains(err.Error(), "unknown peer") {
				t.Errorf("send to a non-member: %v", err)
			}
		})
	}
}

// TestRefusesMisWiredPeers: a peer from another cluster, and one that meant
// to reach another node, are refused and logged on both sides; nothing of
// theirs is delivered.
func TestRefusesMisWiredPeers(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			stream := mode == config.TransportGRPCStream
			l1, l2, l3 := listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")
			// n1 is in cluster "c"; the node at n2's address is in cluster "other".
			addrs := map[automaton.NodeID]string{"n1": l1.Addr().String(), "n2": l2.Addr().String()}
			e1 := start(t, "c", "n1", l1, addrs, stream)
			e2 := start(t, "other", "n2", l2, addrs, stream)
			// n3 believes n4 lives at n1's address (a mis-wired cluster file).
			e3 := start(t, "c", "n3", l3, map[automaton.NodeID]string{"n3": l3.Addr().String(), "n4": l1.Addr().String()}, stream)
			deadline := time.Now().Add(10 * time.Second)
			for {
				e1.sender(mode).Send("n2", "ns", []byte("x"))
				e2.sender(mode).Send("n1", "ns", []byte("y"))
				e3.sender(mode).Send("n4", "ns", []byte("z"))
				l1s, l2s, l3s := e1.log.String(), e2.log.String(), e3.log.String()
				if strings.Contains(l1s, "cluster mismatch") && strings.Contains(l2s, "cluster mismatch") &&
					strings.Contains(l1s, `wrong node: peer \"n3\" meant to reach node \"n4\"`) && strings.Contains(l3s, "wrong node") &&
					strings.Contains(l1s, "level=ERROR") && strings.Contains(l3s, "level=ERROR") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("refusals not logged on both sides:\nn1: %s\nn2: %s\nn3: %s", l1s, l2s, l3s)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if m := append(append(e1.in.get(), e2.in.get()...), e3.in.get()...); len(m) != 0 {
				t.Errorf("mis-wired peers delivered %v", m)
			}
		})
	}
}

// TestSurvivesPeerRestart: after a peer stops and starts again on the same
// address, messages flow both ways again.
func TestSurvivesPeerRestart(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			stream := mode == config.TransportGRPCStream
			l1, l2 := listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")
			addrs := map[automaton.NodeID]string{"n1": l1.Addr().String(), "n2": l2.Addr().String()}
			e1, e2 := start(t, "c", "n1", l1, addrs, stream), start(t, "c", "n2", l2, addrs, stream)
			sendUntil(t, e1.sender(mode), "n2", e2.in, "before", "n1/ns/before")
			e2.t.Close()
			// Sends while the peer is down never block; they are queued or dropped.
			for range 10 {
				e1.sender(mode).Send("n2", "ns", []byte("while down"))
			}
			e2 = start(t, "c", "n2", listen(t, addrs["n2"]), addrs, stream)
			sendUntil(t, e1.sender(mode), "n2", e2.in, "after", "n1/ns/after")
			sendUntil(t, e2.sender(mode), "n1", e1.in, "back", "n2/ns/back")
		})
	}
}

// TestSendNeverBlocks: with the peer unreachable, a full queue drops and
// counts instead of blocking.
func TestSendNeverBlocks(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			l1 := listen(t, "127.0.0.1:0")
			dead := listen(t, "127.0.0.1:0")
			deadAddr := dead.Addr().String()
			dead.Close()
			addrs := map[automaton.NodeID]string{"n1": l1.Addr().String(), "n2": deadAddr}
			e := endpoint{in: &inbox{}}
			tr, err := New(Options{Cluster: "c", Self: "n1", Listener: l1, Handler: e.in.handler, QueueLen: 4,
				Addr:  func(p automaton.NodeID) (string, bool) { a, ok := addrs[p]; return a, ok },
				Peers: func() []automaton.NodeID { return []automaton.NodeID{"n2"} }, Stream: mode == config.TransportGRPCStream})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			e.t = tr
			var dropped int
			for range 100 {
				if err := e.sender(mode).Send("n2", "ns", []byte("x")); err == ErrDropped {
					dropped++
				}
			}
			u, s := tr.Stats()
			st := u["n2"]
			if mode == config.TransportGRPCStream {
				st = s["n2"]
			}
			if dropped < 90 || st.Dropped < uint64(dropped) || st.Connected {
				t.Errorf("dropped %d of 100 with a queue of 4; stats %+v", dropped, st)
			}
		})
	}
}

// TestRoundTripEveryTransport: the measuring helper works for each of the
// three transports (its figures are in BenchmarkRoundTrip).
func TestRoundTripEveryTransport(t *testing.T) {
	for _, kind := range config.Transports {
		ds, err := RoundTrip(kind, 1000, 3, 10*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if len(ds) != 3 || Median(ds) <= 0 {
			t.Errorf("%s: %v", kind, ds)
		}
	}
	if _, err := RoundTrip("udp", 10, 1, time.Second); err == nil {
		t.Error("unknown transport accepted")
	}
}
