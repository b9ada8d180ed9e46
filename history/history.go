// Package history records what clients saw: one entry per operation with its
// invocation and response times, its input and its result, or the fact that its
// outcome is unknown (a write that timed out or met an error after it may have
// reached replicas). The simulator, the live tests and the benchmark driver all
// record histories in this form; package check judges them.
//
// Histories are saved as JSON ("synod check history.json"). Values are stored as
// Go strings; byte strings that are not valid UTF-8 are not preserved exactly by
// JSON, so recorders use printable values.
package history

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"

	"github.com/synod-dev/synod/service"
)

// Outcome says what is known about an operation's effect.
type Outcome string

const (
	// OK: the operation completed and Result is what the client received.
	OK Outcome = "ok"
	// Unknown: no (valid) reply was received. A write may or may not have taken
	// effect, at any time after Call; checkers model it as maybe-applied.
	Unknown Outcome = "unknown"
	// Failed: the operation is known not to have taken effect (refused before it
	// was replicated, for example a syntax error). Checkers ignore it.
	Failed Outcome = "failed"
)

// Result is a JSON-friendly service.Result.
type Result struct {
	Type  string   `json:"type"` // nil, ok, bytes, int, err, array
	Bytes string   `json:"bytes,omitempty"`
	Int   int64    `json:"int,omitempty"`
	Err   string   `json:"err,omitempty"`
	Elems []Result `json:"elems,omitempty"` // an array's elements
}

var typeNames = map[service.ResultType]string{
	service.ResultNil: "nil", service.ResultOK: "ok", service.ResultBytes: "bytes",
	service.ResultInt: "int", service.ResultErr: "err", service.ResultArray: "array",
}

// Equal compares results by the fields their type uses.
func (r Result) Equal(o Result) bool {
	if r.Type != o.Type {
		return false
	}
	switch r.Type {
	case "bytes":
		return r.Bytes == o.Bytes
	case "int":
		return r.Int == o.Int
	case "err":
		return r.Err == o.Err
	case "array":
		if len(r.Elems) != len(o.Elems) {
			return false
		}
		for i := range r.Elems {
			if !r.Elems[i].Equal(o.Elems[i]) {
				return false
			}
		}
	}
	return true
}

// FromResult converts a service result.
func FromResult(r service.Result) Result {
	h := Result{Type: typeNames[r.Type], Bytes: string(r.Bytes), Int: r.Int, Err: r.Err}
	for _, e := range r.Elems {
		h.Elems = append(h.Elems, FromResult(e))
	}
	return h
}

// Op is one operation in a history.
type Op struct {
	// Process identifies the client that issued the operation (a small integer).
	Process   int      `json:"process"`
	Namespace string   `json:"ns,omitempty"`
	Kind      string   `json:"kind"`
	Key       string   `json:"key"`
	Args      []string `json:"args,omitempty"`
	// Read mode used for reads ("linearizable", "regular", "local", ...).
	ReadMode string `json:"read_mode,omitempty"`
	// Opts holds the protocol-declared request options the operation
	// carried, by name (automaton.Options.Ext): ESDS's id, prev and strict,
	// for example.
	Opts map[string][]string `json:"opts,omitempty"`
	// Txn, set on an operation whose Kind is TxnKind or MultiKind, holds the
	// operations of a transaction (interactive) or atomic group (MULTI/EXEC),
	// in the order the client issued them, each with the result the client
	// saw. The outer Outcome is the transaction's: OK committed, Failed
	// aborted (its effects invisible), Unknown (the commit may or may not
	// have taken effect, all or nothing). The outer Key and Args are empty;
	// Call is the first step's invocation and Return the commit's response.
	Txn []Op `json:"txn,omitempty"`
	// Call and Return are nanoseconds since the history began (virtual time in
	// simulation). Return is meaningless when Outcome is Unknown.
	Call    int64   `json:"call"`
	Return  int64   `json:"return"`
	Outcome Outcome `json:"outcome"`
	Result  Result  `json:"result"`
}

// Kinds of history entries that group operations.
const (
	// TxnKind: an interactive transaction (begin, operations, commit/abort).
	TxnKind = "txn"
	// MultiKind: an atomic group sent as one request (MULTI/EXEC).
	MultiKind = "multi"
)

// IsTxn reports whether the entry is a transaction or atomic group.
func (o Op) IsTxn() bool { return o.Kind == TxnKind || o.Kind == MultiKind }

// Opt returns the first value of option name ("" when absent).
func (o Op) Opt(name string) string {
	if v := o.Opts[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// ServiceOp returns the operation as a service.Op.
func (o Op) ServiceOp() service.Op {
	op := service.Op{Kind: o.Kind, Key: o.Key}
	for _, a := range o.Args {
		op.Args = append(op.Args, []byte(a))
	}
	return op
}

// History is a recorded run.
type History struct {
	// Meta describes the run (protocol, seed, command line, ...).
	Meta map[string]string `json:"meta,omitempty"`
	Ops  []Op              `json:"ops"`
}

// Sorted returns the operations ordered by Call time (stable).
func (h *History) Sorted() []Op {
	ops := append([]Op(nil), h.Ops...)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	return ops
}

// Save writes the history as compact JSON (histories of long runs are large).
func (h *History) Save(path string) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Load reads a history written by Save.
func Load(path string) (*History, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var h History
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("%s: not a Synod history: %w", path, err)
	}
	for i, op := range h.Ops {
		switch op.Outcome {
		case OK, Unknown, Failed:
		default:
			return nil, fmt.Errorf("%s: op %d: bad outcome %q", path, i, op.Outcome)
		}
		if op.Outcome == OK && op.Return < op.Call {
			return nil, fmt.Errorf("%s: op %d returns (%d) before it is called (%d)", path, i, op.Return, op.Call)
		}
	}
	return &h, nil
}

// Recorder collects operations from concurrent clients.
type Recorder struct {
	mu  sync.Mutex
	now func() int64
	h   History
}

// NewRecorder returns a recorder whose clock is now (nanoseconds).
func NewRecorder(now func() int64) *Recorder {
	return &Recorder{now: now, h: History{Meta: map[string]string{}}}
}

// Now reads the recorder's clock.
func (r *Recorder) Now() int64 { return r.now() }

// SetMeta records a run attribute.
func (r *Recorder) SetMeta(k, v string) {
	r.mu.Lock()
	r.h.Meta[k] = v
	r.mu.Unlock()
}

// Invoke starts an operation and returns a handle to complete it.
func (r *Recorder) Invoke(process int, ns string, op service.Op, readMode string) *Pending {
	o := Op{Process: process, Namespace: ns, Kind: op.Kind, Key: op.Key, ReadMode: readMode, Call: r.now()}
	for _, a := range op.Args {
		o.Args = append(o.Args, string(a))
	}
	return &Pending{r: r, op: o}
}

// Pending is an invoked operation not yet recorded.
type Pending struct {
	r    *Recorder
	op   Op
	done bool
}

// Complete records the operation as returned with res.
func (p *Pending) Complete(res service.Result) { p.finish(OK, res) }

// Unknown records the operation as of unknown outcome.
func (p *Pending) Unknown() { p.finish(Unknown, service.Result{}) }

// Fail records the operation as known not to have taken effect.
func (p *Pending) Fail(res service.Result) { p.finish(Failed, res) }

func (p *Pending) finish(o Outcome, res service.Result) {
	if p.done {
		panic("history: operation completed twice")
	}
	p.done = true
	p.op.Outcome = o
	p.op.Result = FromResult(res)
	p.op.Return = p.r.now()
	p.r.mu.Lock()
	p.r.h.Ops = append(p.r.h.Ops, p.op)
	p.r.mu.Unlock()
}

// History returns a copy of what was recorded so far.
func (r *Recorder) History() *History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := &History{Meta: map[string]string{}, Ops: append([]Op(nil), r.h.Ops...)}
	for k, v := range r.h.Meta {
		h.Meta[k] = v
	}
	return h
}
