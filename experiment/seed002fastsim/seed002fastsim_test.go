package seed002fastsim

import (
	"testing"

	"github.com/synod-dev/synod/model/fastpaxos"
)

// The simulated protocols take the model's message chains: their round
// trips are within the DKW bound of the model with self-messages free, and
// the seed's reading (every message crosses a link) is slower than that.
func TestSimulatedRoundTripsFollowTheModel(t *testing.T) {
	lan := fastpaxos.Pareto{Alpha: alphaL, B: bL}
	s := setting{wan: paretoSpec(bL, alphaL), lan: paretoSpec(bL, alphaL)}
	tc, tf := roundTrips(lan, lan, 1, 20000, 1, true)
	mc, mf := roundTrips(lan, lan, 1, 20000, 1, false)
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
