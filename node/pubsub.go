package node

import (
	"sync"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Pub/sub between nodes (gateway/pubsub.go has the decisions): a message a
// client publishes at this node goes to every other node of the cluster
// over the peer transport, on a namespace of its own (pubsubNS), outside
// every log, once, and is lost when a peer's queue is full or the peer is
// down (at most once, as Redis Cluster's propagation of PUBLISH).

// pubsubNS is the transport namespace of pub/sub messages.
const pubsubNS = config.GroupSep + "pubsub"

var _ gateway.PubSubBackend = (*Node)(nil)

// pubsubPeers holds the gateway's handler for messages from other nodes.
type pubsubPeers struct {
	mu       sync.Mutex
	recv     []func([]byte)
	announce []func(ns string, op service.Op, res service.Result)
}

// PublishPeers implements gateway.PubSubBackend.
func (n *Node) PublishPeers(msg []byte) {
	if n.tr == nil {
		return
	}
	for _, p := range n.tr.Peers() {
		n.tr.Send(p, pubsubNS, msg) // a full queue drops it: at most once
	}
}

// ReceivePeers implements gateway.PubSubBackend.
func (n *Node) ReceivePeers(f func([]byte)) {
	n.pubsub.mu.Lock()
	n.pubsub.recv = append(n.pubsub.recv, f)
	n.pubsub.mu.Unlock()
}

// onPublish hands a peer's message to this node's gateways (transport
// reader goroutine).
func (n *Node) onPublish(msg []byte) {
	n.pubsub.mu.Lock()
	recv := n.pubsub.recv
	n.pubsub.mu.Unlock()
	for _, f := range recv {
		f(msg)
	}
}

// Announcements (automaton.Announce): the result of an operation a
// protocol proposed on its own, active expiry's removed keys, reaches the
// node whose replica proposed it, once. The node hands it to its gateways
// and, over the peer transport on announceNS, to every other node's,
// once (at most once, as PUBLISH), so that each node publishes the
// "expired" keyspace events its own notify-keyspace-events asks for to
// its own subscribers (gateway/notify.go has the decisions).

// announceNS is the transport namespace of announcements.
const announceNS = config.GroupSep + "announce"

var _ gateway.AnnounceBackend = (*Node)(nil)

// ReceiveAnnounce implements gateway.AnnounceBackend.
func (n *Node) ReceiveAnnounce(f func(ns string, op service.Op, res service.Result)) {
	n.pubsub.mu.Lock()
	n.pubsub.announce = append(n.pubsub.announce, f)
	n.pubsub.mu.Unlock()
}

// announce hands a on to this node's gateways and to the other nodes
// (namespace ns's loop, under its release lock: nothing here blocks).
func (n *Node) announce(ns string, a automaton.Announce) {
	n.onAnnounce(ns, a.Op, a.Result)
	if n.tr == nil {
		return
	}
	e := wire.Encoder{}
	e.String(ns)
	service.EncodeOp(&e, a.Op)
	service.EncodeResult(&e, a.Result)
	for _, p := range n.tr.Peers() {
		n.tr.Send(p, announceNS, e.B) // a full queue drops it: at most once
	}
}

// onAnnounce hands an announcement to this node's gateways.
func (n *Node) onAnnounce(ns string, op service.Op, res service.Result) {
	n.pubsub.mu.Lock()
	recv := n.pubsub.announce
	n.pubsub.mu.Unlock()
	for _, f := range recv {
		f(ns, op, res)
	}
}

// onPeerAnnounce decodes another node's announcement (transport reader
// goroutine).
func (n *Node) onPeerAnnounce(msg []byte) {
	d := wire.NewDecoder(msg)
	ns := d.String()
	op := service.DecodeOp(d)
	res := service.DecodeResult(d)
	if d.Done() != nil {
		n.log.Warn("bad announcement from a peer; dropped")
		return
	}
	n.onAnnounce(ns, op, res)
}
