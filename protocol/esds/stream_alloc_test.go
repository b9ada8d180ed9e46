package esds

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/synod-dev/synod/service"
)

// TestStreamQueueReusesArray: a stream whose queue never empties (positions
// queued and acknowledged at the same rate, as at 64 clients) keeps its
// queue in one array: push moves the queue down to the array's start
// instead of copying it into a new array each time the acknowledged head
// has used up the room at the end (issue 28, session 54). The positions
// keep their sequence numbers and entries throughout, and the slots the
// queue left hold no operation.
func TestStreamQueueReusesArray(t *testing.T) {
	a := &ESDS{peers: make([]peer, 2)}
	a.peers[1].stream = 7
	ops := make([]*op, 64)
	for i := range ops {
		ops[i] = &op{id: fmt.Sprintf("op%d", i)}
	}
	next := 0 // the next operation to queue
	queue := func(n int) {
		for range n {
			o := ops[next%len(ops)]
			a.enqueueOp(1, o.id, o)
			next++
		}
	}
	check := func() {
		p := &a.peers[1]
		for k, q := range p.queue {
			if want := ops[(int(p.acked)+k)%len(ops)]; q.o != want || q.id != want.id {
				t.Fatalf("position %d holds %q, want %q", p.acked+1+uint64(k), q.id, want.id)
			}
		}
		for _, q := range p.qbase[len(p.queue):cap(p.qbase)] {
			if q.o != nil && !inQueue(p.queue, q.o) {
				t.Fatalf("a slot outside the queue keeps %q alive", q.id)
			}
		}
	}
	queue(40)
	for range 50 { // warm up: the array reaches its size
		queue(10)
		a.acknowledged(1, 7, a.peers[1].acked+10)
		check()
	}
	// (AllocsPerRun truncates its average: 100 rounds a run.)
	allocs := testing.AllocsPerRun(20, func() {
		for range 100 {
			queue(10)
			a.acknowledged(1, 7, a.peers[1].acked+10)
		}
	})
	check()
	if allocs != 0 {
		t.Errorf("queue 10, acknowledge 10 with 40 outstanding: %v allocations per 100 rounds, want 0", allocs)
	}
	if got := len(a.peers[1].queue); got != 40 {
		t.Fatalf("queue holds %d positions, want 40", got)
	}
}

func inQueue(q []qent, o *op) bool {
	for i := range q {
		if q[i].o == o {
			return true
		}
	}
	return false
}

// TestMarshalOneBuffer: a stream message of descriptors with 100-byte
// values is encoded into one buffer of its size (entrySize), not grown by
// doubling from 48 bytes an entry (issue 28, session 54), and entrySize
// bounds each kind of entry's encoding.
func TestMarshalOneBuffer(t *testing.T) {
	val := make([]byte, 100)
	var m message
	m.Kind = kindStream
	for i := range 64 {
		x := entry{ID: fmt.Sprintf("%016x-%d", i*7919, i), Prev: []string{"p1", "p2"},
			Op: service.Op{Kind: "set", Key: fmt.Sprintf("key:%012d", i), Args: [][]byte{val}}}
		switch i % 4 {
		case 1:
			x.Flags = flagDone
			x.Label = Label{C: 1 << 40, R: 2, Set: true}
		case 2:
			x.Flags = flagDone | flagBare
			x.Label = Label{C: 99, R: 1, Set: true}
		case 3:
			x.Flags = flagGone
		}
		one := message{Kind: kindStream, Entries: []entry{x}}
		b := one.marshal()
		empty := message{Kind: kindStream}
		if got, bound := len(b)-len(empty.marshal()), entrySize(&x); got > bound {
			t.Fatalf("entry %d (flags %#x) encodes to %d bytes, entrySize says at most %d", i, x.Flags, got, bound)
		}
		m.Entries = append(m.Entries, x)
	}
	if n := testing.AllocsPerRun(20, func() { _ = m.marshal() }); n != 1 {
		t.Errorf("marshal of 64 entries: %v allocations, want 1", n)
	}
}

// TestResultCacheRing: the values of collected operations are kept for the
// last resultCacheSize of them, the oldest evicted first, in a ring that
// keeps its one array (keepResult; issue 28, session 54: cut from the
// front, the id queue was copied into a new array every few hundred
// collections).
func TestResultCacheRing(t *testing.T) {
	a := &ESDS{}
	id := func(i int) string { return fmt.Sprintf("op%d", i) }
	var arr *resultEntry
	const total = 3*resultCacheSize + 17
	for i := range total {
		a.keepResult(id(i), service.Int(int64(i)))
		if i == resultCacheSize {
			arr = &a.results[0]
		}
		if i > resultCacheSize && &a.results[0] != arr {
			t.Fatalf("after %d results the ring moved to a new array", i+1)
		}
		if v, ok := a.keptResult(id(i)); !ok || v.Int != int64(i) {
			t.Fatalf("just kept %s: %v, %v", id(i), v, ok)
		}
	}
	if len(a.results) != resultCacheSize {
		t.Fatalf("%d results kept, want %d", len(a.results), resultCacheSize)
	}
	for i := range total {
		v, ok := a.keptResult(id(i))
		if want := i >= total-resultCacheSize; ok != want {
			t.Fatalf("result of %s kept = %v, want %v", id(i), ok, want)
		}
		if ok && v.Int != int64(i) {
			t.Fatalf("result of %s = %d, want %d", id(i), v.Int, i)
		}
	}
	again := id(0)
	if n := testing.AllocsPerRun(100, func() { a.keepResult(again, service.OK()) }); n != 0 {
		t.Fatalf("keepResult on a full ring: %v allocations, want 0", n)
	}
}

// TestUnmarshalIntoBuffer: a gossip message decoded into the array of the
// previous one's entries (onMessage1's recvBuf; issue 28, session 54) is
// the message a fresh decode gives, whatever the array held, and its
// decode takes one allocation fewer.
func TestUnmarshalIntoBuffer(t *testing.T) {
	val := make([]byte, 100)
	mk := func(base, n int) []byte {
		m := message{Kind: kindStream, Inc: 3, Stream: 9, From: 1, To: uint64(n)}
		for i := range n {
			x := entry{ID: fmt.Sprintf("%016x-%d", base, i), Prev: []string{"p"},
				Op: service.Op{Kind: "set", Key: fmt.Sprintf("k%d", base+i), Args: [][]byte{val}}}
			if i%2 == 1 {
				x.Flags, x.Label = flagDone, Label{C: uint64(base + i), R: 1, Set: true}
			}
			m.Entries = append(m.Entries, x)
		}
		return m.marshal()
	}
	first, second := mk(1, 12), mk(2, 8)
	m1, err := unmarshal(first)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := unmarshal(second)
	got, err := unmarshalInto(second, nil, m1.Entries[:0]) // the array still holds first's entries
	if err != nil {
		t.Fatal(err)
	}
	if &got.Entries[0] != &m1.Entries[0] {
		t.Fatal("the entries were not decoded into the buffer's array")
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Fatalf("decoded into the buffer:\n%+v\nwant\n%+v", got, want)
	}
	buf := make([]entry, 0, 16)
	fresh := testing.AllocsPerRun(100, func() { _, _ = unmarshalInto(second, nil, nil) })
	reused := testing.AllocsPerRun(100, func() { _, _ = unmarshalInto(second, nil, buf) })
	if reused != fresh-1 {
		t.Errorf("decode into a buffer: %v allocations, fresh %v; want one fewer", reused, fresh)
	}
}

// TestMarshalOpInto: flushDirty's records share one array (marshalOpInto);
// each must be the bytes marshalOp makes, end at its own length (an append
// to one must not write into the next), and lie in the array when it has
// room, else in an array of its own with the slab left as it was.
func TestMarshalOpInto(t *testing.T) {
	a := &ESDS{}
	var ops []*op
	for i := range 6 {
		o := &op{id: fmt.Sprintf("c%d.%d", i, 10*i), sop: service.Op{Kind: "set", Key: fmt.Sprintf("key:%04d", i),
			Args: [][]byte{make([]byte, 20*i)}}, label: Label{Set: true, C: uint64(i + 1), R: 1}}
		for j := range i % 3 {
			o.prev = append(o.prev, fmt.Sprintf("p%d", j))
		}
		ops = append(ops, o)
	}
	size := 0
	for _, o := range ops {
		size += opRecordSize(o)
	}
	slab := make([]byte, 0, size)
	base := &slab[:1][0]
	var recs [][]byte
	for _, o := range ops {
		var rec []byte
		before := len(slab)
		rec, slab = a.marshalOpInto(o, slab)
		if !bytes.Equal(rec, a.marshalOp(o)) {
			t.Fatalf("%s: record %x, marshalOp %x", o.id, rec, a.marshalOp(o))
		}
		if cap(rec) != len(rec) {
			t.Fatalf("%s: record of %d bytes has capacity %d", o.id, len(rec), cap(rec))
		}
		if len(slab) != before+len(rec) || &slab[:before+1][before] != &rec[0] {
			t.Fatalf("%s: record not at the slab's end (slab %d -> %d bytes, record %d)", o.id, before, len(slab), len(rec))
		}
		recs = append(recs, rec)
	}
	if &slab[:1][0] != base {
		t.Fatal("the slab moved")
	}
	want := bytes.Clone(recs[1])
	_ = append(recs[0], 0xff, 0xff, 0xff)
	if !bytes.Equal(recs[1], want) {
		t.Fatal("an append to one record wrote into the next")
	}
	// No room: a record of its own, the slab unchanged.
	small := make([]byte, 0, 8)
	rec, rest := a.marshalOpInto(ops[5], small)
	if !bytes.Equal(rec, a.marshalOp(ops[5])) || len(rest) != 0 || cap(rest) != 8 {
		t.Fatalf("without room: record %x (want %x), slab %d/%d", rec, a.marshalOp(ops[5]), len(rest), cap(rest))
	}
}
