package nemesis

import (
	"net"
	"testing"
	"time"
)

// TestAskLeader: SYNOD LEADER's reply read as the leader's id: an array
// names it, a nil array or an error names none.
func TestAskLeader(t *testing.T) {
	for reply, want := range map[string]string{
		"*2\r\n$2\r\nn2\r\n$14\r\n10.213.1.2:7000\r\n": "n2",
		"*-1\r\n": "",
		"-ERR this server does not know leaders\r\n": "",
	} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			buf := make([]byte, 64)
			if n, _ := c.Read(buf); string(buf[:n]) == "*2\r\n$5\r\nSYNOD\r\n$6\r\nLEADER\r\n" {
				c.Write([]byte(reply))
			}
		}()
		got, err := askLeader(l.Addr().String(), 5*time.Second)
		l.Close()
		if err != nil || got != want {
			t.Errorf("reply %q: leader %q, %v; want %q", reply, got, err, want)
		}
	}
}
