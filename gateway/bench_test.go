package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/resp"
)

// benchServe sends b.N commands (SET and GET of 100-byte values on 1000
// keys), depth at a time, over one connection to a server on an in-memory
// backend, and reads the replies: the gateway's cost per command (the
// client's share is one preencoded write per batch and the RESP reader).
// Run with -benchmem: allocs/op is the gateway's and the reader's.
func benchServe(b *testing.B, depth int) { benchServeWith(b, depth, 0) }

// benchServeWith is benchServe with idle more connections open and, when
// idle > 0, the ordering step armed by a BLPOP (order.go): each write then
// peeks at the idle connections' sockets.
func benchServeWith(b *testing.B, depth, idle int) {
	s := NewServer(gatewaytest.KV(), ServerOptions{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go s.Serve(l)
	defer s.Close()
	for i := range idle {
		nc, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		if i == 0 { // arm the step: a blocking command that times out
			r := resp.NewReader(bufio.NewReader(nc), resp.Limits{})
			fmt.Fprintf(nc, "*3\r\n$5\r\nBLPOP\r\n$6\r\nnolist\r\n$4\r\n0.01\r\n")
			if _, err := r.ReadReply(); err != nil {
				b.Fatal(err)
			}
		}
	}
	nc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	val := make([]byte, 100)
	for i := range val {
		val[i] = 'v'
	}
	var batch []byte
	for i := range depth {
		k := fmt.Sprintf("key:%012d", i*7%1000)
		if i%2 == 0 {
			batch = fmt.Appendf(batch, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(k), k, len(val), val)
		} else {
			batch = fmt.Appendf(batch, "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", len(k), k)
		}
	}
	r := resp.NewReader(bufio.NewReaderSize(nc, 64<<10), resp.Limits{})
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n += depth {
		if _, err := nc.Write(batch); err != nil {
			b.Fatal(err)
		}
		for range depth {
			if _, err := r.ReadReply(); err != nil {
				if err == io.EOF {
					b.Fatal("server closed the connection")
				}
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkServeOneByOne(b *testing.B)  { benchServe(b, 1) }
func BenchmarkServePipelined(b *testing.B) { benchServe(b, 32) }

// BenchmarkServeOrdered: one by one, with 3 idle connections open and the
// ordering step armed, its worst case within its connection limit.
func BenchmarkServeOrdered(b *testing.B) { benchServeWith(b, 1, 3) }
