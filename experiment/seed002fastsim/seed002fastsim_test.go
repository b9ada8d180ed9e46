package seed002fastsim

import (
	"math"
	"testing"
	"time"

	"github.com/synod-dev/synod/experiment"

	"github.com/synod-dev/synod/model/fastpaxos"
)

// The simulated protocols take the model's message chains: their round
// trips are within the DKW bound of the model with self-messages free, and
// the seed's reading (every message crosses a link) is slower than that.
func TestSimulatedRoundTripsFollowTheModel(t *testing.T) {
	lan := fastpaxos.Pareto{Alpha: alphaL, B: bL}
	s := setting{wan: paretoSpec(bL, alphaL), lan: paretoSpec(bL, alphaL)}
	ts := roundTrips(lan, lan, 1, 20000, 1, true)
	ms := roundTrips(lan, lan, 1, 20000, 1, false)
	tc, tf, mc, mf := ts.rttC, ts.rttF, ms.rttC, ms.rttF
	if !(quantileOf(tc, 0.5) < quantileOf(mc, 0.5) && quantileOf(tf, 0.5) < quantileOf(mf, 0.5)) {
		t.Fatalf("free self-messages should be faster: classic %v vs %v, fast %v vs %v",
			quantileOf(tc, 0.5), quantileOf(mc, 0.5), quantileOf(tf, 0.5), quantileOf(mf, 0.5))
	}
	rc, err := measure("paxos", 3, s, 60, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	rf, err := measure("fastpaxos", 4, s, 60, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if rc.leader == "" || len(rc.rtts) < 10 || len(rf.rtts) != 60 {
		t.Fatalf("leader %q, %d paxos and %d fastpaxos round trips kept", rc.leader, len(rc.rtts), len(rf.rtts))
	}
	if d, b := ks(rc.rtts, tc), dkw(len(rc.rtts)); d > b {
		t.Errorf("paxos: KS %.3f above the DKW bound %.3f", d, b)
	}
	if d, b := ks(rf.rtts, tf), dkw(len(rf.rtts)); d > b {
		t.Errorf("fastpaxos: KS %.3f above the DKW bound %.3f", d, b)
	}
	// And the check has teeth: the paxos round trips are not Fast's.
	if d, b := ks(rc.rtts, tf), dkw(len(rc.rtts)); d <= b {
		t.Errorf("paxos round trips pass as Fast's (KS %.3f, bound %.3f)", d, b)
	}
	// Time to learn (the Recorder's events stamped with the trace's time):
	// one per operation, within the DKW bound of the model's L_f with
	// self-messages free, and not the round trips.
	if len(rf.learns) != 60 {
		t.Fatalf("%d fastpaxos times to learn for 60 operations", len(rf.learns))
	}
	if d, b := ks(rf.learns, ts.learnF), dkw(len(rf.learns)); d > b {
		t.Errorf("fastpaxos learn: KS %.3f above the DKW bound %.3f", d, b)
	}
	if d, b := ks(rf.rtts, ts.learnF), dkw(len(rf.rtts)); d <= b {
		t.Errorf("fastpaxos round trips pass as times to learn (KS %.3f, bound %.3f)", d, b)
	}
	// And paxos's time to learn at the leader (its Recorder): one per kept
	// operation, within the bound of the model's L_c, and not its round trips.
	if len(rc.learns) != len(rc.rtts) {
		t.Fatalf("%d paxos times to learn for %d kept operations", len(rc.learns), len(rc.rtts))
	}
	if d, b := ks(rc.learns, ts.learnC), dkw(len(rc.learns)); d > b {
		t.Errorf("paxos learn: KS %.3f above the DKW bound %.3f", d, b)
	}
	if d, b := ks(rc.learns, tc), dkw(len(rc.learns)); d <= b {
		t.Errorf("paxos round trips pass as times to learn (KS %.3f, bound %.3f)", d, b)
	}
}

func TestCrossing(t *testing.T) {
	// Classic ahead below 5, Fast above.
	c := []float64{1, 2, 9, 10}
	f := []float64{3, 4, 5, 6}
	x := crossing(c, f, 100)
	if !x.twoRegions || x.x != 4 || x.leadC != 0.5 || x.leadF != 0.5 {
		t.Fatalf("%+v", x)
	}
	if y := crossing(f, c, 100); y.twoRegions {
		t.Fatalf("Fast ahead first: no two regions, got %+v", y)
	}
}

func TestTraceScan(t *testing.T) {
	tr := &traceScan{sent: map[string]int{}}
	tr.Write([]byte("         1ms n2 <- client 0 request 5:1 {set k0 c0-1}\n         2ms n1 <- n2 msg 40 bytes\n         2ms n3 <- n2 msg 40 bytes\n         3ms n2 <- n1 msg 9 bytes\n"))
	if len(tr.reqAt) != 1 || tr.reqAt[0] != "n2" || tr.leader() != "n2" {
		t.Fatalf("%v %v", tr.reqAt, tr.sent)
	}
}

// Simultaneous requests in the simulator collide as often as the model
// says: 2 clients, t = 1, the seed's ≈0.38 within a 99.9 % interval of 60
// rounds; and every round goes through the Recorder and the trace.
func TestSimulatedCollisions(t *testing.T) {
	s := setting{wan: paretoSpec(bW, 1.2), lan: paretoSpec(bL, alphaL)}
	p, r, judged, err := collisionRates(1, 2, s, 60, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := fastpaxos.SimultaneousCollision(1, 2)
	if judged < 55 || math.Abs(p-want) > binomHalfWidth(want, judged) {
		t.Fatalf("collision %.3f over %d rounds, model %.3f (±%.3f)", p, judged, want, binomHalfWidth(want, judged))
	}
	// The protocol recovers at least every round with the seed's event.
	if r < p || r > 1 {
		t.Fatalf("recovered %.3f below the seed's event %.3f", r, p)
	}
}

// Two clients δ = 300 ms apart (sim.RunWithStarts) collide as often as the
// model says at that δ, and far less often than simultaneous ones would.
func TestSimulatedCollisionsDelta(t *testing.T) {
	s := setting{wan: paretoSpec(bW, collAlpha), lan: paretoSpec(bL, alphaL)}
	p, _, judged, err := collisionRates(1, 2, s, 60, 1, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	iv, err := fastpaxos.Collision(fastpaxos.Pareto{Alpha: collAlpha, B: bW}, 1, fastpaxos.Staggered(2, 300), 0)
	if err != nil {
		t.Fatal(err)
	}
	want, hw := iv.Mid(), binomHalfWidth(iv.Mid(), judged)
	if judged < 55 || math.Abs(p-want) > hw {
		t.Fatalf("collision at δ = 300 ms %.3f over %d rounds, model %.3f (±%.3f)", p, judged, want, hw)
	}
	if sim0 := fastpaxos.SimultaneousCollision(1, 2); sim0-want <= hw {
		t.Fatalf("the test cannot tell δ = 300 ms (%.3f) from δ = 0 (%.3f) with %d rounds", want, sim0, judged)
	}
}

func TestArrivals(t *testing.T) {
	a := &arrivals{first: map[string]string{}}
	a.Write([]byte("   10.1s n2 <- client 1 request 5c:1 set k1 \"c1-0\"\n   10.2s n2 <- client 0 request 27:1 set k1 \"c0-0\"\n   20.3s n3 <- client 0 request 27:2 set k1 x\n   20.4s n3 <- client 1 request 5c:1 set k1 x\n"))
	if len(a.first) != 2 || a.first["n2"] != "5c:1" || a.first["n3"] != "5c:1" {
		t.Fatalf("%v", a.first)
	}
}

// The Fig V.5 verdict: t = 3 above t = 1 at δ = 0, falling faster, below at
// the largest δ holds; the same curves with t = 3 not falling below do not.
func TestDeltaClaims(t *testing.T) {
	figs := func(p3End float64) experiment.Figures {
		f := experiment.Figures{}
		set := func(key string, p, model float64) {
			f.Set(key, mCollSim, p)
			f.Set(key, mCollModel, model)
			f.Set(key, mCollHW, 0.02)
		}
		set(collisionCell("1", "2").Key, 0.375, 0.375)
		set(collisionCell("3", "2").Key, 0.656, 0.656)
		for i, d := range collisionDeltas {
			frac := float64(i+1) / float64(len(collisionDeltas))
			set(collisionDeltaCell("1", d).Key, 0.375-frac*(0.375-0.06), 0.375-frac*(0.375-0.06))
			set(collisionDeltaCell("3", d).Key, 0.656-frac*(0.656-p3End), 0.656-frac*(0.656-p3End))
		}
		return f
	}
	verdicts := func(f experiment.Figures) []bool {
		var v []bool
		deltaClaims(f, func(_, _ string, ok bool) { v = append(v, ok) })
		return v
	}
	if v := verdicts(figs(0.02)); len(v) != 3 || !v[0] || !v[1] || !v[2] {
		t.Fatalf("falling faster: verdicts %v, want three holds", v)
	}
	if v := verdicts(figs(0.3)); len(v) != 3 || v[2] {
		t.Fatalf("t = 3 ending above t = 1: verdicts %v, want the claim not to hold", v)
	}
}
