package node

import (
	"sync"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
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
	mu   sync.Mutex
	recv []func([]byte)
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
