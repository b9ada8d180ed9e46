package abd

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/service"
)

// phase sends one client-driven phase to one replica and returns its
// answer.
func phase(t *testing.T, c *harness.Cluster, at automaton.NodeID, op service.Op, ext map[string][]string) service.Result {
	t.Helper()
	var opts automaton.Options
	for k, v := range ext {
		opts.Set(k, v)
	}
	opts, err := automaton.ValidateOptions("abd", automaton.RequestID{}, opts)
	if err != nil {
		t.Fatalf("options %v: %v", ext, err)
	}
	id := c.Request(at, op, opts)
	r, ok := c.Response(id)
	if !ok {
		t.Fatalf("%s gave no answer to a %v phase on %v", at, ext, op)
	}
	return r
}

// clientABD is the seed's ABD capable client (the ABD report §3.1.2) over the
// harness: both phases against the replicas that are up, a majority each.
type clientABD struct {
	t      *testing.T
	c      *harness.Cluster
	writer string
	seq    uint64
	// queried, stored: the replicas that answered the last operation's phases.
	queried, stored []automaton.NodeID
	wroteBack       bool
}

func (cl *clientABD) quorum() int { return automaton.Majority(len(cl.c.IDs())) }

func (cl *clientABD) query(key string) QueryAnswer {
	cl.queried = nil
	var max QueryAnswer
	n, nMax := 0, 0
	for _, id := range cl.c.IDs() {
		if !cl.c.Up(id) || n == cl.quorum() {
			continue
		}
		r := phase(cl.t, cl.c, id, get(key), map[string][]string{OptPhase: {PhaseQuery}})
		q, err := ParseQueryAnswer(r)
		if err != nil {
			cl.t.Fatal(err)
		}
		n++
		cl.queried = append(cl.queried, id)
		switch {
		case n == 1 || max.Tag.Less(q.Tag, false):
			max, nMax = q, 1
		case q.Tag == max.Tag:
			nMax++
		}
	}
	if n < cl.quorum() {
		cl.t.Fatalf("query: %d replicas up, fewer than a majority", n)
	}
	cl.wroteBack = nMax < cl.quorum()
	return max
}

func (cl *clientABD) store(op service.Op, tag Tag) {
	cl.stored = nil
	for _, id := range cl.c.IDs() {
		if !cl.c.Up(id) || len(cl.stored) == cl.quorum() {
			continue
		}
		r := phase(cl.t, cl.c, id, op, map[string][]string{OptPhase: {PhaseStore}, OptTag: {FormatTag(tag)}})
		if !r.Equal(service.OK()) {
			cl.t.Fatalf("store at %s: %v", id, r)
		}
		cl.stored = append(cl.stored, id)
	}
	if len(cl.stored) < cl.quorum() {
		cl.t.Fatalf("store: %d acknowledgements, fewer than a majority", len(cl.stored))
	}
}

func (cl *clientABD) set(key, val string) Tag {
	max := cl.query(key)
	cl.seq++
	tag := Tag{TS: max.Tag.TS + 1, Node: cl.writer, Seq: cl.seq}
	cl.store(set(key, val), tag)
	return tag
}

func (cl *clientABD) get(key string) service.Result {
	max := cl.query(key)
	if cl.wroteBack {
		op := set(key, string(max.Value))
		if max.Tomb {
			op = service.Op{Kind: "del", Key: key}
		}
		cl.store(op, max.Tag)
	}
	if !max.Present() {
		return service.Nil()
	}
	return service.Bytes(max.Value)
}

// A client-driven write and read against three replicas with one down
// (the ABD report §3.1.2: a majority answers each phase), the replicas never
// sending each other a message.
func TestClientDrivenOneReplicaDown(t *testing.T) {
	nw := newNet(t, "abd", 3)
	sent := 0
	nw.Observe(func(_ automaton.NodeID, o automaton.Output) {
		if _, ok := o.(automaton.Send); ok {
			sent++
		}
	})
	nw.Crash("n2")
	cl := &clientABD{t: t, c: nw, writer: ClientWriter(7)}
	tag := cl.set("k", "v1")
	if tag.TS != 1 || tag.Node != "client/0000000000000007" {
		t.Fatalf("first write's tag %v, want (1, client/0000000000000007, 1)", tag)
	}
	if got := strings.Join(ids(cl.stored), ","); got != "n1,n3" {
		t.Fatalf("stored at %s, want n1,n3", got)
	}
	if r := cl.get("k"); !r.Equal(service.Bytes([]byte("v1"))) {
		t.Fatalf("read %v, want v1", r)
	}
	if cl.wroteBack {
		t.Fatal("the read wrote back although a majority already held the highest tag")
	}
	tag2 := cl.set("k", "v2")
	if !tag.Less(tag2, false) || tag2.TS != 2 {
		t.Fatalf("second write's tag %v is not (2, ...) above %v", tag2, tag)
	}
	if sent != 0 {
		t.Fatalf("replicas sent %d messages to each other; client-driven phases send none", sent)
	}
	// n2 comes back with nothing; n1 goes down. The read's majority is
	// {n2, n3}: n3 has the latest write, n2 nothing, so the read writes back.
	nw.Restart("n2")
	nw.Crash("n1")
	if r := cl.get("k"); !r.Equal(service.Bytes([]byte("v2"))) {
		t.Fatalf("read %v after the replica set changed, want v2", r)
	}
	if !cl.wroteBack {
		t.Fatal("the read did not write back a tag only one queried replica held")
	}
	if e := abd(nw, "n2").entry("k"); e.Tag != tag2 || string(e.Value) != "v2" {
		t.Fatalf("n2 holds %v %q after the write-back, want %v v2", e.Tag, e.Value, tag2)
	}
	if v := nw.Violation(); v != "" {
		t.Fatal(v)
	}
}

func ids(l []automaton.NodeID) []string {
	out := make([]string, len(l))
	for i, id := range l {
		out[i] = string(id)
	}
	return out
}

// A store with a tag not above the register's is acknowledged and ignored;
// a delete stores a tombstone that a query reports with its tag.
func TestStorePhaseConditional(t *testing.T) {
	nw := newNet(t, "abd", 1)
	hi := Tag{TS: 5, Node: "client/a", Seq: 1}
	lo := Tag{TS: 4, Node: "client/b", Seq: 9}
	st := func(op service.Op, tag Tag) {
		r := phase(t, nw, "n1", op, map[string][]string{OptPhase: {PhaseStore}, OptTag: {FormatTag(tag)}})
		if !r.Equal(service.OK()) {
			t.Fatalf("store %v: %v, want OK", tag, r)
		}
	}
	query := func() QueryAnswer {
		r := phase(t, nw, "n1", get("k"), map[string][]string{OptPhase: {PhaseQuery}})
		q, err := ParseQueryAnswer(r)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	if q := query(); q.Tag != (Tag{}) || q.Present() || q.Tomb {
		t.Fatalf("empty register answered %+v", q)
	}
	st(set("k", "new"), hi)
	st(set("k", "old"), lo)
	if q := query(); q.Tag != hi || string(q.Value) != "new" {
		t.Fatalf("after a stale store: %+v, want %v new", q, hi)
	}
	del := Tag{TS: 6, Node: "client/b", Seq: 10}
	st(service.Op{Kind: "del", Key: "k"}, del)
	if q := query(); q.Tag != del || !q.Tomb || q.Present() {
		t.Fatalf("after a delete: %+v, want a tombstone at %v", q, del)
	}
	// The node-coordinated read of the same namespace sees the tombstone.
	_, r, ok := do(nw, "n1", get("k"), 0)
	mustResult(t, r, ok, service.Nil())
	// And a node-coordinated write orders after the client's tags.
	do(nw, "n1", set("k", "node"), 0)
	if q := query(); q.Tag.TS != 7 || string(q.Value) != "node" {
		t.Fatalf("after a node-coordinated write: %+v, want ts 7 node", q)
	}
}

// Malformed phases are refused by the options' validation or the replica,
// and change nothing.
func TestPhaseRefusals(t *testing.T) {
	for _, ext := range []map[string][]string{
		{OptPhase: {"gossip"}},
		{OptTag: {"x:1:c"}},
		{OptTag: {"0:1:c"}},
		{OptTag: {"1:2"}},
	} {
		var o automaton.Options
		for k, v := range ext {
			o.Set(k, v)
		}
		if _, err := automaton.ValidateOptions("abd", automaton.RequestID{}, o); err == nil {
			t.Errorf("options %v accepted", ext)
		}
	}
	nw := newNet(t, "abd", 1)
	for _, c := range []struct {
		op  service.Op
		ext map[string][]string
	}{
		{set("k", "v"), map[string][]string{OptPhase: {PhaseStore}}}, // no tag
		{get("k"), map[string][]string{OptPhase: {PhaseStore}, OptTag: {"1:1:c"}}},
		{set("k", "v"), map[string][]string{OptPhase: {PhaseQuery}}},
		{service.Op{Kind: "incr", Key: "k"}, map[string][]string{OptPhase: {PhaseStore}, OptTag: {"1:1:c"}}},
	} {
		r := phase(t, nw, "n1", c.op, c.ext)
		if !r.IsErr() {
			t.Errorf("%v with %v answered %v, want an error", c.op, c.ext, r)
		}
	}
	if e := abd(nw, "n1").entry("k"); e.Tag != (Tag{}) {
		t.Fatalf("refused phases stored %v", e.Tag)
	}
}

func TestTagSpelling(t *testing.T) {
	for _, tag := range []Tag{{}, {TS: 1, Node: "n1", Seq: 0}, {TS: 1 << 63, Node: "client/00ff:x", Seq: 1<<64 - 1}} {
		got, err := ParseTag(FormatTag(tag))
		if err != nil || got != tag {
			t.Fatalf("%v spelled %q parsed back as %v, %v", tag, FormatTag(tag), got, err)
		}
	}
}

// ParseTag refuses what is not TS:SEQ:WRITER, and parses without
// allocating (a client-driven put parses several tags per replica).
func TestParseTagRefusalsAndAllocations(t *testing.T) {
	for _, s := range []string{"1", "1:2", "1:2:", ":2:w", "1::w", "x:2:w", "1:y:w", "-1:2:w", "18446744073709551616:1:w"} {
		if tag, err := ParseTag(s); err == nil {
			t.Errorf("ParseTag(%q) = %v, want an error", s, tag)
		}
	}
	if tag, err := ParseTag("3:4:a:b"); err != nil || tag != (Tag{TS: 3, Seq: 4, Node: "a:b"}) {
		t.Errorf("ParseTag(3:4:a:b) = %v, %v", tag, err)
	}
	s := FormatTag(Tag{TS: 12, Seq: 34, Node: "client/00000000000000ff"})
	if n := testing.AllocsPerRun(100, func() { ParseTag(s) }); n != 0 {
		t.Errorf("ParseTag allocates %.0f times, want 0", n)
	}
}

// A query's answer spells its tag as FormatTag does, in one allocation.
func TestQueryResultTag(t *testing.T) {
	for _, tag := range []Tag{{}, {TS: 1, Seq: 2, Node: "n1"}, {TS: 1 << 40, Seq: 1<<64 - 1, Node: "client/00000000000000ff"}} {
		e := entry{Tag: tag, Value: []byte("v")}
		r := queryResult(e)
		if got := string(r.Elems[0].Bytes); got != FormatTag(tag) || r.Elems[0].Bytes == nil {
			t.Errorf("queryResult's tag %q (nil %v), want %q", got, r.Elems[0].Bytes == nil, FormatTag(tag))
		}
		if q, err := ParseQueryAnswer(r); err != nil || q.Tag != tag {
			t.Errorf("query answer of %v parsed as %v, %v", tag, q, err)
		}
		if n := testing.AllocsPerRun(100, func() { appendTagText([]byte{}, tag) }); n > 1 {
			t.Errorf("spelling %v: %.0f allocations, want at most 1", tag, n)
		}
	}
}
