package grpcpeer

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/transport"
	"github.com/synod-dev/synod/transport/grpcpeer/peerpb"
)

// Mode grpc-unary: one Deliver call per message (the Grid Services thesis, III.C.2 "Call").

// unaryPeer is one destination's queue and the goroutine that calls it.
type unaryPeer struct {
	id automaton.NodeID
	q  chan *peerpb.PeerMsg
	c  counters
}

type unarySender struct{ t *Transport }

// Send queues msg for one Deliver call to peer to. It never blocks.
func (s unarySender) Send(to automaton.NodeID, ns string, msg []byte) error {
	t := s.t
	m, err := t.message(to, ns, msg)
	if err != nil {
		return err
	}
	p := t.unaryPeer(to)
	if p == nil {
		return ErrClosed
	}
	select {
	case p.q <- m:
		return nil
	default:
		p.c.dropped.Add(1)
		return ErrDropped
	}
}

// unaryPeer returns peer id's queue, created with its caller goroutine on
// first use (nil once the transport is closed).
func (t *Transport) unaryPeer(id automaton.NodeID) *unaryPeer {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	p := t.unary[id]
	if p == nil {
		p = &unaryPeer{id: id, q: make(chan *peerpb.PeerMsg, t.o.QueueLen)}
		t.unary[id] = p
		t.wg.Add(1)
		go t.runUnary(p)
	}
	return p
}

// message checks a message to send and builds it, copying msg.
func (t *Transport) message(to automaton.NodeID, ns string, msg []byte) (*peerpb.PeerMsg, error) {
	if _, ok := t.o.Addr(to); !ok || to == t.o.Self {
		return nil, fmt.Errorf("%w %q", ErrUnknownPeer, to)
	}
	if ns == "" || len(ns) > 255 {
		return nil, fmt.Errorf("grpcpeer: bad namespace name %q", ns)
	}
	if len(msg) > t.o.MaxMsg {
		return nil, fmt.Errorf("%w: message of %d bytes to %s (limit %d)", transport.ErrFrameTooLarge, len(msg), to, t.o.MaxMsg)
	}
	if t.ctx.Err() != nil {
		return nil, ErrClosed
	}
	return &peerpb.PeerMsg{Cluster: t.o.Cluster, From: string(t.o.Self), To: string(to), Namespace: ns, Msg: append([]byte(nil), msg...)}, nil
}

// runUnary calls Deliver for each queued message in order, one call at a
// time. A failed call loses its message and delays the next by a backoff.
func (t *Transport) runUnary(p *unaryPeer) {
	defer t.wg.Done()
	var f failures
	backoff := t.o.MinBackoff
	for {
		var m *peerpb.PeerMsg
		select {
		case m = <-p.q:
		case <-t.ctx.Done():
			return
		}
		err := t.deliver(p.id, m)
		if err == nil {
			p.c.sent.Add(1)
			p.c.connected.Store(true)
			f.up(t.log, "unary call", p.id)
			backoff = t.o.MinBackoff
			continue
		}
		p.c.dropped.Add(1)
		p.c.connected.Store(false)
		if t.ctx.Err() != nil {
			return
		}
		f.note(t.log, "unary call", p.id, err)
		if !sleep(t.ctx, backoff) {
			return
		}
		backoff = min(2*backoff, t.o.MaxBackoff)
	}
}

func (t *Transport) deliver(id automaton.NodeID, m *peerpb.PeerMsg) error {
	c, err := t.client(id)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(t.ctx, t.o.CallTimeout)
	defer cancel()
	_, err = c.Deliver(ctx, m)
	return err
}

// Deliver serves one message from a peer (mode grpc-unary).
func (t *Transport) Deliver(ctx context.Context, m *peerpb.PeerMsg) (*peerpb.Ack, error) {
	if reason := t.check(m.GetCluster(), m.GetFrom(), m.GetTo()); reason != "" {
		return nil, t.refuse("call", remoteOf(ctx), m.GetFrom(), reason)
	}
	if m.GetNamespace() == "" {
		return nil, status.Error(codes.InvalidArgument, "grpcpeer: message without a namespace")
	}
	from := automaton.NodeID(m.GetFrom())
	if p := t.unaryPeer(from); p != nil {
		p.c.received.Add(1)
	}
	t.o.Handler(from, m.GetNamespace(), m.GetMsg())
	return &peerpb.Ack{}, nil
}
