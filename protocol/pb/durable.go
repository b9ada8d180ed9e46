package pb

import (
	"fmt"
	"sort"
	"strings"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
)

// Durable views and state (package doc, "Durability"): what a node
// persists, how it comes back, and how a cluster that lost every node at
// once chooses its primary.

// Record keys.
const (
	// viewKey: the node's view (ballot, previous view, base, epoch,
	// member list) and whether its state records hold a state of it.
	viewKey = "pb/view"
	// snapKey: the machine's image (encode) at some applied count.
	snapKey = "pb/snap"
	// entryPrefix + %016x index: one entry applied after the image.
	entryPrefix = "pb/e/"
	// snapEvery is how many entries are persisted one by one before the
	// image is written again and they are deleted.
	snapEvery = 256
)

func entryKey(i uint64) string { return fmt.Sprintf("%s%016x", entryPrefix, i) }

// viewRecord is a node's durable view, and what it tells the others in a
// report after a restart.
type viewRecord struct {
	view, prev  proto.Ballot
	base, epoch uint64
	members     []automaton.NodeID
	hasState    bool         // the state records hold this node's state in this view
	applied     uint64       // (reports) the state's applied count
	sv          proto.Ballot // the view of the stream the state follows (takeover.go)
}

func (r viewRecord) marshal() []byte {
	e := recordHeader.Record(32)
	r.view.Encode(&e)
	r.prev.Encode(&e)
	e.Uvarint(r.base)
	e.Uvarint(r.epoch)
	encodeNodes(&e, r.members)
	e.Bool(r.hasState)
	r.sv.Encode(&e)
	return e.B
}

func unmarshalViewRecord(b []byte) (viewRecord, error) {
	var r viewRecord
	d, err := recordHeader.OpenRecord(b, "view")
	if err != nil {
		return r, err
	}
	r.view = proto.DecodeBallot(d, maxMembers)
	r.prev = proto.DecodeBallot(d, maxMembers)
	r.base = d.Uvarint()
	r.epoch = d.Uvarint()
	r.members = decodeNodes(d)
	r.hasState = d.Bool()
	if d.Err() == nil && len(d.B) == 0 {
		// A record written before the state's view was kept (session 43's
		// take-over rules, takeover.go): its state's view is unknown and
		// counts as the oldest, the zero ballot, so a node upgraded from such
		// a record starts (it used to stop with "corrupt view record") and
		// the restart election ranks such states by index alone, as the old
		// code did.
		return r, nil
	}
	r.sv = proto.DecodeBallot(d, maxMembers)
	return r, d.Done()
}

func marshalEntry(e entry) []byte {
	w := recordHeader.Record(32 + len(e.payload))
	w.Uvarint(e.index)
	w.Uvarint(e.id.Client)
	w.Uvarint(e.id.Seq)
	w.Bool(e.full)
	w.Bytes(e.payload)
	encodeOutcome(&w, e.out)
	encodeSession(&w, e.low, e.end)
	return w.B
}

func unmarshalEntry(b []byte) (entry, error) {
	var e entry
	d, err := recordHeader.OpenRecord(b, "entry")
	if err != nil {
		return e, err
	}
	e.index = d.Uvarint()
	e.id = automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}
	e.full = d.Bool()
	e.payload = d.BytesCopy()
	e.out = decodeOutcome(d)
	e.low, e.end = decodeSession(d)
	return e, d.Done()
}

// record is the node's current durable view record.
func (a *PB) record() viewRecord {
	r := viewRecord{view: a.view, prev: a.prev, base: a.base, epoch: a.epoch,
		members: a.members, hasState: a.m != nil && a.role != roleJoining && a.role != roleRecovering, sv: a.sv}
	if a.role == roleRecovering {
		r.hasState = a.m != nil
	}
	if a.m != nil {
		r.applied = a.m.applied
	}
	return r
}

// saveView persists the view record when it changed. Step calls it last
// and puts the record before every output of the step, so that nothing the
// step sends (a new view, a member list, an acknowledgement in a view) is
// released before the view it rests on is durable.
func (a *PB) saveView() {
	if a.role == roleRecovering {
		return // nothing changed since the records were read
	}
	b := a.record().marshal()
	if string(b) == string(a.savedView) {
		return
	}
	a.savedView = b
	a.Out = append([]automaton.Output{automaton.Persist{Key: viewKey, Value: b}}, a.Out...)
}

// persistEntry makes an applied entry durable, before anything the step
// sends after it (a backup's acknowledgement, the primary's answer); every
// snapEvery entries the image replaces them.
func (a *PB) persistEntry(e entry) {
	if a.m.applied-a.snapAt >= snapEvery {
		a.persistImage()
		return
	}
	a.Emit(automaton.Persist{Key: entryKey(e.index), Value: marshalEntry(e)})
	a.persistedTo = e.index
}

// persistImage writes the machine's image and deletes the entry records
// it covers (a joiner's installed state, or a compaction).
func (a *PB) persistImage() {
	a.Emit(automaton.Persist{Key: snapKey, Value: a.m.encode()})
	for i := a.snapAt + 1; i <= a.persistedTo; i++ {
		a.Emit(automaton.Persist{Key: entryKey(i), Delete: true})
	}
	a.snapAt, a.persistedTo = a.m.applied, a.m.applied
}

// restore rebuilds the machine from the records: the image, then the
// entries after it in order. It returns nil when there is no image.
func (a *PB) restore(recs map[string][]byte) *machine {
	b, ok := recs[snapKey]
	if !ok {
		return nil
	}
	m, err := decodeMachine(a.cfg.Service, b)
	if err != nil {
		panic(fmt.Sprintf("pb: corrupt state image: %v", err))
	}
	var idx []uint64
	for k, v := range recs {
		if !strings.HasPrefix(k, entryPrefix) {
			continue
		}
		e, err := unmarshalEntry(v)
		if err != nil {
			panic(fmt.Sprintf("pb: corrupt entry record %s: %v", k, err))
		}
		idx = append(idx, e.index)
	}
	sort.Slice(idx, func(i, j int) bool { return idx[i] < idx[j] })
	a.snapAt, a.persistedTo = m.applied, m.applied
	for _, i := range idx {
		if i <= m.applied {
			continue
		}
		e, _ := unmarshalEntry(recs[entryKey(i)])
		if e.index != m.applied+1 {
			break // a gap: nothing after it was acknowledged (records are durable in order)
		}
		if err := m.inject(e); err != nil {
			panic(fmt.Sprintf("pb: entry record %d does not fit the state: %v", i, err))
		}
		e.chain = m.chain
		a.log = append(a.log, e)
		a.persistedTo = i
	}
	a.logStart = m.applied - uint64(len(a.log))
	return m
}

// recoverFrom begins an incarnation that found a view record: the node
// reports its durable view to every other node and waits, in role
// recovering, either for a live primary (whose heartbeat makes it join as
// before) or, when the whole cluster restarted, for the election below.
func (a *PB) recoverFrom(recs map[string][]byte, vb []byte) {
	r, err := unmarshalViewRecord(vb)
	if err != nil {
		panic(fmt.Sprintf("pb: corrupt view record: %v", err))
	}
	a.savedView = vb
	a.view, a.prev, a.base, a.epoch, a.members = r.view, r.prev, r.base, r.epoch, r.members
	a.sv = r.sv
	if r.hasState {
		a.m = a.restore(recs)
	}
	a.role = roleRecovering
	a.reports = map[automaton.NodeID]viewRecord{a.cfg.Self: a.record()}
	a.sendReports(true)
}

// sendReports tells every other node this node's durable view; ask asks
// the recovering ones to answer with theirs.
func (a *PB) sendReports(ask bool) {
	m := a.reportMsg(ask)
	for _, n := range a.others() {
		a.send(n, m)
	}
}

func (a *PB) reportMsg(ask bool) message {
	r := a.record()
	m := message{Kind: kindReport, View: r.view, Prev: r.prev, Base: r.base, Epoch: r.epoch,
		Members: r.members, Index: r.applied, Joined: r.hasState, SV: r.sv}
	if ask {
		m.Nonce = 1
	}
	return m
}

// onReport: a restarted node's durable view. A primary answers with a
// heartbeat (it should join), a recovering node notes it and answers with
// its own when asked, everyone else ignores it (the primary answers).
func (a *PB) onReport(from automaton.NodeID, m message) {
	switch a.role {
	case rolePrimary:
		a.send(from, a.viewMsg(a.heartbeatKind()))
	case roleRecovering:
		a.reports[from] = viewRecord{view: m.View, prev: m.Prev, base: m.Base, epoch: m.Epoch,
			members: m.Members, hasState: m.Joined, applied: m.Index, sv: m.SV}
		if m.Nonce == 1 {
			a.send(from, a.reportMsg(false))
		}
		a.elect()
	case roleBackup, roleJoining:
		if a.collects() && m.Nonce == 1 {
			a.send(from, a.reportMsg(false)) // its election needs every node (takeover.go)
		}
	}
}

// elect is the restarted cluster's choice of a primary (package doc,
// "Durability"): the primary of the latest view any node reports, once it
// and every member of its own durable member list have reported and none
// reports a later view. Only that node acts: it takes over under a view
// later than every reported one, keeping its state; the others join it.
func (a *PB) elect() {
	if a.collects() {
		a.electLatestState() // takeover.go: a member list may have shrunk
		return
	}
	var best viewRecord
	for _, n := range sortedNodes(a.reports) {
		if r := a.reports[n]; best.view.Less(r.view) {
			best = r
		}
	}
	if best.view.IsZero() || len(best.members) == 0 {
		return
	}
	p := best.members[0]
	pr, ok := a.reports[p]
	if !ok || pr.view != best.view || p != a.cfg.Self || !pr.hasState {
		return
	}
	for _, n := range pr.members {
		if _, ok := a.reports[n]; !ok {
			return
		}
	}
	var round uint64
	for _, r := range a.reports {
		round = max(round, r.view.Round)
	}
	a.restartPrimary(round + 1)
}

// restartPrimary takes over after a whole-cluster restart, under round:
// the state is this node's durable one (every acknowledged write: it was
// the primary of the latest view), the member list only itself; the
// others rejoin by state transfer.
func (a *PB) restartPrimary(round uint64) {
	a.reports = nil
	a.prev = a.view
	a.view = proto.Ballot{Round: round, Node: uint32(a.me + 1)}
	a.base = a.m.applied
	a.epoch = 0
	a.members = []automaton.NodeID{a.cfg.Self}
	a.sv = a.view
	a.stable = a.m.applied
	a.initPrimary()
	a.announce()
}

// leaveRecovery: a live primary exists (its heartbeat or new view came):
// rejoin it by state transfer, as a restarted node always did.
func (a *PB) leaveRecovery() {
	a.reports = nil
	a.becomeJoining()
}

// electLatestState is the restarted cluster's choice when the primary of
// the latest view reported was not serving yet (it collected promises,
// takeover.go): once every configured node reported, the node with the
// latest state (its state's view, then its applied count; the first in
// configuration order on a tie) takes over. Every acknowledged write is
// in it: the collection it replaces would have chosen among fewer.
func (a *PB) electLatestState() {
	var best automaton.NodeID
	var bv proto.Ballot
	var bi uint64
	var round uint64
	for _, n := range a.cfg.Nodes {
		r, ok := a.reports[n]
		if !ok {
			return
		}
		round = max(round, r.view.Round)
		if r.hasState && (best == "" || better(r.sv, r.applied, bv, bi)) {
			best, bv, bi = n, r.sv, r.applied
		}
	}
	if best != a.cfg.Self {
		return
	}
	a.restartPrimary(round + 1)
}
