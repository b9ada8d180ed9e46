package abd

import (
	"testing"

	"github.com/synod-dev/synod/service"
)

func qa(tag Tag, val string) service.Result {
	v := service.Nil()
	if val != "" {
		v = service.Bytes([]byte(val))
	}
	return service.Array(service.Bytes([]byte(FormatTag(tag))), v)
}

func mustCoord(t *testing.T, op service.Op, noWB bool) *Coordinator {
	t.Helper()
	c, err := NewCoordinator(op, "client/1", 9, 3, noWB)
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Phase(); p.Name != PhaseQuery || p.Ext[OptPhase][0] != PhaseQuery || p.Op.Key != op.Key {
		t.Fatalf("first phase %+v, want a query of %q", p, op.Key)
	}
	return c
}

func answer(t *testing.T, c *Coordinator, i int, r service.Result, wantAdvance bool) {
	t.Helper()
	adv, err := c.Answer(i, r)
	if err != nil || adv != wantAdvance {
		t.Fatalf("Answer(%d, %v) = %v, %v; want %v", i, r, adv, err, wantAdvance)
	}
}

// A write stores with (max ts + 1, writer, seq) after a majority of
// queries; a replica's second answer does not count twice.
func TestCoordinatorWrite(t *testing.T) {
	c := mustCoord(t, service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}, false)
	answer(t, c, 0, qa(Tag{TS: 4, Node: "n1"}, "a"), false)
	answer(t, c, 0, qa(Tag{TS: 4, Node: "n1"}, "a"), false) // duplicate
	answer(t, c, 2, qa(Tag{TS: 7, Node: "n2"}, "b"), true)
	p := c.Phase()
	if p.Name != PhaseStore || p.Ext[OptTag][0] != "8:9:client/1" || string(p.Op.Args[0]) != "v" {
		t.Fatalf("store phase %+v, want tag 8:9:client/1 value v", p)
	}
	answer(t, c, 1, service.OK(), false)
	if c.Done() {
		t.Fatal("done after one store acknowledgement of three replicas")
	}
	answer(t, c, 2, service.OK(), true)
	if !c.Done() || c.Result().Type != service.ResultOK {
		t.Fatalf("done %v result %v", c.Done(), c.Result())
	}
}

// A read writes back the highest tag unless a majority already holds it;
// the broken coordinator never writes back.
func TestCoordinatorReadWriteBack(t *testing.T) {
	hi, lo := Tag{TS: 3, Node: "client/2", Seq: 1}, Tag{TS: 2, Node: "n1"}
	c := mustCoord(t, service.Op{Kind: "get", Key: "k"}, false)
	answer(t, c, 1, qa(lo, "old"), false)
	answer(t, c, 0, qa(hi, "new"), true)
	if p := c.Phase(); c.Done() || p.Name != PhaseStore || p.Ext[OptTag][0] != FormatTag(hi) || string(p.Op.Args[0]) != "new" {
		t.Fatalf("read did not write back %v: %+v", hi, p)
	}
	answer(t, c, 0, service.OK(), false)
	answer(t, c, 1, service.OK(), true)
	if string(c.Result().Bytes) != "new" {
		t.Fatalf("read returned %v, want new", c.Result())
	}

	c = mustCoord(t, service.Op{Kind: "get", Key: "k"}, false)
	answer(t, c, 1, qa(hi, "new"), false)
	answer(t, c, 2, qa(hi, "new"), true)
	if !c.Done() || string(c.Result().Bytes) != "new" {
		t.Fatalf("a majority holding the tag still wrote back: done %v", c.Done())
	}

	c = mustCoord(t, service.Op{Kind: "exists", Key: "k"}, true)
	answer(t, c, 1, qa(lo, "old"), false)
	answer(t, c, 0, qa(hi, "new"), true)
	if !c.Done() || c.Result().Int != 1 {
		t.Fatalf("broken coordinator: done %v result %v, want an answer without write-back", c.Done(), c.Result())
	}
}

// A delete stores a tombstone and answers whether the highest tag held a value;
// error answers are reported, not counted.
func TestCoordinatorDelAndErrors(t *testing.T) {
	c := mustCoord(t, service.Op{Kind: "del", Key: "k"}, false)
	if _, err := c.Answer(0, service.Errorf("ERR nope")); err == nil {
		t.Fatal("an error answer was taken")
	}
	answer(t, c, 0, qa(Tag{}, ""), false)
	answer(t, c, 1, qa(Tag{TS: 1, Node: "n1"}, "x"), true)
	if p := c.Phase(); p.Op.Kind != "del" || p.Ext[OptTag][0] != "2:9:client/1" {
		t.Fatalf("delete's store phase %+v", p)
	}
	answer(t, c, 0, service.OK(), false)
	answer(t, c, 2, service.OK(), true)
	if c.Result().Int != 1 {
		t.Fatalf("del answered %v, want 1", c.Result())
	}
	if _, err := NewCoordinator(service.Op{Kind: "incr", Key: "k"}, "w", 1, 3, false); err == nil {
		t.Fatal("incr was accepted")
	}
}

// AnswerQuery counts a query's answer as Answer counts the same [tag,
// value] result, once per replica, and refuses one in a store phase; the
// query phases of two coordinators share their options (read only).
func TestCoordinatorAnswerQuery(t *testing.T) {
	c, err := NewCoordinator(service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}, "client/w", 4, 3, false)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := NewCoordinator(service.Op{Kind: "get", Key: "k"}, "client/w", 5, 3, false)
	if c.Phase().Ext[OptPhase][0] != PhaseQuery || d.Phase().Ext[OptPhase][0] != PhaseQuery {
		t.Fatalf("query phases' options %v %v", c.Phase().Ext, d.Phase().Ext)
	}
	q := QueryAnswer{Tag: Tag{TS: 5, Node: "n1", Seq: 2}, Value: []byte("old")}
	if adv, err := c.AnswerQuery(0, q); adv || err != nil {
		t.Fatalf("first answer: %v %v", adv, err)
	}
	if adv, err := c.AnswerQuery(0, q); adv || err != nil {
		t.Fatalf("a replica's second answer: %v %v, want ignored", adv, err)
	}
	if adv, err := c.AnswerQuery(2, QueryAnswer{}); !adv || err != nil {
		t.Fatalf("a majority's answer: %v %v, want the store phase next", adv, err)
	}
	ph := c.Phase()
	if want := FormatTag(Tag{TS: 6, Node: "client/w", Seq: 4}); !c.Storing() || ph.Ext[OptTag][0] != want {
		t.Fatalf("after the query: storing %v, options %v, want tag %s", c.Storing(), ph.Ext, want)
	}
	if _, err := c.AnswerQuery(1, q); err == nil {
		t.Fatal("a query's answer in the store phase: accepted")
	}
}
