package shard

import (
	"fmt"
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
