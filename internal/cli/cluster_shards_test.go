package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/resp"
)

// fakeInfo serves INFO <section> from sections over RESP on loopback
// until the test ends; it returns the address.
func fakeInfo(t *testing.T, sections map[string]string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := resp.NewReader(bufio.NewReader(c), resp.Limits{})
				for {
					cmd, err := r.ReadCommand()
					if err != nil {
						return
					}
					body := ""
					if len(cmd) == 2 && strings.EqualFold(string(cmd[0]), "info") {
						body = sections[string(cmd[1])]
					}
					fmt.Fprintf(c, "$%d\r\n%s\r\n", len(body), body)
				}
			}()
		}
	}()
	return l.Addr().String()
}

// `synod cluster status` shows the requests that spanned groups, summed
// over the nodes that routed them (node/crossgroup.go; session 48): the
// CROSS column per group, a line per namespace with its pairs.
func TestPrintShardsCross(t *testing.T) {
	n1 := fakeInfo(t, map[string]string{
		"shards":     "# Shards\r\n#placement:slots=0-16383,nodes=n1,epoch=1,cross=0,local=1,leader=n1\r\ndefault#s0:slots=0-8191,nodes=n1,epoch=1,cross=3,local=1,leader=n1\r\ndefault#s1:slots=8192-16383,nodes=n2,epoch=1,cross=2,local=0\r\n",
		"crossgroup": "# Crossgroup\r\ndefault:requests=3,computed=1,s0+s1=3\r\n",
	})
	n2 := fakeInfo(t, map[string]string{
		"shards":     "# Shards\r\ndefault#s0:slots=0-8191,nodes=n1,epoch=1,cross=4,local=0\r\ndefault#s1:slots=8192-16383,nodes=n2,epoch=1,cross=4,local=1,leader=n2\r\n",
		"crossgroup": "# Crossgroup\r\ndefault:requests=4,computed=0,s0+s1=4\r\n",
	})
	var out bytes.Buffer
	printShards(&out, []cluster.NodeStatus{{ID: "n1", Client: n1, PingOK: true}, {ID: "n2", Client: n2, PingOK: true}})
	got := out.String()
	for _, want := range []string{
		"GROUP       SLOTS       NODES  LEADER  CROSS",
		"default#s0  0-8191      n1     n1      7",
		"default#s1  8192-16383  n2     n2      6",
		"#placement  0-16383     n1     n1      -",
		"default: 7 requests spanned groups (1 computed); by pair: s0+s1 7",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("cluster status lacks %q:\n%s", want, got)
		}
	}
}
