package grpcpeer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/transport/grpcpeer/peerpb"
)

// Mode grpc-stream: the receiver subscribes to each sender and the sender
// pushes down that stream (the Grid Services thesis, III.A and III.C.2 "Notification").

// streamPeer is the queue of messages for one receiver, drained by the
// Subscribe call that receiver holds open to this node.
type streamPeer struct {
	id  automaton.NodeID
	q   chan *peerpb.PeerMsg
	c   counters
	gen uint64             // under Transport.mu: the current subscription
	cur context.CancelFunc // under Transport.mu: ends the current subscription
}

type streamSender struct{ t *Transport }

// Send queues msg for peer to's subscription. It never blocks.
func (s streamSender) Send(to automaton.NodeID, ns string, msg []byte) error {
	t := s.t
	m, err := t.message(to, ns, msg)
	if err != nil {
		return err
	}
	// Down a stream authenticated when it opened, a message carries only
	// its namespace and bytes.
	m.Cluster, m.From, m.To = "", "", ""
	p := t.streamPeer(to)
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

func (t *Transport) streamPeer(id automaton.NodeID) *streamPeer {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	p := t.stream[id]
	if p == nil {
		p = &streamPeer{id: id, q: make(chan *peerpb.PeerMsg, t.o.QueueLen)}
		t.stream[id] = p
	}
	return p
}

// Subscribe serves a peer's subscription: after checking who it is, it
// pushes the peer's queued messages down the stream, in order, until the
// peer goes, a newer subscription from the same peer replaces this one, or
// the transport closes.
func (t *Transport) Subscribe(req *peerpb.SubscribeRequest, ss grpc.ServerStreamingServer[peerpb.PeerMsg]) error {
	ctx := ss.Context()
	if reason := t.check(req.GetCluster(), req.GetFrom(), req.GetTo()); reason != "" {
		return t.refuse("subscription", remoteOf(ctx), req.GetFrom(), reason)
	}
	id := automaton.NodeID(req.GetFrom())
	p := t.streamPeer(id)
	if p == nil {
		return status.Error(codes.Unavailable, "grpcpeer: closing")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t.mu.Lock()
	if p.cur != nil {
		p.cur() // the peer resubscribed (it restarted, or its old stream is dead)
	}
	p.gen++
	gen := p.gen
	p.cur = cancel
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		if p.gen == gen {
			p.cur = nil
			p.c.connected.Store(false)
		}
		t.mu.Unlock()
	}()
	if err := ss.SendHeader(metadata.Pairs(MDCluster, t.o.Cluster, MDNode, string(t.o.Self))); err != nil {
		return err
	}
	p.c.connected.Store(true)
	t.log.Debug("peer subscribed", "peer", id, "remote", remoteOf(ctx))
	for {
		select {
		case m := <-p.q:
			if err := ss.Send(m); err != nil {
				p.c.dropped.Add(1)
				return err
			}
			p.c.sent.Add(1)
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-t.ctx.Done():
			return status.Error(codes.Unavailable, "grpcpeer: closing")
		}
	}
}

// ---- the subscribing side ----

// subscriber holds this node's subscription to one peer open.
type subscriber struct {
	id       automaton.NodeID
	cancel   context.CancelFunc
	received atomic.Uint64
}

// resyncLoop keeps one subscriber per peer listed by Options.Peers.
func (t *Transport) resyncLoop() {
	defer t.wg.Done()
	for {
		t.resync()
		if !sleep(t.ctx, 2*t.o.Resync) { // jittered in [Resync, 2·Resync]
			return
		}
	}
}

func (t *Transport) resync() {
	want := map[automaton.NodeID]bool{}
	for _, id := range t.o.Peers() {
		if id != t.o.Self {
			want[id] = true
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	for id, s := range t.subs {
		if !want[id] {
			s.cancel()
			delete(t.subs, id)
		}
	}
	for id := range want {
		if _, ok := t.subs[id]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(t.ctx)
		s := &subscriber{id: id, cancel: cancel}
		t.subs[id] = s
		t.wg.Add(1)
		go t.subscribe(ctx, s)
	}
}

// subscribe opens the subscription to s.id and hands every message pushed
// down it to the handler, reopening it with backoff when it fails.
func (t *Transport) subscribe(ctx context.Context, s *subscriber) {
	defer t.wg.Done()
	var f failures
	backoff := t.o.MinBackoff
	for {
		up, err := t.subscribeOnce(ctx, s, &f)
		if ctx.Err() != nil {
			return
		}
		if up {
			backoff = t.o.MinBackoff
		}
		f.note(t.log, "subscription", s.id, err)
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, t.o.MaxBackoff)
	}
}

var errEnded = errors.New("subscription ended by the peer")

// subscribeOnce runs one subscription until it fails; up reports whether
// the peer accepted it.
func (t *Transport) subscribeOnce(ctx context.Context, s *subscriber, f *failures) (up bool, err error) {
	c, err := t.client(s.id)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.Subscribe(ctx, &peerpb.SubscribeRequest{Cluster: t.o.Cluster, From: string(t.o.Self), To: string(s.id)})
	if err != nil {
		return false, err
	}
	md, err := st.Header()
	if err != nil {
		return false, err
	}
	if md == nil || len(md.Get(MDCluster)) == 0 {
		// The stream ended without a header: its status says why.
		_, err := st.Recv()
		if err == nil {
			err = errEnded
		}
		return false, err
	}
	if cl, node := first(md.Get(MDCluster)), first(md.Get(MDNode)); cl != t.o.Cluster || node != string(s.id) {
		reason := fmt.Sprintf("mis-wired peer: the node at %s's address is node %q of cluster %q, not node %q of cluster %q", s.id, node, cl, s.id, t.o.Cluster)
		return false, status.Error(codes.PermissionDenied, reason)
	}
	f.up(t.log, "subscription", s.id)
	for {
		m, err := st.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errEnded
			}
			return true, err
		}
		if m.GetNamespace() == "" {
			return true, fmt.Errorf("grpcpeer: message without a namespace from %s", s.id)
		}
		s.received.Add(1)
		t.o.Handler(s.id, m.GetNamespace(), m.GetMsg())
	}
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}
