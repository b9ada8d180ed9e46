package node

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Test-only protocols, registered under names no real protocol uses.

func init() {
	automaton.Register(regProto{})
	automaton.Register(miscProto{})
	automaton.Register(orderProto{})
}

// orderProto ("nodetest-order") steps client batches (as abd and esds,
// so its loop runs direct passes): a set of key "ord" appends its value
// to the list of values in the order the automaton steps them; a get of
// "ord" answers that list, comma-separated; anything else answers OK.
type orderProto struct{}

func (orderProto) Name() string             { return "nodetest-order" }
func (orderProto) IdempotentRetry() bool    { return false }
func (orderProto) StepsClientBatches() bool { return true }
func (orderProto) New(cfg automaton.Config) (automaton.Automaton, error) {
	return &orderAut{}, nil
}

type orderAut struct{ seen []string }

func (o *orderAut) Step(in automaton.Input) []automaton.Output {
	var reqs []automaton.Request
	switch in := in.(type) {
	case automaton.ClientRequest:
		reqs = []automaton.Request{in.Req}
	case automaton.ClientBatch:
		reqs = in.Reqs
	}
	var out []automaton.Output
	for _, r := range reqs {
		res := service.OK()
		switch {
		case r.Op.Kind == "set" && r.Op.Key == "ord":
			o.seen = append(o.seen, string(r.Op.Args[0]))
		case r.Op.Kind == "get" && r.Op.Key == "ord":
			res = service.Bytes([]byte(strings.Join(o.seen, ",")))
		}
		out = append(out, automaton.Respond{Resp: automaton.Response{ID: r.ID, Result: res}})
	}
	return out
}

// regProto ("nodetest-reg"): every node keeps a register per key. A set
// persists the value, broadcasts it to every other node, and answers OK; a
// peer's broadcast is persisted and applied; a get answers from local state.
// Start restores the persisted registers.
type regProto struct{}

func (regProto) Name() string          { return "nodetest-reg" }
func (regProto) IdempotentRetry() bool { return false }
func (regProto) New(cfg automaton.Config) (automaton.Automaton, error) {
	if len(cfg.Params) != 0 {
		return nil, fmt.Errorf("nodetest-reg takes no parameters")
	}
	return &reg{cfg: cfg, vals: map[string][]byte{}}, nil
}

type reg struct {
	cfg  automaton.Config
	vals map[string][]byte
}

func (r *reg) Step(in automaton.Input) []automaton.Output {
	switch in := in.(type) {
	case automaton.Start:
		for k, v := range in.Records {
			r.vals[strings.TrimPrefix(k, "r/")] = v
		}
	case automaton.ClientRequest:
		op := in.Req.Op
		switch op.Kind {
		case "get":
			v, ok := r.vals[op.Key]
			res := service.Nil()
			if ok {
				res = service.Bytes(append([]byte(nil), v...))
			}
			return []automaton.Output{automaton.Respond{Resp: automaton.Response{ID: in.Req.ID, Result: res}}}
		case "set":
			v := append([]byte(nil), op.Args[0]...)
			r.vals[op.Key] = v
			out := []automaton.Output{automaton.Persist{Key: "r/" + op.Key, Value: v}}
			e := wire.Encoder{}
			e.String(op.Key)
			e.Bytes(v)
			for _, n := range r.cfg.Nodes {
				if n != r.cfg.Self {
					out = append(out, automaton.Send{To: n, Msg: e.B})
				}
			}
			return append(out, automaton.Respond{Resp: automaton.Response{ID: in.Req.ID, Result: service.OK()}})
		}
		return []automaton.Output{automaton.Respond{Resp: automaton.Response{ID: in.Req.ID, Result: service.Errorf("unsupported %s", op.Kind)}}}
	case automaton.PeerMessage:
		d := wire.NewDecoder(in.Msg)
		k, v := d.String(), d.BytesCopy()
		if d.Done() != nil {
			return nil
		}
		r.vals[k] = v
		return []automaton.Output{automaton.Persist{Key: "r/" + k, Value: v}}
	}
	return nil
}

// miscProto ("nodetest-misc"), one node, exercises timers and waiters:
//
//	set arm/<id> <ms>   SetTimer(id, ms)            -> OK
//	set cancel/<id> x   CancelTimer(id)             -> OK
//	get fired           the ids fired so far, sorted, comma-separated
//	get hold            no answer until "set release x"
//	set release x       answers every held request once ("released"), then OK
//	set self x          emits a Send to itself (runtimes must drop it), then OK
//	set early/<k> v     answers OK, then persists v under early/<k>
type miscProto struct{}

func (miscProto) Name() string          { return "nodetest-misc" }
func (miscProto) IdempotentRetry() bool { return false }
func (miscProto) New(cfg automaton.Config) (automaton.Automaton, error) {
	return &misc{cfg: cfg, held: map[automaton.RequestID]bool{}}, nil
}

type misc struct {
	cfg   automaton.Config
	fired []int
	held  map[automaton.RequestID]bool
}

func (m *misc) Step(in automaton.Input) []automaton.Output {
	switch in := in.(type) {
	case automaton.TimerFired:
		m.fired = append(m.fired, int(in.ID))
	case automaton.ClientRequest:
		op, id := in.Req.Op, in.Req.ID
		ok := automaton.Respond{Resp: automaton.Response{ID: id, Result: service.OK()}}
		switch {
		case op.Kind == "set" && strings.HasPrefix(op.Key, "arm/"):
			tid, _ := strconv.Atoi(op.Key[4:])
			ms, _ := strconv.Atoi(string(op.Args[0]))
			return []automaton.Output{automaton.SetTimer{ID: automaton.TimerID(tid), After: time.Duration(ms) * time.Millisecond}, ok}
		case op.Kind == "set" && strings.HasPrefix(op.Key, "cancel/"):
			tid, _ := strconv.Atoi(op.Key[7:])
			return []automaton.Output{automaton.CancelTimer{ID: automaton.TimerID(tid)}, ok}
		case op.Kind == "get" && op.Key == "fired":
			f := append([]int(nil), m.fired...)
			sort.Ints(f)
			s := make([]string, len(f))
			for i, x := range f {
				s[i] = strconv.Itoa(x)
			}
			return []automaton.Output{automaton.Respond{Resp: automaton.Response{ID: id, Result: service.Bytes([]byte(strings.Join(s, ",")))}}}
		case op.Kind == "get" && op.Key == "hold":
			m.held[id] = true
			return nil
		case op.Kind == "set" && op.Key == "release":
			var out []automaton.Output
			for h := range m.held {
				out = append(out, automaton.Respond{Resp: automaton.Response{ID: h, Result: service.Bytes([]byte("released"))}})
			}
			clear(m.held)
			return append(out, ok)
		case op.Kind == "set" && strings.HasPrefix(op.Key, "early/"):
			// Answers before it persists: the answer needs no record.
			return []automaton.Output{ok, automaton.Persist{Key: op.Key, Value: op.Args[0]}}
		case op.Kind == "set" && op.Key == "self":
			return []automaton.Output{automaton.Send{To: m.cfg.Self, Msg: []byte("loop")}, ok}
		}
		return []automaton.Output{automaton.Respond{Resp: automaton.Response{ID: id, Result: service.Errorf("unsupported")}}}
	}
	return nil
}
