package shard

import (
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand"
	"sort"
	"strings"
	"testing"
)

// The migration machine against model groups: each step is one client
// request or one driver action, each atomic in one group's log as in the
// real system (node/migrate.go runs the same actions as atomic groups).
// Drivers die (a new one starts from the saved record), fail actions, and
// keep running after they were replaced (a deposed placement leader);
// clients route by stale copies of the placement map and follow ASK,
// MOVED and TRYAGAIN. Checked after every step: each placement epoch's map
// has every slot owned by exactly one group; at most one group accepts a
// client write to any slot; every read returns the last acknowledged
// write; and at the end, every acknowledged write is in the group the
// final map names, and the source holds none of the moved slots' keys.

var simTrace = false

var simSeed = flag.Int64("migrate.seed", 0, "run only this seed of TestMigrationSim")

type simGroup struct {
	name string
	kv   map[string]string // values, slot states included (reserved keys)
	sets map[string]map[string]bool
}

type simWorld struct {
	fatal   func(string, ...any)
	rnd     *rand.Rand
	groups  []*simGroup
	place   Placement
	epochs  []Placement
	views   []Placement // clients' copies of the map
	rec     Migration
	recVer  int
	ctl     Control
	acked   map[string]string
	keys    []string
	applied int
	asks    int
	tryagn  int
	moved   int

	checked int // epochs checked
	maps    map[uint64]*Map

	brokenFrozen, brokenNoDirty bool // model faults the checks must catch
}

type simDriver struct {
	m   *Machine
	ver int // the record version it last saved or read
}

func pos(key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return h.Sum64()>>2 + 1
}

func (w *simWorld) state(g, slot int) []byte {
	v, ok := w.groups[g].kv[StateKey(slot)]
	if !ok {
		return nil
	}
	return []byte(v)
}

// client runs one request: a write of a fresh value, or a read.
func (w *simWorld) client(ci int, key string, write bool, val string) {
	view := &w.views[ci]
	slot := KeySlot(key)
	g := int(w.owners(*view).Owner[slot])
	asking := false
	for hop := 0; hop < 4; hop++ {
		mode := ModeRead
		if write {
			mode = ModeWrite
		}
		if asking {
			mode = ModeAsking
		}
		ref, peer := Admit(w.state(g, slot), mode)
		if w.brokenFrozen && ref == RefuseTryAgain {
			ref = ""
		}
		switch ref {
		case "":
			gr := w.groups[g]
			if write {
				if Tracks(w.state(g, slot)) && !w.brokenNoDirty {
					addSet(gr, DirtyKey, key)
				}
				gr.kv[key] = val
				w.acked[key] = val
			} else if got := gr.kv[key]; got != w.acked[key] {
				w.fatal("read of %s (slot %d) in group %s returned %q, last acknowledged write %q", key, slot, gr.name, got, w.acked[key])
			}
			w.applied++
			return
		case RefuseAsk:
			w.asks++
			g, asking = w.index(peer), true
		case RefuseMoved:
			w.moved++
			*view = w.place // reload the map
			g, asking = int(w.owners(*view).Owner[slot]), false
		case RefuseTryAgain:
			w.tryagn++
			return // not acknowledged; the client tries later
		default:
			w.fatal("client refused with %q", ref)
		}
	}
}

// owners is p's slot table, built once per epoch.
func (w *simWorld) owners(p Placement) *Map {
	if w.maps == nil {
		w.maps = map[uint64]*Map{}
	}
	m := w.maps[p.Epoch]
	if m == nil {
		m = Build(p.Groups)
		w.maps[p.Epoch] = m
	}
	return m
}

func (w *simWorld) index(name string) int {
	for i, g := range w.groups {
		if g.name == name {
			return i
		}
	}
	w.fatal("no group %q", name)
	return -1
}

func addSet(g *simGroup, set, key string) {
	if g.sets[set] == nil {
		g.sets[set] = map[string]bool{}
	}
	g.sets[set][key] = true
}

// do runs driver action a in the model; it returns the outcome.
func (w *simWorld) do(d *simDriver, a Action) Outcome {
	if simTrace {
		fmt.Printf("tok %d phase %v: %v %v keys=%d items=%d cur=%d\n", d.m.Rec.Token, d.m.Rec.Phase, a.Kind, a.State, len(a.Keys), len(a.Items), a.Cursor)
	}
	fenced := func(g int) bool {
		ref, _ := Admit(w.state(g, a.Slots[0].First), TokMode(a.Token))
		return ref != ""
	}
	switch a.Kind {
	case ActSave:
		if w.recVer != d.ver {
			return Outcome{Err: "record changed"}
		}
		w.rec, w.recVer = a.Rec, w.recVer+1
		d.ver = w.recVer
	case ActSetState:
		for _, r := range a.Slots {
			for s := r.First; s <= r.Last; s++ {
				if ref, _ := Admit(w.state(a.Group, s), InMode(a.State.Token, a.Expect)); ref != "" {
					return Outcome{Err: fmt.Sprintf("slot %d is %q", s, w.state(a.Group, s))}
				}
			}
		}
		for _, r := range a.Slots {
			for s := r.First; s <= r.Last; s++ {
				w.groups[a.Group].kv[StateKey(s)] = a.State.String()
			}
		}
	case ActScan:
		var ks []string
		for k := range w.groups[a.Group].kv {
			if pos(k) >= a.Cursor {
				ks = append(ks, k)
			}
		}
		sort.Slice(ks, func(i, j int) bool { return pos(ks[i]) < pos(ks[j]) })
		if len(ks) <= a.Count {
			return Outcome{Keys: ks}
		}
		return Outcome{Keys: ks[:a.Count], Cursor: pos(ks[a.Count-1]) + 1}
	case ActDump:
		if fenced(a.Group) {
			return Outcome{Err: "fenced"}
		}
		var items []Item
		for _, k := range a.Keys {
			v, ok := w.groups[a.Group].kv[k]
			items = append(items, Item{Key: k, Value: []byte(v), Absent: !ok})
		}
		return Outcome{Items: items}
	case ActImport:
		if fenced(a.Group) {
			return Outcome{Err: "fenced"}
		}
		b := 0
		for _, it := range a.Items {
			b += itemBytes(it)
		}
		if len(a.Items) > 1 && b > d.m.BatchBytes {
			panic(fmt.Sprintf("an import of %d items, %d bytes, over the batch's %d", len(a.Items), b, d.m.BatchBytes))
		}
		for _, it := range a.Items {
			if it.Absent {
				delete(w.groups[a.Group].kv, it.Key)
			} else {
				w.groups[a.Group].kv[it.Key] = string(it.Value)
			}
		}
	case ActTake:
		g := w.groups[a.Group]
		if fenced(a.Group) {
			return Outcome{Err: "fenced"}
		}
		for k := range g.sets[DirtyKey] {
			addSet(g, TakenKey, k)
		}
		delete(g.sets, DirtyKey)
		var ks []string
		for k := range g.sets[TakenKey] {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		return Outcome{Keys: ks}
	case ActClearTaken:
		if fenced(a.Group) {
			return Outcome{Err: "fenced"}
		}
		delete(w.groups[a.Group].sets, TakenKey)
	case ActDelete:
		if fenced(a.Group) {
			return Outcome{Err: "fenced"}
		}
		for _, k := range a.Keys {
			delete(w.groups[a.Group].kv, k)
			delete(w.groups[a.Group].sets, k)
		}
	case ActFlip:
		if !w.place.Owns(a.Group, a.Slots) {
			w.place = w.place.Move(a.Slots, a.Group)
			w.epochs = append(w.epochs, w.place)
		}
	}
	return Outcome{}
}

// check is the per-step invariant: every epoch's map places each slot
// once, and at most one group accepts a client write to each slot of the
// migration (by any client's map, with or without ASKING).
func (w *simWorld) check() {
	if len(w.epochs) > w.checked {
		for _, p := range w.epochs[w.checked:] {
			if err := Check(p.Groups); err != nil {
				w.fatal("epoch %d: %v", p.Epoch, err)
			}
		}
		w.checked = len(w.epochs)
	}
	var owners []*Map
	for _, v := range append(w.views, w.place) {
		owners = append(owners, w.owners(v))
	}
	for _, r := range w.rec.Slots {
		for s := r.First; s <= r.Last; s++ {
			var acc []string
			for g := range w.groups {
				routed := false
				for _, m := range owners {
					if int(m.Owner[s]) == g {
						routed = true
					}
				}
				wr, _ := Admit(w.state(g, s), ModeWrite)
				as, _ := Admit(w.state(g, s), ModeAsking)
				if (routed && wr == "") || as == "" {
					acc = append(acc, w.groups[g].name)
				}
			}
			if len(acc) > 1 {
				w.fatal("slot %d: groups %v all accept writes (states %q, %q)", s, acc, w.state(0, s), w.state(1, s))
			}
		}
	}
}

func runSim(fatal func(string, ...any), seed int64, cancel bool, set func(*simWorld)) (w *simWorld) {
	rnd := rand.New(rand.NewSource(seed))
	w = &simWorld{fatal: fatal, rnd: rnd, acked: map[string]string{}}
	if set != nil {
		set(w)
	}
	for _, n := range []string{"s0", "s1"} {
		w.groups = append(w.groups, &simGroup{name: n, kv: map[string]string{}, sets: map[string]map[string]bool{}})
	}
	w.place = Placement{Epoch: 1, Groups: [][]Range{{{0, 8191}}, {{8192, 16383}}}}
	w.epochs = []Placement{w.place}
	for i := 0; i < 3; i++ {
		w.views = append(w.views, w.place)
	}
	slots := []Range{{100, 199}, {4000, 4010}}
	for i := 0; len(w.keys) < 300; i++ {
		k := fmt.Sprintf("k%d", i)
		s := KeySlot(k)
		if InRanges(slots, s) || rnd.Intn(10) == 0 && s < 8192 {
			w.keys = append(w.keys, k)
		}
	}
	for i, k := range w.keys { // preload
		if rnd.Intn(4) > 0 {
			v := fmt.Sprintf("v%d.0", i)
			w.groups[0].kv[k] = v
			w.acked[k] = v
		}
	}
	w.rec = Migration{ID: 1, From: 0, To: 1, FromName: "s0", ToName: "s1", Slots: slots}
	newDriver := func() *simDriver {
		m := NewMachine(w.rec)
		m.Batch, m.FreezeAt = 1+rnd.Intn(40), rnd.Intn(20)
		m.BatchBytes = 8 * m.Batch // binds about half the time (items of 6-15 bytes)
		return &simDriver{m: m, ver: w.recVer}
	}
	d := newDriver()
	var zombie *simDriver
	for steps := 0; steps < 200000; steps++ {
		switch x := rnd.Intn(100); {
		case x < 45:
			k := w.keys[rnd.Intn(len(w.keys))]
			w.client(rnd.Intn(len(w.views)), k, rnd.Intn(2) == 0, fmt.Sprintf("v%d", steps))
		case x < 47:
			d = newDriver() // the driver died; the placement leader's next one takes over
		case x < 48 && zombie == nil:
			zombie, d = d, newDriver() // the old driver keeps running
		case x < 50:
			w.ctl.Paused = rnd.Intn(3) == 0
			w.ctl.Rate = float64(rnd.Intn(3) * 100)
			if cancel && w.rec.Phase >= PhCopy {
				w.ctl.Cancel = true
			}
		case x < 53 && zombie != nil:
			a := zombie.m.Next(w.ctl)
			if a.Kind == ActStop {
				zombie = nil
				continue
			}
			zombie.m.Apply(w.do(zombie, a))
		default:
			a := d.m.Next(w.ctl)
			if a.Kind == ActStop {
				if w.rec.Phase.Finished() {
					if zombie == nil {
						w.check()
						return w
					}
					continue
				}
				d = newDriver()
				continue
			}
			var o Outcome
			if rnd.Intn(50) == 0 && a.Kind != ActWait {
				o.Err = "injected failure" // the action's outcome is unknown: it may have been applied
				if rnd.Intn(2) == 0 {
					w.do(d, a)
				}
			} else {
				o = w.do(d, a)
			}
			d.m.Apply(o)
		}
		w.check()
	}
	fatal("seed %d: migration did not finish in 200000 steps (phase %v, record %+v)", seed, w.rec.Phase, w.rec)
	return w
}

func TestMigrationSim(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 40
	}
	canceled := 0
	defer func() {
		if *simSeed == 0 && canceled == 0 {
			t.Errorf("no seed ended in a cancelled migration")
		}
	}()
	for i := 0; i < seeds; i++ {
		seed := int64(i + 1)
		if *simSeed != 0 {
			if i > 0 {
				break
			}
			seed = *simSeed
		}
		cancel := seed%5 == 0
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("replay: go test ./shard -run 'TestMigrationSim$' -migrate.seed %d", seed)
				}
			}()
			w := runSim(t.Fatalf, seed, cancel, nil)
			finalCheck(t.Fatalf, w, cancel)
			if w.rec.Phase == PhCanceled {
				canceled++
			}
			t.Logf("seed %d: %d requests applied, %d ASK, %d MOVED, %d TRYAGAIN; record %s", seed, w.applied, w.asks, w.moved, w.tryagn, strings.ReplaceAll(w.rec.Encode(), "\n", " "))
		})
	}
}

func finalCheck(fatal func(string, ...any), w *simWorld, cancel bool) {
	// A cancel asked for after the hand-off is refused: the migration
	// finishes.
	cancel = cancel && w.rec.Phase == PhCanceled
	m := Build(w.place.Groups)
	for k, v := range w.acked {
		g := m.Owner[KeySlot(k)]
		if got, ok := w.groups[g].kv[k]; !ok && v != "" || got != v {
			fatal("key %s: acknowledged %q, group %s holds %q (%v)", k, v, w.groups[g].name, got, ok)
		}
	}
	for k := range w.groups[0].kv {
		if !Reserved(k) && InRanges(w.rec.Slots, KeySlot(k)) && !cancel {
			fatal("source still holds %s of a moved slot", k)
		}
	}
	for k := range w.groups[1].kv {
		if !Reserved(k) && InRanges(w.rec.Slots, KeySlot(k)) && cancel {
			fatal("destination still holds %s after the cancel", k)
		}
	}
	want := PhDone
	if cancel {
		want = PhCanceled
	}
	if w.rec.Phase != want {
		fatal("migration ended in %v, want %v", w.rec.Phase, want)
	}
	if !cancel && !w.place.Owns(1, w.rec.Slots) {
		fatal("map did not move the slots: %v", w.place.Encode())
	}
}

// The checks catch what they guard against: a source that keeps accepting
// writes when frozen (its state not checked), and a source that marks no
// written key dirty, each lose acknowledged writes or let two groups
// accept a slot, and the checks say so.
func TestMigrationSimCatchesBrokenVariants(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(w *simWorld)
	}{
		{"frozen source accepts writes", func(w *simWorld) { w.brokenFrozen = true }},
		{"written keys never marked dirty", func(w *simWorld) { w.brokenNoDirty = true }},
	} {
		t.Run(c.name, func(t *testing.T) {
			failed := 0
			for seed := int64(1); seed <= 20; seed++ {
				if why := simFails(seed, c.set); why != "" {
					failed++
					if failed == 1 {
						t.Logf("seed %d: %s", seed, why)
					}
				}
			}
			if failed == 0 {
				t.Fatalf("no seed of 20 failed with %q", c.name)
			}
			t.Logf("%d of 20 seeds failed, as they should", failed)
		})
	}
}

type simFailure string

// simFails runs one seed with a model fault and returns the failure the
// checks reported ("" when none).
func simFails(seed int64, set func(*simWorld)) (why string) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(simFailure)
			if !ok {
				panic(r)
			}
			why = string(f)
		}
	}()
	fatal := func(f string, a ...any) { panic(simFailure(fmt.Sprintf(f, a...))) }
	w := runSim(fatal, seed, false, set)
	finalCheck(fatal, w, false)
	return ""
}
