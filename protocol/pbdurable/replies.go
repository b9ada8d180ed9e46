package pbdurable

import (
	"fmt"
	"maps"
	"slices"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/durability"
	"github.com/synod-dev/synod/service"
)

// Replies is the protocol's own state object: each client's last answered
// write (its sequence number and answer), recorded by every write request
// through the proxies like any other update, so that it is as durable as
// the request's changes and all-or-nothing with them (commit.go). A new
// primary has it (replicated, or recovered from the database) and answers
// a client's retry of a write that already executed from it instead of
// executing it again: writes are executed at most once across fail-overs
// (IdempotentRetry, package doc).
type replies struct {
	last map[uint64]reply
}

type reply struct {
	seq uint64
	res []byte // service.EncodeResultBytes
}

var repliesInfo = durability.ObjectInfo{
	Name: "Replies",
	Updates: []durability.MethodInfo{{Name: "Answer", Params: []durability.Param{
		{Name: "client", Kind: durability.KindInt}, {Name: "seq", Kind: durability.KindInt}, {Name: "result", Kind: durability.KindBytes}}}},
}

// Replies' mapping entries, by mechanism.
var repliesMappings = map[durability.Mechanism]string{
	durability.Replicated: `
  Replies:
    mechanism: replicated
    methods:
      Answer: repeat
`,
	durability.Database: `
  Replies:
    mechanism: database
    init:
      - CREATE TABLE IF NOT EXISTS synod_replies (client BIGINT PRIMARY KEY, seq BIGINT NOT NULL, result BYTEA NOT NULL)
    recover:
      - query: SELECT client, seq, result FROM synod_replies
        call: Answer
    methods:
      Answer:
        sql: INSERT INTO synod_replies (client, seq, result) VALUES (:client, :seq, :result) ON CONFLICT (client) DO UPDATE SET seq = excluded.seq, result = excluded.result
`,
	durability.Reconstructible: `
  Replies:
    mechanism: reconstructible
`,
}

// repliesMechanism is the mechanism of Replies beside the seed's services'
// objects (their mapping files do not name it): replicated when any object
// is (an update buffer is shipped anyway: no database transaction for a
// request that has none), else database when any object is, else
// reconstructible.
func repliesMechanism(s *durability.Set) durability.Mechanism {
	switch {
	case s.Has(durability.Replicated):
		return durability.Replicated
	case s.Has(durability.Database):
		return durability.Database
	}
	return durability.Reconstructible
}

// newReplies builds the object and its proxy with mechanism m.
func newReplies(m durability.Mechanism) (*replies, durability.Proxy, error) {
	mp, err := durability.ParseMapping([]byte("service: replies\nobjects:" + repliesMappings[m]))
	if err != nil {
		return nil, nil, err
	}
	return newRepliesFrom(mp.Objects["Replies"])
}

func newRepliesFrom(om *durability.ObjectMapping) (*replies, durability.Proxy, error) {
	r := &replies{}
	p, err := durability.NewProxy(repliesInfo, om, durability.Hooks{
		Replay: r.replay,
		Reset:  func() { r.last = nil },
		Save:   func() ([]byte, error) { return nil, fmt.Errorf("Replies has no snapshot instruction") },
		Load:   func([]byte) error { return fmt.Errorf("Replies has no snapshot instruction") },
	})
	return r, p, err
}

func (r *replies) replay(method string, args []durability.Value) error {
	if method != "Answer" || len(args) != 3 {
		return fmt.Errorf("Replies has no update method %s/%d", method, len(args))
	}
	c, err := durability.AsInt64(args[0])
	if err != nil {
		return err
	}
	s, err := durability.AsInt64(args[1])
	if err != nil {
		return err
	}
	b, err := durability.AsBytes(args[2])
	if err != nil {
		return err
	}
	r.answer(uint64(c), uint64(s), b)
	return nil
}

func (r *replies) answer(client, seq uint64, res []byte) {
	if r.last == nil {
		r.last = map[uint64]reply{}
	}
	r.last[client] = reply{seq: seq, res: res}
}

// record is the write's Answer through the proxy (inside its startA ..
// commitA).
func (r *replies) record(set *durability.Set, id automaton.RequestID, res service.Result) {
	b := service.EncodeResultBytes(res)
	set.Proxy("Replies").Invoke("Answer", []durability.Value{int64(id.Client), int64(id.Seq), b},
		func() { r.answer(id.Client, id.Seq, b) })
}

// lookup answers a write that already executed: its recorded answer, or
// an error for a request older than the client's last answered write.
func (r *replies) lookup(id automaton.RequestID) (service.Result, bool) {
	x, ok := r.last[id.Client]
	switch {
	case !ok || x.seq < id.Seq:
		return service.Result{}, false
	case x.seq > id.Seq:
		return service.Errorf("ERR request %v is older than this client's last answered write (seq %d)", id, x.seq), true
	}
	res, err := service.DecodeResultBytes(x.res)
	if err != nil {
		return service.Errorf("ERR request %v: its recorded answer is unreadable: %v", id, err), true
	}
	return res, true
}

// repliesSnap carries Replies to a new backup.
type repliesSnap struct {
	Client, Seq uint64
	Res         []byte
}

func (r *replies) snapshot() []repliesSnap {
	out := make([]repliesSnap, 0, len(r.last))
	for _, c := range slices.Sorted(maps.Keys(r.last)) {
		out = append(out, repliesSnap{c, r.last[c].seq, r.last[c].res})
	}
	return out
}

func (r *replies) install(s []repliesSnap) {
	r.last = nil
	for _, x := range s {
		r.answer(x.Client, x.Seq, x.Res)
	}
}
