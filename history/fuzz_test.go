package history

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad reads a history file. A history that loads has only known
// outcomes and no completed operation returning before its call; saved
// again it loads to the same history (same operations, results Equal), and
// saving that gives the same bytes.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"meta":{"protocol":"paxos"},"ops":[{"process":1,"kind":"set","key":"k","args":["v"],"call":1,"return":2,"outcome":"ok","result":{"type":"ok"}},` +
		`{"process":2,"ns":"kv","kind":"get","key":"k","read_mode":"lease","opts":{"op_id":["x"]},"call":3,"return":0,"outcome":"unknown","result":{"type":"nil"}}]}`))
	f.Add([]byte(`{"ops":[{"process":0,"kind":"txn","key":"","txn":[{"kind":"incr","key":"a","call":0,"return":0,"outcome":"ok","result":{"type":"int","int":3}}],"call":5,"return":9,"outcome":"ok","result":{"type":"array","elems":[{"type":"bytes","bytes":"x"},{"type":"err","err":"ERR no"}]}}]}`))
	f.Add([]byte(`{"ops":[{"call":5,"return":4,"outcome":"ok"}]}`))
	f.Add([]byte(`{"ops":[{"outcome":"maybe"}]}`))
	f.Add([]byte(`{"ops":[{"result":{"elems":[]}}],"meta":{}}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		in, out := filepath.Join(dir, "in.json"), filepath.Join(dir, "out.json")
		if err := os.WriteFile(in, data, 0o644); err != nil {
			t.Fatal(err)
		}
		h, err := Load(in)
		if err != nil {
			return
		}
		for i, op := range h.Ops {
			if op.Outcome != OK && op.Outcome != Unknown && op.Outcome != Failed {
				t.Fatalf("op %d: outcome %q loaded", i, op.Outcome)
			}
			if op.Outcome == OK && op.Return < op.Call {
				t.Fatalf("op %d returns at %d before its call at %d", i, op.Return, op.Call)
			}
		}
		if err := h.Save(out); err != nil {
			t.Fatalf("a loaded history does not save: %v", err)
		}
		again, err := Load(out)
		if err != nil || len(again.Ops) != len(h.Ops) {
			t.Fatalf("saved history does not load back: %v", err)
		}
		for i := range h.Ops {
			if !again.Ops[i].Result.Equal(h.Ops[i].Result) || again.Ops[i].Call != h.Ops[i].Call || again.Ops[i].Kind != h.Ops[i].Kind {
				t.Fatalf("op %d: %+v loads back as %+v", i, h.Ops[i], again.Ops[i])
			}
		}
		b1, _ := json.Marshal(h)
		b2, _ := json.Marshal(again)
		if !bytes.Equal(b1, b2) {
			t.Fatalf("history saves as %s, then as %s", b1, b2)
		}
	})
}
