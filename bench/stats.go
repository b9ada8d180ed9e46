package bench

import (
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram range: latencies are recorded in microseconds, 1 µs to 60 s, with 3
// significant digits. Larger values are clamped to the maximum.
const (
	histMin    = 1
	histMax    = 60_000_000
	histDigits = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histDigits) }

func recordHist(h *hdrhistogram.Histogram, d time.Duration) {
	us := d.Microseconds()
	if us < histMin {
		us = histMin
	}
	if us > histMax {
		us = histMax
	}
	_ = h.RecordValue(us) // in range by construction
}

// maxErrorSamples bounds the distinct error messages kept for the report.
const maxErrorSamples = 5

// shard holds the measurements of some clients. Clients record into their own
// shard under its mutex; the progress reporter and the final report merge all
// shards.
type shard struct {
	mu          sync.Mutex
	reads       *hdrhistogram.Histogram
	writes      *hdrhistogram.Histogram
	readErrors  int64
	writeErrors int64
	perSecOps   []int64 // successful completions by second since the start
	perSecErrs  []int64
	late        int64
	errSamples  []string
}

func newShard() *shard { return &shard{reads: newHist(), writes: newHist()} }

func grow(s []int64, i int) []int64 {
	for len(s) <= i {
		s = append(s, 0)
	}
	return s
}

// record adds one completed operation. since is its completion time relative to
// the measured phase's start; errMsg is empty on success.
func (s *shard) record(read bool, lat time.Duration, since time.Duration, errMsg string) {
	sec := int(since / time.Second)
	if sec < 0 {
		sec = 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if errMsg != "" {
		if read {
			s.readErrors++
		} else {
			s.writeErrors++
		}
		s.perSecErrs = grow(s.perSecErrs, sec)
		s.perSecErrs[sec]++
		if len(s.errSamples) < maxErrorSamples {
			for _, e := range s.errSamples {
				if e == errMsg {
					return
				}
			}
			s.errSamples = append(s.errSamples, errMsg)
		}
		return
	}
	if read {
		recordHist(s.reads, lat)
	} else {
		recordHist(s.writes, lat)
	}
	s.perSecOps = grow(s.perSecOps, sec)
	s.perSecOps[sec]++
}

func (s *shard) addLate() {
	s.mu.Lock()
	s.late++
	s.mu.Unlock()
}

// stats is the set of shards of one run.
type stats struct{ shards []*shard }

func newStats(n int) *stats {
	st := &stats{shards: make([]*shard, n)}
	for i := range st.shards {
		st.shards[i] = newShard()
	}
	return st
}

func (st *stats) shard(client int) *shard { return st.shards[client%len(st.shards)] }

// merged is a consistent-enough snapshot of all shards.
type merged struct {
	reads, writes, all      *hdrhistogram.Histogram
	readErrors, writeErrors int64
	perSecOps, perSecErrs   []int64
	late                    int64
	errSamples              []string
}

// merge combines all shards. withHists false skips the read/write histograms
// (the progress line needs only the overall one).
func (st *stats) merge(withHists bool) merged {
	m := merged{all: newHist()}
	if withHists {
		m.reads, m.writes = newHist(), newHist()
	}
	seen := map[string]bool{}
	for _, s := range st.shards {
		s.mu.Lock()
		m.all.Merge(s.reads)
		m.all.Merge(s.writes)
		if withHists {
			m.reads.Merge(s.reads)
			m.writes.Merge(s.writes)
		}
		m.readErrors += s.readErrors
		m.writeErrors += s.writeErrors
		m.late += s.late
		m.perSecOps = addSeries(m.perSecOps, s.perSecOps)
		m.perSecErrs = addSeries(m.perSecErrs, s.perSecErrs)
		for _, e := range s.errSamples {
			if !seen[e] && len(m.errSamples) < maxErrorSamples {
				seen[e] = true
				m.errSamples = append(m.errSamples, e)
			}
		}
		s.mu.Unlock()
	}
	return m
}

func addSeries(dst, src []int64) []int64 {
	if len(src) > 0 {
		dst = grow(dst, len(src)-1)
	}
	for i, v := range src {
		dst[i] += v
	}
	return dst
}
