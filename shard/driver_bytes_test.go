package shard

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestCopyBatchBytes (session 49): a copy of 300 keys of 10 KiB with the
// default bounds (100 keys, 64 KiB) imports at most 64 KiB per batch (or
// one item), dumps probeKeys keys first and then as many as 64 KiB holds
// at the sizes copied, and copies every key once, the cursor saved only when the keys
// in hand are all imported. Keys alone (BatchBytes 0) made 1,000 KiB
// imports: the test fails on the code before the bound.
func TestCopyBatchBytes(t *testing.T) {
	slots := []Range{{0, 16383}}
	var keys []string
	for i := 0; i < 300; i++ {
		keys = append(keys, fmt.Sprintf("k%d", i))
	}
	val := []byte(strings.Repeat("v", 10<<10))
	m := NewMachine(Migration{ID: 1, From: 0, To: 1, FromName: "s0", ToName: "s1", Slots: slots, Phase: PhCopy})
	copied := map[string]int{}
	imports, maxImport, maxDump, dumps := 0, 0, 0, 0
	for step := 0; step < 10000 && m.Rec.Phase == PhCopy; step++ {
		a := m.Next(Control{})
		var o Outcome
		switch a.Kind {
		case ActStop:
			t.Fatalf("stopped: %s", a.Reason)
		case ActScan:
			o.Keys = keys // one scan returns them all
		case ActDump:
			if dumps++; dumps == 1 && len(a.Keys) > probeKeys {
				t.Fatalf("the first dump, no size known, asks %d keys", len(a.Keys))
			}
			if dumps > 1 {
				maxDump = max(maxDump, len(a.Keys))
			}
			for _, k := range a.Keys {
				o.Items = append(o.Items, Item{Key: k, Value: val})
			}
		case ActImport:
			b := 0
			for _, it := range a.Items {
				b += itemBytes(it)
				copied[it.Key]++
			}
			if len(a.Items) > 1 && b > m.BatchBytes {
				t.Fatalf("an import of %d items, %d bytes (bound %d)", len(a.Items), b, m.BatchBytes)
			}
			imports++
			maxImport = max(maxImport, b)
		case ActSave:
			if a.Rec.Cursor != 0 && len(copied) < len(keys) {
				t.Fatalf("cursor %d saved with %d of %d keys copied", a.Rec.Cursor, len(copied), len(keys))
			}
		}
		m.Apply(o)
	}
	if len(copied) != len(keys) {
		t.Fatalf("copied %d of %d keys (phase %v)", len(copied), len(keys), m.Rec.Phase)
	}
	for k, n := range copied {
		if n != 1 {
			t.Fatalf("%s copied %d times", k, n)
		}
	}
	if m.Rec.Keys != 300 || m.Rec.Bytes != int64(300*(10<<10))+int64(len(strings.Join(keys, ""))) {
		t.Fatalf("record counts %d keys, %d bytes", m.Rec.Keys, m.Rec.Bytes)
	}
	if maxDump != 6 { // 64 KiB over 10 KiB and a few bytes
		t.Fatalf("largest dump after the first %d keys, want 6", maxDump)
	}
	t.Logf("%d imports, the largest %d bytes; the largest dump %d keys", imports, maxImport, maxDump)
}

// TestCopyBackoff (session 49): imports taking 10 ms ask no wait; one
// taking 100 ms (the destination's log busy) asks a back-off wait of the
// excess over twice the fastest, 80 ms; 10 ms again, none; 3 s is capped
// at 1 s; with a rate limit the longer wait wins, the rate's being the
// batch's share of a second less the import's time. With Backoff off
// (the copy before session 49) no import asks a wait.
func TestCopyBackoff(t *testing.T) {
	run := func(backoff bool, rate float64, took []float64) []Action {
		var keys []string
		for i := 0; i < 40; i++ {
			keys = append(keys, fmt.Sprintf("k%d", i))
		}
		m := NewMachine(Migration{ID: 1, From: 0, To: 1, FromName: "s0", ToName: "s1", Slots: []Range{{0, 16383}}, Phase: PhCopy})
		m.Backoff, m.Batch, m.BatchBytes = backoff, 10, 0
		var waits []Action
		imports := 0
		for step := 0; step < 1000 && m.Rec.Phase == PhCopy; step++ {
			a := m.Next(Control{Rate: rate})
			var o Outcome
			switch a.Kind {
			case ActScan:
				o.Keys = keys
			case ActDump:
				for _, k := range a.Keys {
					o.Items = append(o.Items, Item{Key: k, Value: []byte("v")})
				}
			case ActImport:
				o.Took = took[imports]
				imports++
			case ActWait:
				waits = append(waits, a)
			}
			m.Apply(o)
		}
		return waits
	}
	waits := run(true, 0, []float64{0.010, 0.100, 0.010, 3})
	if len(waits) != 2 || waits[0].Reason != "backoff" || math.Abs(waits[0].Wait-0.080) > 1e-9 || waits[1].Wait != backoffMax {
		t.Fatalf("waits %+v", waits)
	}
	// A rate of 100 keys/s gives a 10-key import 0.1 s, less the time it
	// took: 90 ms after a 10 ms import; nothing after a 100 ms one, which
	// asks its 80 ms back-off instead.
	waits = run(true, 100, []float64{0.010, 0.100, 0.010, 3})
	if len(waits) != 4 || waits[0].Reason != "rate" || math.Abs(waits[0].Wait-0.090) > 1e-9 || waits[1].Reason != "backoff" || waits[3].Reason != "backoff" {
		t.Fatalf("with a rate: %+v", waits)
	}
	if waits := run(false, 0, []float64{0.010, 0.100, 0.010, 3}); len(waits) != 0 {
		t.Fatalf("without back-off: %+v", waits)
	}
}
