package service

import (
	"bytes"
	"runtime"
	"testing"
)

// fuzzOps are applied to each service's initial state to make seed
// snapshots; the ones a service does not know only return errors.
var fuzzOps = []Op{
	{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}},
	{Kind: "incr", Key: "n"},
	{Kind: "sadd", Key: "s", Args: [][]byte{[]byte("a"), []byte("b")}},
	{Kind: "rpush", Key: "l", Args: [][]byte{[]byte("x")}},
	{Kind: "hset", Key: "h", Args: [][]byte{[]byte("f"), []byte("v")}},
	{Kind: "zadd", Key: "z", Args: [][]byte{[]byte("1.5"), []byte("m")}},
	{Kind: "add", Key: "", Args: [][]byte{[]byte("3")}},
	{Kind: "deposit", Key: "acct", Args: [][]byte{[]byte("10")}},
	{Kind: "append", Key: "", Args: [][]byte{[]byte("text")}},
}

// FuzzSnapshotRestore restores a snapshot into a registered service's
// state (the first byte picks the service, the rest is the snapshot).
// Restoring allocates at most 4 MB (a fresh sharded state alone costs about
// 1.5 MB) plus 256 bytes per input byte: a length claiming 4 GB is refused
// before allocating. A snapshot that restores gives a state whose snapshot
// restores to a state with the same snapshot.
func FuzzSnapshotRestore(f *testing.F) {
	names := Names()
	for i, name := range names {
		svc, _ := Lookup(name)
		st := svc.NewState()
		f.Add(append([]byte{byte(i)}, st.Snapshot()...))
		for _, op := range fuzzOps {
			if svc.Validate(op) == nil {
				st.Apply(op)
			}
		}
		snap := st.Snapshot()
		f.Add(append([]byte{byte(i)}, snap...))
		if len(snap) > 2 {
			f.Add(append(append([]byte{byte(i)}, snap[:2]...), 0xff, 0xff, 0xff, 0xff, 0x0f))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		svc, err := Lookup(names[int(in[0])%len(names)])
		if err != nil {
			t.Fatal(err)
		}
		snap := in[1:]
		st := svc.NewState()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		err = st.Restore(snap)
		runtime.ReadMemStats(&m1)
		if n := m1.TotalAlloc - m0.TotalAlloc; n > 4<<20+256*uint64(len(snap)) {
			t.Fatalf("%s: restoring %d bytes allocated %d", svc.Name(), len(snap), n)
		}
		if err != nil {
			return
		}
		s1 := st.Snapshot()
		st2 := svc.NewState()
		if err := st2.Restore(s1); err != nil {
			t.Fatalf("%s: %x restores, its state's snapshot %x does not: %v", svc.Name(), snap, s1, err)
		}
		if s2 := st2.Snapshot(); !bytes.Equal(s1, s2) {
			t.Fatalf("%s: %x restores to a state with snapshot %x, which restores to one with snapshot %x", svc.Name(), snap, s1, s2)
		}
	})
}
