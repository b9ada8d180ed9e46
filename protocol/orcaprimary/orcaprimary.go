package orcaprimary

import (
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
	_ "github.com/synod-dev/synod/orca" // the object service travels with its runtimes
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

// Name is the protocol's registered name.
const Name = "orca-primary"

// BrokenEarlyUnlock: a secondary unlocks its copy as soon as it has applied
// a lock-and-update, before the primary has every acknowledgement.
const BrokenEarlyUnlock = Name + "-broken-earlyunlock"

// BrokenSkipUpdate: a secondary acknowledges a lock-and-update and takes
// its version without applying the operation.
const BrokenSkipUpdate = Name + "-broken-skipupdate"

func init() {
	automaton.Register(protocol{Capabilities: capabilities(Name,
		"Orca's point-to-point runtime (the Orca paper §3): a primary copy per object, secondaries in a copy set, remote operations at the primary, invalidation or two-phase update per object, copies created from read statistics",
		scenarios)})
	automaton.RegisterBroken(Name, protocol{earlyUnlock: true, Capabilities: capabilities(BrokenEarlyUnlock,
		"two-phase update whose secondaries unlock right after applying (before every copy acknowledged): two copies serve different versions at once; the invariant readable-copies-agree catches it",
		[]automaton.Scenario{{Name: "caught by the invariant readable-copies-agree",
			Args: []string{"--nodes", "3", "--clients", "6", "--ops", "300", "--keys", "2", "--faults", "none", "--param", "replicate_after=1"}, Seeds: "1-4"}})})
	automaton.RegisterBroken(Name, protocol{skipUpdate: true, Capabilities: capabilities(BrokenSkipUpdate,
		"two-phase update whose secondaries acknowledge a lock-and-update and take its version without applying the operation: a copy serves the old value under the new version, so the invariants (which compare versions) see nothing; the sequential-consistency checker catches a client that misses its own write at its node's copy",
		[]automaton.Scenario{{Name: "caught by the sequential-consistency checker (Orca integer objects, the generic search)",
			Args: []string{"--nodes", "3", "--clients", "3", "--ops", "90", "--keys", "1", "--faults", "none", "--service", "orca", "--param", "replicate_after=1"}, Seeds: "1-3"}})})
}

// capabilities is the registration of the protocol or a variant.
func capabilities(name, doc string, scenarios []automaton.Scenario) automaton.Capabilities {
	return automaton.Capabilities{Protocol: name, Doc: doc,
		// Each primary copy keeps a persisted deduplication table.
		Idempotent: true,
		// The paper's serializability with one order of writes across
		// objects (§3: the X/Y example), reads at copies: sequential
		// consistency for clients that stay on their node.
		Consistency: automaton.Sequential,
		Params:      params.Defaults(),
		Scenarios:   scenarios,
	}
}

// Defaults.
const (
	DefaultRetransmit     = 20 * time.Millisecond
	DefaultReplicateAfter = 2
	DefaultDropAfter      = 8
	DefaultMigrateAfter   = 3 // §3.3's migration, on by default: see the package doc (and ROBUSTNESS P21)
)

var params = proto.NewSpec(
	proto.Param{Name: "retransmit", Kind: proto.Duration, Default: DefaultRetransmit.String(), Min: "0", MinOpen: true,
		Doc: "resend interval of remote operations, fetches, phase-one messages and a locked copy's acknowledgement"},
	proto.Param{Name: "invalidate", Kind: proto.String, Default: "",
		Doc: "comma-separated object-name prefixes whose objects use the invalidation protocol; the others use two-phase update (\"*\": every object)"},
	proto.Param{Name: "replicate_after", Kind: proto.Int, Default: strconv.Itoa(DefaultReplicateAfter), Min: "0",
		Doc: "remote reads of an object a node makes (since it last wrote it) before it fetches a copy; 0 never replicates"},
	proto.Param{Name: "drop_after", Kind: proto.Int, Default: strconv.Itoa(DefaultDropAfter), Min: "0",
		Doc: "updates a secondary copy receives without a local read in between before the node discards it; 0 never drops"},
	proto.Param{Name: "migrate_after", Kind: proto.Int, Default: strconv.Itoa(DefaultMigrateAfter), Min: "0",
		Doc: "successive remote writes of an object from one node (no other writer between) before its primary copy migrates there; 0 never migrates"},
)

// protocol is the registered value: its capabilities, and the variant.
type protocol struct {
	automaton.Capabilities
	earlyUnlock bool
	skipUpdate  bool
}

// scenarios are the conformance suite's own simulations of orca-primary.
var scenarios = []automaton.Scenario{
	{Name: "invalidation protocol under faults",
		Args: []string{"--nodes", "3", "--clients", "4", "--ops", "300", "--faults", "all", "--param", "invalidate=*", "--param", "replicate_after=1"}, Seeds: "1-5"},
	{Name: "primary migrates to frequent writers under faults",
		Args: []string{"--nodes", "3", "--clients", "4", "--ops", "300", "--faults", "all", "--keys", "2", "--param", "migrate_after=2", "--param", "replicate_after=1"}, Seeds: "1-5"},
	{Name: "primary migrates while nodes crash and messages are lost (migrations and forwards counted by TestMigrationScenariosMigrateUnderFaults)",
		Args: []string{"--nodes", "3", "--clients", "3", "--ops", "400", "--faults", "crash,loss", "--keys", "2", "--mix", "get:1,set:3", "--param", "migrate_after=3", "--param", "replicate_after=1", "--param", "drop_after=4"}, Seeds: "1-5"},
	{Name: "migration under faults, clients that never retry (ROBUSTNESS P21: a request a node leaves unanswered never completes, and the liveness check fails it)",
		Args: []string{"--nodes", "3", "--clients", "4", "--ops", "4000", "--faults", "all", "--keys", "2", "--mix", "get:1,set:3", "--liveness", "1s", "--liveness-bound", "2s", "--timeout", "60s", "--param", "migrate_after=1"}, Seeds: "1-2"},
	{Name: "migration with invalidation under faults",
		Args: []string{"--nodes", "3", "--clients", "4", "--ops", "300", "--faults", "all", "--keys", "2", "--param", "migrate_after=1", "--param", "invalidate=*", "--param", "replicate_after=1"}, Seeds: "1-5"},
	{Name: "Orca integer objects under faults (sequential consistency judged by the generic search over the object service)",
		Args: []string{"--nodes", "3", "--clients", "4", "--ops", "200", "--faults", "all", "--keys", "3", "--service", "orca", "--param", "replicate_after=1"}, Seeds: "1-3"},
	{Name: "eager copies and drops under faults",
		Args: []string{"--nodes", "3", "--clients", "4", "--ops", "300", "--faults", "all", "--keys", "3", "--param", "replicate_after=1", "--param", "drop_after=2"}, Seeds: "1-5"},
}

// New implements automaton.Protocol.
func (p protocol) New(cfg automaton.Config) (automaton.Automaton, error) {
	if cfg.Service == nil {
		return nil, fmt.Errorf("%s: namespace %q has no service", p.Protocol, cfg.Namespace)
	}
	if _, _, err := proto.Positions(p.Protocol, cfg.Nodes, cfg.Self); err != nil {
		return nil, err
	}
	if service.IsNondeterministic(cfg.Service) {
		return nil, fmt.Errorf("%s: secondaries apply each update themselves; the nondeterministic service %s would diverge", p.Protocol, cfg.Service.Name())
	}
	prm, err := params.Parse(p.Protocol, cfg.Params)
	if err != nil {
		return nil, err
	}
	a := &Primary{proto: p, cfg: cfg,
		retransmit:     prm.Duration("retransmit"),
		replicateAfter: prm.Int("replicate_after"),
		dropAfter:      prm.Int("drop_after"),
		migrateAfter:   prm.Int("migrate_after"),
		Outbox:         proto.Outbox{Self: cfg.Self},
		timer:          proto.Ticker{ID: tick, Every: prm.Duration("retransmit")},
	}
	for _, s := range strings.Split(prm.String("invalidate"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			a.invalidate = append(a.invalidate, s)
		}
	}
	return a, nil
}

// Primary is one node's automaton: the primary copies of the objects that
// hash to it, the secondary copies it holds of others, and the client
// requests it waits on.
type Primary struct {
	proto          protocol
	cfg            automaton.Config
	retransmit     time.Duration
	replicateAfter int
	dropAfter      int
	migrateAfter   int
	invalidate     []string

	prim    map[string]*primCopy // objects whose primary is here
	sec     map[string]*secCopy  // secondary copies held here
	remote  map[automaton.RequestID]automaton.Request
	fetches map[string]uint64 // key → nonce of the outstanding fetch
	waiting map[string][]automaton.Request
	reads   map[string]int              // remote reads per key since this node's last write (statistics)
	seenV   map[string]uint64           // highest version named by a lock-and-update or invalidate
	moved   map[string]*moved           // objects whose primary copy left this node (persisted forwarding pointers)
	loc     map[string]automaton.NodeID // where this node last heard from an object's primary (a volatile hint)

	proto.Outbox
	timer proto.Ticker // retransmission, while anything is outstanding
}

const tick automaton.TimerID = 1

// Step implements automaton.Automaton.
func (a *Primary) Step(in automaton.Input) []automaton.Output {
	a.Begin()
	proto.Dispatch(a, in)
	a.armTimer()
	return a.Out
}

// OnTimer is the retransmission tick.
func (a *Primary) OnTimer(id automaton.TimerID) {
	if a.timer.Fired(id) {
		a.onTick()
	}
}

func (a *Primary) send(to automaton.NodeID, m message) { a.Send(to, m.encode()) }

// primaryOf is where this node believes an object's primary copy is: here
// when it holds it; else where it sent it (its forwarding pointer), or
// where the primary last spoke from (§3.3 migration); else where every
// object starts: a hash of its name over the nodes (§3.3: "Initially the
// system contains one copy for each object: the primary copy"). A wrong
// belief costs a forwarding hop, never a wrong answer: only a node holding
// the primary copy executes writes.
func (a *Primary) primaryOf(key string) automaton.NodeID {
	if _, ok := a.prim[key]; ok {
		return a.cfg.Self
	}
	if mv, ok := a.moved[key]; ok {
		return mv.to
	}
	if l, ok := a.loc[key]; ok {
		return l
	}
	return InitialPrimary(a.cfg.Nodes, key)
}

// InitialPrimary is where an object's primary copy starts: a hash of its
// name over the nodes. Benchmarks use it to place the writer.
func InitialPrimary(nodes []automaton.NodeID, key string) automaton.NodeID {
	h := fnv.New32a()
	h.Write([]byte(key))
	return nodes[int(h.Sum32())%len(nodes)]
}

func (a *Primary) invalidates(key string) bool {
	for _, p := range a.invalidate {
		if p == "*" || strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// OnStart recovers the primary copies from their records; secondary copies
// are volatile and lost.
func (a *Primary) OnStart(s automaton.Start) {
	a.prim = map[string]*primCopy{}
	a.sec = map[string]*secCopy{}
	a.remote = map[automaton.RequestID]automaton.Request{}
	a.fetches = map[string]uint64{}
	a.waiting = map[string][]automaton.Request{}
	a.reads = map[string]int{}
	a.seenV = map[string]uint64{}
	a.moved = map[string]*moved{}
	a.loc = map[string]automaton.NodeID{}
	a.timer.Stop()
	keys := make([]string, 0)
	for k := range s.Records {
		if strings.HasPrefix(k, "o/") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		a.recoverPrimary(strings.TrimPrefix(k, "o/"), s.Records[k])
	}
	for _, k := range slices.Sorted(maps.Keys(s.Records)) {
		if strings.HasPrefix(k, "f/") {
			a.recoverMoved(strings.TrimPrefix(k, "f/"), s.Records[k])
		}
	}
}

// Validator implements proto.Validating.
func (a *Primary) Validator(automaton.Request) service.Service { return a.cfg.Service }

// Invalid implements proto.Validating.
func (a *Primary) Invalid(req automaton.Request, r service.Result) { a.Respond(req.ID, r) }

// OnRequest: a validated request (Validator). A write goes to the primary (here, or remote); a read runs on
// a local copy, or remotely, or fetches a copy (statistics decide).
func (a *Primary) OnRequest(req automaton.Request) {
	if r, refused := automaton.RefuseUnsupported(a.proto.Protocol, req); refused {
		a.Respond(req.ID, r)
		return
	}
	if spansObjects(a.cfg.Service, req.Op) {
		a.Respond(req.ID, service.Errorf("ERR orca-primary: %s names several keys; each key is one shared object with its own primary copy, and an Orca operation applies to one object (seed 004 §1)", req.Op.Kind))
		return
	}
	key := req.Op.Key
	if a.primaryOf(key) == a.cfg.Self {
		a.primaryRequest(a.cfg.Self, automaton.Request{ID: req.ID, Op: req.Op})
		return
	}
	if !a.cfg.Service.IsRead(req.Op) {
		a.reads[key] = 0
		a.remoteOp(req)
		return
	}
	if c, ok := a.sec[key]; ok {
		c.reads++
		c.since = 0
		a.readCopy(key, c, req)
		return
	}
	a.reads[key]++
	if a.replicateAfter > 0 && a.reads[key] >= a.replicateAfter {
		a.waiting[key] = append(a.waiting[key], req)
		a.fetch(key)
		return
	}
	a.remoteOp(req)
}

// remoteOp ships the operation to the primary (remote read or write).
func (a *Primary) remoteOp(req automaton.Request) {
	if _, ok := a.remote[req.ID]; ok {
		return
	}
	a.remote[req.ID] = req
	a.send(a.primaryOf(req.Op.Key), message{kind: kRemote, key: req.Op.Key, req: req})
}

func (a *Primary) onReply(m message) {
	if _, ok := a.remote[m.req.ID]; !ok {
		return
	}
	delete(a.remote, m.req.ID)
	a.Respond(m.req.ID, m.res)
}

func (a *Primary) OnMessage(from automaton.NodeID, raw []byte) {
	m, err := decodeMessage(raw)
	if err != nil {
		return
	}
	switch m.kind {
	case kRemote, kFetch, kAck:
		if a.forward(from, m) {
			return
		}
		if m.origin != "" {
			from = m.origin
		}
	case kReply, kInstall, kLockUpd, kInval, kUnlock:
		a.loc[m.key] = from
	}
	switch m.kind {
	case kRemote:
		if a.primaryOf(m.key) == a.cfg.Self && (from != a.cfg.Self || a.remote[m.req.ID].Op.Kind != "") {
			if from == a.cfg.Self { // our own request, forwarded back after the primary migrated here
				delete(a.remote, m.req.ID)
			}
			a.primaryRequest(from, m.req)
		}
	case kReply:
		a.onReply(m)
	case kFetch:
		a.onFetch(from, m)
	case kInstall:
		a.onInstall(m)
	case kLockUpd:
		a.onLockAndUpdate(from, m)
	case kInval:
		a.onInvalidate(from, m)
	case kAck:
		a.onAck(from, m)
	case kUnlock:
		a.onUnlock(m)
	case kMigrate:
		a.onMigrate(from, m)
	case kMigrated:
		a.onMigrated(from, m)
	}
}

// onTick retransmits what is outstanding.
func (a *Primary) onTick() {
	ids := make([]automaton.RequestID, 0, len(a.remote))
	for id := range a.remote {
		ids = append(ids, id)
	}
	automaton.SortRequestIDs(ids)
	for _, id := range ids {
		r := a.remote[id]
		a.send(a.primaryOf(r.Op.Key), message{kind: kRemote, key: r.Op.Key, req: r})
	}
	for _, k := range slices.Sorted(maps.Keys(a.fetches)) {
		a.send(a.primaryOf(k), message{kind: kFetch, key: k, nonce: a.fetches[k]})
	}
	for _, k := range slices.Sorted(maps.Keys(a.prim)) {
		a.resendPhaseOne(k, a.prim[k])
	}
	for _, k := range slices.Sorted(maps.Keys(a.sec)) {
		if c := a.sec[k]; c.locked {
			a.send(a.primaryOf(k), message{kind: kAck, key: k, version: c.version, has: true})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(a.moved)) {
		a.resendMigrate(k)
	}
}

func (a *Primary) outstanding() bool {
	if len(a.remote) > 0 || len(a.fetches) > 0 {
		return true
	}
	for _, c := range a.prim {
		if c.flight != nil {
			return true
		}
	}
	for _, c := range a.sec {
		if c.locked {
			return true
		}
	}
	for _, mv := range a.moved {
		if mv.pending {
			return true
		}
	}
	return false
}

func (a *Primary) armTimer() {
	if !a.timer.Armed() && a.outstanding() {
		a.timer.Arm(&a.Outbox)
	}
}

func (a *Primary) seen(key string) uint64 { return a.seenV[key] }

func (a *Primary) see(key string, v uint64) {
	if v > a.seenV[key] {
		a.seenV[key] = v
	}
}

// spansObjects reports whether op names a key other than its own (COPY,
// LMOVE, SMOVE, SINTERSTORE, ...: the service's locks name several keys).
// An Orca operation applies to one object (the Orca paper §1, principle 2: "an
// operation invocation can modify at most one object"), and here each key
// is an object with its own primary copy on its own node: such a write ran
// at the first key's primary alone, answered success and left the other
// key's object unchanged. It is refused instead; so is a read of several
// keys, whose answer would come from one node's copies only.
func spansObjects(svc service.Service, op service.Op) bool {
	locks, ok := service.LocksOf(svc, op)
	if !ok {
		return false
	}
	for _, l := range locks {
		if l.Key != op.Key {
			return true
		}
	}
	return false
}
