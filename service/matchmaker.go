package service

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/synod-dev/synod/wire"
)

func init() { Register(Matchmaker{}) }

// Matchmaker is the Grid Services thesis's example nondeterministic service, the simplified
// Condor Matchmaker of chapter III, section III.C.1 "Matchmaker Grid
// Service" (the grid resource broker and grid scheduling service of chapter
// I are its two sources of nondeterminism; chapter IV, section IV.D.2 "The
// Matchmaker Service" is a deterministic variant). It keeps track of the
// machines available in the grid, accepts requests for machines and maps each
// request to a suitable machine.
//
// Operations, as a client types them (SYNOD OP kind key [arg ...]; numbers
// are decimal text; the listings ignore their key: SYNOD OP machines -):
//
//	advertise <machine> cpu mem disk      -> OK, or bytes: the queued job that took the machine
//	submit    <job> cpu mem disk [prio]   -> bytes: the chosen machine; nil when none fits (job queued)
//	withdraw  <machine>                   -> int 1 if the machine was known, else 0
//	cancel    <job>                       -> int 1 if the job was known, else 0
//	job       <job>                       -> bytes: its machine; nil while queued; error if unknown
//	machines  <ignored>                   -> bytes: one line per machine, by id
//	queue     <ignored>                   -> bytes: one line per queued job, in service order
//
// advertise is the seed's resourceAdvertise (resource ID, available CPU
// speed, memory and disk) and submit its jobSubmit (job ID, required CPU
// speed, memory and disk, priority). machines, queue and job are the only
// reads. cpu, mem and disk are non-negative integers in units the users
// agree on (the seed: CPU speed, memory size, disk size); prio is a signed
// integer, 0 when omitted. Machine and job ids are non-empty and contain no
// spaces or control characters (they appear in the listings).
//
// # Nondeterminism
//
// The seed names two sources (III.C.1). First, "if there are several
// machines that satisfy a jobSubmit request, then the machine that is
// allocated can be nondeterministically chosen": submit draws the machine
// uniformly among the suitable ones from env.Rand() (Env, env.go), over the
// suitable machines sorted by id, so the same state, operation and Env give
// the same choice on every replica. Second, the seed's two threads (one
// enqueues requests, one executes them) make the order of execution depend
// on the speed of the server (chapter I's scheduling example). In a state
// machine every request runs to completion when the protocol applies it, so
// that source is the protocol's order of requests; the service itself adds
// no timing.
//
// The Matchmaker declares Nondeterministic() true and its state implements
// EnvApplier: protocols call service.ApplyEnv with the Env they agreed on (or
// replicate the resulting state, as chapter VI's PB-Paxos does). Plain Apply
// is ApplyEnv with the zero Env: deterministic, always the same draw, so a
// protocol that forgets the Env gets a stable answer rather than a silently
// random one.
//
// # Decisions where the seed is silent
//
//   - The queue (III.C.1: "requests are enqueued in priority order, and is
//     FIFO within each priority"; "otherwise, the request returns a null
//     string"). The seed's queue lives between its two threads; applied one
//     at a time, such a queue would always be empty. Synod keeps the jobs
//     that found no machine: submit answers nil (the seed's null string) and
//     the job waits in a priority queue, larger prio first and FIFO within
//     one prio by a submission sequence number (not by time). When a machine
//     becomes free (advertise, or cancel of the job that held it) the first
//     queued job in that order that fits it takes it; a job that does not fit
//     does not hold back the jobs behind it. So no queued job ever fits a
//     free machine. A client that learns nil and gives up cancels its job;
//     one that waits reads job.
//   - Suitable means free and at least the required cpu, mem and disk, each.
//     A job takes the whole machine (chapter IV's experiment advertises "a
//     large enough number of machines that all subsequent jobSubmit calls
//     can be satisfied", so allocations use machines up).
//   - A machine returns to the pool when it advertises again (IV.D.2:
//     "each machine periodically advertises its availability"), which ends
//     the job it held, or when that job is cancelled. withdraw removes a
//     machine (and forgets its job); the seed has no such request, but a
//     machine leaving the grid needs one.
//   - The answer is the machine's resource ID, not its address and
//     identification string: the ID names the machine, and a capability kept
//     in replicated state, snapshots and listings would be no secret.
//   - The seed's Matchmaker reads no clock, so neither does this one: it
//     reads only env.Rand(), and only when two or more machines are suitable.
//   - Submitting a job id that is queued or holds a machine is an error.
type Matchmaker struct{}

// Name implements Service.
func (Matchmaker) Name() string { return "matchmaker" }

// Nondeterministic implements NondeterministicService: submit's choice of a
// machine reads the Env.
func (Matchmaker) Nondeterministic() bool { return true }

// mmResources are a machine's available resources or a job's requirements
// (III.C.1: CPU speed, memory size, disk size).
type mmResources struct{ cpu, mem, disk uint64 }

// fits reports whether resources r satisfy requirements need.
func (r mmResources) fits(need mmResources) bool {
	return r.cpu >= need.cpu && r.mem >= need.mem && r.disk >= need.disk
}

func (r mmResources) String() string {
	return fmt.Sprintf("cpu=%d mem=%d disk=%d", r.cpu, r.mem, r.disk)
}

// mmRequest is an operation's parsed arguments.
type mmRequest struct {
	res  mmResources
	prio int64
}

// parse checks op and decodes its arguments; Validate and ApplyEnv share it.
func (Matchmaker) parse(op Op) (mmRequest, error) {
	var rq mmRequest
	switch op.Kind {
	case "advertise", "submit":
		want := []int{3}
		if op.Kind == "submit" {
			want = []int{3, 4}
		}
		if err := arity(op, want...); err != nil {
			return rq, err
		}
		if err := mmCheckID(op.Kind, op.Key); err != nil {
			return rq, err
		}
		var err error
		for i, p := range []*uint64{&rq.res.cpu, &rq.res.mem, &rq.res.disk} {
			if *p, err = strconv.ParseUint(string(op.Args[i]), 10, 64); err != nil {
				return rq, fmt.Errorf("%s %s: %q is not a non-negative integer", op.Kind, [...]string{"cpu", "mem", "disk"}[i], op.Args[i])
			}
		}
		if len(op.Args) == 4 {
			if rq.prio, err = strconv.ParseInt(string(op.Args[3]), 10, 64); err != nil {
				return rq, fmt.Errorf("submit priority: %q is not an integer", op.Args[3])
			}
		}
		return rq, nil
	case "withdraw", "cancel", "job":
		if err := arity(op, 0); err != nil {
			return rq, err
		}
		return rq, mmCheckID(op.Kind, op.Key)
	case "machines", "queue":
		return rq, arity(op, 0)
	}
	return rq, fmt.Errorf("unknown matchmaker operation %q (want advertise, submit, withdraw, cancel, job, machines or queue)", op.Kind)
}

// mmCheckID checks a machine or job id: non-empty, bounded, and free of
// spaces and control characters so that listings stay one line per entry.
func mmCheckID(kind, id string) error {
	if id == "" {
		return fmt.Errorf("%s: empty id", kind)
	}
	if len(id) > MaxKeySize {
		return fmt.Errorf("%s: id too large (%d bytes, limit %d)", kind, len(id), MaxKeySize)
	}
	if i := strings.IndexFunc(id, func(r rune) bool { return r <= ' ' || r == 0x7f }); i >= 0 {
		return fmt.Errorf("%s: id %q contains a space or control character", kind, id)
	}
	return nil
}

// Validate implements Service.
func (m Matchmaker) Validate(op Op) error {
	_, err := m.parse(op)
	return err
}

// IsRead implements Service.
func (Matchmaker) IsRead(op Op) bool {
	switch op.Kind {
	case "machines", "queue", "job":
		return true
	}
	return false
}

// NewState implements Service.
func (Matchmaker) NewState() State {
	return &MatchmakerState{machines: map[string]mmMachine{}, jobs: map[string]string{}}
}

// mmMachine is an advertised machine: its resources and the job holding it
// ("" while free).
type mmMachine struct {
	res mmResources
	job string
}

// mmJob is a queued job.
type mmJob struct {
	id   string
	prio int64
	seq  uint64 // submission order: FIFO within one priority
	need mmResources
}

// before orders the queue: larger priority first, then submission order
// (then id, which only a forged snapshot could need).
func (a mmJob) before(b mmJob) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if a.seq != b.seq {
		return a.seq < b.seq
	}
	return a.id < b.id
}

// MatchmakerState is a Matchmaker replica's state.
type MatchmakerState struct {
	machines map[string]mmMachine
	ids      []string          // machine ids, sorted: the order of candidates
	jobs     map[string]string // every known job -> its machine ("" while queued)
	queue    []mmJob           // queued jobs in service order
	seq      uint64            // the next submission's sequence number
}

var _ EnvApplier = (*MatchmakerState)(nil)

// Apply implements State with the zero Env (see Matchmaker): deterministic,
// but not what a protocol replicating this service should call; it calls
// ApplyEnv (service.ApplyEnv) with the agreed environment.
func (s *MatchmakerState) Apply(op Op) Result { return s.ApplyEnv(op, Env{}) }

// ApplyEnv implements EnvApplier: one handler per request.
func (s *MatchmakerState) ApplyEnv(op Op, env Env) Result {
	rq, err := Matchmaker{}.parse(op)
	if err != nil {
		return Errorf("%v", err)
	}
	switch op.Kind {
	case "advertise":
		return s.resourceAdvertise(op.Key, rq.res)
	case "submit":
		return s.jobSubmit(op.Key, rq.res, rq.prio, env)
	case "withdraw":
		return s.withdraw(op.Key)
	case "cancel":
		return s.cancel(op.Key)
	case "job":
		return s.jobStatus(op.Key)
	case "machines":
		return s.listMachines()
	case "queue":
		return s.listQueue()
	}
	return Errorf("unknown matchmaker operation %q", op.Kind) // unreachable: parse checked
}

// resourceAdvertise (III.C.1 resourceAdvertise; IV.D.2 machineAdvertise):
// the machine is available with resources res. A machine already known is
// updated, and the job it held ends. The first queued job that fits takes it.
func (s *MatchmakerState) resourceAdvertise(id string, res mmResources) Result {
	m, known := s.machines[id]
	if !known {
		i, _ := slices.BinarySearch(s.ids, id)
		s.ids = slices.Insert(s.ids, i, id)
	} else if m.job != "" {
		delete(s.jobs, m.job)
	}
	s.machines[id] = mmMachine{res: res}
	if job, ok := s.serveQueue(id); ok {
		return Bytes([]byte(job))
	}
	return OK()
}

// jobSubmit (III.C.1 jobSubmit): choose a suitable machine at random (the
// seed's first source of nondeterminism); when none fits, answer the seed's
// null string and queue the job in priority order, FIFO within a priority.
func (s *MatchmakerState) jobSubmit(id string, need mmResources, prio int64, env Env) Result {
	if _, dup := s.jobs[id]; dup {
		return Errorf("job %q already submitted", id)
	}
	seq := s.seq
	s.seq++
	var suitable []string
	for _, mid := range s.ids {
		if m := s.machines[mid]; m.job == "" && m.res.fits(need) {
			suitable = append(suitable, mid)
		}
	}
	if len(suitable) == 0 {
		j := mmJob{id: id, prio: prio, seq: seq, need: need}
		i, _ := slices.BinarySearchFunc(s.queue, j, mmCompare)
		s.queue = slices.Insert(s.queue, i, j)
		s.jobs[id] = ""
		return Nil()
	}
	chosen := suitable[0]
	if len(suitable) > 1 {
		chosen = suitable[env.Rand().IntN(len(suitable))]
	}
	s.allocate(chosen, id)
	return Bytes([]byte(chosen))
}

// withdraw removes a machine from the pool (not in the seed: a machine
// leaving the grid). The job it held, if any, is forgotten, not requeued.
func (s *MatchmakerState) withdraw(id string) Result {
	m, ok := s.machines[id]
	if !ok {
		return Int(0)
	}
	if m.job != "" {
		delete(s.jobs, m.job)
	}
	delete(s.machines, id)
	i, _ := slices.BinarySearch(s.ids, id)
	s.ids = slices.Delete(s.ids, i, i+1)
	return Int(1)
}

// cancel ends a job (not in the seed: the client of a queued job that gave
// up, or a job that finished). A queued job leaves the queue; a job holding
// a machine frees it, and the first queued job that fits takes it.
func (s *MatchmakerState) cancel(id string) Result {
	mid, ok := s.jobs[id]
	if !ok {
		return Int(0)
	}
	delete(s.jobs, id)
	if mid == "" {
		i := slices.IndexFunc(s.queue, func(j mmJob) bool { return j.id == id })
		s.queue = slices.Delete(s.queue, i, i+1)
		return Int(1)
	}
	m := s.machines[mid]
	m.job = ""
	s.machines[mid] = m
	s.serveQueue(mid)
	return Int(1)
}

// jobStatus answers where a job runs: its machine, nil while it is queued.
func (s *MatchmakerState) jobStatus(id string) Result {
	mid, ok := s.jobs[id]
	switch {
	case !ok:
		return Errorf("no such job %q", id)
	case mid == "":
		return Nil()
	}
	return Bytes([]byte(mid))
}

// listMachines lists the machines by id: "id cpu=.. mem=.. disk=.. free" or
// "... job=<job>", one per line.
func (s *MatchmakerState) listMachines() Result {
	var b strings.Builder
	for _, id := range s.ids {
		m := s.machines[id]
		fmt.Fprintf(&b, "%s %v ", id, m.res)
		if m.job == "" {
			b.WriteString("free\n")
		} else {
			fmt.Fprintf(&b, "job=%s\n", m.job)
		}
	}
	return Bytes([]byte(b.String()))
}

// listQueue lists the queued jobs in the order they will be served:
// "id prio=.. cpu=.. mem=.. disk=..", one per line.
func (s *MatchmakerState) listQueue() Result {
	var b strings.Builder
	for _, j := range s.queue {
		fmt.Fprintf(&b, "%s prio=%d %v\n", j.id, j.prio, j.need)
	}
	return Bytes([]byte(b.String()))
}

// serveQueue gives the free machine mid to the first queued job that fits.
func (s *MatchmakerState) serveQueue(mid string) (string, bool) {
	res := s.machines[mid].res
	for i, j := range s.queue {
		if res.fits(j.need) {
			s.queue = slices.Delete(s.queue, i, i+1)
			s.allocate(mid, j.id)
			return j.id, true
		}
	}
	return "", false
}

// allocate gives free machine mid to job.
func (s *MatchmakerState) allocate(mid, job string) {
	m := s.machines[mid]
	m.job = job
	s.machines[mid] = m
	s.jobs[job] = mid
}

func mmCompare(a, b mmJob) int {
	switch {
	case a.before(b):
		return -1
	case b.before(a):
		return 1
	}
	return 0
}

// Clone returns an independent copy of the state (see KVState.Clone).
func (s *MatchmakerState) Clone() State {
	c := &MatchmakerState{
		machines: maps.Clone(s.machines),
		ids:      slices.Clone(s.ids),
		jobs:     maps.Clone(s.jobs),
		queue:    slices.Clone(s.queue),
		seq:      s.seq,
	}
	if c.machines == nil {
		c.machines = map[string]mmMachine{}
	}
	if c.jobs == nil {
		c.jobs = map[string]string{}
	}
	return c
}

// Snapshot implements State: the sequence counter, the machines by id and
// the queued jobs in service order, so equal states give equal bytes.
func (s *MatchmakerState) Snapshot() []byte {
	e := wire.Encoder{B: []byte{codecVersion}}
	e.Uvarint(s.seq)
	e.Uvarint(uint64(len(s.ids)))
	for _, id := range s.ids {
		m := s.machines[id]
		e.String(id)
		mmEncodeResources(&e, m.res)
		e.String(m.job)
	}
	e.Uvarint(uint64(len(s.queue)))
	for _, j := range s.queue {
		e.String(j.id)
		e.Varint(j.prio)
		e.Uvarint(j.seq)
		mmEncodeResources(&e, j.need)
	}
	return e.B
}

func mmEncodeResources(e *wire.Encoder, r mmResources) {
	e.Uvarint(r.cpu)
	e.Uvarint(r.mem)
	e.Uvarint(r.disk)
}

func mmDecodeResources(d *wire.Decoder) mmResources {
	return mmResources{cpu: d.Uvarint(), mem: d.Uvarint(), disk: d.Uvarint()}
}

// Restore implements State. It refuses snapshots that are not canonical
// (machines out of order, queue out of service order) or inconsistent (a job
// both queued and holding a machine, or holding two).
func (s *MatchmakerState) Restore(snap []byte) error {
	d := wire.NewDecoder(snap)
	if v := d.Byte(); v != codecVersion {
		return fmt.Errorf("matchmaker: snapshot version %d, want %d", v, codecVersion)
	}
	n := &MatchmakerState{machines: map[string]mmMachine{}, jobs: map[string]string{}}
	bad := func(f string, a ...any) error {
		return fmt.Errorf("matchmaker: bad snapshot: "+f, a...)
	}
	n.seq = d.Uvarint()
	nm := d.Count(1<<40, 6)
	for i := 0; i < nm && d.Err() == nil; i++ {
		id := d.String()
		m := mmMachine{res: mmDecodeResources(d), job: d.String()}
		if d.Err() != nil {
			break
		}
		if err := mmCheckID("machine", id); err != nil {
			return bad("%v", err)
		}
		if len(n.ids) > 0 && n.ids[len(n.ids)-1] >= id {
			return bad("machine %q out of order", id)
		}
		if m.job != "" {
			if _, dup := n.jobs[m.job]; dup {
				return bad("job %q holds two machines", m.job)
			}
			n.jobs[m.job] = id
		}
		n.ids = append(n.ids, id)
		n.machines[id] = m
	}
	nq := d.Count(1<<40, 7)
	for i := 0; i < nq && d.Err() == nil; i++ {
		j := mmJob{id: d.String(), prio: d.Varint(), seq: d.Uvarint(), need: mmDecodeResources(d)}
		if d.Err() != nil {
			break
		}
		if err := mmCheckID("job", j.id); err != nil {
			return bad("%v", err)
		}
		if _, dup := n.jobs[j.id]; dup {
			return bad("job %q listed twice", j.id)
		}
		if j.seq >= n.seq {
			return bad("job %q has sequence number %d, next is %d", j.id, j.seq, n.seq)
		}
		if len(n.queue) > 0 && !n.queue[len(n.queue)-1].before(j) {
			return bad("job %q out of order", j.id)
		}
		n.jobs[j.id] = ""
		n.queue = append(n.queue, j)
	}
	if err := d.Done(); err != nil {
		return fmt.Errorf("matchmaker: bad snapshot: %w", err)
	}
	*s = *n
	return nil
}
