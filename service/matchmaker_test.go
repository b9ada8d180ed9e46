package service

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func mmOp(kind, key string, args ...string) Op {
	o := Op{Kind: kind, Key: key}
	for _, a := range args {
		o.Args = append(o.Args, []byte(a))
	}
	return o
}

func newMM() *MatchmakerState { return Matchmaker{}.NewState().(*MatchmakerState) }

type mmStep struct {
	op   Op
	want Result
}

func runMM(t *testing.T, s *MatchmakerState, steps []mmStep) {
	t.Helper()
	for i, st := range steps {
		if got := s.Apply(st.op); !got.Equal(st.want) {
			t.Fatalf("step %d %v: got %v, want %v", i, st.op, got, st.want)
		}
		mmCheckInvariants(t, s)
	}
}

func bs(s string) Result { return Bytes([]byte(s)) }

// mmCheckInvariants checks the state's internal consistency and the queue's
// promise: no queued job fits a free machine.
func mmCheckInvariants(t *testing.T, s *MatchmakerState) {
	t.Helper()
	if len(s.ids) != len(s.machines) {
		t.Fatalf("%d ids, %d machines", len(s.ids), len(s.machines))
	}
	held := 0
	for i, id := range s.ids {
		if i > 0 && s.ids[i-1] >= id {
			t.Fatalf("ids not sorted: %q", s.ids)
		}
		m, ok := s.machines[id]
		if !ok {
			t.Fatalf("id %q has no machine", id)
		}
		if m.job != "" {
			held++
			if s.jobs[m.job] != id {
				t.Fatalf("machine %q holds %q, which says %q", id, m.job, s.jobs[m.job])
			}
			continue
		}
		for _, j := range s.queue {
			if m.res.fits(j.need) {
				t.Fatalf("queued job %q fits free machine %q", j.id, id)
			}
		}
	}
	for i, j := range s.queue {
		if i > 0 && !s.queue[i-1].before(j) {
			t.Fatalf("queue out of order at %q", j.id)
		}
		if mid, ok := s.jobs[j.id]; !ok || mid != "" {
			t.Fatalf("queued job %q indexed as %q, %v", j.id, mid, ok)
		}
	}
	if len(s.jobs) != held+len(s.queue) {
		t.Fatalf("%d jobs indexed, %d held + %d queued", len(s.jobs), held, len(s.queue))
	}
}

func TestMatchmakerIsNondeterministic(t *testing.T) {
	svc, err := Lookup("matchmaker")
	if err != nil {
		t.Fatal(err)
	}
	if !IsNondeterministic(svc) {
		t.Fatal("matchmaker does not declare itself nondeterministic")
	}
	if IsNondeterministic(KV{}) {
		t.Fatal("kv declares itself nondeterministic")
	}
	if _, ok := svc.NewState().(EnvApplier); !ok {
		t.Fatal("matchmaker state does not implement EnvApplier")
	}
}

// The Grid Services thesis III.C.1: requests are served in priority order, FIFO within each
// priority.
func TestMatchmakerPriorityThenFIFO(t *testing.T) {
	s := newMM()
	runMM(t, s, []mmStep{
		{mmOp("submit", "a", "1", "1", "1", "1"), Nil()},
		{mmOp("submit", "b", "1", "1", "1", "5"), Nil()},
		{mmOp("submit", "c", "1", "1", "1", "1"), Nil()},
		{mmOp("submit", "d", "1", "1", "1", "5"), Nil()},
		{mmOp("submit", "e", "1", "1", "1"), Nil()}, // priority 0
		{mmOp("submit", "f", "1", "1", "1", "-3"), Nil()},
		{mmOp("queue", ""), bs("b prio=5 cpu=1 mem=1 disk=1\nd prio=5 cpu=1 mem=1 disk=1\n" +
			"a prio=1 cpu=1 mem=1 disk=1\nc prio=1 cpu=1 mem=1 disk=1\n" +
			"e prio=0 cpu=1 mem=1 disk=1\nf prio=-3 cpu=1 mem=1 disk=1\n")},
		{mmOp("job", "a"), Nil()},
		// Each new machine goes to the head of the queue.
		{mmOp("advertise", "m6", "9", "9", "9"), bs("b")},
		{mmOp("advertise", "m5", "9", "9", "9"), bs("d")},
		{mmOp("advertise", "m4", "9", "9", "9"), bs("a")},
		{mmOp("advertise", "m3", "9", "9", "9"), bs("c")},
		{mmOp("advertise", "m2", "9", "9", "9"), bs("e")},
		{mmOp("advertise", "m1", "9", "9", "9"), bs("f")},
		{mmOp("advertise", "m0", "9", "9", "9"), OK()},
		{mmOp("queue", ""), bs("")},
		{mmOp("job", "a"), bs("m4")},
		{mmOp("job", "f"), bs("m1")},
	})
}

// A queued job that does not fit a new machine does not hold back a later
// one that does; the one that does not fit keeps its place.
func TestMatchmakerNoHeadOfLineBlocking(t *testing.T) {
	s := newMM()
	runMM(t, s, []mmStep{
		{mmOp("submit", "big", "8", "1024", "10", "9"), Nil()},
		{mmOp("submit", "small", "1", "128", "1", "0"), Nil()},
		{mmOp("submit", "small2", "1", "128", "1", "0"), Nil()},
		{mmOp("advertise", "tiny", "2", "256", "5"), bs("small")},
		{mmOp("advertise", "huge", "8", "1024", "10"), bs("big")}, // exactly enough fits
		{mmOp("queue", ""), bs("small2 prio=0 cpu=1 mem=128 disk=1\n")},
	})
}

// III.C.1: "otherwise, the request returns a null string".
func TestMatchmakerNullWhenNothingFits(t *testing.T) {
	s := newMM()
	runMM(t, s, []mmStep{
		{mmOp("advertise", "fast", "3000", "512", "100"), OK()},
		{mmOp("advertise", "roomy", "1000", "8192", "100"), OK()},
		{mmOp("advertise", "disky", "1000", "512", "9000"), OK()},
		// Each machine lacks one resource.
		{mmOp("submit", "j1", "2000", "4096", "1000"), Nil()},
		{mmOp("job", "j1"), Nil()},
		// Fits only "fast"; then nothing is left for a second such job.
		{mmOp("submit", "j2", "2000", "0", "0"), bs("fast")},
		{mmOp("submit", "j3", "2000", "0", "0"), Nil()},
		{mmOp("machines", "x"), bs("disky cpu=1000 mem=512 disk=9000 free\n" +
			"fast cpu=3000 mem=512 disk=100 job=j2\n" +
			"roomy cpu=1000 mem=8192 disk=100 free\n")},
	})
}

func TestMatchmakerMachinesReturnAndLeave(t *testing.T) {
	s := newMM()
	runMM(t, s, []mmStep{
		{mmOp("advertise", "m", "4", "4", "4"), OK()},
		{mmOp("submit", "j1", "4", "4", "4"), bs("m")},
		{mmOp("submit", "j2", "4", "4", "4", "1"), Nil()},
		{mmOp("submit", "j3", "1", "1", "1", "2"), Nil()},
		{mmOp("submit", "j1", "1", "1", "1"), Errorf(`job "j1" already submitted`)},
		{mmOp("submit", "j2", "1", "1", "1"), Errorf(`job "j2" already submitted`)},
		// Re-advertising ends j1 and serves the queue: j3 has the higher priority.
		{mmOp("advertise", "m", "4", "4", "4"), bs("j3")},
		{mmOp("job", "j1"), Errorf(`no such job "j1"`)},
		// Cancelling j3 frees m, which goes to j2.
		{mmOp("cancel", "j3"), Int(1)},
		{mmOp("job", "j2"), bs("m")},
		{mmOp("cancel", "j3"), Int(0)},
		// Cancelling a queued job removes it from the queue.
		{mmOp("submit", "j4", "1", "1", "1"), Nil()},
		{mmOp("cancel", "j4"), Int(1)},
		{mmOp("queue", ""), bs("")},
		{mmOp("advertise", "n", "1", "1", "1"), OK()},
		// Withdrawing a held machine forgets its job.
		{mmOp("withdraw", "m"), Int(1)},
		{mmOp("withdraw", "m"), Int(0)},
		{mmOp("job", "j2"), Errorf(`no such job "j2"`)},
		{mmOp("machines", ""), bs("n cpu=1 mem=1 disk=1 free\n")},
		{mmOp("submit", "j2", "1", "1", "1"), bs("n")},
	})
}

// mmPool advertises five machines, of which c, d and e suit a job needing
// cpu 4, a is too slow, b has too little memory, and f is taken.
func mmPool(t *testing.T) *MatchmakerState {
	s := newMM()
	runMM(t, s, []mmStep{
		{mmOp("advertise", "f", "8", "8", "8"), OK()},
		{mmOp("submit", "holder", "8", "8", "8"), bs("f")},
		{mmOp("advertise", "e", "4", "4", "4"), OK()},
		{mmOp("advertise", "a", "2", "64", "64"), OK()},
		{mmOp("advertise", "d", "16", "16", "16"), OK()},
		{mmOp("advertise", "b", "64", "2", "64"), OK()},
		{mmOp("advertise", "c", "5", "4", "4"), OK()},
	})
	return s
}

// III.C.1: the choice among several suitable machines is nondeterministic,
// and in Synod a function of the Env: the same Env on the same state gives
// the same machine; over many Envs every suitable machine is chosen and no
// unsuitable one ever is.
func TestMatchmakerChoiceIsAFunctionOfEnv(t *testing.T) {
	submit := mmOp("submit", "job", "4", "4", "4")
	chosen := map[string]int{}
	for seed := uint64(0); seed < 300; seed++ {
		env := Env{Time: 1_700_000_000_000_000_000 + int64(seed)*1000, Seed: seed * 0x9e3779b97f4a7c15}
		a, b := mmPool(t), mmPool(t)
		ra, rb := a.ApplyEnv(submit, env), b.ApplyEnv(submit, env)
		if !ra.Equal(rb) || string(a.Snapshot()) != string(b.Snapshot()) {
			t.Fatalf("env %+v: independent states answered %v and %v", env, ra, rb)
		}
		if ra.Type != ResultBytes {
			t.Fatalf("env %+v: %v", env, ra)
		}
		chosen[string(ra.Bytes)]++
		mmCheckInvariants(t, a)
	}
	for _, m := range []string{"c", "d", "e"} {
		if chosen[m] == 0 {
			t.Errorf("suitable machine %s never chosen: %v", m, chosen)
		}
	}
	for _, m := range []string{"a", "b", "f"} {
		if chosen[m] != 0 {
			t.Errorf("unsuitable machine %s chosen %d times", m, chosen[m])
		}
	}
	// With one suitable machine there is no choice, whatever the Env.
	for seed := uint64(0); seed < 20; seed++ {
		s := mmPool(t)
		if got := s.ApplyEnv(mmOp("submit", "j", "10", "10", "10"), Env{Seed: seed}); !got.Equal(bs("d")) {
			t.Fatalf("seed %d: %v", seed, got)
		}
	}
}

// Plain Apply is ApplyEnv with the zero Env: deterministic.
func TestMatchmakerApplyUsesZeroEnv(t *testing.T) {
	submit := mmOp("submit", "job", "4", "4", "4")
	want := mmPool(t).ApplyEnv(submit, Env{})
	for i := 0; i < 5; i++ {
		if got := mmPool(t).Apply(submit); !got.Equal(want) {
			t.Fatalf("Apply gave %v, ApplyEnv(zero Env) %v", got, want)
		}
	}
	if got := ApplyEnv(mmPool(t), submit, Env{}); !got.Equal(want) {
		t.Fatalf("service.ApplyEnv gave %v, want %v", got, want)
	}
}

// mmRandomOp draws an operation over small id spaces so that machines and
// jobs collide, return and leave often.
func mmRandomOp(r *rand.Rand) Op {
	num := func() string { return fmt.Sprint(r.IntN(4)) }
	machine := fmt.Sprintf("m%d", r.IntN(6))
	job := fmt.Sprintf("j%d", r.IntN(12))
	switch r.IntN(10) {
	case 0, 1, 2:
		return mmOp("advertise", machine, num(), num(), num())
	case 3, 4, 5:
		return mmOp("submit", job, num(), num(), num(), fmt.Sprint(r.IntN(3)-1))
	case 6:
		return mmOp("withdraw", machine)
	case 7:
		return mmOp("cancel", job)
	case 8:
		return mmOp("job", job)
	}
	return mmOp([]string{"machines", "queue"}[r.IntN(2)], "")
}

// Replicas that agree on the Env stay identical through Snapshot/Restore and
// Clone: a restored or cloned state continues exactly as the original, and
// reads change nothing.
func TestMatchmakerApplyEnvAcrossSnapshotAndClone(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 9))
	for trial := 0; trial < 20; trial++ {
		a := newMM()
		var b, c *MatchmakerState
		for i := 0; i < 300; i++ {
			if i == 150 {
				b = newMM()
				if err := b.Restore(a.Snapshot()); err != nil {
					t.Fatal(err)
				}
				c = a.Clone().(*MatchmakerState)
			}
			o := mmRandomOp(r)
			env := Env{Time: int64(i), Seed: r.Uint64()}
			before := a.Snapshot()
			ra := a.ApplyEnv(o, env)
			mmCheckInvariants(t, a)
			if ra.IsErr() && !strings.Contains(ra.Err, "already submitted") && !strings.Contains(ra.Err, "no such job") {
				t.Fatalf("%v: %v", o, ra)
			}
			if (Matchmaker{}).IsRead(o) && string(a.Snapshot()) != string(before) {
				t.Fatalf("read %v changed the state", o)
			}
			if b == nil {
				continue
			}
			rb, rc := b.ApplyEnv(o, env), c.ApplyEnv(o, env)
			if !ra.Equal(rb) || !ra.Equal(rc) {
				t.Fatalf("trial %d step %d %v: original %v, restored %v, clone %v", trial, i, o, ra, rb, rc)
			}
			if sa := string(a.Snapshot()); sa != string(b.Snapshot()) || sa != string(c.Snapshot()) {
				t.Fatalf("trial %d step %d %v: states diverged", trial, i, o)
			}
		}
	}
}

func TestMatchmakerCloneIsIndependent(t *testing.T) {
	a := mmPool(t)
	runMM(t, a, []mmStep{{mmOp("submit", "q", "99", "0", "0"), Nil()}})
	snap := string(a.Snapshot())
	c := a.Clone().(*MatchmakerState)
	runMM(t, c, []mmStep{
		{mmOp("advertise", "z", "99", "9", "9"), bs("q")},
		{mmOp("withdraw", "d"), Int(1)},
		{mmOp("submit", "p", "5", "4", "1", "7"), bs("c")},
	})
	if string(a.Snapshot()) != snap {
		t.Fatal("changing the clone changed the original")
	}
}

func TestMatchmakerSnapshotIsCanonical(t *testing.T) {
	a, b := newMM(), newMM()
	for _, m := range []string{"x", "b", "q", "a"} {
		a.Apply(mmOp("advertise", m, "1", "1", "1"))
	}
	for _, m := range []string{"q", "a", "x", "b"} {
		b.Apply(mmOp("advertise", m, "1", "1", "1"))
	}
	if string(a.Snapshot()) != string(b.Snapshot()) {
		t.Fatal("equal states give different snapshots")
	}

	s := mmPool(t)
	runMM(t, s, []mmStep{
		{mmOp("submit", "q1", "99", "0", "0", "1"), Nil()},
		{mmOp("submit", "q2", "99", "0", "0", "3"), Nil()},
	})
	snap := s.Snapshot()
	r := newMM()
	if err := r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	mmCheckInvariants(t, r)
	if string(r.Snapshot()) != string(snap) {
		t.Fatal("restore then snapshot changed the bytes")
	}
	if got := r.Apply(mmOp("machines", "")); !got.Equal(s.Apply(mmOp("machines", ""))) {
		t.Fatalf("restored machines: %v", got)
	}
	// The sequence counter survives: a job submitted after restore queues
	// behind an equal-priority job submitted before.
	runMM(t, r, []mmStep{
		{mmOp("submit", "q3", "99", "0", "0", "3"), Nil()},
		{mmOp("advertise", "big", "99", "0", "0"), bs("q2")},
		{mmOp("advertise", "big2", "99", "0", "0"), bs("q3")},
	})

	for _, bad := range [][]byte{{9}, snap[:len(snap)-1], append(append([]byte{}, snap...), 0)} {
		if err := newMM().Restore(bad); err == nil {
			t.Fatalf("bad snapshot %x accepted", bad)
		}
	}
	if err := r.Restore([]byte{9}); err == nil || r.Apply(mmOp("queue", "")).Equal(bs("")) {
		t.Fatalf("failed restore: err %v, or it cleared the state", err)
	}
}

// Restore refuses snapshots that are well-formed but describe no reachable
// state.
func TestMatchmakerRestoreRejectsInconsistentState(t *testing.T) {
	build := func(mk func(*MatchmakerState)) []byte {
		s := newMM()
		mk(s)
		return s.Snapshot()
	}
	cases := map[string][]byte{
		"machines out of order": build(func(s *MatchmakerState) {
			s.ids = []string{"b", "a"}
			s.machines["a"], s.machines["b"] = mmMachine{}, mmMachine{}
		}),
		"job holds two machines": build(func(s *MatchmakerState) {
			s.ids = []string{"a", "b"}
			s.machines["a"], s.machines["b"] = mmMachine{job: "j"}, mmMachine{job: "j"}
		}),
		"job queued and holding": build(func(s *MatchmakerState) {
			s.ids = []string{"a"}
			s.machines["a"] = mmMachine{job: "j"}
			s.queue = []mmJob{{id: "j"}}
			s.seq = 1
		}),
		"queue out of order": build(func(s *MatchmakerState) {
			s.queue = []mmJob{{id: "x", prio: 1, seq: 0}, {id: "y", prio: 2, seq: 1}}
			s.seq = 2
		}),
		"sequence from the future": build(func(s *MatchmakerState) {
			s.queue = []mmJob{{id: "x", seq: 5}}
			s.seq = 5
		}),
		"id with a space": build(func(s *MatchmakerState) {
			s.ids = []string{"a b"}
			s.machines["a b"] = mmMachine{}
		}),
	}
	for name, snap := range cases {
		if err := newMM().Restore(snap); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestMatchmakerValidate(t *testing.T) {
	good := []Op{
		mmOp("advertise", "m1", "2400", "8192", "500"),
		mmOp("submit", "j1", "0", "0", "0"),
		mmOp("submit", "j1", "1", "2", "3", "-7"),
		mmOp("withdraw", "m1"),
		mmOp("cancel", "j1"),
		mmOp("job", "j1"),
		mmOp("machines", ""),
		mmOp("queue", "ignored"),
	}
	for _, o := range good {
		if err := (Matchmaker{}).Validate(o); err != nil {
			t.Errorf("%v: %v", o, err)
		}
	}
	bad := []struct {
		op   Op
		want string
	}{
		{mmOp("advertise", "m1", "1", "2"), "wrong number of arguments"},
		{mmOp("advertise", "m1", "1", "2", "3", "4"), "wrong number of arguments"},
		{mmOp("advertise", "", "1", "2", "3"), "empty id"},
		{mmOp("advertise", "m 1", "1", "2", "3"), "space or control"},
		{mmOp("advertise", "m\n1", "1", "2", "3"), "space or control"},
		{mmOp("advertise", "m1", "-1", "2", "3"), "cpu"},
		{mmOp("advertise", "m1", "1", "lots", "3"), "mem"},
		{mmOp("advertise", "m1", "1", "2", "18446744073709551616"), "disk"},
		{mmOp("submit", "j1", "1", "2"), "wrong number of arguments"},
		{mmOp("submit", "j1", "1", "2", "3", "4", "5"), "wrong number of arguments"},
		{mmOp("submit", "j1", "1", "2", "3", "high"), "priority"},
		{mmOp("submit", "j1", "1.5", "2", "3"), "cpu"},
		{mmOp("withdraw", "m1", "now"), "wrong number of arguments"},
		{mmOp("cancel", ""), "empty id"},
		{mmOp("job", "j1", "x"), "wrong number of arguments"},
		{mmOp("machines", "", "x"), "wrong number of arguments"},
		{mmOp("resourceAdvertise", "m1", "1", "2", "3"), "unknown matchmaker operation"},
	}
	s := newMM()
	for _, c := range bad {
		err := (Matchmaker{}).Validate(c.op)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %q", c.op, err, c.want)
		}
		// Apply refuses it too, and changes nothing.
		if r := s.Apply(c.op); !r.IsErr() || len(s.ids) != 0 || len(s.jobs) != 0 || s.seq != 0 {
			t.Errorf("%v: Apply gave %v and changed the state", c.op, r)
		}
	}
	reads := map[string]bool{"machines": true, "queue": true, "job": true,
		"advertise": false, "submit": false, "withdraw": false, "cancel": false}
	for kind, read := range reads {
		if (Matchmaker{}).IsRead(Op{Kind: kind}) != read {
			t.Errorf("IsRead(%s) = %v", kind, !read)
		}
	}
}

// BenchmarkMatchmakerSubmit measures a submit that chooses among many
// suitable machines (a scan of the pool and one draw), followed by the
// cancel that frees the machine again.
func BenchmarkMatchmakerSubmit(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("machines=%d", n), func(b *testing.B) {
			s := newMM()
			for i := 0; i < n; i++ {
				s.Apply(mmOp("advertise", fmt.Sprintf("m%05d", i), "8", "8", "8"))
			}
			submit, cancel := mmOp("submit", "j", "4", "4", "4"), mmOp("cancel", "j")
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if r := s.ApplyEnv(submit, Env{Seed: uint64(i)}); r.Type != ResultBytes {
					b.Fatal(r)
				}
				s.Apply(cancel)
			}
		})
	}
}
