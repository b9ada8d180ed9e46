package node

import (
	"bufio"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/automaton/cpuwork"
	"github.com/synod-dev/synod/config"
)

// BenchmarkESDSTail looks for what makes ESDS's put p99 at 64 clients
// (issue 28; docs/COSTS.md, esds48): three esds nodes in this process with
// fsync and reads=local, 64 RESP connections to n1 each putting one SET at
// a time (as redis-benchmark -c 64 -P 1), every node's stages traced
// (trace.go) and every automaton step timed. It reports the puts' p50 and
// p99 and, for the puts at or above the p99 (the tail) and for the others,
// what n1 did while each waited: commits that ended, the longest commit,
// peer messages stepped, and the longest step:
//
//	go test ./node -run '^$' -bench ESDSTail -benchtime 20000x
func BenchmarkESDSTail(b *testing.B) {
	const clients = 64
	ns := config.Namespace{Name: "default", Protocol: "esds", Service: "kv",
		Params: map[string]string{"reads": "local"}}
	cfg, ls := mkCluster(b, 3, config.Fsync, ns)
	rec := newStageRecorder()
	var nodes []*Node
	// n1's steps' thread CPU, in the order of their "step-out" records:
	// appended under the recorder's lock with the record (take below
	// takes both at once), so that a step running while the records are
	// taken cannot pair one step's CPU with another (the figures were
	// "not matched", off by one to three, in 3 of 4 runs at load 17-20).
	var stepCPU []time.Duration
	take := func() ([]stageRec, []time.Duration) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		recs, cpu := rec.recs, stepCPU
		rec.recs, stepCPU = nil, nil
		return recs, cpu
	}
	var cpuIn int64
	for i, c := range cfg.Nodes {
		id := automaton.NodeID(c.ID)
		tr := rec.tracer(id)
		o := Options{trace: tr}
		o.onStep = func(l *nsLoop, enter bool) {
			if l.ns.Name != "default" {
				return
			}
			if enter {
				tr("step-in", "", 0)
				if i == 0 {
					cpuIn = threadCPU()
				}
			} else {
				if i != 0 {
					tr("step-out", "", 0)
					return
				}
				d := time.Duration(threadCPU() - cpuIn)
				at := time.Since(rec.base)
				rec.mu.Lock()
				rec.recs = append(rec.recs, stageRec{at: at, node: id, stage: "step-out"})
				stepCPU = append(stepCPU, d)
				rec.mu.Unlock()
			}
		}
		nodes = append(nodes, startNode(b, cfg, c.ID, ls[i], o))
	}
	conns := make([]*bufio.ReadWriter, clients)
	for i := range conns {
		c, err := net.Dial("tcp", nodes[0].ClientAddr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		conns[i] = bufio.NewReadWriter(bufio.NewReader(c), bufio.NewWriter(c))
	}
	val := strings.Repeat("v", 100)
	set := func(rw *bufio.ReadWriter, k int) {
		key := fmt.Sprintf("k%d", k%10000)
		fmt.Fprintf(rw, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(key), key, len(val), val)
		if err := rw.Flush(); err != nil {
			b.Error(err)
			return
		}
		if line, err := rw.ReadString('\n'); err != nil || line != "+OK\r\n" {
			b.Errorf("SET: %q %v", line, err)
		}
	}
	run := func(n int, spans [][2]time.Duration) {
		var wg sync.WaitGroup
		per := (n + clients - 1) / clients
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range per {
					k := c*per + i
					if k >= n {
						return
					}
					t0 := time.Since(rec.base)
					set(conns[c], k)
					if spans != nil {
						spans[k] = [2]time.Duration{t0, time.Since(rec.base)}
					}
				}
			}()
		}
		wg.Wait()
	}
	run(2000, nil) // warm up
	take()
	spans := make([][2]time.Duration, b.N)
	b.ResetTimer()
	run(b.N, spans)
	b.StopTimer()
	recs, stepCPUs := take()
	lat := make([]time.Duration, len(spans))
	for i, s := range spans {
		lat[i] = s[1] - s[0]
	}
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	p99 := sorted[len(sorted)*99/100]
	b.ReportMetric(us(sorted[len(sorted)/2]), "p50-us")
	b.ReportMetric(us(p99), "p99-us")
	b.ReportMetric(us(sorted[len(sorted)-1]), "max-us")

	// n1's events, in time order: commits as [start, end], steps as [in, out].
	type span struct {
		from, to time.Duration
		cpu      time.Duration // a step's thread CPU
		kind     int           // 0 a timer or other input, 1 client requests, 2 a peer message
		reqs     int           // client requests in it
	}
	var commits, steps []span
	var open, stepOpen time.Duration
	var stepKind, stepReqs int
	for _, r := range recs {
		if r.node != "n1" {
			continue
		}
		switch r.stage {
		case stageCommitStart:
			open = r.at
		case stageCommitEnd:
			commits = append(commits, span{from: open, to: r.at})
		case stageStepMsg:
			stepKind = 2
		case stageStepRequest:
			stepKind = 1
			stepReqs++
		case "step-in":
			stepOpen = r.at
		case "step-out":
			steps = append(steps, span{from: stepOpen, to: r.at, kind: stepKind, reqs: stepReqs})
			stepKind, stepReqs = 0, 0
		}
	}
	if len(stepCPUs) == len(steps) {
		for i := range steps {
			// A step whose goroutine moved to another thread reads two
			// threads' clocks: dropped (-1) when outside [0, wall].
			steps[i].cpu = stepCPUs[i]
			if steps[i].cpu < 0 || steps[i].cpu > steps[i].to-steps[i].from {
				steps[i].cpu = -1
			}
		}
	} else {
		b.Logf("%d step CPU figures for %d steps: not matched", len(stepCPUs), len(steps))
	}
	// For a put's window: commits ended inside it, the longest commit
	// overlapping it, peer-message steps inside it, the longest step
	// overlapping it, and the CPU the loop stepped inside it.
	type sums struct {
		commitsEnded, msgSteps, n     int
		maxCommit, maxStep, stepTotal time.Duration
		byKind                        [3]time.Duration
	}
	var tail, rest sums
	for i, s := range spans {
		w := &rest
		if lat[i] >= p99 {
			w = &tail
		}
		w.n++
		for _, c := range commits[firstEnding(len(commits), func(j int) time.Duration { return commits[j].to }, s[0]):] {
			if c.from > s[1] {
				break
			}
			if c.to <= s[1] {
				w.commitsEnded++
			}
			w.maxCommit = max(w.maxCommit, c.to-c.from)
		}
		for _, st := range steps[firstEnding(len(steps), func(j int) time.Duration { return steps[j].to }, s[0]):] {
			if st.from > s[1] {
				break
			}
			if st.kind == 2 {
				w.msgSteps++
			}
			w.maxStep = max(w.maxStep, st.to-st.from)
			d := min(st.to, s[1]) - max(st.from, s[0])
			w.stepTotal += d
			w.byKind[st.kind] += d
		}
	}
	avg := func(w sums, x int) float64 { return float64(x) / float64(max(w.n, 1)) }
	avgd := func(w sums, d time.Duration) float64 { return us(d) / float64(max(w.n, 1)) }
	b.ReportMetric(avg(tail, tail.commitsEnded), "tail-commits")
	b.ReportMetric(avg(rest, rest.commitsEnded), "rest-commits")
	b.ReportMetric(avg(tail, tail.msgSteps), "tail-msgsteps")
	b.ReportMetric(avg(rest, rest.msgSteps), "rest-msgsteps")
	b.ReportMetric(avgd(tail, tail.stepTotal), "tail-steptime-us")
	b.ReportMetric(avgd(rest, rest.stepTotal), "rest-steptime-us")
	cd := make([]time.Duration, len(commits))
	for i, c := range commits {
		cd[i] = c.to - c.from
	}
	slices.Sort(cd)
	pctMax := func(ds []time.Duration) float64 {
		if len(ds) == 0 {
			return 0
		}
		return us(ds[len(ds)-1])
	}
	pct := func(ds []time.Duration, p int) float64 {
		if len(ds) == 0 {
			return 0
		}
		return us(ds[len(ds)*p/100])
	}
	var sd, md, td []time.Duration
	var cpus [3][]time.Duration
	nreq := 0
	for _, st := range steps {
		if st.cpu >= 0 {
			cpus[st.kind] = append(cpus[st.kind], st.cpu)
		}
		switch st.kind {
		case 2:
			md = append(md, st.to-st.from)
		case 1:
			sd = append(sd, st.to-st.from)
			nreq += st.reqs
		default:
			td = append(td, st.to-st.from)
		}
	}
	// How often a step of n1 takes longer than 5 ms (wall, and thread
	// CPU), by kind: the steps a put arriving meanwhile waits behind.
	var long, longCPU [3]int
	for _, st := range steps {
		if st.to-st.from > 5*time.Millisecond {
			long[st.kind]++
		}
		if st.cpu > 5*time.Millisecond {
			longCPU[st.kind]++
		}
	}
	b.Logf("n1 steps over 5 ms, of %d: wall timer %d, request %d, message %d; thread CPU timer %d, request %d, message %d",
		len(steps), long[0], long[1], long[2], longCPU[0], longCPU[1], longCPU[2])
	b.ReportMetric(float64(long[0]+long[1]+long[2]), "steps>5ms")
	b.ReportMetric(float64(longCPU[0]+longCPU[1]+longCPU[2]), "cpusteps>5ms")
	for k, name := range []string{"timer", "request", "message"} {
		slices.Sort(cpus[k])
		var sum time.Duration
		for _, d := range cpus[k] {
			sum += d
		}
		b.ReportMetric(pctMax(cpus[k]), name+"-maxcpu-us")
		b.Logf("n1 %s steps: %d timed, thread CPU p50 %.0f, p99 %.0f, max %.0f us, %.1f us per put",
			name, len(cpus[k]), pct(cpus[k], 50), pct(cpus[k], 99), pctMax(cpus[k]), us(sum)/float64(b.N))
	}
	slices.Sort(sd)
	slices.Sort(md)
	slices.Sort(td)
	b.Logf("%d puts, p50 %.0f us, p99 %.0f us, max %.0f us; n1: %d commits (p50 %.0f, p99 %.0f, max %.0f us), "+
		"%d request steps (%.1f requests each; p50 %.0f, p99 %.0f, max %.0f us), %d peer-message steps (p50 %.0f, p99 %.0f, max %.0f us), "+
		"%d other steps (timers; p50 %.0f, p99 %.0f, max %.0f us)",
		b.N, us(sorted[len(sorted)/2]), us(p99), us(sorted[len(sorted)-1]),
		len(cd), pct(cd, 50), pct(cd, 99), pctMax(cd),
		len(sd), float64(nreq)/float64(max(len(sd), 1)), pct(sd, 50), pct(sd, 99), pctMax(sd), len(md), pct(md, 50), pct(md, 99), pctMax(md),
		len(td), pct(td, 50), pct(td, 99), pctMax(td))
	b.Logf("tail (%d puts): commits ended %.2f, max commit %.0f us, msg steps %.2f, max step %.0f us, loop step time %.0f us per put (requests %.0f, messages %.0f, timers %.0f)",
		tail.n, avg(tail, tail.commitsEnded), us(tail.maxCommit), avg(tail, tail.msgSteps), us(tail.maxStep), avgd(tail, tail.stepTotal),
		avgd(tail, tail.byKind[1]), avgd(tail, tail.byKind[2]), avgd(tail, tail.byKind[0]))
	b.Logf("rest (%d puts): commits ended %.2f, max commit %.0f us, msg steps %.2f, max step %.0f us, loop step time %.0f us per put (requests %.0f, messages %.0f, timers %.0f)",
		rest.n, avg(rest, rest.commitsEnded), us(rest.maxCommit), avg(rest, rest.msgSteps), us(rest.maxStep), avgd(rest, rest.stepTotal),
		avgd(rest, rest.byKind[1]), avgd(rest, rest.byKind[2]), avgd(rest, rest.byKind[0]))
}

// firstEnding is the first of n spans, in time order, whose end (to) is at
// or after at.
func firstEnding(n int, to func(int) time.Duration, at time.Duration) int {
	return sort.Search(n, func(j int) bool { return to(j) >= at })
}

// threadCPU is the CPU time of the calling OS thread in nanoseconds
// (cpuwork.ThreadCPU; 0 where it cannot be read).
func threadCPU() int64 {
	t, _ := cpuwork.ThreadCPU()
	return int64(t)
}
