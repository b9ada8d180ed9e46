package esds

import (
	"math/rand"
	"strconv"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// A dead replica blocks strict operations; removing it (admin request at one
// node, gossiped to the others) lets them complete.
func TestRemoveDeadReplicaUnblocksStrict(t *testing.T) {
	c := newCluster(t, "esds", 3, service.Counter{}, nil)
	c.Crash("n3")
	s := c.request("n1", opts("s", true), "add", "4")
	c.settle(10)
	if _, ok := c.answer(s); ok {
		t.Fatal("strict operation answered while n3 (a member) is dead")
	}
	self := c.request("n1", opts("", false), AdminRemove)
	if got := c.mustAnswer(self); !got.IsErr() {
		t.Fatalf("removal without a node accepted: %v", got)
	}
	rid := c.Request("n2", service.Op{Kind: AdminRemove, Key: "n3"}, automaton.Options{})
	if got := c.mustAnswer(rid); !got.Equal(service.OK()) {
		t.Fatalf("remove n3: %v", got)
	}
	c.settle(10)
	if got := c.mustAnswer(s); !got.Equal(service.Int(4)) {
		t.Fatalf("strict add answered %v after removing n3", got)
	}
	// The removal survives a restart.
	c.Crash("n1")
	c.Boot("n1")
	if c.esds("n1").removed&(1<<2) == 0 {
		t.Fatal("n1 forgot the removal across a restart")
	}
	if _, err := (protocol{Capabilities: capabilities("esds", optParams, "")}).New(automaton.Config{Self: "n1", Nodes: c.IDs(), Service: service.Counter{}, Params: map[string]string{"removed": "n1"}}); err == nil {
		t.Fatal("a replica removing itself by parameter was accepted")
	}
}

func TestBrokenEarlyStrictAnswersBeforeStability(t *testing.T) {
	c := newCluster(t, "esds-broken-earlystrict", 3, service.Counter{}, nil)
	s := c.request("n1", opts("s", true), "add", "1")
	if _, ok := c.answer(s); !ok {
		t.Fatal("the broken variant should answer a strict operation at once")
	}
	c2 := newCluster(t, "esds", 3, service.Counter{}, nil)
	s2 := c2.request("n1", opts("s", true), "add", "1")
	if _, ok := c2.answer(s2); ok {
		t.Fatal("esds answered a strict operation before stability")
	}
}

func TestGarbageCollectionKeepsSummaryCompact(t *testing.T) {
	c := newCluster(t, "esds", 3, service.Counter{}, nil)
	var last automaton.RequestID
	for i := 0; i < 200; i++ {
		last = c.request(c.IDs()[i%3], opts("", false), "add", "1")
		if i%10 == 0 {
			c.settle(1)
		}
	}
	c.settle(4 * gcEveryTicks)
	for _, id := range c.IDs() {
		a := c.esds(id)
		if len(a.ops) != 0 || a.gcd.size() != 1 {
			t.Fatalf("%s: %d live operations, summary of %d ranges (want 0 and 1: one client, contiguous)", id, len(a.ops), a.gcd.size())
		}
	}
	// A retry of a collected operation gets its cached stable value (its
	// value in the final order), not a second add.
	c.Submit("n2", automaton.Request{ID: last, Op: service.Op{Kind: "add", Args: [][]byte{[]byte("1")}}})
	answers := c.Responses(last)
	got := answers[len(answers)-1]
	if len(answers) != 2 || got.Type != service.ResultInt || got.Int < 1 || got.Int > 200 {
		t.Fatalf("retry of a collected op answered %v, first answer %v", got, answers[0])
	}
	r := c.request("n3", opts("", true), "read")
	c.settle(6)
	if got := c.mustAnswer(r); !got.Equal(service.Int(200)) {
		t.Fatalf("counter reads %v after 200 adds and a retry", got)
	}
}

func TestIDSummary(t *testing.T) {
	var s idSummary
	id := func(q uint64) string { return AssignedOpID(automaton.RequestID{Client: 0xab, Seq: q}) }
	for _, q := range []uint64{1, 2, 5, 4, 3, 9} {
		s.add(id(q))
	}
	s.add("custom-id")
	for q, want := range map[uint64]bool{1: true, 3: true, 5: true, 6: false, 9: true, 10: false, 0: false} {
		if s.has(id(q)) != want {
			t.Fatalf("has(%d) = %v", q, !want)
		}
	}
	if !s.has("custom-id") || s.has("00000000000000ab-01") || s.size() != 3 {
		t.Fatalf("summary %+v", s)
	}
	// Only the canonical spelling parses (anything else is an id of its
	// own, kept one by one): the rule of the version that parsed, then
	// compared the lower-cased and re-formatted parts.
	for _, id := range []string{"00000000000000ab-1", "00000000000000ab-0", "00000000000000ab-00", "00000000000000ab-01",
		"00000000000000AB-1", "00000000000000ab-", "00000000000000ab-+1", "00000000000000ab--1", "0x000000000000ab-1",
		"00000000000000ab-1-2", "ffffffffffffffff-18446744073709551615", "ffffffffffffffff-18446744073709551616",
		"0000000000000ab-1", "000000000000000ab-1", "00000000000000ag-1", "00000000000000ab-1a", "-1", "", "custom-id",
		"00000000000000ab-" + strings.Repeat("9", 25), "0000000000_000ab-1"} {
		c1, q1, ok1 := parseDerived(id)
		c2, q2, ok2 := canonicalDerived(id)
		if c1 != c2 || q1 != q2 || ok1 != ok2 {
			t.Errorf("parseDerived(%q) = %x, %d, %v; the canonical rule says %x, %d, %v", id, c1, q1, ok1, c2, q2, ok2)
		}
	}
}

// canonicalDerived is the rule parseDerived implements, with strconv.
func canonicalDerived(id string) (uint64, uint64, bool) {
	c, q, found := strings.Cut(id, "-")
	if !found || len(c) != 16 {
		return 0, 0, false
	}
	cv, err1 := strconv.ParseUint(c, 16, 64)
	sv, err2 := strconv.ParseUint(q, 10, 64)
	if err1 != nil || err2 != nil || strings.ToLower(c) != c || strconv.FormatUint(sv, 10) != q {
		return 0, 0, false
	}
	return cv, sv, true
}

// TestParseDerivedAsStrconv: parseDerived's one pass over the bytes reads
// what strconv reads under the canonical rule, over 200,000 random ids
// near the form (hex and decimal digits, capitals, signs, dashes, lengths
// around 16 and around the uint64 limit), and allocates nothing.
func TestParseDerivedAsStrconv(t *testing.T) {
	rng := rand.New(rand.NewSource(58))
	const alphabet = "0123456789abcdefABG-+_ "
	pick := func(n int, digits string) string {
		b := make([]byte, n)
		for i := range b {
			if rng.Intn(40) == 0 {
				b[i] = alphabet[rng.Intn(len(alphabet))]
			} else {
				b[i] = digits[rng.Intn(len(digits))]
			}
		}
		return string(b)
	}
	ok := 0
	for range 200000 {
		id := pick(14+rng.Intn(5), "0123456789abcdef") + "-" + pick(rng.Intn(22), "0123456789")
		if rng.Intn(10) == 0 {
			id = pick(16, "0123456789abcdef") + "-" + "1844674407370955" + pick(4, "0123456789")
		}
		c1, q1, ok1 := parseDerived(id)
		c2, q2, ok2 := canonicalDerived(id)
		if c1 != c2 || q1 != q2 || ok1 != ok2 {
			t.Fatalf("parseDerived(%q) = %x, %d, %v; strconv says %x, %d, %v", id, c1, q1, ok1, c2, q2, ok2)
		}
		if ok1 {
			ok++
		}
	}
	if ok < 10000 {
		t.Fatalf("only %d of the ids parse: the test exercises little", ok)
	}
	id := "00000000000000ab-12345"
	if n := testing.AllocsPerRun(100, func() { parseDerived(id) }); n != 0 {
		t.Fatalf("parseDerived: %v allocations", n)
	}
}

func FuzzUnmarshal(f *testing.F) {
	m := message{Kind: kindStream, Inc: 3, Stream: 9, From: 1, To: 2, AckStream: 4, AckSeq: 1,
		Entries: []entry{{ID: "a", Prev: []string{"b"}, Strict: true, Op: service.Op{Kind: "add", Args: [][]byte{[]byte("1")}}, Flags: flagDone | flagSolid, Label: Label{C: 4, R: 1, Set: true}},
			{ID: "g", Flags: flagGone}}}
	f.Add(m.marshal())
	f.Add((&message{Kind: kindFull, Removed: 2}).marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := unmarshal(b)
		if err != nil {
			return
		}
		again, err := unmarshal(m.marshal())
		if err != nil {
			t.Fatalf("re-decoding a decoded message: %v", err)
		}
		if len(again.Entries) != len(m.Entries) {
			t.Fatal("entries changed in a round trip")
		}
	})
}

func TestParams(t *testing.T) {
	cfg := automaton.Config{Self: "n1", Nodes: []automaton.NodeID{"n1", "n2"}, Service: service.Counter{}}
	for _, bad := range []map[string]string{{"gossip": "0s"}, {"batch": "x"}, {"variant": "fast"}, {"removed": "n9"}, {"nope": "1"}} {
		cfg.Params = bad
		if _, err := (protocol{Capabilities: capabilities("esds", optParams, "")}).New(cfg); err == nil {
			t.Errorf("params %v accepted", bad)
		}
	}
	cfg.Params = map[string]string{"gossip": "5ms", "retransmit": "50ms", "batch": "64", "variant": "unopt", "removed": "n2"}
	a, err := (protocol{Capabilities: capabilities("esds", optParams, "")}).New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if e := a.(*ESDS); !e.unopt || e.batch != 64 || e.removedParam != 2 {
		t.Fatalf("params not applied: %+v", e)
	}
}

// TestSpreadsheetUsers: the ESDS thesis's distributed spreadsheet (§4.4) over ESDS:
// two users at different front ends enter disjoint cells (non-strict, each
// sent to two replicas, send=2); after gossip a strict refresh at a third
// node sees both entries.
func TestSpreadsheetUsers(t *testing.T) {
	c := newCluster(t, "esds", 3, service.Spreadsheet{}, map[string]string{"send": "2"})
	set := func(at automaton.NodeID, id, cell, v string) automaton.RequestID {
		return c.Request(at, service.Op{Kind: "set", Key: cell, Args: [][]byte{[]byte(v)}}, opts(id, false))
	}
	a := set("n1", "a", "A1", "alice")
	b := set("n2", "b", "B1", "bob")
	c.settle(4)
	c.mustAnswer(a)
	c.mustAnswer(b)
	r := c.Request("n3", service.Op{Kind: "refresh"}, opts("r", true))
	c.settle(4)
	if got := string(c.mustAnswer(r).Bytes); got != "A1=alice\nB1=bob\n" {
		t.Fatalf("strict refresh = %q", got)
	}
}
