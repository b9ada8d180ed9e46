// Package trace records latency traces for the Fast Paxos model
// (model/fastpaxos): TCP probes against an echo server, one latency in
// milliseconds per line. The seed's NWS traces (GrADS testbed, 2002) are not
// available; these are ours.
//
// A probe is the NWS one the seed describes (chapter V.B): "the time to
// establish a TCP connection, send four bytes, receive four bytes, and close
// the connection" (ModeNWS), or a round trip of four bytes on an established
// connection with Nagle off (ModeRTT).
package trace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// Probe kinds.
const (
	ModeNWS = "nws"
	ModeRTT = "rtt"
)

// Options configure Record.
type Options struct {
	// Samples is the number of probes.
	Samples int
	// Mode is ModeNWS (default) or ModeRTT.
	Mode string
	// Connect is the echo server to probe; "" starts one on 127.0.0.1.
	Connect string
	// Interval is the pause between probes (0: back to back).
	Interval time.Duration
}

// Echo serves the probe protocol on l until it is closed: read four bytes,
// write them back, until the peer closes.
func Echo(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetNoDelay(true)
			}
			buf := make([]byte, 4)
			for {
				if _, err := io.ReadFull(c, buf); err != nil {
					return
				}
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
	}
}

// Record runs the probes and returns their latencies in ms.
func Record(ctx context.Context, o Options) ([]float64, error) {
	if o.Samples < 1 {
		return nil, fmt.Errorf("trace: %d samples", o.Samples)
	}
	if o.Mode == "" {
		o.Mode = ModeNWS
	}
	if o.Mode != ModeNWS && o.Mode != ModeRTT {
		return nil, fmt.Errorf("trace: mode %q, want %s or %s", o.Mode, ModeNWS, ModeRTT)
	}
	addr := o.Connect
	if addr == "" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		go Echo(l)
		addr = l.Addr().String()
	}
	var d net.Dialer
	out := make([]float64, 0, o.Samples)
	msg, buf := []byte("ping"), make([]byte, 4)
	var conn net.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for len(out) < o.Samples {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		t0 := time.Now()
		if o.Mode == ModeNWS || conn == nil {
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return out, err
			}
			c.(*net.TCPConn).SetNoDelay(true)
			conn = c
			if o.Mode == ModeRTT {
				t0 = time.Now() // the connection is not part of an RTT probe
			}
		}
		if _, err := conn.Write(msg); err != nil {
			return out, err
		}
		if _, err := io.ReadFull(conn, buf); err != nil {
			return out, err
		}
		if o.Mode == ModeNWS {
			err := conn.Close()
			conn = nil
			if err != nil {
				return out, err
			}
		}
		out = append(out, float64(time.Since(t0).Nanoseconds())/1e6)
		if o.Interval > 0 {
			select {
			case <-ctx.Done():
				return out, ctx.Err()
			case <-time.After(o.Interval):
			}
		}
	}
	return out, nil
}

// Write writes a trace: the header lines as '#' comments, then one latency
// per line in ms with microsecond resolution.
func Write(w io.Writer, header []string, samples []float64) error {
	var b strings.Builder
	for _, h := range header {
		fmt.Fprintf(&b, "# %s\n", h)
	}
	for _, v := range samples {
		fmt.Fprintf(&b, "%.3f\n", v)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ErrNetemUnavailable is returned (wrapped, with the reason) when a WAN-like
// link cannot be built here.
var ErrNetemUnavailable = errors.New("netem WAN link not available")
