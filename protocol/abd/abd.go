package abd

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

func init() {
	automaton.Register(protocol{Capabilities: capabilities("abd",
		"multi-writer ABD atomic registers (the ABD report §3.1), linearizable, non-blocking with a majority")})
	// Deliberately broken variants, kept so that the checkers and the
	// invariants can be shown to catch them (see the package doc). Never use
	// them for data.
	automaton.RegisterBroken("abd", protocol{noWriteBack: true, Capabilities: capabilities("abd-broken-nowriteback",
		"reads never write back (the ABD report §3.1.2's one-phase read): new/old inversion; the invariant \"a completed operation's tag is held by a majority\" and the linearizability checker catch it")})
	automaton.RegisterBroken("abd", protocol{tsOnly: true, Capabilities: capabilities("abd-broken-nowriterid",
		"tags compare by timestamp only (the ABD report §3.1.1's server rule): concurrent writers leave replicas with different values; the invariant \"an acknowledged store is held\" and the linearizability checker catch it")})
	automaton.RegisterBroken("abd", protocol{clientNoWriteBack: true, Capabilities: capabilities("abd-broken-clientnowriteback",
		"client-driven reads (sim --client-driven, client.ABD) never write back (the ABD report §3.1.2's one-phase read, run by the client): new/old inversion; the linearizability checker catches it in the client-driven scenario")})
}

// capabilities is the registration of the protocol or a variant (its
// request options, client coordinator, scenarios, model and invariants are
// methods: direct.go, coordinator.go, scenarios.go, model.go,
// invariant.go).
func capabilities(name, doc string) automaton.Capabilities {
	return automaton.Capabilities{Protocol: name, Doc: doc,
		// No table of outcomes: a write retried at another node is a new
		// write.
		Idempotent:        false,
		RegisterSemantics: true,
		Params:            params.Defaults(),
	}
}

// protocol is the registration: its capabilities and the broken variants'
// switches.
type protocol struct {
	automaton.Capabilities
	noWriteBack bool // reads never write back (the ABD report's one-phase read)
	tsOnly      bool // tags compare by timestamp only (the ABD report's server rule)
	// clientNoWriteBack: client-driven reads never write back
	// (coordinator.go; the seed's one-phase read run by the client).
	clientNoWriteBack bool
}

// StepsClientBatches implements automaton.BatchStepper: a ClientBatch's
// requests run as usual, and the phase messages of one step to one peer
// leave as one batch message (msg.go, kindBatch).
func (p protocol) StepsClientBatches() bool { return true }

// OrdersKeyRuns implements automaton.KeyRunOrderer: a batch's linearizable
// requests on one key form a key run with serial results in batch order
// (batch.go); not in the variant whose reads skip the write-back, which
// forms no runs.
func (p protocol) OrdersKeyRuns() bool { return !p.noWriteBack }

// Defaults for the protocol parameters.
const (
	DefaultRetransmit = 50 * time.Millisecond
	DefaultOpTimeout  = 5 * time.Second
	doneCacheSize     = 4096
	// doneEvict: the answers forgotten at once when doneCacheSize +
	// doneEvict are remembered (forgetOldest).
	doneEvict = 1024
)

// params is the parameter table (see the package doc).
var params = proto.NewSpec(
	proto.Param{Name: "retransmit", Kind: proto.Duration, Default: DefaultRetransmit.String(), Min: "0", MinOpen: true,
		Doc: "a phase's resend interval to replicas that have not answered"},
	proto.Param{Name: "op_timeout", Kind: proto.Duration, Default: DefaultOpTimeout.String(), Min: "0", MinOpen: true,
		Doc: "a request's time limit at its coordinator"},
	proto.Param{Name: "window", Kind: proto.Int, Default: "2", Min: "0",
		Doc: "round groups a coordinator has in flight; requests arriving meanwhile wait and start together as the next group (0: no limit)"},
	proto.Param{Name: "gather", Kind: proto.Duration, Default: "0s", Min: "0",
		Doc: "after a round group of several requests ends, hold the requests that arrive until as many as it answered have come back, or this long (0: off)"},
	proto.Param{Name: "peer_pipeline", Kind: proto.Bool, Default: "false",
		Doc: "while several round groups are in flight, a peer that has not answered the phase messages sent to it gets the next ones when it answers or with the next message to it (one batch message in flight per peer); false: a step's phase messages leave at once"},
	proto.Param{Name: "thrifty", Kind: proto.Bool, Default: "false",
		Doc: "a query phase asks a majority first (this replica and peers taken round robin by round group), the others when it retransmits; false: every replica at once, as the seed"},
)

func (p protocol) New(cfg automaton.Config) (automaton.Automaton, error) {
	if cfg.Service == nil || cfg.Service.Name() != "kv" {
		return nil, fmt.Errorf("abd replicates registers: namespace %q needs service kv", cfg.Namespace)
	}
	index, self, err := proto.Positions("abd", cfg.Nodes, cfg.Self)
	if err != nil {
		return nil, err
	}
	prm, err := params.Parse("abd", cfg.Params)
	if err != nil {
		return nil, err
	}
	a := &ABD{
		// A step's usual outputs: at most a timer, a record and a send to
		// each peer, allocated at once.
		Outbox:     proto.Outbox{Self: cfg.Self, Size: 2 + len(cfg.Nodes)},
		baseSize:   2 + len(cfg.Nodes),
		proto:      p,
		cfg:        cfg,
		index:      index,
		self:       self,
		store:      map[string]*entry{},
		ops:        map[uint64]*op{},
		reqs:       map[automaton.RequestID]reqState{},
		retransmit: prm.Duration("retransmit"),
		opTimeout:  prm.Duration("op_timeout"),
		window:     prm.Int("window"),
		thrifty:    prm.Bool("thrifty"),
		peerPipe:   prm.Bool("peer_pipeline"),
		gather:     prm.Duration("gather"),
		groupReqs:  map[uint64]int{},
		silent:     make([]bool, len(cfg.Nodes)),
		groupLeft:  map[uint64]int{},
	}
	a.sends.Reset()
	a.replies = []byte{}
	a.batchReqs, a.batchSeen, a.groupRuns, a.peerMsgs = []automaton.Request{}, map[automaton.RequestID]bool{}, map[string]*op{}, [][]byte{}
	if a.peerPipe {
		a.pipeInit()
	}
	return a, nil
}

// ABD is one node's replica and coordinator for one namespace.
type ABD struct {
	proto.Outbox
	sends proto.Sends // this step's Sends (send)
	// baseSize is Outbox.Size between steps; a step sets Size from its
	// input (outSize).
	baseSize int
	// batchReqs, batchSeen and groupRuns are OnBatch's and beginGroup's
	// scratch (batch.go), empty between steps: a group's admitted
	// requests, their ids, and its key runs, kept so that a client batch
	// allocates none of them once they have grown.
	batchReqs []automaton.Request
	batchSeen map[automaton.RequestID]bool
	groupRuns map[string]*op
	// peerMsgs is OnMessage's scratch: a batch message's messages,
	// empty between steps.
	peerMsgs [][]byte
	// replies holds this step's answers to peers (reply); never nil, so
	// that it looks the same after every step (as sends).
	replies []byte
	proto   protocol
	cfg     automaton.Config
	index   map[automaton.NodeID]int
	self    int

	retransmit, opTimeout time.Duration
	// thrifty: a query phase's first sending asks a majority only
	// (broadcast; parameter thrifty). silent[i]: replica i had not
	// answered an operation when it retransmitted, and nothing came from
	// it since; thrifty queries ask it last (a replica down would
	// otherwise cost every query that asks it a retransmission).
	thrifty bool
	silent  []bool

	// Replica state.
	store map[string]*entry

	// Coordinator state.
	incarnation uint64
	fresh       bool // started without records (first boot, or a wiped disk)
	counter     uint64
	ops         map[uint64]*op
	// reqs: every client request this coordinator knows of, by id, in one
	// table (reqState): queued for a round group, coordinated by an
	// operation in flight, or answered (the answer remembered for a
	// retry; doneOrder, oldest first, bounds how many). One table instead
	// of three maps (byReq, queued, done) costs a request one lookup in
	// admit instead of three, and one write per state change: Go's hash
	// maps were ~9 % of a coordinator's CPU at 64 clients (session 53).
	reqs      map[automaton.RequestID]reqState
	doneOrder []automaton.RequestID

	// Round groups (batch.go): the requests begun together, their
	// operations not yet finished per group, the next group's id, and the
	// requests waiting for a group to finish (at most window groups in
	// flight; window 0: no limit).
	window    int
	groupLeft map[uint64]int
	groupSeq  uint64
	queue     []automaton.Request
	// gather (parameter gather, batch.go): after a group of expect > 1
	// requests ended, arrivals wait in the queue until expect of them are
	// queued or the gather timer (armed: gathering) fires; backCap bounds
	// expect after a timer fired (0: no bound). groupReqs: requests per
	// group in flight (kept only with gather).
	gather    time.Duration
	expect    int
	backCap   int
	gathering bool
	groupReqs map[uint64]int
	// peer_pipeline (pipeline.go), per replica position: owed (phase
	// messages sent in an earlier step, no answer since), held (phase
	// messages waiting for its answer; heldBytes, nHeld: their sizes and
	// count), and this step's sends (sentNow, phaseNow; touched lists
	// the positions to reset).
	peerPipe  bool
	owed      []bool
	sentNow   []bool
	phaseNow  []bool
	held      [][][]byte
	heldBytes []int
	nHeld     int
	touched   []int
	// rounds counts the groups begun, for the runtime's metrics
	// (automaton.RoundReporter); nothing reads it in a step.
	rounds automaton.RoundGroups

	// What this step did, for the invariant checker (invariant.go): stores
	// applied or acknowledged, and operations completed.
	stepStores []keyTag
	stepDone   []keyTag
}

// reqState is one client request's entry in ABD.reqs.
type reqState struct {
	state reqStage
	op    uint64         // reqBusy: the operation coordinating it
	res   service.Result // reqDone: its answer
}

type reqStage uint8

const (
	reqQueued reqStage = iota + 1 // waiting in the queue for a round group (batch.go)
	reqBusy                       // coordinated by operation op (or its key run)
	reqDone                       // answered with res, remembered for a retry
)

type keyTag struct {
	key string
	tag Tag
}

// op is one client request being coordinated.
type op struct {
	id    uint64
	req   automaton.Request
	write bool
	phase int // 1 query, 2 store

	replied    []bool
	repliedBuf [7]bool // replied's room for up to 7 replicas (one allocation per op fewer)
	count      int
	elapsed    time.Duration

	// Query phase: highest (tag, value) seen, and how many replies carry it.
	max  entry
	nMax int

	// Store phase: what is being stored.
	put entry

	// A key run (batch.go): the later requests of the op's client batch
	// on its key, applied after req in batch order; results answers req
	// and run, computed when the query phase completes.
	run     []automaton.Request
	results []service.Result
	// group: the round group the op was begun in (batch.go), 0 if none.
	group uint64
}

func (a *ABD) quorum() int { return automaton.Majority(len(a.cfg.Nodes)) }

// Step implements automaton.Automaton.
func (a *ABD) Step(in automaton.Input) []automaton.Output {
	a.Begin()
	a.sends.Reset()
	a.stepStores, a.stepDone = a.stepStores[:0], a.stepDone[:0]
	a.Size = a.outSize(in)
	proto.Dispatch(a, in) // a ClientBatch: OnBatch, batch.go
	a.Size = a.baseSize   // capacity only, and the same between steps (the model's state)
	if a.peerPipe {
		a.pipeEnd()
	}
	// One step's messages to one peer (a batch's queries or stores, a
	// replica's answers to a batch message) leave as one batch message,
	// placed as Header.Coalesce places it.
	out := header.Place(a.Out, &a.sends, kindBatch)
	a.sends.Reset() // placed: nothing of this step's Sends stays in the state
	a.replies = a.replies[:0]
	return out
}

// outSize is the room a step's first Emit makes for its outputs: a
// step's usual outputs (baseSize: a timer, a record, a send to each
// peer) and, per request of a client batch or message of a batch message
// beyond the first, what it usually adds: an operation's timer (a client
// request), a record (a store), a Respond and a CancelTimer, or the next
// phase's record (an answer); a query adds nothing (its answer is a
// Send, placed with the step's others). Grown by append from baseSize, a
// step of a 16-request group's answers (16 Responds and 16 CancelTimers)
// reallocated its list three times (TestAllocationsPerBatchedOperation).
// The count and the first message's kind are read from the batch's
// header (SplitBatch checks them when the step reads it).
func (a *ABD) outSize(in automaton.Input) int {
	n, per := 1, 0
	switch in := in.(type) {
	case automaton.ClientBatch:
		n, per = len(in.Reqs), 1
	case automaton.PeerMessage:
		b := in.Msg
		if len(b) <= 2 || b[1] != kindBatch {
			break
		}
		c, k := binary.Uvarint(b[2:])
		if k <= 0 || c >= 1<<12 {
			break
		}
		n = int(c)
		if l, j := binary.Uvarint(b[2+k:]); j > 0 && l >= 2 && len(b) > 2+k+j+1 {
			switch b[2+k+j+1] { // the first message's kind
			case kindStore:
				per = 1
			case kindQueryReply, kindStoreAck:
				per = 2
			}
		}
	}
	return a.baseSize + per*(max(n, 1)-1)
}

// send sends msg to a peer: kept aside with its place among the step's
// outputs (proto.Sends), so that a step boxes one Send per batch message,
// not one per message.
func (a *ABD) send(to automaton.NodeID, msg []byte) { a.sends.Add(len(a.Out), to, msg) }

// reply sends a replica's answer (or a coordinator's phase message,
// broadcast) encoded at a.replies[from:] (a buffer reused every step:
// Place copies what leaves alone, a batch copies anyway), so a step's
// answers to a batch message allocate nothing each.
func (a *ABD) reply(to automaton.NodeID, from int) {
	a.sends.AddScratch(len(a.Out), to, a.replies[from:len(a.replies):len(a.replies)])
}

// OnStart restores the replica's registers and starts a new incarnation.
func (a *ABD) OnStart(s automaton.Start) {
	a.store = map[string]*entry{}
	if a.peerPipe {
		a.pipeInit() // nothing sent before the restart is owed
	}
	a.fresh = len(s.Records) == 0
	for k, v := range s.Records {
		if key, ok := registerKey(k); ok {
			e, err := unmarshalEntry(v)
			if err != nil {
				panic(fmt.Sprintf("abd: corrupt record %q: %v", k, err))
			}
			e.rkey = k
			a.store[key] = &e
		} else if k == "inc" && len(v) == 8 {
			a.incarnation = binary.BigEndian.Uint64(v)
		}
	}
	if a.incarnation == 0 {
		// First boot, or a memory-mode restart: start from a random incarnation
		// so that operation ids from a forgotten earlier life are not reused.
		a.incarnation = uint64(a.cfg.Rand.Uint32()) | 1
	} else {
		a.incarnation++
	}
	a.incarnation &= 0xffffffff
	a.counter = 0
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], a.incarnation)
	a.Emit(automaton.Persist{Key: "inc", Value: b[:]})
}

// Validator implements proto.Validating: groups and transaction steps,
// refused unvalidated (admit), aside.
func (a *ABD) Validator(req automaton.Request) service.Service {
	if len(req.Ops) > 0 || req.Txn != nil {
		return nil
	}
	return a.cfg.Service
}

// Invalid implements proto.Validating.
func (a *ABD) Invalid(req automaton.Request, r service.Result) { a.Respond(req.ID, r) }

// OnRequest starts coordinating a client request (the ABD report §3.1.2), in
// a round group of its own or, while window groups are in flight, in the
// next (batch.go).
func (a *ABD) OnRequest(req automaton.Request) {
	if a.admit(req) {
		one := [1]automaton.Request{req}
		a.start(one[:], false)
	}
}

// admit answers a request that needs no quorum (a refusal, a remembered
// answer, a local read, a client-driven phase) or joins the same request
// in flight, and reports whether req is an operation to begin.
func (a *ABD) admit(req automaton.Request) bool {
	// Only a group or a transaction step is refused; checking for them
	// first spares a single operation the registry lookup.
	if len(req.Ops) > 0 || req.Txn != nil {
		if res, refused := automaton.RefuseUnsupported(a.proto.Protocol, req); refused {
			a.Respond(req.ID, res) // no atomic groups, no transactions: nothing applied
			return false
		}
	}
	if phase := req.Opts.String(OptPhase); phase != "" {
		a.onPhase(req, phase) // client-driven mode (direct.go)
		return false
	}
	switch st := a.reqs[req.ID]; {
	case st.state == reqQueued || (st.state == reqBusy && a.ops[st.op] != nil):
		return false // a retry of a request in flight: it is answered when that completes
	case st.state == reqDone:
		a.Respond(req.ID, st.res)
		return false
	}
	o := req.Op
	if !service.RegisterKinds[o.Kind] || (o.Kind == "set" && len(o.Args) != 1) {
		what := o.Kind
		if o.Kind == "set" {
			what = "set with a condition (NX/XX)"
		}
		a.Respond(req.ID, service.Errorf("ERR %s needs an atomic read-modify-write; namespace %q uses abd, which offers get, set, del and exists: use a consensus protocol", what, a.cfg.Namespace))
		return false
	}
	if !a.cfg.Service.IsRead(o) || req.Opts.Read != automaton.ReadLocal {
		return true
	}
	// Local read: this replica's register alone; may be stale.
	a.Respond(req.ID, a.readResult(o, a.entry(o.Key)))
	return false
}

func (a *ABD) begin(req automaton.Request, group uint64) *op {
	a.counter++
	if group != 0 {
		a.groupLeft[group]++
	}
	o := &op{
		id:    a.incarnation<<32 | (a.counter & 0xffffffff),
		group: group,
		req:   req,
		write: !a.cfg.Service.IsRead(req.Op),
		phase: 1,
	}
	if n := len(a.cfg.Nodes); n <= len(o.repliedBuf) {
		o.replied = o.repliedBuf[:n:n]
	} else {
		o.replied = make([]bool, n)
	}
	a.ops[o.id] = o
	a.reqs[req.ID] = reqState{state: reqBusy, op: o.id}
	a.Emit(automaton.SetTimer{ID: automaton.TimerID(o.id), After: a.retransmit})
	a.broadcast(o)
	return o
}

// broadcast sends the current phase's message to every replica that has not
// answered it. This replica answers itself first, without the network; if that
// answer completes the phase (N = 1, or the last missing vote), the recursive
// call has already moved the operation on and this call stops. The message
// is encoded once into the step's scratch buffer (a.replies) and shared by
// the peers: Place copies it for a peer it leaves alone to, a batch
// message copies it anyway, so a phase of a batch allocates nothing of its
// own.
//
// With parameter thrifty (default false), a query phase's first sending
// is thrifty: it asks only the peers a majority needs besides this replica,
// taken round robin by round group (thriftyPeers); the retransmission
// (OnTimer) asks every replica that has not answered. Store phases ask
// every replica, so that every replica holds what a majority holds and
// a read's majority usually finds its tags equal (no write-back).
func (a *ABD) broadcast(o *op) {
	if !o.replied[a.self] {
		phase := o.phase
		a.selfReply(o)
		if a.ops[o.id] != o || o.phase != phase {
			return
		}
	}
	if a.thrifty && o.phase == 1 && o.elapsed == 0 {
		a.thriftyPeers(o)
		return
	}
	at := -1
	for i := range a.cfg.Nodes {
		if o.replied[i] {
			continue
		}
		if at < 0 {
			at = len(a.replies)
			a.replies = appendPhase(a.replies, o)
		}
		a.phaseTo(i, at)
	}
}

// thriftyPeers sends o's query to as many peers as a majority needs
// besides the answers o has (this replica's own), the peers taken in ring
// order after this replica from an offset that moves by one each round
// group: all the operations of a group ask the same peers (one batch
// message each), and consecutive groups spread the queries over the
// peers. Any majority intersects the majority that holds the latest
// completed write (the ABD report §3.1.2's argument needs no more), so a
// query answered by this replica and these peers sees what one answered
// by every replica sees; the others are asked when o retransmits.
func (a *ABD) thriftyPeers(o *op) {
	n := len(a.cfg.Nodes)
	need := a.quorum() - o.count
	if need <= 0 || n < 2 {
		return
	}
	at := -1
	off := int(o.group % uint64(n-1))
	// Peers not silent first; silent ones only when too few others.
	for pass := 0; pass < 2 && need > 0; pass++ {
		for j := 0; j < n-1 && need > 0; j++ {
			i := (a.self + 1 + (off+j)%(n-1)) % n
			if o.replied[i] || a.silent[i] != (pass == 1) {
				continue
			}
			if at < 0 {
				at = len(a.replies)
				a.replies = appendPhase(a.replies, o)
			}
			a.phaseTo(i, at)
			need--
		}
	}
}

// appendPhase appends o's current phase message to b: a query (phase 1)
// or a store of o.put (phase 2), as message.marshal encodes them.
func appendPhase(b []byte, o *op) []byte {
	if o.phase == 1 && o.elapsed == 0 { // a query-above: o.max is this replica's answer or higher, held
		return appendQueryAbove(b, o.id, o.req.Op.Key, o.max.Tag, o.write)
	}
	if o.phase == 1 { // a retransmission: the plain query, which a node older than query-above answers
		return appendQuery(b, o.id, o.req.Op.Key)
	}
	return appendRegister(b, kindStore, o.id, o.req.Op.Key, o.put.Tag, o.put.Tomb, o.put.Value)
}

// selfReply is this replica's own answer to o's current phase.
func (a *ABD) selfReply(o *op) {
	if o.phase == 1 {
		a.onQueryReply(a.self, o.id, a.entry(o.req.Op.Key), true)
		return
	}
	a.applyStore(o.req.Op.Key, nil, o.put.Tag, o.put.Tomb, o.put.Value)
	a.onStoreAck(a.self, o.id)
}

// entry is key's register, as a value without its record key (rkey: the
// store's own; an operation keeps the value, whose state then does not
// depend on where it came from).
func (a *ABD) entry(key string) entry {
	if e := a.store[key]; e != nil {
		return entry{Tag: e.Tag, Tomb: e.Tomb, Value: e.Value}
	}
	return entry{}
}

// OnMessage handles a peer's message, or each message of a batch message
// (msg.go, kindBatch) in order, as if it had arrived alone.
func (a *ABD) OnMessage(from automaton.NodeID, b []byte) {
	i, ok := a.index[from]
	if !ok || i == a.self {
		return // not a member: ignore
	}
	a.silent[i] = false
	if len(b) < 2 || b[1] != kindBatch {
		a.onMessage1(from, i, b)
		return
	}
	msgs, err := header.AppendBatch(a.peerMsgs[:0], b, kindBatch)
	if err != nil {
		clear(a.peerMsgs[:cap(a.peerMsgs)]) // what it read before the error aliases the input
		return                              // corrupt message: drop (the sender retransmits)
	}
	for _, m := range msgs {
		a.onMessage1(from, i, m)
	}
	clear(msgs) // they alias the input
	a.peerMsgs = msgs[:0]
}

// onMessage1 reads a peer's message as a frame aliasing b (msg.go): the
// key, the tag's writer and the value are copied only where they are kept.
func (a *ABD) onMessage1(from automaton.NodeID, i int, b []byte) {
	f, err := decodeFrame(b)
	if err != nil {
		return // corrupt message: drop (the sender retransmits)
	}
	switch f.Kind {
	case kindQuery, kindQueryAbove: // replica (the ABD report §3.1.1, GET)
		var e entry
		if p := a.store[string(f.Key)]; p != nil {
			e = *p
		}
		if f.Kind == kindQueryAbove && (f.Writes || !f.below(e.Tag)) {
			e.Value = nil // the coordinator holds it, or writes (see appendPhase)
		}
		n := len(a.replies)
		a.replies = appendRegister(a.replies, kindQueryReply, f.Op, f.Key, e.Tag, e.Tomb, e.Value)
		if a.peerPipe {
			a.touch(i) // held messages for from ride with the answer
		}
		a.reply(from, n)
	case kindStore: // replica (the ABD report §3.1.1, PUT)
		a.applyStore("", f.Key, f.tag(a.cfg.Nodes), f.Tomb, f.Value)
		n := len(a.replies)
		a.replies = appendStoreAck(a.replies, f.Op)
		if a.peerPipe {
			a.touch(i)
		}
		a.reply(from, n)
	case kindQueryReply:
		a.answered(i)
		a.onQueryReply(i, f.Op, entry{Tag: f.tag(a.cfg.Nodes), Tomb: f.Tomb, Value: f.Value}, false)
	case kindStoreAck:
		a.answered(i)
		a.onStoreAck(i, f.Op)
	}
}

// applyStore installs (tag, value) in the register of key if the tag is
// higher than the register's, persisting it first; a lower or equal tag is
// acknowledged and ignored. The key is key, or keyb (the bytes of a
// received frame, made a string only for a register it creates). value
// may alias an input's buffer: the register keeps the copy in its record
// (the record's tail), and a register already held is updated in place
// and keeps its record key (entry.rkey), so a store allocates its record
// only (and the register and its record key, for a new key). Nothing
// writes into a register's value or a Persist's bytes after they are made.
func (a *ABD) applyStore(key string, keyb []byte, t Tag, tomb bool, value []byte) {
	var cur *entry
	if keyb != nil {
		cur = a.store[string(keyb)]
	} else {
		cur = a.store[key]
	}
	var rkey string
	switch {
	case cur != nil:
		rkey = cur.rkey
	case keyb != nil:
		rkey = recKeyPfx + string(keyb)
	default:
		rkey = recKeyPfx + key
	}
	a.stepStores = append(a.stepStores, keyTag{rkey[len(recKeyPfx):], t})
	if cur != nil && !cur.Tag.Less(t, a.proto.tsOnly) {
		return
	}
	rec := entry{Tag: t, Tomb: tomb, Value: value}.marshal()
	if cur == nil {
		cur = &entry{}
		a.store[rkey[len(recKeyPfx):]] = cur
	}
	*cur = entry{Tag: t, Tomb: tomb, Value: recordValue(rec, len(value)), rkey: rkey}
	a.Emit(automaton.Persist{Key: rkey, Value: rec})
}

// onQueryReply counts a replica's register e for operation id. owned says
// whether e.Value is the automaton's own memory; when it aliases a
// received frame it is copied if kept as the highest so far (rarely: this
// replica's own answer comes first, and a peer's usually carries the same
// tag).
func (a *ABD) onQueryReply(from int, id uint64, e entry, owned bool) {
	o := a.ops[id]
	if o == nil || o.phase != 1 || o.replied[from] {
		return
	}
	o.replied[from] = true
	o.count++
	switch {
	case o.count == 1 || o.max.Tag.Less(e.Tag, a.proto.tsOnly):
		if !owned {
			e.Value = copyBytes(e.Value)
		}
		o.max, o.nMax = e, 1
	case !e.Tag.Less(o.max.Tag, a.proto.tsOnly):
		o.nMax++ // equal tag
	}
	if o.count < a.quorum() {
		return
	}
	// A majority answered the query.
	if len(o.run) > 0 {
		a.runQueried(o) // batch.go
		return
	}
	if !o.write {
		if o.req.Opts.Read == automaton.ReadRegular || a.proto.noWriteBack || o.nMax >= a.quorum() {
			if o.req.Opts.Read != automaton.ReadRegular {
				a.stepDone = append(a.stepDone, keyTag{o.req.Op.Key, o.max.Tag})
			}
			a.finish(o, a.readResult(o.req.Op, o.max))
			return
		}
		o.put = o.max // write back
	} else {
		o.put = entry{Tag: Tag{TS: o.max.Tag.TS + 1, Node: string(a.cfg.Self), Seq: o.id}}
		if o.req.Op.Kind == "del" {
			o.put.Tomb = true
		} else {
			o.put.Value = o.req.Op.Args[0]
		}
	}
	o.phase = 2
	o.count = 0
	for i := range o.replied {
		o.replied[i] = false
	}
	a.broadcast(o)
}

func (a *ABD) onStoreAck(from int, id uint64) {
	o := a.ops[id]
	if o == nil || o.phase != 2 || o.replied[from] {
		return
	}
	o.replied[from] = true
	o.count++
	if o.count < a.quorum() {
		return
	}
	a.stepDone = append(a.stepDone, keyTag{o.req.Op.Key, o.put.Tag})
	if o.results != nil {
		a.finishRun(o, o.results) // batch.go
		return
	}
	var res service.Result
	switch o.req.Op.Kind {
	case "set":
		res = service.OK()
	case "del":
		res = service.Int(0)
		if o.max.present() {
			res = service.Int(1)
		}
	default:
		res = a.readResult(o.req.Op, o.put)
	}
	a.finish(o, res)
}

func (a *ABD) readResult(op service.Op, e entry) service.Result {
	if op.Kind == "exists" {
		if e.present() {
			return service.Int(1)
		}
		return service.Int(0)
	}
	if !e.present() {
		return service.Nil()
	}
	return service.Bytes(e.Value)
}

func (a *ABD) OnTimer(t automaton.TimerID) {
	if t == gatherTimer {
		a.gathered()
		return
	}
	id := uint64(t)
	o := a.ops[id]
	if o == nil {
		return
	}
	if a.peerPipe {
		a.flushAll() // something is slow: nothing waits any more
	}
	o.elapsed += a.retransmit
	if o.elapsed >= a.opTimeout {
		a.finish(o, service.Fail(synoderr.TryAgain, "no quorum: %d of %d replicas answered within %v (a write's outcome is unknown)",
			o.count, len(a.cfg.Nodes), a.opTimeout))
		return
	}
	for i, r := range o.replied {
		if !r && i != a.self {
			a.silent[i] = true
		}
	}
	a.Emit(automaton.SetTimer{ID: automaton.TimerID(id), After: a.retransmit})
	a.broadcast(o)
}

// finish ends o with res, the answer of its request and, for a key run
// (batch.go) that failed as a whole, of every request of the run.
func (a *ABD) finish(o *op, res service.Result) {
	delete(a.ops, o.id)
	a.Emit(automaton.CancelTimer{ID: automaton.TimerID(o.id)})
	a.answer(o.req.ID, res)
	for _, r := range o.run {
		a.answer(r.ID, res)
	}
	a.leaveGroup(o)
}

// answer answers request id with res, remembered for a retry unless it
// is an error.
func (a *ABD) answer(id automaton.RequestID, res service.Result) {
	if res.IsErr() {
		delete(a.reqs, id)
	} else {
		if len(a.doneOrder) >= doneCacheSize+doneEvict {
			a.forgetOldest()
		}
		a.reqs[id] = reqState{state: reqDone, res: res}
		a.doneOrder = append(a.doneOrder, id)
	}
	a.Respond(id, res)
}

// forgetOldest forgets the doneEvict oldest remembered answers, moving
// the rest to the front of doneOrder's array. Forgetting one answer per
// answer, by reslicing doneOrder's front off, walked the window off its
// array's end every few hundred answers: a new array of some 5,000 ids
// (80 KB) and a copy of 4,096 each time, 2.4 % of the bytes a node
// allocated per SET at 64 clients (pprof, BenchmarkReplyFn). Now the array
// stays, and at least the last doneCacheSize answers are remembered, as
// before.
func (a *ABD) forgetOldest() {
	for _, id := range a.doneOrder[:doneEvict] {
		delete(a.reqs, id) // answered, so never begun again while remembered
	}
	n := copy(a.doneOrder, a.doneOrder[doneEvict:])
	clear(a.doneOrder[n:])
	a.doneOrder = a.doneOrder[:n]
}
