package grpcpeer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/transport"
)

// Pair is two peer endpoints, "a" and "b", of one transport kind
// (config.TransportTCP, TransportGRPCUnary or TransportGRPCStream) on
// loopback, set up as a node sets them up: each listens on one port split
// between the TCP transport and the gRPC peer service. It exists to measure
// a state update's round trip (the Grid Services thesis, Table III.1) for each transport.
type Pair struct {
	Kind string
	// A and B are a's and b's senders of the pair's kind.
	A, B    transport.Sender
	closers []func() error
}

// NewPair starts the two endpoints. onA and onB receive the messages
// delivered to a and b. Close stops them.
func NewPair(kind string, onA, onB transport.Handler) (*Pair, error) {
	switch kind {
	case config.TransportTCP, config.TransportGRPCUnary, config.TransportGRPCStream:
	default:
		return nil, fmt.Errorf("grpcpeer: unknown transport %q (want one of %v)", kind, config.Transports)
	}
	p := &Pair{Kind: kind}
	var lns [2]net.Listener
	addrs := map[automaton.NodeID]string{}
	for i, id := range []automaton.NodeID{"a", "b"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			p.Close()
			return nil, err
		}
		lns[i] = ln
		addrs[id] = ln.Addr().String()
	}
	addr := func(id automaton.NodeID) (string, bool) { a, ok := addrs[id]; return a, ok }
	for i, id := range []automaton.NodeID{"a", "b"} {
		h := onA
		if id == "b" {
			h = onB
		}
		tcpLn, h2Ln := transport.SplitListener(lns[i], 0, nil)
		tr, err := transport.New(transport.Options{Cluster: "pair", Self: id, Peers: addrs, Listener: tcpLn, Handler: h})
		if err != nil {
			tcpLn.Close()
			h2Ln.Close()
			p.Close()
			return nil, err
		}
		p.closers = append(p.closers, tr.Close)
		var s transport.Sender = tr
		if kind != config.TransportTCP {
			g, err := New(Options{Cluster: "pair", Self: id, Listener: h2Ln, Addr: addr, Handler: h,
				Stream: kind == config.TransportGRPCStream, Peers: func() []automaton.NodeID { return []automaton.NodeID{"a", "b"} }})
			if err != nil {
				h2Ln.Close()
				p.Close()
				return nil, err
			}
			p.closers = append(p.closers, g.Close)
			s = g.Unary()
			if kind == config.TransportGRPCStream {
				s = g.Stream()
			}
		} else {
			h2Ln.Close()
		}
		if id == "a" {
			p.A = s
		} else {
			p.B = s
		}
	}
	return p, nil
}

// Close stops both endpoints.
func (p *Pair) Close() error {
	var errs []error
	for _, c := range p.closers {
		errs = append(errs, c())
	}
	p.closers = nil
	return errors.Join(errs...)
}

// RoundTrip measures n state-update round trips over transport kind on
// loopback: a sends a message of size bytes (at least 8) to b, b's handler
// acknowledges it with an 8-byte message over the same transport, and each
// duration runs from a's Send to a's handler receiving that ack. The
// round trips run one after another, after one unmeasured exchange that
// brings the connections up. A round trip that takes longer than timeout
// (a lost message) is an error.
func RoundTrip(kind string, size, n int, timeout time.Duration) ([]time.Duration, error) {
	size = max(size, 8)
	acks := make(chan uint64, 16)
	var pair *Pair
	ready := make(chan struct{})
	onB := func(from automaton.NodeID, ns string, msg []byte) {
		<-ready
		if len(msg) >= 8 {
			pair.B.Send(from, ns, msg[:8])
		}
	}
	onA := func(_ automaton.NodeID, _ string, msg []byte) {
		if len(msg) == 8 {
			select {
			case acks <- binary.BigEndian.Uint64(msg):
			default:
			}
		}
	}
	pair, err := NewPair(kind, onA, onB)
	close(ready)
	if err != nil {
		return nil, err
	}
	defer pair.Close()
	msg := make([]byte, size)
	exchange := func(seq uint64, wait time.Duration) (time.Duration, error) {
		binary.BigEndian.PutUint64(msg, seq)
		t0 := time.Now()
		if err := pair.A.Send("b", "state", msg); err != nil {
			return 0, err
		}
		deadline := time.After(wait)
		for {
			select {
			case got := <-acks:
				if got == seq {
					return time.Since(t0), nil
				}
			case <-deadline:
				return 0, fmt.Errorf("%s: no ack for update %d of %d bytes within %v", kind, seq, size, wait)
			}
		}
	}
	// Warm up: retry until the connections are up (a unary call or a
	// stream message sent before then may be lost).
	seq := uint64(1)
	start := time.Now()
	for {
		if _, err := exchange(seq, 200*time.Millisecond); err == nil {
			break
		} else if time.Since(start) > timeout {
			return nil, fmt.Errorf("connections not up within %v: %w", timeout, err)
		}
		seq++
	}
	out := make([]time.Duration, 0, n)
	for range n {
		seq++
		d, err := exchange(seq, timeout)
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
	return out, nil
}

// Median of ds (0 for none).
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
