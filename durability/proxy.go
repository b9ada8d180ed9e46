package durability

import (
	"fmt"
	"sort"
)

// Update is one recorded call of an update method (the replication
// proxy's update buffer entry): repeated on the backup object, or, for a
// snapshot instruction, the object's state after the request.
type Update struct {
	Object string
	Method string
	Args   []Value
	State  []byte // snapshot instruction: the object's whole state
}

// Work is what a proxy operation asks the runtime to do. The proxies are
// pure (they run inside protocol automata), so the I/O their mechanism
// needs comes back as Work: the runtime runs SQL through a store (an
// Effect, package doc) and ships the update buffer to the backups.
type Work struct {
	// SQL: statements to run in one database transaction (startA..commitA
	// as BEGIN..COMMIT), or init's DDL.
	SQL []Stmt
	// Queries: database recovery queries; their rows go to Restore.
	Queries []Query
	// Ship: the replication proxies' update buffer, sent to every backup
	// at commitA; the answer waits for their acknowledgements.
	Ship []Update
}

// Query is one recovery query of one object.
type Query struct {
	Object string
	SQL    string
}

// Empty reports whether w asks for nothing.
func (w Work) Empty() bool { return len(w.SQL) == 0 && len(w.Queries) == 0 && len(w.Ship) == 0 }

// Merge appends o's work to w's.
func (w *Work) Merge(o Work) {
	w.SQL = append(w.SQL, o.SQL...)
	w.Queries = append(w.Queries, o.Queries...)
	w.Ship = append(w.Ship, o.Ship...)
}

// Hooks are what generated code gives the generic proxy about one object:
// the seed's Java dynamic proxy reached the object by reflection; ours
// reaches it through these functions, emitted by the generator.
type Hooks struct {
	// Replay calls update method name with args on the raw object.
	Replay func(method string, args []Value) error
	// Reset makes the object empty (its zero value).
	Reset func()
	// Save and Load copy the object's state (checkpoints, snapshot
	// instructions).
	Save func() ([]byte, error)
	Load func([]byte) error
}

// Role is a replication proxy's role (IV.C.2).
type Role int

const (
	Primary Role = iota
	Backup
)

func (r Role) String() string { return [...]string{"primary", "backup"}[r] }

// Proxy is the seed's durability proxy interface (Fig. IV.2, IV.C.2):
// invoke, init, recover and the five action-control methods. Work that
// needs I/O is returned, never done.
type Proxy interface {
	// Object names the state object.
	Object() string
	Mechanism() Mechanism
	// Invoke is called for every call of an update method: it runs the
	// call on the object and records the update in the request's buffer
	// (replicated, database). Reads do not pass through it.
	Invoke(method string, args []Value, call func())
	// Init initialises the object at the first start: database: its
	// tables; others: the empty object.
	Init() Work
	// Recover restores the object when the primary failed: replicated at
	// a promoted backup: the state is already here (role change);
	// database: the recovery queries (their rows go to Restore);
	// reconstructible: empty, then the rebuild method.
	Recover() Work
	// Restore replays a recovery query's rows on the (empty) object.
	Restore(q Query, rows [][]Value) error
	StartA()
	CommitA() (Work, error)
	StartTA(txn string) error
	CommitTA() (Work, error)
	AbortTA() (Work, error)
	// Apply is the backup side of commitA: install a shipped update
	// (after the acknowledgement, IV.C.2).
	Apply(u Update) error
	// SetRole switches a replication proxy's role (recover at a backup).
	SetRole(r Role)
}

// proxy implements all three mechanisms; the mapping entry picks one.
type proxy struct {
	name  string
	m     *ObjectMapping
	info  ObjectInfo
	hooks Hooks
	role  Role
	tmpl  map[string][]template // database: compiled per method

	inA  bool
	txn  string
	buf  []Update
	ckpt []byte
	err  error // a failure inside invoke (a snapshot that could not be saved)
}

// NewProxy builds the proxy of one object from its mapping entry (already
// validated against info by Mapping.Validate) and its generated hooks.
func NewProxy(info ObjectInfo, m *ObjectMapping, h Hooks) (Proxy, error) {
	if m == nil {
		return nil, fmt.Errorf("objects.%s: missing", info.Name)
	}
	p := &proxy{name: info.Name, m: m, info: info, hooks: h}
	if m.Mechanism == Database {
		p.tmpl = map[string][]template{}
		for meth, in := range m.Methods {
			mi, _ := info.update(meth)
			for i, s := range in.SQL {
				t, err := compileSQL(s, mi, true)
				if err != nil {
					return nil, fmt.Errorf("objects.%s.methods.%s.sql[%d]: %v", info.Name, meth, i, err)
				}
				p.tmpl[meth] = append(p.tmpl[meth], t)
			}
		}
	}
	return p, nil
}

func (p *proxy) Object() string       { return p.name }
func (p *proxy) Mechanism() Mechanism { return p.m.Mechanism }
func (p *proxy) SetRole(r Role)       { p.role = r }

// Invoke: (IV.C.2) forward the call to the object; if it is an update,
// store it in the update buffer (replicated, database; reconstructible
// records nothing).
func (p *proxy) Invoke(method string, args []Value, call func()) {
	call()
	if p.m.Mechanism == Reconstructible {
		return
	}
	u := Update{Object: p.name, Method: method, Args: args}
	if in := p.m.Methods[method]; in != nil && in.Keyword == Snapshot {
		// The whole state after the call replaces the earlier ones of this
		// request.
		st, err := p.hooks.Save()
		if err != nil {
			p.err = fmt.Errorf("%s.%s: snapshot: %w", p.name, method, err)
		}
		u = Update{Object: p.name, Method: method, State: st}
		if n := len(p.buf); n > 0 && p.buf[n-1].State != nil {
			p.buf = p.buf[:n-1]
		}
	}
	p.buf = append(p.buf, u)
}

// Init: database: create the tables (the statements of the mapping);
// replicated and reconstructible: the empty object (the seed's replication
// init opens connections to the backups: the protocol's peers do that).
func (p *proxy) Init() Work {
	p.hooks.Reset()
	if p.m.Mechanism != Database {
		return Work{}
	}
	var w Work
	for _, s := range p.m.Init {
		w.SQL = append(w.SQL, Stmt{Object: p.name, SQL: s})
	}
	return w
}

// Recover (IV.C.2): replicated: change role to primary, the state is
// already here; database: the recovery queries on an empty object;
// reconstructible: init, then the rebuild method.
func (p *proxy) Recover() Work {
	p.buf, p.inA, p.txn, p.ckpt = nil, false, "", nil
	switch p.m.Mechanism {
	case Replicated:
		p.role = Primary
		return Work{}
	case Database:
		p.hooks.Reset()
		var w Work
		for _, st := range p.m.Recover {
			w.Queries = append(w.Queries, Query{Object: p.name, SQL: st.Query})
		}
		return w
	}
	p.hooks.Reset()
	if p.m.Rebuild != "" {
		_ = p.hooks.Replay(p.m.Rebuild, nil)
	}
	return Work{}
}

// Restore replays each row of q as the mapping's call (Fig. IV.5: "for
// (each line) insertBill(clientID, balance)").
func (p *proxy) Restore(q Query, rows [][]Value) error {
	for i, st := range p.m.Recover {
		if st.Query != q.SQL {
			continue
		}
		mi, _ := p.info.update(st.Call)
		for _, r := range rows {
			if len(r) != len(mi.Params) {
				return fmt.Errorf("objects.%s.recover[%d]: the query returns %d columns, %s takes %d arguments", p.name, i, len(r), st.Call, len(mi.Params))
			}
			if err := p.hooks.Replay(st.Call, r); err != nil {
				return fmt.Errorf("objects.%s.recover[%d]: %w", p.name, i, err)
			}
		}
		return nil
	}
	return fmt.Errorf("objects.%s: no recovery query %q", p.name, q.SQL)
}

// StartA: an empty update buffer; nothing inside a transaction (IV.C.2:
// the proxy ignores startA and commitA while the object is in one).
func (p *proxy) StartA() {
	if p.txn != "" {
		return
	}
	p.inA = true
	p.buf = p.buf[:0]
	p.err = nil
}

// CommitA: replicated: the buffer, to ship to the backups (the caller
// waits for their acknowledgement before answering); database: the
// buffer's statements, to run between BEGIN and COMMIT; reconstructible:
// nothing.
func (p *proxy) CommitA() (Work, error) {
	if p.txn != "" {
		return Work{}, nil
	}
	p.inA = false
	return p.flush()
}

func (p *proxy) flush() (Work, error) {
	buf := p.buf
	p.buf = nil
	if err := p.err; err != nil {
		p.err = nil
		return Work{}, err
	}
	var w Work
	switch p.m.Mechanism {
	case Replicated:
		w.Ship = buf
	case Database:
		for _, u := range buf {
			for _, t := range p.tmpl[u.Method] {
				w.SQL = append(w.SQL, t.bind(p.name, u.Args))
			}
		}
	}
	return w, nil
}

// StartTA: checkpoint the state (mapping) and open an update buffer for
// the transaction. The seed's replication startTA also registers the
// backups as participants; here the transaction runs at the primary and
// the backups see its buffer only at commitTA (package doc).
func (p *proxy) StartTA(txn string) error {
	if p.txn != "" {
		return fmt.Errorf("%s: already in transaction %s", p.name, p.txn)
	}
	p.txn, p.buf, p.ckpt, p.err = txn, nil, nil, nil
	if p.m.checkpoint() == CheckpointCopy {
		st, err := p.hooks.Save()
		if err != nil {
			p.txn = ""
			return fmt.Errorf("%s: checkpoint: %w", p.name, err)
		}
		p.ckpt = st
	}
	return nil
}

// CommitTA: like commitA for the whole transaction; the checkpoint is
// discarded.
func (p *proxy) CommitTA() (Work, error) {
	if p.txn == "" {
		return Work{}, fmt.Errorf("%s: commitTA outside a transaction", p.name)
	}
	p.txn, p.ckpt = "", nil
	return p.flush()
}

// AbortTA: roll the object back (restore: checkpoint, recover or init)
// and discard the buffer. Restoring by recover returns the recovery
// queries: the caller runs them and calls Restore.
func (p *proxy) AbortTA() (Work, error) {
	if p.txn == "" {
		return Work{}, fmt.Errorf("%s: abortTA outside a transaction", p.name)
	}
	ckpt := p.ckpt
	p.txn, p.buf, p.ckpt, p.err = "", nil, nil, nil
	switch p.m.restore() {
	case RestoreCheckpoint:
		return Work{}, p.hooks.Load(ckpt)
	case RestoreRecover:
		return p.Recover(), nil
	}
	p.hooks.Reset()
	return Work{}, nil
}

// Apply installs a shipped update at a backup: repeat the call, or load
// the snapshot.
func (p *proxy) Apply(u Update) error {
	if u.State != nil {
		return p.hooks.Load(u.State)
	}
	return p.hooks.Replay(u.Method, u.Args)
}

// Set is a service's proxies: the action-control methods over every
// state object a request may touch, so that a request is all-or-nothing
// across them (IV.B.3): one database transaction for every database
// object's statements, one shipped buffer for every replicated object.
type Set struct {
	proxies []Proxy
	by      map[string]Proxy
}

// NewSet builds a set; proxies are kept in name order so that merged work
// is deterministic.
func NewSet(ps ...Proxy) *Set {
	s := &Set{by: map[string]Proxy{}}
	for _, p := range ps {
		s.by[p.Object()] = p
		s.proxies = append(s.proxies, p)
	}
	sort.Slice(s.proxies, func(i, j int) bool { return s.proxies[i].Object() < s.proxies[j].Object() })
	return s
}

// Proxy returns the named object's proxy.
func (s *Set) Proxy(name string) Proxy { return s.by[name] }

// Proxies lists the proxies by name.
func (s *Set) Proxies() []Proxy { return s.proxies }

// Has reports whether some object uses mechanism m.
func (s *Set) Has(m Mechanism) bool {
	for _, p := range s.proxies {
		if p.Mechanism() == m {
			return true
		}
	}
	return false
}

func (s *Set) each(f func(Proxy) Work) Work {
	var w Work
	for _, p := range s.proxies {
		w.Merge(f(p))
	}
	return w
}

func (s *Set) eachErr(f func(Proxy) (Work, error)) (Work, error) {
	var w Work
	var first error
	for _, p := range s.proxies {
		x, err := f(p)
		if err != nil && first == nil {
			first = err
		}
		w.Merge(x)
	}
	return w, first
}

// Init initialises every object (first start of the first primary).
func (s *Set) Init() Work { return s.each(Proxy.Init) }

// Recover restores every object (a new primary, before it serves).
func (s *Set) Recover() Work { return s.each(Proxy.Recover) }

// Restore hands a recovery query's rows to its object.
func (s *Set) Restore(q Query, rows [][]Value) error {
	p := s.by[q.Object]
	if p == nil {
		return fmt.Errorf("no state object %q", q.Object)
	}
	return p.Restore(q, rows)
}

// StartA starts a request on every object (the generator's rewiring
// calls it at the beginning of each service method).
func (s *Set) StartA() {
	for _, p := range s.proxies {
		p.StartA()
	}
}

// CommitA ends the request: the merged work of every object.
func (s *Set) CommitA() (Work, error) { return s.eachErr(Proxy.CommitA) }

// StartTA starts a transaction on every object.
func (s *Set) StartTA(txn string) error {
	for i, p := range s.proxies {
		if err := p.StartTA(txn); err != nil {
			for _, q := range s.proxies[:i] {
				_, _ = q.AbortTA()
			}
			return err
		}
	}
	return nil
}

// CommitTA commits the transaction on every object.
func (s *Set) CommitTA() (Work, error) { return s.eachErr(Proxy.CommitTA) }

// AbortTA rolls every object back.
func (s *Set) AbortTA() (Work, error) { return s.eachErr(Proxy.AbortTA) }

// Apply installs a shipped buffer at a backup, in order.
func (s *Set) Apply(ups []Update) error {
	for _, u := range ups {
		p := s.by[u.Object]
		if p == nil {
			return fmt.Errorf("shipped update for unknown object %q", u.Object)
		}
		if err := p.Apply(u); err != nil {
			return fmt.Errorf("%s.%s: %w", u.Object, u.Method, err)
		}
	}
	return nil
}

// SetRole sets every replication proxy's role.
func (s *Set) SetRole(r Role) {
	for _, p := range s.proxies {
		p.SetRole(r)
	}
}
