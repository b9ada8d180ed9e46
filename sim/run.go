package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/synod-dev/synod/check"
	"github.com/synod-dev/synod/history"
)

// Result is the outcome of one simulated run.
type Result struct {
	Seed int64
	// Ops is the number of operations invoked; Completed got a reply, Unknown
	// did not (or got an error reply to a write).
	Ops, Completed, Unknown int
	// SimTime is the virtual time the run took; WallTime the real time,
	// including the check.
	SimTime, WallTime time.Duration
	// Digest is the hex SHA-256 trace digest: the same seed and Config give
	// the same digest.
	Digest  string
	History *history.History
	// Check is the linearizability report (nil with Config.NoCheck).
	Check *check.Report
	// Violation is set when the checker found the history not linearizable.
	Violation bool
	Stats     Stats
}

// Run simulates cfg and checks the resulting history. It returns an error for
// an invalid Config or when a protocol breaks the automaton contract (a send
// to itself, an unknown output, ...); a linearizability violation is not an
// error but Result.Violation.
func Run(cfg Config) (*Result, error) {
	start := time.Now()
	s, err := newSimulator(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.run(); err != nil {
		return nil, err
	}
	res := &Result{Seed: s.cfg.Seed, SimTime: s.now, Digest: s.digestSum(), Stats: s.stats}
	s.setMeta(res.Digest)
	res.History = s.rec.History()
	for _, op := range res.History.Ops {
		res.Ops++
		switch op.Outcome {
		case history.OK:
			res.Completed++
		case history.Unknown:
			res.Unknown++
		}
	}
	if !s.cfg.NoCheck {
		rep, err := check.Linearizable(res.History, checkOptions(s.cfg))
		if err != nil {
			return nil, fmt.Errorf("sim seed %d: checking the history: %w", s.cfg.Seed, err)
		}
		res.Check = rep
		res.Violation = rep.Result == check.Illegal
	}
	res.WallTime = time.Since(start)
	return res, nil
}

// checkOptions chooses the checker options for a run. Register protocols
// (names starting with "abd") cannot give a linearizable DEL count: the reply
// says whether the highest tag seen in the query phase held a value, and a
// concurrent write may be ordered between that tag and the tombstone. Their
// DEL replies are therefore not checked (the delete itself still is).
func checkOptions(cfg Config) check.Options {
	return check.Options{
		Timeout:        cfg.CheckTimeout,
		IgnoreDelCount: strings.HasPrefix(cfg.Protocol, "abd"),
		Services:       map[string]string{Namespace: ServiceName},
	}
}

func (s *simulator) setMeta(digest string) {
	c := s.cfg
	for k, v := range map[string]string{
		"runtime":   "sim",
		"protocol":  c.Protocol,
		"seed":      fmt.Sprint(c.Seed),
		"nodes":     fmt.Sprint(c.Nodes),
		"clients":   fmt.Sprint(c.Clients),
		"ops":       fmt.Sprint(c.Ops),
		"keys":      fmt.Sprint(c.Keys),
		"faults":    c.Faults,
		"latency":   c.Latency,
		"read_mode": c.ReadMode.String(),
		"digest":    digest,
		"sim_time":  s.now.String(),
	} {
		s.rec.SetMeta(k, v)
	}
}
