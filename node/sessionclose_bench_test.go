package node

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/config"
)

// BenchmarkCloseReadOnly prints what closing a read-only RESP connection
// costs the paxos log (gateway/sessions.go; session 51): each operation
// is one connection to the leader of a 3-node paxos namespace, fsync on,
// that sends one GET, reads the reply and closes. Reported per
// connection, once every connection's goroutine has ended (INFO clients:
// the probe alone connected): the leader's log records persisted and its
// fdatasyncs. Before session 51 each such close ended its client id's
// session through the log (one record, an fdatasync unless grouped); now
// none.
//
//	go test -run '^$' -bench CloseReadOnly -benchtime 200x ./node
func BenchmarkCloseReadOnly(b *testing.B) {
	ns := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv"}
	cfg, ls := mkCluster(b, 3, config.Fsync, ns)
	var nodes []*Node
	for i, n := range cfg.Nodes {
		nodes = append(nodes, startNode(b, cfg, n.ID, ls[i], Options{}))
	}
	at := leaderIndex(b, nodes)
	addr := cfg.Nodes[at].Client
	probe, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer probe.Close()
	pr := bufio.NewReader(probe)
	cmd := func(nc net.Conn, r *bufio.Reader, args ...string) string {
		var sb strings.Builder
		fmt.Fprintf(&sb, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&sb, "$%d\r\n%s\r\n", len(a), a)
		}
		if _, err := nc.Write([]byte(sb.String())); err != nil {
			b.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		if line[0] == '$' && line != "$-1\r\n" {
			var n int
			fmt.Sscanf(line[1:], "%d", &n)
			body := make([]byte, n+2)
			if _, err := io.ReadFull(r, body); err != nil {
				b.Fatal(err)
			}
			return string(body[:n])
		}
		return strings.TrimSpace(line)
	}
	if r := cmd(probe, pr, "SET", "k", "v"); r != "+OK" {
		b.Fatalf("SET: %q", r)
	}
	alone := func() {
		for end := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
			if strings.Contains(cmd(probe, pr, "INFO", "clients"), "connected_clients:1\r\n") {
				return
			}
			if time.Now().After(end) {
				b.Fatal("the closed connections' goroutines did not end within a minute")
			}
		}
	}
	alone()
	c0, _ := nodes[at].Counters("default")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		if r := cmd(nc, bufio.NewReader(nc), "GET", "k"); r != "v" {
			b.Fatalf("GET: %q", r)
		}
		nc.Close()
	}
	alone()
	b.StopTimer()
	c1, _ := nodes[at].Counters("default")
	b.ReportMetric(float64(c1.Persists-c0.Persists)/float64(b.N), "persists/conn")
	b.ReportMetric(float64(c1.Fsyncs-c0.Fsyncs)/float64(b.N), "fsyncs/conn")
}
