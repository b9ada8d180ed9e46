package sim

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/check"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// A tiny test-only protocol: a single fixed leader (the first node) holds a
// register per key and a per-client deduplication table, both persisted.
// Other nodes forward client requests to the leader, which answers the client
// directly. It is linearizable as long as the runtime obeys the durability
// rule, and it retries idempotently.
//
// "test-leader-ackfirst" is broken on purpose: the leader answers before it
// persists, so a crash before the fsync loses acknowledged writes (only when
// nothing older is still unsynced: the runtime holds outputs of later steps).
// "test-leader-volatile" never persists: a leader crash forgets everything.
func init() {
	automaton.Register(leaderProto{name: "test-leader"})
	automaton.Register(leaderProto{name: "test-leader-ackfirst", ackFirst: true})
	automaton.Register(leaderProto{name: "test-leader-volatile", volatile: true})
	automaton.Register(fanoutProto{leaderProto{name: "test-leader-fanout", fanout: true}})
	automaton.Register(fanoutProto{leaderProto{name: "test-leader-fanout-allanswer", fanout: true, allAnswer: true}})
}

type leaderProto struct {
	name     string
	ackFirst bool
	volatile bool
	// fanout: clients send to every node; non-leaders answer a fanned-out
	// request Silent (or, allAnswer, from their own empty state: wrong).
	fanout, allAnswer bool
}

// fanoutProto declares automaton.FanoutProtocol.
type fanoutProto struct{ leaderProto }

func (fanoutProto) ClientFanout() bool { return true }

func (p leaderProto) Name() string          { return p.name }
func (p leaderProto) IdempotentRetry() bool { return true }
func (p leaderProto) New(cfg automaton.Config) (automaton.Automaton, error) {
	if len(cfg.Params) != 0 {
		return nil, fmt.Errorf("%s: no parameters", p.name)
	}
	return &leader{p: p, cfg: cfg, kv: map[string][]byte{}, dedup: map[uint64]dedupEntry{}}, nil
}

type dedupEntry struct {
	seq uint64
	res service.Result
}

type leader struct {
	p     leaderProto
	cfg   automaton.Config
	kv    map[string][]byte
	dedup map[uint64]dedupEntry
}

func (l *leader) isLeader() bool { return l.cfg.Self == l.cfg.Nodes[0] }

func (l *leader) Step(in automaton.Input) []automaton.Output {
	switch in := in.(type) {
	case automaton.Start:
		for k, v := range in.Records {
			switch k[0] {
			case 'k':
				l.kv[k[2:]] = append([]byte(nil), v...)
			case 'd':
				id, _ := strconv.ParseUint(k[2:], 16, 64)
				d := wire.NewDecoder(v)
				e := dedupEntry{seq: d.Uvarint(), res: service.DecodeResult(d)}
				if d.Done() != nil {
					panic("bad dedup record")
				}
				l.dedup[id] = e
			}
		}
		return nil
	case automaton.ClientRequest:
		if !l.isLeader() && in.Req.Fanout {
			if !l.p.fanout {
				panic("fanned-out request to a protocol that did not ask for it")
			}
			if l.p.allAnswer {
				return l.apply(in.Req)
			}
			return []automaton.Output{automaton.Respond{Resp: automaton.Response{ID: in.Req.ID, Silent: true}}}
		}
		if !l.isLeader() {
			e := wire.Encoder{}
			e.Uvarint(in.Req.ID.Client)
			e.Uvarint(in.Req.ID.Seq)
			service.EncodeOp(&e, in.Req.Op)
			return []automaton.Output{automaton.Send{To: l.cfg.Nodes[0], Msg: e.B}}
		}
		return l.apply(in.Req)
	case automaton.PeerMessage:
		d := wire.NewDecoder(in.Msg)
		req := automaton.Request{ID: automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}}
		req.Op = service.DecodeOp(d)
		if d.Done() != nil || !l.isLeader() {
			panic("bad forward")
		}
		return l.apply(req)
	}
	return nil
}

func (l *leader) apply(req automaton.Request) []automaton.Output {
	if e, ok := l.dedup[req.ID.Client]; ok && e.seq >= req.ID.Seq {
		if e.seq == req.ID.Seq {
			return []automaton.Output{automaton.Respond{Resp: automaton.Response{ID: req.ID, Result: e.res}}}
		}
		return nil
	}
	op := req.Op
	v, present := l.kv[op.Key]
	var res service.Result
	var persist []automaton.Output
	switch op.Kind {
	case "get":
		res = service.Nil()
		if present {
			res = service.Bytes(v)
		}
	case "exists":
		res = service.Int(0)
		if present {
			res = service.Int(1)
		}
	case "set":
		l.kv[op.Key] = op.Args[0]
		res = service.OK()
		persist = append(persist, automaton.Persist{Key: "k/" + op.Key, Value: op.Args[0]})
	case "del":
		res = service.Int(0)
		if present {
			res = service.Int(1)
			delete(l.kv, op.Key)
			persist = append(persist, automaton.Persist{Key: "k/" + op.Key, Delete: true})
		}
	default:
		res = service.Errorf("unsupported")
	}
	l.dedup[req.ID.Client] = dedupEntry{req.ID.Seq, res}
	e := wire.Encoder{}
	e.Uvarint(req.ID.Seq)
	service.EncodeResult(&e, res)
	persist = append(persist, automaton.Persist{Key: "d/" + strconv.FormatUint(req.ID.Client, 16), Value: e.B})
	resp := automaton.Respond{Resp: automaton.Response{ID: req.ID, Result: res}}
	if l.p.volatile {
		return []automaton.Output{resp}
	}
	if l.p.ackFirst {
		return append([]automaton.Output{resp}, persist...)
	}
	return append(persist, resp)
}

// TestFanoutClients: for a protocol that declares FanoutProtocol, every
// client request reaches every live node marked Fanout, Silent answers are
// skipped and the leader's answer completes the operation; --no-fanout
// sends to one node, which forwards. A protocol whose followers answer
// fanned-out requests from their own state is caught.
func TestFanoutClients(t *testing.T) {
	base := Config{Protocol: "test-leader-fanout", Nodes: 3, Clients: 4, Ops: 300, Faults: "crash,dup,reorder"}
	for seed := int64(1); seed <= 5; seed++ {
		cfg := base
		cfg.Seed = seed
		r, err := Run(cfg)
		if err != nil {
			t.Fatalf("seed %d: %v\nreplay: %s", seed, err, cfg.Command())
		}
		if r.Violation || r.Check == nil || r.Check.Result != check.Ok {
			t.Fatalf("seed %d: %v\nreplay: %s", seed, r.Check, cfg.Command())
		}
		if r.Stats.Silent == 0 {
			t.Errorf("seed %d: no Silent answer counted: requests were not fanned out (%s)", seed, r.Stats)
		}
		cfg.NoFanout = true
		if !strings.Contains(cfg.Command(), "--no-fanout") {
			t.Errorf("replay command lost --no-fanout: %s", cfg.Command())
		}
		r, err = Run(cfg)
		if err != nil || r.Violation {
			t.Fatalf("seed %d without fanout: %v %v\nreplay: %s", seed, err, r, cfg.Command())
		}
		if r.Stats.Silent != 0 {
			t.Errorf("seed %d: --no-fanout still fanned out (%d silent answers)", seed, r.Stats.Silent)
		}
	}
	caught := false
	for seed := int64(1); seed <= 5 && !caught; seed++ {
		cfg := base
		cfg.Protocol, cfg.Seed = "test-leader-fanout-allanswer", seed
		r, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		caught = r.Violation
	}
	if !caught {
		t.Error("followers answering fanned-out requests from their own state were not caught")
	}
}
