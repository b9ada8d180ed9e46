package pbpaxos

import (
	"fmt"
	"sort"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// machine is the replicated state (the Grid Services thesis VI.A.2's state): the service
// state and the duplicate table (per client, its latest write and the
// results it got), so that a retry of a write at any replica, after any
// leader change, is answered from the table instead of executed again
// (exactly-once).
type machine struct {
	svc  service.Service
	st   service.State
	dups map[uint64]dupEntry
}

type dupEntry struct {
	seq     uint64
	res     service.Result
	results []service.Result
}

func newMachine(svc service.Service) *machine {
	return &machine{svc: svc, st: svc.NewState(), dups: map[uint64]dupEntry{}}
}

// clone returns an independent copy: Clone when the state has it, a
// snapshot restored otherwise.
func (m *machine) clone() *machine {
	c := &machine{svc: m.svc, dups: make(map[uint64]dupEntry, len(m.dups))}
	for k, v := range m.dups {
		c.dups[k] = v
	}
	st, err := service.CloneState(m.svc, m.st)
	if err != nil {
		panic(fmt.Sprintf("pbpaxos: copying the state: %v", err))
	}
	c.st = st
	return c
}

// lookup returns the remembered outcome of write id.
func (m *machine) lookup(id automaton.RequestID) (dupEntry, bool) {
	d, ok := m.dups[id.Client]
	return d, ok && d.seq == id.Seq
}

// done reports whether write id (or a later write of its client) executed.
func (m *machine) done(id automaton.RequestID) bool {
	d, ok := m.dups[id.Client]
	return ok && d.seq >= id.Seq
}

// remember records the results of the writes among cs.
func (m *machine) remember(cs []cmd) {
	for _, c := range cs {
		if !c.writes() {
			continue
		}
		if d, ok := m.dups[c.ID.Client]; ok && d.seq > c.ID.Seq {
			continue
		}
		m.dups[c.ID.Client] = dupEntry{seq: c.ID.Seq, res: c.Result, results: c.Results}
	}
}

// execute runs c on the state (the leader's execution, or a replay) and
// fills in its results.
func (m *machine) execute(c *cmd) {
	switch c.Kind {
	case cmdOp, cmdRead:
		c.Result = service.ApplyEnv(m.st, c.Op, envAt(c.Envs, 0))
	case cmdGroup:
		c.Result, c.Results = service.OK(), automaton.ApplyGroup(m.st, c.Ops, envAt(c.Envs, 0))
	case cmdTxn:
		for i, op := range c.Ops {
			service.ApplyEnv(m.st, op, envAt(c.Envs, i))
		}
		c.Result = service.OK()
	case cmdNoop:
		c.Result = service.OK()
	}
}

func envAt(es []service.Env, i int) service.Env {
	if i < len(es) {
		return es[i]
	}
	return service.Env{}
}

const machineVersion = 1

// snapshot encodes the whole replicated state.
func (m *machine) snapshot() []byte {
	st := m.st.Snapshot()
	e := wire.Encoder{B: make([]byte, 0, len(st)+16+len(m.dups)*24)}
	e.Byte(machineVersion)
	e.Bytes(st)
	ids := make([]uint64, 0, len(m.dups))
	for k := range m.dups {
		ids = append(ids, k)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	e.Uvarint(uint64(len(ids)))
	for _, k := range ids {
		d := m.dups[k]
		e.Uvarint(k)
		e.Uvarint(d.seq)
		service.EncodeResult(&e, d.res)
		e.Uvarint(uint64(len(d.results)))
		for _, r := range d.results {
			service.EncodeResult(&e, r)
		}
	}
	return e.B
}

// restore replaces the replicated state by a snapshot.
func (m *machine) restore(b []byte) error {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != machineVersion && d.Err() == nil {
		return fmt.Errorf("pbpaxos: state version %d", v)
	}
	st := d.Bytes()
	n := d.Count(1<<40, 3)
	dups := make(map[uint64]dupEntry, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		k := d.Uvarint()
		e := dupEntry{seq: d.Uvarint(), res: service.DecodeResult(d)}
		k2 := d.Count(maxOps, 1)
		for j := 0; j < k2 && d.Err() == nil; j++ {
			e.results = append(e.results, service.DecodeResult(d))
		}
		dups[k] = e
	}
	if err := d.Done(); err != nil {
		return fmt.Errorf("pbpaxos: bad state: %w", err)
	}
	ns := m.svc.NewState()
	if err := ns.Restore(st); err != nil {
		return err
	}
	m.st, m.dups = ns, dups
	return nil
}

// version is the service state's Version (0 when it has none).
func (m *machine) version() uint64 {
	if d, ok := m.st.(service.DeltaState); ok {
		return d.Version()
	}
	return 0
}

// install applies an instance's value to m (a learner applying the chosen
// state, the Grid Services thesis VI.A.2; or an acceptor materialising its latest state):
// the update by its kind, and the requests' results into the duplicate
// table. updCovered entries are installed by the entry that covers them.
func (m *machine) install(cs []cmd, kind byte, upd []byte) error {
	switch kind {
	case updCovered:
		return nil
	case updFull:
		return m.restore(upd)
	case updDelta:
		if len(upd) > 0 {
			ds, ok := m.st.(service.DeltaState)
			if !ok {
				return fmt.Errorf("pbpaxos: a delta for a state without deltas")
			}
			if err := ds.ApplyDelta(upd); err != nil {
				return err
			}
		}
		m.remember(cs)
	case updReplay:
		for i := range cs {
			m.execute(&cs[i])
		}
		m.remember(cs)
	}
	return nil
}
