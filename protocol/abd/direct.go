package abd

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Client-driven ABD (the ABD report §1 and §3.1: "mode 1", the "ABD capable
// client").
//
// In the seed, servers in ABD mode never talk to each other: the client runs
// both phases itself against every server and waits for a majority. A
// request carrying the option abd.phase is one such phase, addressed to
// this replica alone; the replica answers it from its own register and
// sends nothing to its peers:
//
//	abd.phase=query  on get (or exists) KEY: answer [tag, value] (seed §3.1.1 GET)
//	abd.phase=store  on set KEY VALUE or del KEY, with abd.tag=TAG: install
//	                 (TAG, VALUE) if TAG is higher than the register's (del:
//	                 a tombstone), persist it, answer OK (seed §3.1.1 PUT)
//
// A query's answer is an array of two elements: the tag as FormatTag spells
// it ("" when the register was never written) and the value (null for a
// tombstone or a register never written). A store is acknowledged whether or
// not it was installed (the notes' reading of the seed's gap: the client
// waits for acknowledgements, so an ignored stale store must be acknowledged
// too).
//
// The phases are ordinary client requests with protocol-declared options
// (automaton.OptionSpec), so the gateway, the gRPC API, the Go client
// (client.ABD), the simulator and histories carry them unchanged, and one
// namespace serves node-coordinated and client-driven operations at once:
// a client-driven writer's tags name the client ("client/<id>", which no
// node id spells), node-coordinated tags name the node, so the two kinds of
// writer never produce the same tag.

// Request options of the client-driven mode.
const (
	// OptPhase selects a client-driven phase: PhaseQuery or PhaseStore.
	OptPhase = "abd.phase"
	// OptTag is a store phase's tag, as FormatTag spells it.
	OptTag = "abd.tag"

	PhaseQuery = "query"
	PhaseStore = "store"
)

// FormatTag spells t as "TS:SEQ:WRITER" (the writer last: it may contain
// colons). The zero tag is "".
func FormatTag(t Tag) string {
	if t == (Tag{}) {
		return ""
	}
	return strconv.FormatUint(t.TS, 10) + ":" + strconv.FormatUint(t.Seq, 10) + ":" + t.Node
}

// appendTagText appends FormatTag(t) to b, growing it once (a query's answer
// spells its tag this way, one allocation).
func appendTagText(b []byte, t Tag) []byte {
	if t == (Tag{}) {
		return b
	}
	b = slices.Grow(b, 2*20+2+len(t.Node))
	b = strconv.AppendUint(b, t.TS, 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, t.Seq, 10)
	b = append(b, ':')
	return append(b, t.Node...)
}

// ParseTag parses FormatTag's spelling ("" is the zero tag).
func ParseTag(s string) (Tag, error) {
	if s == "" {
		return Tag{}, nil
	}
	// strings.Cut, not SplitN: no list (a client-driven put parses about
	// seven tags, client and replicas; s52-grpc.md).
	tsText, rest, ok1 := strings.Cut(s, ":")
	seqText, writer, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 || writer == "" {
		return Tag{}, fmt.Errorf("tag %q is not TS:SEQ:WRITER", s)
	}
	ts, err1 := strconv.ParseUint(tsText, 10, 64)
	seq, err2 := strconv.ParseUint(seqText, 10, 64)
	if err1 != nil || err2 != nil {
		return Tag{}, fmt.Errorf("tag %q is not TS:SEQ:WRITER with decimal TS and SEQ", s)
	}
	return Tag{TS: ts, Node: writer, Seq: seq}, nil
}

// ClientWriter is the writer id a client-driven writer puts in its tags.
func ClientWriter(clientID uint64) string { return fmt.Sprintf("client/%016x", clientID) }

// QueryAnswer is a replica's answer to a query phase.
type QueryAnswer struct {
	Tag Tag
	// Tomb: the register holds a delete (Value nil); a zero Tag with Tomb
	// false is a register never written.
	Tomb  bool
	Value []byte
}

// Present reports whether the answer carries a value.
func (q QueryAnswer) Present() bool { return q.Tag != (Tag{}) && !q.Tomb }

// queryResult renders e as the query phase's answer.
func queryResult(e entry) service.Result {
	val := service.Nil()
	if e.present() {
		val = service.Bytes(e.Value)
	}
	return service.Array(service.Bytes(appendTagText([]byte{}, e.Tag)), val)
}

// ParseQueryAnswer reads a query phase's answer.
func ParseQueryAnswer(r service.Result) (QueryAnswer, error) {
	if r.Type != service.ResultArray || len(r.Elems) != 2 || r.Elems[0].Type != service.ResultBytes {
		return QueryAnswer{}, fmt.Errorf("abd: a query answer is [tag, value], got %v", r)
	}
	t, err := ParseTag(string(r.Elems[0].Bytes))
	if err != nil {
		return QueryAnswer{}, fmt.Errorf("abd: query answer: %w", err)
	}
	q := QueryAnswer{Tag: t}
	switch v := r.Elems[1]; v.Type {
	case service.ResultNil:
		q.Tomb = t != (Tag{})
	case service.ResultBytes:
		q.Value = v.Bytes
	default:
		return QueryAnswer{}, fmt.Errorf("abd: a query answer's value is bytes or null, got %v", v)
	}
	return q, nil
}

// RequestOptions implements automaton.OptionDeclarer.
func (p protocol) RequestOptions() []automaton.OptionSpec {
	return []automaton.OptionSpec{
		{
			Name:         OptPhase,
			Type:         automaton.OptString,
			Doc:          "client-driven ABD (the ABD report's ABD client): answer one phase from this replica alone, query or store",
			PerOperation: true,
			Validate: func(v []string) error {
				if v[0] != PhaseQuery && v[0] != PhaseStore {
					return fmt.Errorf("%q is neither %s nor %s", v[0], PhaseQuery, PhaseStore)
				}
				return nil
			},
		},
		{
			Name:         OptTag,
			Type:         automaton.OptString,
			Doc:          "a client-driven store's tag, TS:SEQ:WRITER",
			PerOperation: true,
			Validate: func(v []string) error {
				t, err := ParseTag(v[0])
				if err == nil && t.TS == 0 {
					err = fmt.Errorf("tag %q: a stored tag's timestamp is at least 1", v[0])
				}
				return err
			},
		},
	}
}

// onPhase answers one client-driven phase from this replica's register
// (the ABD report §3.1.1), without messages to other replicas. Its
// operation was validated (Validator).
func (a *ABD) onPhase(req automaton.Request, phase string) {
	switch phase {
	case PhaseQuery:
		a.onQueryPhase(req)
	case PhaseStore:
		a.onStorePhase(req)
	default:
		a.Respond(req.ID, service.Errorf("ERR option %s: %q is neither %s nor %s", OptPhase, phase, PhaseQuery, PhaseStore))
	}
}

// onQueryPhase answers a client's query with this replica's (tag, value)
// (the ABD report §3.1.1, GET: "simply returns the entry").
func (a *ABD) onQueryPhase(req automaton.Request) {
	if k := req.Op.Kind; k != "get" && k != "exists" {
		a.Respond(req.ID, service.Errorf("ERR %s=%s runs on get or exists, not %s", OptPhase, PhaseQuery, k))
		return
	}
	a.Respond(req.ID, queryResult(a.entry(req.Op.Key)))
}

// onStorePhase installs a client's (tag, value) if the tag is higher than
// the register's, and acknowledges either way (the ABD report §3.1.1, PUT).
func (a *ABD) onStorePhase(req automaton.Request) {
	o := req.Op
	m := &message{Kind: kindStore, Key: o.Key}
	switch {
	case o.Kind == "set" && len(o.Args) == 1:
		m.Value = o.Args[0]
	case o.Kind == "del":
		m.Tomb = true
	default:
		a.Respond(req.ID, service.Errorf("ERR %s=%s runs on set KEY VALUE (no conditions) or del KEY, not %s", OptPhase, PhaseStore, o.Kind))
		return
	}
	t, err := ParseTag(req.Opts.String(OptTag))
	if err != nil || t.TS == 0 {
		a.Respond(req.ID, service.Errorf("ERR %s=%s needs option %s=TS:SEQ:WRITER with TS >= 1", OptPhase, PhaseStore, OptTag))
		return
	}
	m.Tag = t
	a.applyStore(m.Key, nil, m.Tag, m.Tomb, m.Value)
	a.Respond(req.ID, service.OK())
}
