package seed000frontends

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/experiment"
	_ "github.com/synod-dev/synod/protocol/esds"
)

// TestQuick runs the CI pass and checks what it must show: sending to more
// replicas costs messages and replica load; a front end on a replica's node
// answers faster than one a hop away; when n1 dies, its front end's
// operations are never answered with send=1 alone, answered after the
// resend interval with resend, and at once with send=2 or all.
func TestQuick(t *testing.T) {
	e := New()
	fs := pflag.NewFlagSet(e.Name(), pflag.ContinueOnError)
	e.Flags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	res, err := experiment.Run(context.Background(), e, experiment.RunOptions{Options: experiment.Options{Quick: true, Reps: 1}, Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	f := experiment.Figures{}
	for _, c := range res.Cells {
		if c.Status != experiment.StatusOK {
			t.Fatalf("cell %s: %s %s", c.Key, c.Status, c.Reason)
		}
		for k, v := range c.Metrics {
			f.Set(c.Key, k, v)
		}
	}
	get := func(cell, m string) float64 {
		t.Helper()
		v, ok := f.Get(cell, m)
		if !ok {
			t.Fatalf("%s has no %s", cell, m)
		}
		return v
	}
	for _, fe := range []string{"colocated", "separate"} {
		k := "run=steady,fe=" + fe + ",policy="
		for _, p := range []string{"1", "2", "all"} {
			if u := get(k+p, mUnans); u != 0 {
				t.Errorf("%s%s: %v unanswered", k, p, u)
			}
		}
		if !(get(k+"1", mMsgs) < get(k+"2", mMsgs) && get(k+"2", mMsgs) < get(k+"all", mMsgs)) {
			t.Errorf("%s: messages per op do not grow with the replicas sent to", fe)
		}
		if !(get(k+"1", mOpsMean) < get(k+"2", mOpsMean) && get(k+"2", mOpsMean) < get(k+"all", mOpsMean)) {
			t.Errorf("%s: replica load does not grow with the replicas sent to", fe)
		}
	}
	if c, s := get("run=steady,fe=colocated,policy=1", mLat), get("run=steady,fe=separate,policy=1", mLat); c >= s {
		t.Errorf("colocated %.2f ms, separate %.2f ms", c, s)
	}
	k := "run=crash,fe=separate,policy="
	if get(k+"1", mVictim) == 0 || get(k+"1", mVictimAns) != 0 || get(k+"1", mVictimMax) != -1 {
		t.Errorf("send=1 without resend: n4's operations answered after n1 died")
	}
	r := get(k+"1+resend", mVictimMax)
	if r < float64(resendAfter.Milliseconds())/2 || get(k+"1+resend", mVictimAns) != get(k+"1+resend", mVictim) {
		t.Errorf("send=1+resend: max %.1f ms", r)
	}
	for _, p := range []string{"2", "all"} {
		if m := get(k+p, mVictimMax); m < 0 || m >= r {
			t.Errorf("send=%s: max %.1f ms after the crash, resend %.1f", p, m, r)
		}
	}
	if s := strings.Join(res.Summary, "\n"); !strings.Contains(s, "§4.2.4") || !strings.Contains(s, "n1 dies") {
		t.Errorf("summary %q", s)
	}
}
