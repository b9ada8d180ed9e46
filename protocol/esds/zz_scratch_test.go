package esds

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"sort"
	"testing"

	"github.com/synod-dev/synod/automaton"
)

type stepRec struct {
	ms                            float64
	entries, bare, solid, all, gn int
	gcs                           uint64
	persists, replayed, applied   int
	to                            automaton.NodeID
	dbg                           [8]int64
}

func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func TestZZScratch(t *testing.T) {
	if os.Getenv("ZZ") == "" {
		t.Skip()
	}
	b := &testing.B{}
	_ = b
	c, put, n := setClusterT(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for k := range 10000 {
		put(c.IDs()[k%3], k)
	}
	for range 4 * gcEveryTicks {
		for _, id := range c.IDs() {
			c.FireTimer(id, timerGossip)
		}
		c.DeliverAll()
	}
	persists := 0
	c.Observe(func(_ automaton.NodeID, o automaton.Output) {
		if _, ok := o.(automaton.Persist); ok {
			persists++
		}
	})
	n0 := *n
	var ticks, msgs []stepRec
	t0 := threadCPU()
	for r := range 100 {
		if os.Getenv("ZZRESET") != "" {
			c.ResetTrace()
		}
		for _, id := range c.IDs() {
			for range 170 {
				put(id, c.rng.Intn(10000))
			}
		}
		for _, id := range c.IDs() {
			p0, g0 := persists, gcCycles()
			s := threadCPU()
			c.FireTimer(id, timerGossip)
			ticks = append(ticks, stepRec{ms: float64(threadCPU()-s) / 1e6, persists: persists - p0, gcs: gcCycles() - g0, entries: r})
		}
		for {
			m, ok := c.Pop()
			if !ok {
				break
			}
			mm, _ := unmarshal(m.Msg)
			rec := stepRec{entries: len(mm.Entries), to: m.To}
			for _, x := range mm.Entries {
				if x.Flags&flagBare != 0 {
					rec.bare++
				}
				if x.Flags&flagSolid != 0 {
					rec.solid++
				}
				if x.Flags&flagAll != 0 {
					rec.all++
				}
				if x.Flags == flagGone {
					rec.gn++
				}
			}
			a := c.Node(m.To).(*ESDS)
			r0, ap0 := a.replayed, len(a.appliedLive)
			p0, g0 := persists, gcCycles()
			s := threadCPU()
			c.DeliverMessage(m)
			rec.ms = float64(threadCPU()-s) / 1e6
			rec.persists, rec.gcs, rec.replayed, rec.applied = persists-p0, gcCycles()-g0, a.replayed-r0, len(a.appliedLive)-ap0
			msgs = append(msgs, rec)
		}
	}
	total := threadCPU() - t0
	for _, id := range c.IDs() {
		a := c.Node(id).(*ESDS)
		q := 0
		for j := range a.peers {
			q += len(a.peers[j].queue)
		}
		fmt.Printf("%s: queued %d ops %d dna %d appliedLive %d goneQ %d\n", id, q, len(a.ops), len(a.dna)+len(a.dnaNew), len(a.appliedLive), len(a.goneQ))
	}
	fmt.Printf("cpu-us/set %.1f msgs %d ticks %d\n", float64(total)/1e3/float64(*n-n0), len(msgs), len(ticks))
	sort.Slice(msgs, func(i, j int) bool { return msgs[i].ms > msgs[j].ms })
	sort.Slice(ticks, func(i, j int) bool { return ticks[i].ms > ticks[j].ms })
	for _, r := range msgs[:15] {
		fmt.Printf("msg %.2fms entries %d bare %d solid %d all %d gone %d persists %d gcs %d replayed %d applied %d\n", r.ms, r.entries, r.bare, r.solid, r.all, r.gn, r.persists, r.gcs, r.replayed, r.applied)
	}
	tot := map[string]int{}
	for _, r := range msgs {
		tot["entries"] += r.entries
		tot["bare"] += r.bare
		tot["solid"] += r.solid
		tot["all"] += r.all
		tot["gone"] += r.gn
		tot["persists"] += r.persists
	}
	fmt.Println("totals", tot, "per set", float64(tot["entries"])/float64(*n-n0))
	for _, r := range ticks[:10] {
		fmt.Printf("tick %.2fms round %d persists %d gcs %d\n", r.ms, r.entries, r.persists, r.gcs)
	}
}
