package node

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/synod-dev/synod/config"
)

func seqEvent(i int) event { return event{gen: uint64(i)} }

// The queue is a FIFO through growth, wrap-around and the release of its
// buffer, and never holds more than max.
func TestInQueueOrderAndGrowth(t *testing.T) {
	q := newInQueue(100)
	next, want := 0, 0
	put := func(k int) {
		for range k {
			if r := q.put(seqEvent(next), nil, nil, nil); r != -1 {
				t.Fatalf("put into a queue with room: %d", r)
			}
			next++
		}
	}
	take := func(k int) {
		for range k {
			ev, ok := q.take()
			if !ok {
				t.Fatalf("take %d: empty, %d waiting", want, q.len())
			}
			if int(ev.gen) != want {
				t.Fatalf("took %d, want %d", ev.gen, want)
			}
			want++
		}
	}
	for _, step := range [][2]int{{3, 2}, {20, 10}, {40, 30}, {70, 91}, {5, 5}, {100, 100}} {
		put(step[0])
		take(step[1])
		if q.len() != next-want {
			t.Fatalf("len %d, want %d", q.len(), next-want)
		}
		if len(q.buf) > 128 {
			t.Fatalf("buffer of %d for a queue bounded at 100", len(q.buf))
		}
	}
	if _, ok := q.take(); ok {
		t.Fatal("took from an empty queue")
	}
	// It ended empty after holding 100 (its whole buffer): kept. A
	// quiet turn (at most a quarter) then gives it back.
	if len(q.buf) != 100 {
		t.Fatalf("buffer %d after a burst of 100, want 100 kept", len(q.buf))
	}
	put(3)
	take(3)
	if q.buf != nil {
		t.Fatalf("buffer of %d kept by an idle queue", len(q.buf))
	}
	var nilQ *inQueue
	if _, ok := nilQ.take(); ok {
		t.Fatal("took from a nil queue")
	}
}

// put waits while the queue is full (a channel's backpressure) until a
// take makes room, or one of its channels is closed.
func TestInQueueBackpressure(t *testing.T) {
	q := newInQueue(2)
	q.put(seqEvent(0), nil, nil, nil)
	q.put(seqEvent(1), nil, nil, nil)
	done := make(chan int)
	go func() { done <- q.put(seqEvent(2), nil, nil, nil) }()
	// The putter must still be waiting: the queue stays full until the
	// take below.
	for range 50 {
		runtime.Gosched()
	}
	select {
	case r := <-done:
		t.Fatalf("put into a full queue returned %d", r)
	default:
	}
	if q.len() != 2 {
		t.Fatalf("len %d, want 2", q.len())
	}
	if ev, _ := q.take(); ev.gen != 0 {
		t.Fatalf("took %d, want 0", ev.gen)
	}
	if r := <-done; r != -1 {
		t.Fatalf("put after a take: %d, want -1", r)
	}
	for i := 1; i <= 2; i++ {
		if ev, _ := q.take(); int(ev.gen) != i {
			t.Fatalf("took %d, want %d", ev.gen, i)
		}
	}
	// Full, a closed channel ends the wait and says which.
	q.put(seqEvent(3), nil, nil, nil)
	q.put(seqEvent(4), nil, nil, nil)
	stop := make(chan struct{})
	go func() { done <- q.put(seqEvent(5), nil, nil, stop) }()
	close(stop)
	if r := <-done; r != 2 {
		t.Fatalf("put ended by its third channel: %d, want 2", r)
	}
	if q.len() != 2 {
		t.Fatalf("len %d after a put that gave up, want 2", q.len())
	}
}

// Idle groups hold no inbox buffers (issue 33 item 1): a node with 200
// idle paxos groups at the default InboxLen (4,096) adds well under
// 128 KiB of heap per group. With two channels of 4,096 events per
// group, allocated up front, it added more than 256 KiB per group.
func TestIdleGroupInboxesGrowOnDemand(t *testing.T) {
	const groups = 200
	runtime.GC()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cfg, ls := mkCluster(t, 1, config.Memory, shardedOnOne(groups, nil))
	n := startNode(t, cfg, "n1", ls[0], Options{})
	waitLeaders(t, n, groups)
	// One group takes a burst of writes: its queue grows and works.
	for i := range 50 {
		if r := do(t, n, "default", req("set", fmt.Sprintf("k%d", i), "v")); r.IsErr() {
			t.Fatalf("set: %v", r)
		}
	}
	runtime.GC()
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	perGroup := (int64(ms1.HeapInuse) - int64(ms0.HeapInuse)) / groups
	t.Logf("heap per idle group: %d KiB (default InboxLen %d)", perGroup>>10, n.opts.InboxLen)
	if perGroup > 128<<10 {
		t.Errorf("%d KiB of heap per idle group: inbox buffers allocated up front?", perGroup>>10)
	}
}
