package node

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/config"
)

// TestLimitsFromClusterFile: the cluster file's limits reach the node's
// gateway; maxclients counts RESP and gRPC connections together; refusals
// are exported as metrics.
func TestLimitsFromClusterFile(t *testing.T) {
	cfg, ls := mkCluster(t, 1, config.Memory, config.Namespace{Name: "default", Protocol: "abd", Service: "kv"})
	cfg.Limits = &config.Limits{MaxClients: 2, MaxPipeline: 7, ProtoMaxBulkLen: 4096}
	n := startGRPCNode(t, cfg, ls[0])
	addr := n.ClientAddr().String()

	// One gRPC client (connected by a call) and one RESP client: the limit.
	cc, err := grpc.NewClient("passthrough:///"+cfg.Nodes[0].GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := synodpb.NewSynodClient(cc).Do(ctx, &synodpb.Request{ClientId: 1, Seq: 1, Op: &synodpb.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}}); err != nil {
		t.Fatalf("gRPC set: %v", err)
	}
	r1 := respDial(t, addr)
	if got := r1.cmd("CONFIG GET max-pipeline"); !strings.Contains(got, "7") {
		t.Errorf("CONFIG GET max-pipeline: %q", got)
	}
	// A third client is refused with Redis's message.
	r2 := respDial(t, addr)
	if line, _ := r2.br.ReadString('\n'); line != "-ERR max number of clients reached\r\n" {
		t.Errorf("third client: %q", line)
	}
	// proto_max_bulk_len applies.
	if got := r1.raw("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5000\r\n" + strings.Repeat("x", 5000) + "\r\n"); got != "-ERR Protocol error: invalid bulk length\r\n" {
		t.Errorf("bulk over proto_max_bulk_len: %q", got)
	}
	// The refusal is a metric.
	res, err := http.Get("http://" + n.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{`synod_clients_rejected_total{node="n1"} 1`, `synod_clients_output_limit_closed_total{node="n1"} 0`, `synod_clients_backpressure_pauses_total{node="n1"}`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

type respConn struct {
	nc net.Conn
	br *bufio.Reader
}

func respDial(t *testing.T, addr string) *respConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { nc.Close() })
	return &respConn{nc: nc, br: bufio.NewReader(nc)}
}

// cmd sends an inline command and returns its whole reply as sent. Each
// command has its own 30 s deadline: a connection kept through a long test
// (TestNodeUnderFlood's other client) must not run out of a deadline set
// at dial time when the machine is loaded.
func (c *respConn) cmd(line string) string {
	c.nc.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(c.nc, line+"\r\n")
	var out strings.Builder
	readReply(c.br, &out)
	return out.String()
}

// readReply copies one RESP reply, nested arrays and bulk strings read to
// their end, from br to out (what arrived, up to an error).
func readReply(br *bufio.Reader, out *strings.Builder) {
	l, err := br.ReadString('\n')
	out.WriteString(l)
	if err != nil || len(l) < 3 {
		return
	}
	n, err := strconv.Atoi(strings.TrimSuffix(l[1:], "\r\n"))
	if err != nil {
		return
	}
	switch l[0] {
	case '$':
		if n >= 0 {
			b := make([]byte, n+2)
			k, _ := io.ReadFull(br, b)
			out.Write(b[:k])
		}
	case '*', '%', '~', '>':
		if l[0] == '%' {
			n *= 2
		}
		for range n {
			readReply(br, out)
		}
	}
}

func (c *respConn) raw(s string) string {
	io.WriteString(c.nc, s)
	l, _ := c.br.ReadString('\n')
	return l
}

// TestNodeUnderFlood: a running node (ABD, one replica) holding 1000
// clients refuses 2000 more with Redis's message, serves a client that
// pipelines 50000 SETs without reading (answering all once it reads), and
// serves another client throughout; memory stays bounded.
func TestNodeUnderFlood(t *testing.T) {
	const max, dials = 1000, 3000
	pipelined := 50_000
	if raceDetector {
		pipelined = 5_000
	}
	cfg, ls := mkCluster(t, 1, config.Memory, config.Namespace{Name: "default", Protocol: "abd", Service: "kv"})
	cfg.Limits = &config.Limits{MaxClients: max}
	n := startNode(t, cfg, "n1", ls[0], Options{})
	addr := n.ClientAddr().String()
	before := memInUse()

	// The pipelining client and the client served throughout come first.
	pc := respDial(t, addr)
	pc.nc.SetDeadline(time.Now().Add(time.Minute))
	pc.nc.(*net.TCPConn).SetReadBuffer(16 << 10)
	other := respDial(t, addr)
	writeErr := make(chan error, 1)
	go func() {
		var b []byte
		for i := 0; i < pipelined; i++ {
			b = fmt.Appendf(b, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$6\r\n%06d\r\n", i)
			if len(b) >= 32<<10 || i == pipelined-1 {
				if _, err := pc.nc.Write(b); err != nil {
					writeErr <- err
					return
				}
				b = b[:0]
			}
		}
		writeErr <- nil
	}()

	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	served, refused := 2, 0
	for i := 2; i < dials; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		held = append(held, c)
		c.SetDeadline(time.Now().Add(30 * time.Second))
		io.WriteString(c, "PING\r\n")
		switch line, _ := bufio.NewReaderSize(c, 64).ReadString('\n'); line {
		case "+PONG\r\n":
			served++
		case "-ERR max number of clients reached\r\n":
			refused++
		default:
			t.Fatalf("connection %d: %q", i, line)
		}
		if i%500 == 0 {
			if got := other.cmd(fmt.Sprintf("SET o%d v", i)); got != "+OK\r\n" {
				t.Fatalf("the other client during the flood: %q", got)
			}
		}
	}
	if served != max || refused != dials-max {
		t.Errorf("served %d, refused %d; want %d and %d", served, refused, max, dials-max)
	}
	during := memInUse()
	if got := other.cmd("GET o2500"); got != "$1\r\nv\r\n" {
		t.Errorf("GET by the other client: %q", got)
	}
	// The pipelining client now reads: every SET answered, and the last
	// value is the last one sent.
	br := bufio.NewReaderSize(pc.nc, 64<<10)
	for i := 0; i < pipelined; i++ {
		if line, err := br.ReadString('\n'); line != "+OK\r\n" {
			t.Fatalf("pipelined reply %d: %q %v", i, line, err)
		}
	}
	if err := <-writeErr; err != nil {
		t.Fatal(err)
	}
	if got := other.cmd("GET k"); got != fmt.Sprintf("$6\r\n%06d\r\n", pipelined-1) {
		t.Errorf("GET k after the pipeline: %q", got)
	}
	grown := int64(during) - int64(before)
	t.Logf("node under flood: %d dials, maxclients %d: %d served, %d refused, %d pipelined SETs; memory in use grew %.1f MB",
		dials, max, served, refused, pipelined, float64(grown)/(1<<20))
	if grown > 256<<20 {
		t.Errorf("memory grew %d MB; want under 256 MB", grown>>20)
	}
}

func memInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}
