package node

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/synod-dev/synod/config"
)

// BenchmarkRESPSet: SETs of 100-byte values on 10,000 keys through the
// RESP gateway of n1 (abd, esds) or of the leader (paxos) of a 3-node
// cluster in this process (in memory; esds with fsync, as its live cell), by 1 or 64 clients, one connection
// each, no pipelining: the shared path RESP parse -> dispatch -> node
// hand-off -> protocol -> service apply -> reply that the live 64-client
// cells run (scripts/bench-ab). The clients send preencoded commands and
// read "+OK" lines (no allocation of theirs per SET), so allocs/op is the
// three nodes' and the gateway's, summed; cpu-us/op is the process's
// user+system CPU per SET (the clients' reads and writes included). The
// figures docs/costs/s50-alloc50.md compares before and after:
//
//	go test ./node -run '^$' -bench RESPSet -benchtime 20000x -count 6
func BenchmarkRESPSet(b *testing.B) {
	for _, proto := range []string{"abd", "esds", "paxos"} {
		for _, clients := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/clients=%d", proto, clients), func(b *testing.B) {
				benchRESPSet(b, proto, clients)
			})
		}
	}
}

func benchRESPSet(b *testing.B, proto string, clients int) {
	ns := config.Namespace{Name: "default", Protocol: proto, Service: "kv"}
	dur := config.Memory
	if proto == "esds" { // esds refuses memory on 3 nodes
		dur = config.Fsync
	}
	cfg, ls := mkCluster(b, 3, dur, ns)
	var nodes []*Node
	for i, n := range cfg.Nodes {
		nodes = append(nodes, startNode(b, cfg, n.ID, ls[i], Options{}))
	}
	at := 0
	if proto == "paxos" {
		at = leaderIndex(b, nodes)
	}
	run := respSets(b, cfg.Nodes[at].Client, clients)
	b.ReportAllocs()
	p0 := takeProcCounts(nodes)
	b.ResetTimer()
	run()
	b.StopTimer()
	p0.report(b, nodes, float64(b.N))
}

// respSets dials clients RESP connections to addr, each with its own
// preencoded SETs of 100-byte values on 10,000 keys, and sets every one
// of its keys once (the connections' buffers grown, the keys set); run
// then sends b.N SETs over the connections, closed-loop, one in flight
// on each, and returns when all are answered.
func respSets(b *testing.B, addr string, clients int) (run func()) {
	b.Helper()
	val := make([]byte, 100)
	for i := range val {
		val[i] = 'v'
	}
	type client struct {
		nc   net.Conn
		r    *bufio.Reader
		cmds [][]byte
	}
	const keys, perClient = 10000, 64
	cs := make([]*client, clients)
	for i := range cs {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { nc.Close() })
		c := &client{nc: nc, r: bufio.NewReader(nc)}
		for j := range perClient {
			k := fmt.Sprintf("key:%06d", (i*perClient+j)%keys)
			c.cmds = append(c.cmds, fmt.Appendf(nil, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(k), k, len(val), val))
		}
		cs[i] = c
	}
	set := func(c *client, j int) error {
		if _, err := c.nc.Write(c.cmds[j%perClient]); err != nil {
			return err
		}
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return err
		}
		if string(line) != "+OK\r\n" {
			return fmt.Errorf("SET: %q", line)
		}
		return nil
	}
	for _, c := range cs {
		for j := range perClient {
			if err := set(c, j); err != nil {
				b.Fatal(err)
			}
		}
	}
	return func() {
		var wg sync.WaitGroup
		for i, c := range cs {
			n := b.N / clients
			if i < b.N%clients {
				n++
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range n {
					if err := set(c, j); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
}

// leaderIndex waits (at most 30 s) for nodes[0] to know the default
// namespace's leader and returns its index in nodes (node IDs n1, n2, ...).
func leaderIndex(b *testing.B, nodes []*Node) int {
	b.Helper()
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if id, _, err := nodes[0].Leader("default"); err == nil && id != "" {
			at := 0
			fmt.Sscanf(string(id), "n%d", &at)
			return at - 1
		}
		if time.Now().After(end) {
			b.Fatal("no leader")
		}
	}
}
