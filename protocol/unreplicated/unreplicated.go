package unreplicated

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// Name is the protocol's registered name.
const Name = "unreplicated"

// BrokenAnswerFirst is the broken variant's name.
const BrokenAnswerFirst = Name + "-broken-answerfirst"

// BrokenDirtyTxn is the broken variant whose transactions write straight
// to the shared state.
const BrokenDirtyTxn = Name + "-broken-dirtytxn"

func init() {
	automaton.Register(protocol{Capabilities: capabilities(Name,
		"one server (the first node) holds the only copy and persists each write before answering; the others forward to it: the baseline for replication overhead (the Grid Services thesis)",
		[]automaton.Scenario{
			{Name: "snapshots and recovery under crashes",
				Args:  []string{"--nodes", "3", "--clients", "4", "--ops", "300", "--faults", "crash,loss,dup", "--param", "snapshot_every=4"},
				Seeds: "1-3"},
		})})
	// Deliberately broken, kept to show that the invariants and the
	// linearizability checker catch it (see the package doc). Never use it
	// for data.
	automaton.RegisterBroken(Name, protocol{answerFirst: true, Capabilities: capabilities(BrokenAnswerFirst,
		"the server answers a write before persisting it: a crash loses acknowledged writes; the invariant persist-before-answer catches it at the first write, the linearizability checker under crash faults with a slow disk",
		[]automaton.Scenario{
			{Name: "caught by the invariant persist-before-answer",
				Args:  []string{"--nodes", "3", "--clients", "4", "--ops", "50", "--faults", "none"},
				Seeds: "1"},
			{Name: "caught by linearizability under crashes with a slow disk (invariants off)",
				Args:  []string{"--nodes", "3", "--clients", "4", "--ops", "400", "--faults", "crash", "--fsync", "uniform:5ms:20ms", "--no-invariants"},
				Seeds: brokenSeeds},
		})})
	automaton.RegisterBroken(Name, protocol{dirtyTxn: true, Capabilities: capabilities(BrokenDirtyTxn,
		"an interactive transaction's writes go straight to the shared state (no workspace; a commit always succeeds and an abort rolls nothing back): other clients see uncommitted and aborted writes; the serializability checker catches it",
		[]automaton.Scenario{
			{Name: "caught by serializability (uncommitted and aborted writes are visible)",
				Args:  []string{"--nodes", "3", "--clients", "4", "--ops", "150", "--faults", "none", "--txns", "0.5"},
				Seeds: dirtyTxnSeeds},
		})})
}

// capabilities is the registration of the protocol or a variant.
func capabilities(name, doc string, scenarios []automaton.Scenario) automaton.Capabilities {
	return automaton.Capabilities{Protocol: name, Doc: doc,
		// No deduplication table survives a crash, so a write retried
		// elsewhere could apply twice.
		Idempotent: false,
		Params:     params.Defaults(),
		// One copy of the state cannot diverge from another, and recovery
		// replays each write with its recorded Env.
		Nondeterminism: true,
		// A group is applied in one step of the only copy, so nothing can
		// interleave with it; interactive transactions run optimistically
		// in a workspace and commit first-committer wins (txn.go).
		Transactions: automaton.TxnSupport{Atomic: true, Interactive: true},
		Scenarios:    scenarios,
		// A callee of nested requests: the latest outcome per client id,
		// durable with the state (nested.go).
		NestedWindow: 1,
	}
}

// Defaults for the protocol parameters.
const (
	DefaultSnapshotEvery = 1000
	DefaultRetransmit    = 50 * time.Millisecond
	DefaultOpTimeout     = time.Second
	// dupCacheSize bounds the server's memory of replies to forwarded
	// writes, which answers network duplicates.
	dupCacheSize = 4096
)

// protocol is the registered value: its capabilities, and the variant.
type protocol struct {
	automaton.Capabilities
	answerFirst bool // broken: a write's answer precedes its record
	dirtyTxn    bool // broken: transactions write to the shared state
}

// params is the parameter table.
var params = proto.NewSpec(
	proto.Param{Name: "snapshot_every", Kind: proto.Int, Default: strconv.Itoa(DefaultSnapshotEvery), Min: "1",
		Doc: "writes between the server's snapshots"},
	proto.Param{Name: "retransmit", Kind: proto.Duration, Default: DefaultRetransmit.String(), Min: "0", MinOpen: true,
		Doc: "a forwarder's resend interval"},
	proto.Param{Name: "op_timeout", Kind: proto.Duration, Default: DefaultOpTimeout.String(), Min: "0", MinOpen: true,
		Doc: "a request's time limit at the node the client reached"},
)

// brokenSeeds are seeds on which the linearizability checker catches the
// broken variant with invariants off: `synod-lab sim --protocol
// unreplicated-broken-answerfirst --seeds 1-40` with the scenario's flags
// failed 18 of 40 seeds, seeds 1, 2 and 3 among them; the correct protocol
// passes all 40.
const brokenSeeds = "1-3"

// dirtyTxnSeeds are seeds on which the serializability checker catches the
// dirty-transaction variant: `synod-lab sim --protocol
// unreplicated-broken-dirtytxn --seeds 1-50` with the scenario's flags
// failed 50 of 50 seeds (and 50 of 50 with --ops 300 --faults all --txns
// 0.3); the correct protocol passes those seeds.
const dirtyTxnSeeds = "1-3"

// New implements automaton.Protocol.
func (p protocol) New(cfg automaton.Config) (automaton.Automaton, error) {
	if cfg.Service == nil {
		return nil, fmt.Errorf("%s: namespace %q has no service", p.Protocol, cfg.Namespace)
	}
	if len(cfg.Nodes) == 0 {
		return nil, fmt.Errorf("%s: no nodes", p.Protocol)
	}
	if proto.Index(cfg.Nodes, cfg.Self) < 0 {
		return nil, fmt.Errorf("%s: self %s is not among the nodes %v", p.Protocol, cfg.Self, cfg.Nodes)
	}
	prm, err := params.Parse(p.Protocol, cfg.Params)
	if err != nil {
		return nil, err
	}
	u := &Unreplicated{
		Outbox:     proto.Outbox{Self: cfg.Self},
		proto:      p,
		cfg:        cfg,
		server:     cfg.Nodes[0],
		snapEvery:  uint64(prm.Int("snapshot_every")),
		retransmit: prm.Duration("retransmit"),
		opTimeout:  prm.Duration("op_timeout"),
	}
	u.isServer = cfg.Self == u.server
	return u, nil
}

// Unreplicated is one node's automaton: the server or a forwarder.
type Unreplicated struct {
	proto                 protocol
	cfg                   automaton.Config
	server                automaton.NodeID
	isServer              bool
	snapEvery             uint64
	retransmit, opTimeout time.Duration

	// Server state.
	st       service.State // nil on forwarders
	applied  uint64        // writes applied: the index of the last write record
	snapAt   uint64        // the writes the snapshot record covers
	restored uint64        // applied after recovery, at Start
	fresh    bool          // started without records
	dups     map[fwdKey]message
	dupOrder []fwdKey
	txns     map[automaton.RequestID]*txn // open interactive transactions (txn.go)
	txnOrder []automaton.RequestID        // their begins, oldest first (may hold ended ones)
	nested   map[uint64]nestedEntry       // nested requests' latest outcome per client id (nested.go)

	// Forwarder state.
	inc   uint64 // incarnation nonce, fresh at every Start
	seq   uint64
	fwds  map[uint64]*forward
	byReq map[automaton.RequestID]uint64

	proto.Outbox
	// stepWrites records, for the invariant checker, where the last step
	// put each write's record and answer among its outputs.
	stepWrites []stepWrite
}

// fwdKey names a forwarded request at the server.
type fwdKey struct {
	from     automaton.NodeID
	inc, seq uint64
}

// forward is a request a forwarder waits on.
type forward struct {
	seq     uint64
	req     automaton.Request
	read    bool
	elapsed time.Duration
}

// stepWrite locates one write's record and answer in a step's outputs.
type stepWrite struct {
	index    uint64
	rec, ans int
}

// Step implements automaton.Automaton.
func (u *Unreplicated) Step(in automaton.Input) []automaton.Output {
	u.Begin()
	u.stepWrites = u.stepWrites[:0]
	proto.Dispatch(u, in)
	return u.Out
}

// OnStart begins an incarnation. The server recovers its state from its
// records: the snapshot, then the write records after it, in order, up to
// the first gap; records the snapshot covers and records after the gap are
// deleted.
func (u *Unreplicated) OnStart(s automaton.Start) {
	u.inc = u.cfg.Rand.Uint64()
	u.seq = 0
	u.fwds = map[uint64]*forward{}
	u.byReq = map[automaton.RequestID]uint64{}
	if !u.isServer {
		return
	}
	u.st = u.cfg.Service.NewState()
	u.dups = map[fwdKey]message{}
	u.txns = map[automaton.RequestID]*txn{} // a crash aborts every open transaction
	u.txnOrder = nil
	u.nested = map[uint64]nestedEntry{}
	u.fresh = len(s.Records) == 0
	if b, ok := s.Records[snapKey]; ok {
		index, state, nested, err := unmarshalSnap(b)
		if err == nil {
			err = u.st.Restore(state)
		}
		if err != nil {
			panic(fmt.Sprintf("unreplicated: corrupt snapshot record: %v", err))
		}
		u.applied, u.snapAt = index, index
		u.nested = nested
	}
	var idx []uint64
	for k := range s.Records {
		if i, ok := parseWriteKey(k); ok {
			idx = append(idx, i)
		}
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
	for _, i := range idx {
		k := writeKey(i)
		if i != u.applied+1 {
			// Covered by the snapshot, or after a gap (never answered: an
			// answer waits for every earlier record).
			u.Emit(automaton.Persist{Key: k, Delete: true})
			continue
		}
		r, err := unmarshalWrite(s.Records[k])
		if err != nil {
			panic(fmt.Sprintf("unreplicated: corrupt record %q: %v", k, err))
		}
		u.replay(r)
		u.applied = i
	}
	u.restored = u.applied
}

// Validator implements proto.Validating: a membership change is refused
// unvalidated (OnRequest).
func (u *Unreplicated) Validator(req automaton.Request) service.Service {
	if automaton.IsMemberOp(req.Op) {
		return nil
	}
	return u.cfg.Service
}

// Invalid implements proto.Validating.
func (u *Unreplicated) Invalid(req automaton.Request, r service.Result) {
	u.respond(automaton.Response{ID: req.ID, Result: r})
}

// OnRequest serves a client's validated request (Validator): the server
// applies it, a forwarder forwards it.
func (u *Unreplicated) OnRequest(req automaton.Request) {
	if automaton.IsMemberOp(req.Op) {
		u.respond(automaton.Response{ID: req.ID, Result: service.Errorf("ERR %s has no membership changes", u.proto.Protocol)})
		return
	}
	if res, refused := automaton.RefuseUnsupported(u.proto.Protocol, req); refused {
		u.respond(automaton.Response{ID: req.ID, Result: res}) // not reached: both shapes are declared
		return
	}
	if u.isServer {
		u.serve(req, func(r automaton.Response) automaton.Output { return automaton.Respond{Resp: r} })
		return
	}
	u.forward(req)
}

// serve applies a request at the server and answers it through answer. A
// write's record (and, every snapEvery writes, the snapshot) is emitted
// before the answer, so the runtime releases the answer only once the write
// is durable.
func (u *Unreplicated) serve(req automaton.Request, answer func(automaton.Response) automaton.Output) {
	if req.Txn != nil && !(u.proto.dirtyTxn && req.Txn.Action == automaton.TxnOp) {
		u.serveTxn(req, answer)
		return
	}
	if req.Txn != nil && u.txns[req.Txn.Txn] == nil {
		u.Emit(answer(automaton.Response{ID: req.ID, Result: service.Errorf("%s", automaton.ErrNoSuchTxn)}))
		return
	}
	if req.Nested {
		if r, ok := u.nestedCache(req.ID); ok {
			u.Emit(answer(r)) // a copy: answered from the table (nested.go)
			return
		}
	}
	// Broken (dirtyTxn): a transaction's operation runs on the shared state.
	op, ops, env := req.Op, req.Ops, req.Env
	write := !automaton.IsReadRequest(u.cfg.Service, automaton.Request{Op: op, Ops: ops})
	resp := automaton.Response{ID: req.ID}
	if res := u.applyOps(op, ops, env); len(ops) > 0 {
		resp.Result, resp.Results = service.OK(), res
	} else {
		resp.Result = res[0]
	}
	ans := answer(resp)
	if req.Nested {
		// Read or write, its outcome is recorded before it is answered.
		u.noteNested(req.ID, resp)
		u.commitWrite(writeRecord{Op: op, Ops: ops, Env: env,
			Nested: &nestedTrailer{ID: req.ID, Result: resp.Result, Results: resp.Results}}, ans)
		return
	}
	if !write {
		u.Emit(ans)
		return
	}
	u.commitWrite(writeRecord{Op: op, Ops: ops, Env: env}, ans)
}

// commitWrite counts a write applied to the state, emits its record and
// then its answer ans, so the runtime releases the answer only once the
// write is durable.
func (u *Unreplicated) commitWrite(r writeRecord, ans automaton.Output) {
	u.applied++
	w := stepWrite{index: u.applied}
	if u.proto.answerFirst {
		w.ans = len(u.Out)
		u.Emit(ans)
		w.rec = len(u.Out)
		u.persistWrite(r)
	} else {
		w.rec = len(u.Out)
		u.persistWrite(r)
		w.ans = len(u.Out)
		u.Emit(ans)
	}
	u.stepWrites = append(u.stepWrites, w)
}

// applyOps applies one operation or an atomic group to the state.
func (u *Unreplicated) applyOps(op service.Op, ops []service.Op, env service.Env) []service.Result {
	if len(ops) > 0 {
		return automaton.ApplyGroup(u.st, ops, env)
	}
	return []service.Result{service.ApplyEnv(u.st, op, env)}
}

// persistWrite emits the record of write u.applied and, when it completes
// snapEvery writes since the snapshot, a new snapshot and the deletion of
// the records it covers (after the snapshot, so that a crash between them
// keeps a state that recovers).
func (u *Unreplicated) persistWrite(r writeRecord) {
	u.Emit(automaton.Persist{Key: writeKey(u.applied), Value: r.marshal()})
	if u.applied-u.snapAt < u.snapEvery {
		return
	}
	u.Emit(automaton.Persist{Key: snapKey, Value: marshalSnap(u.applied, u.st.Snapshot(), u.nested)})
	for i := u.snapAt + 1; i <= u.applied; i++ {
		u.Emit(automaton.Persist{Key: writeKey(i), Delete: true})
	}
	u.snapAt = u.applied
}

// forward sends a client's request to the server and waits for the reply
// (onReply) or the operation timeout (OnTimer). A retry of a request in
// flight here joins it.
func (u *Unreplicated) forward(req automaton.Request) {
	if seq, ok := u.byReq[req.ID]; ok && u.fwds[seq] != nil {
		return
	}
	u.seq++
	// A nested request is resent like a read: the server answers every
	// copy of its id alike (nested.go).
	f := &forward{seq: u.seq, req: req, read: req.Nested || automaton.IsReadRequest(u.cfg.Service, req)}
	u.fwds[f.seq] = f
	u.byReq[req.ID] = f.seq
	u.Emit(automaton.SetTimer{ID: automaton.TimerID(f.seq), After: u.retransmit})
	u.sendForward(f)
}

func (u *Unreplicated) sendForward(f *forward) {
	m := message{Kind: kindForward, Inc: u.inc, Seq: f.seq, Req: f.req.ID, Op: f.req.Op, Ops: f.req.Ops, Env: f.req.Env}
	if f.req.Txn != nil {
		m.Kind, m.Txn = kindTxnForward, f.req.Txn
	} else if f.req.Nested {
		m.Kind = kindNestedForward
	}
	u.Emit(automaton.Send{To: u.server, Msg: m.marshal()})
}

func (u *Unreplicated) OnMessage(from automaton.NodeID, b []byte) {
	m, err := unmarshal(b)
	if err != nil {
		return // corrupt: drop (a read is retransmitted, a write times out)
	}
	switch m.Kind {
	case kindForward, kindTxnForward, kindNestedForward:
		u.onForward(from, m)
	case kindReply:
		u.onReply(m)
	}
}

// onForward serves a forwarded request at the server. A duplicate of a
// forwarded write still remembered gets the remembered reply.
func (u *Unreplicated) onForward(from automaton.NodeID, m message) {
	if !u.isServer || from == u.cfg.Self {
		return
	}
	key := fwdKey{from, m.Inc, m.Seq}
	if r, ok := u.dups[key]; ok {
		u.Emit(automaton.Send{To: from, Msg: r.marshal()})
		return
	}
	req := automaton.Request{ID: m.Req, Op: m.Op, Ops: m.Ops, Env: m.Env, Txn: m.Txn, Nested: m.Kind == kindNestedForward} // validated by the forwarder (Validator)
	var reply message
	u.serve(req, func(r automaton.Response) automaton.Output {
		reply = message{Kind: kindReply, Inc: m.Inc, Seq: m.Seq, Result: r.Result, Results: r.Results}
		return automaton.Send{To: from, Msg: reply.marshal()}
	})
	if !automaton.IsReadRequest(u.cfg.Service, req) {
		u.remember(key, reply)
	}
}

// remember keeps the reply to a forwarded write for duplicates, forgetting
// the oldest beyond dupCacheSize.
func (u *Unreplicated) remember(key fwdKey, reply message) {
	if len(u.dupOrder) >= dupCacheSize {
		delete(u.dups, u.dupOrder[0])
		u.dupOrder = u.dupOrder[1:]
	}
	u.dups[key] = reply
	u.dupOrder = append(u.dupOrder, key)
}

// onReply relays the server's answer to the client that asked here.
func (u *Unreplicated) onReply(m message) {
	if m.Inc != u.inc {
		return // for an earlier incarnation of this node
	}
	f := u.fwds[m.Seq]
	if f == nil {
		return // answered already, or timed out
	}
	u.finish(f, automaton.Response{ID: f.req.ID, Result: m.Result, Results: m.Results})
}

// OnTimer retransmits a read, or gives up after opTimeout with TRYAGAIN.
// Writes are never retransmitted (the package doc says why).
func (u *Unreplicated) OnTimer(id automaton.TimerID) {
	f := u.fwds[uint64(id)]
	if f == nil {
		return
	}
	f.elapsed += u.retransmit
	if f.elapsed >= u.opTimeout {
		u.finish(f, automaton.Response{ID: f.req.ID, Result: service.Fail(synoderr.TryAgain,
			"the server %s did not answer within %v (a write's outcome is unknown)", u.server, u.opTimeout)})
		return
	}
	u.Emit(automaton.SetTimer{ID: id, After: u.retransmit})
	if f.read {
		u.sendForward(f)
	}
}

func (u *Unreplicated) finish(f *forward, resp automaton.Response) {
	delete(u.fwds, f.seq)
	delete(u.byReq, f.req.ID)
	u.Emit(automaton.CancelTimer{ID: automaton.TimerID(f.seq)})
	u.respond(resp)
}

func (u *Unreplicated) respond(r automaton.Response) { u.Emit(automaton.Respond{Resp: r}) }

// Leader implements automaton.LeaderReporter: clients that ask are sent to
// the server directly, saving the forwarding hop.
func (u *Unreplicated) Leader() automaton.NodeID { return u.server }
