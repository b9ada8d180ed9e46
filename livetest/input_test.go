package livetest

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/transport"
)

// closedByPeer writes b to addr (then half-closes when eof is set) and
// reports whether the node then closes the connection within a few seconds
// rather than leaving it hanging.
func closedByPeer(t *testing.T, addr string, b []byte, eof bool) bool {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	nc.Write(b) // the node may close before reading everything
	if eof {
		nc.(*net.TCPConn).CloseWrite()
	}
	_, err = io.Copy(io.Discard, nc)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

func mustPing(t *testing.T, addr, when string) {
	t.Helper()
	if err := cluster.Ping(addr, "", 2*time.Second); err != nil {
		t.Fatalf("%s: node %s no longer answers PING: %v", when, addr, err)
	}
}

// TestBadPeerAndClientInput feeds hostile bytes to a node's peer and client
// ports and checks that it drops those connections and stays up.
func TestBadPeerAndClientInput(t *testing.T) {
	c := upCluster(t, cluster.UpOptions{Nodes: 3, Protocol: "abd", Durability: "memory"})
	n1 := c.Nodes[0]
	rng := rand.New(rand.NewPCG(7, 7))
	garbage := make([]byte, 8192)
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}

	// Peer port: random bytes, a truncated magic, an oversized frame after a
	// valid handshake.
	if !closedByPeer(t, n1.Peer, garbage, false) {
		t.Error("peer port kept a connection that sent garbage")
	}
	mustPing(t, n1.Client, "after garbage on the peer port")
	if !closedByPeer(t, n1.Peer, []byte("SYN"), true) {
		t.Error("peer port kept a connection that sent a truncated handshake")
	}

	// A handshake from another cluster is refused with a reason.
	func() {
		nc, err := net.DialTimeout("tcp", n1.Peer, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		hs := transport.AppendHandshake(nil, transport.Handshake{Version: transport.Version, Cluster: "someone-else", From: "n2", To: "n1"})
		if _, err := nc.Write(hs); err != nil {
			t.Fatal(err)
		}
		refusal, err := transport.ReadAck(bufio.NewReader(nc))
		if err != nil {
			t.Fatalf("reply to a foreign handshake: %v", err)
		}
		if refusal == "" || !strings.Contains(refusal, "cluster") {
			t.Fatalf("a handshake from cluster %q was accepted (refusal %q)", "someone-else", refusal)
		}
	}()
	mustPing(t, n1.Client, "after a foreign handshake")

	// A valid handshake followed by a frame claiming 4 GiB.
	func() {
		nc, err := net.DialTimeout("tcp", n1.Peer, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(nc)
		refusal, err := transport.Authenticate(nc, br, c.Config.Secret, transport.Handshake{Version: transport.Version, Cluster: c.Config.Cluster, From: "n2", To: "n1", Nonce: transport.NewNonce()})
		if err != nil || refusal != "" {
			t.Fatalf("a valid handshake was refused: %q %v", refusal, err)
		}
		nc.Write(binary.BigEndian.AppendUint32(nil, 0xFFFFFFFF))
		nc.Write(garbage[:64])
		if _, err := io.Copy(io.Discard, br); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Error("peer port kept a connection that announced a 4 GiB frame")
			}
		}
	}()
	mustPing(t, n1.Client, "after an oversized peer frame")

	// Client port: random bytes, a bulk length far over the limit, a deep
	// nesting of arrays, and an unterminated command.
	for _, b := range [][]byte{
		garbage,
		[]byte("*1\r\n$99999999999\r\n"),
		[]byte(strings.Repeat("*1\r\n", 10000)),
		[]byte("*2\r\n$3\r\nGET\r\n$5\r\nab"),
	} {
		nc, err := net.DialTimeout("tcp", n1.Client, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(2 * time.Second))
		nc.Write(b)
		nc.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, nc)
		nc.Close()
		mustPing(t, n1.Client, "after garbage on the client port")
	}

	// The cluster still replicates: a write through n1 is read back through n3.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := client.New([]string{n1.Client}, client.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Set(ctx, "after-garbage", []byte("v1")); err != nil {
		t.Fatalf("SET through n1 after garbage: %v", err)
	}
	r, err := client.New([]string{c.Nodes[2].Client}, client.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if v, found, err := r.Get(ctx, "after-garbage"); err != nil || !found || string(v) != "v1" {
		t.Fatalf("GET through n3 after garbage: %q %v %v", v, found, err)
	}
	st, err := c.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if !s.Alive || !s.PingOK {
			t.Errorf("after hostile input: %+v", s)
		}
	}
}

// TestBadConfig starts `synod node` on invalid cluster files: it must exit
// with a non-zero status and an error naming the offending field.
func TestBadConfig(t *testing.T) {
	good := `cluster: bad-config-test
durability: memory
nodes:
  - id: n1
    peer: 127.0.0.1:1
    client: 127.0.0.1:2
namespaces:
  - name: default
    protocol: abd
    service: kv
`
	for _, tc := range []struct {
		name, yaml, id, want string
	}{
		{"peer without port", strings.Replace(good, "peer: 127.0.0.1:1", "peer: 127.0.0.1", 1), "n1", "nodes[0].peer"},
		{"unknown protocol", strings.Replace(good, "protocol: abd", "protocol: nope", 1), "n1", "namespaces[0].protocol"},
		{"bad durability", strings.Replace(good, "durability: memory", "durability: sometimes", 1), "n1", "durability"},
		{"unknown field", good + "colour: blue\n", "n1", "colour"},
		{"unknown node id", good, "n7", "n7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cluster.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, synodBin, "node", "--config", path, "--id", tc.id).CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("synod node did not exit within 10s on a bad config; output:\n%s", out)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 0 {
				t.Fatalf("synod node exited with %v on a bad config; output:\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("error does not name %q:\n%s", tc.want, out)
			}
		})
	}
}
