package transport

import (
	"fmt"

	"github.com/synod-dev/synod/automaton"
)

// Peers added and removed at run time (membership changes, see package
// protocol/paxos): a node learns a new member's peer address from the
// replicated configuration, and drops a removed member.

func (t *Transport) peer(id automaton.NodeID) (*peer, bool) {
	t.pmu.RLock()
	p, ok := t.peers[id]
	t.pmu.RUnlock()
	return p, ok
}

// AddPeer makes id a peer at addr: messages to it are queued and sent over a
// new outgoing connection, and its incoming connections are accepted. Adding
// a known peer at the same address does nothing; at another address it
// replaces the peer (its queued messages are lost).
func (t *Transport) AddPeer(id automaton.NodeID, addr string) error {
	if id == t.o.Self {
		return nil
	}
	if id == "" || addr == "" {
		return fmt.Errorf("transport: peer %q has an empty id or address", id)
	}
	t.mu.Lock() // held so that Close cannot start waiting before wg.Add
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	t.pmu.Lock()
	defer t.pmu.Unlock()
	if old, ok := t.peers[id]; ok {
		if old.addr == addr {
			return nil
		}
		old.cancel()
	}
	p := t.newPeer(id, addr)
	t.peers[id] = p
	t.wg.Add(1)
	go p.run()
	t.log.Info("peer added", "peer", id, "addr", addr)
	return nil
}

// RemovePeer forgets peer id: its writer stops (queued messages are
// dropped), later sends to it fail with ErrUnknownPeer, and new connections
// from it are refused. It reports whether id was a peer.
func (t *Transport) RemovePeer(id automaton.NodeID) bool {
	t.pmu.Lock()
	p, ok := t.peers[id]
	delete(t.peers, id)
	t.pmu.Unlock()
	if ok {
		p.cancel()
		t.log.Info("peer removed", "peer", id, "addr", p.addr)
	}
	return ok
}

// PeerAddr returns the address of peer id.
func (t *Transport) PeerAddr(id automaton.NodeID) (string, bool) {
	p, ok := t.peer(id)
	if !ok {
		return "", false
	}
	return p.addr, true
}
