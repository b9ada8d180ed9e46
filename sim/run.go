package sim

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
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
	// Check is the report of the protocol's checker: check.Linearizable, or
	// check.Sequential for protocols whose automaton.ConsistencyOf is
	// Sequential (nil with Config.NoCheck).
	Check *check.Report
	// ESDS is the eventual-serializability report of protocols whose
	// consistency model is EventuallySerializable (Check is nil then).
	ESDS *check.ESDSReport
	// Violation is set when the checker found the history not linearizable
	// (or, for ESDS protocols, not eventually serializable).
	Violation bool
	Stats     Stats
	// Invariant describes the first violated protocol invariant
	// (automaton/invariant.go); "" if none. InvariantChecks counts the
	// checks made (0 when the protocol states no invariants).
	Invariant       string
	InvariantChecks int
	// Divergence describes the first pair of replicas found with different
	// states at the same applied count (converge.go); "" if none.
	// ConvergeChecks counts the state hashes compared (0 when the
	// protocol's automata do not report their state).
	Divergence     string
	ConvergeChecks int
	// Liveness describes a liveness failure (Config.Liveness); "" if none.
	Liveness string
	// viz writes the HTML view of a check made here rather than by
	// package check (the matchmaker's: matchmaker.go); nil otherwise.
	viz func(path string) error
	// ReplicaTimes are the replica response times of the answered requests,
	// in the order answered (cpu.go: the ESDS thesis's T_r).
	ReplicaTimes []time.Duration
	// Callee is the outcome of the callee namespace (Config.Callee): its
	// history of nested requests, one operation per request id, and its
	// checks. A violation there makes this run's Violation true. The
	// output-commit checks of callee.go report in Invariant.
	Callee *Result
}

// Run simulates cfg and checks the resulting history. It returns an error for
// an invalid Config or when a protocol breaks the automaton contract (a send
// to itself, an unknown output, ...); a linearizability violation is not an
// error but Result.Violation.
func Run(cfg Config) (*Result, error) { return runWith(cfg, nil) }

// runWith is Run with setup applied to the simulator before it starts
// (offsets.go).
func runWith(cfg Config, setup func(*simulator) error) (*Result, error) {
	start := time.Now()
	if err := checkClientDriven(cfg); err != nil {
		return nil, err
	}
	s, err := newSimulator(cfg)
	if err != nil {
		return nil, err
	}
	if setup != nil {
		if err := setup(s); err != nil {
			return nil, err
		}
	}
	err = s.run()
	for _, n := range s.nodes {
		s.closeExecutors(n)
	}
	if s.callee != nil {
		for _, n := range s.callee.nodes {
			s.callee.closeExecutors(n)
		}
	}
	if err == nil {
		err = s.err
	}
	if err != nil {
		return nil, err
	}
	res, err := s.result(start)
	if err != nil || s.callee == nil {
		return res, err
	}
	// The callee's outcome (callee.go): its history, invariants,
	// convergence and checker; a violation there is one of the run.
	s.callee.closeNested()
	cres, err := s.callee.result(start)
	if err != nil {
		return nil, fmt.Errorf("callee namespace %s: %w", s.callee.ns, err)
	}
	res.Callee = cres
	if cres.Violation || cres.Liveness != "" {
		res.Violation = true
		if res.Invariant == "" && cres.Invariant != "" {
			res.Invariant = "callee namespace " + s.callee.ns + ": " + cres.Invariant
		}
		if res.Divergence == "" && cres.Divergence != "" {
			res.Divergence = "callee namespace " + s.callee.ns + ": " + cres.Divergence
		}
	}
	res.WallTime = time.Since(start)
	return res, nil
}

// result builds the Result of a finished run and checks its history.
func (s *simulator) result(start time.Time) (*Result, error) {
	s.stats.CPUQueued, s.stats.CPUMaxQueue = s.cpu.queued, s.cpu.maxQueue
	res := &Result{Seed: s.cfg.Seed, SimTime: s.now, Digest: s.digestSum(), Stats: s.stats, ReplicaTimes: s.replicaTimes}
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
	res.InvariantChecks = s.invChecked
	if s.invErr != "" {
		res.Invariant = s.invErr
		res.Violation = true
		res.WallTime = time.Since(start)
		return res, nil
	}
	s.finalConvergence()
	res.ConvergeChecks = s.conv.checks
	if s.conv.err != "" {
		res.Divergence = s.conv.err
		res.Violation = true
		res.WallTime = time.Since(start)
		return res, nil
	}
	if !s.cfg.NoCheck && s.esds {
		if err := s.checkESDS(res); err != nil {
			return nil, err
		}
	} else if !s.cfg.NoCheck && s.cfg.Service == MatchmakerService {
		// Bounded by specification steps (check.DefaultMatchmakerSteps),
		// not by --check-timeout: the verdict of a seed does not depend on
		// the machine's load (session 50; conformance's unreplicated seed 3).
		opts := checkOptions(s.cfg, s.ns)
		opts.Timeout = 0
		rep, viz, err := check.MatchmakerCheck(res.History, opts)
		if err != nil {
			return nil, fmt.Errorf("sim seed %d: checking the history: %w", s.cfg.Seed, err)
		}
		res.Check, res.viz = rep, viz
		res.Violation = rep.Result == check.Illegal
	} else if !s.cfg.NoCheck {
		checker := check.ForHistory(s.consistency, res.History)
		rep, err := checker(res.History, checkOptions(s.cfg, s.ns))
		if err != nil {
			return nil, fmt.Errorf("sim seed %d: checking the history: %w", s.cfg.Seed, err)
		}
		res.Check = rep
		res.Violation = rep.Result == check.Illegal
	}
	res.Liveness = s.checkLiveness(res.History)
	res.WallTime = time.Since(start)
	return res, nil
}

// checkOptions chooses the checker options for a run. Register protocols
// (automaton.RegisterProtocol: ABD, blocking) cannot give a linearizable DEL count: the reply
// says whether the highest tag seen in the query phase held a value, and a
// concurrent write may be ordered between that tag and the tombstone. Their
// DEL replies are therefore not checked (the delete itself still is).
func checkOptions(cfg Config, ns string) check.Options {
	return check.Options{
		Timeout:        cfg.CheckTimeout,
		IgnoreDelCount: automaton.HasRegisterSemantics(cfg.Protocol),
		Services:       map[string]string{ns: cfg.Service},
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
		"service":   c.Service,
		"digest":    digest,
		"sim_time":  s.now.String(),
	} {
		s.rec.SetMeta(k, v)
	}
}

// Command returns the "synod-lab sim" command line that replays this Config's
// seed. Fields without a command-line flag (MaxAttempts, MaxTime, DrainTime,
// MaxEvents, ReorderDelay, NoCheck, Trace) are not rendered.
func (c Config) Command() string {
	d, err := c.withDefaults()
	if err == nil {
		c = d
	}
	args := []string{"synod-lab", "sim",
		"--protocol", shellQuote(c.Protocol),
		"--nodes", fmt.Sprint(c.Nodes),
		"--clients", fmt.Sprint(c.Clients),
		"--ops", fmt.Sprint(c.Ops),
		"--faults", shellQuote(c.Faults),
		"--latency", shellQuote(c.Latency),
	}
	opt := func(flag string, val, def any) {
		if fmt.Sprint(val) != fmt.Sprint(def) {
			args = append(args, flag, shellQuote(fmt.Sprint(val)))
		}
	}
	opt("--read-mode", c.ReadMode, automaton.ReadDefault)
	opt("--liveness", c.Liveness, time.Duration(0))
	if c.Liveness > 0 {
		opt("--liveness-bound", c.LivenessBound, time.Duration(0))
	}
	opt("--keys", c.Keys, DefaultKeys)
	opt("--service", c.Service, ServiceName)
	if m, ok := mixOf(c.Service); ok {
		opt("--mix", c.Mix, m.def)
	}
	if c.NoInvariants {
		args = append(args, "--no-invariants")
	}
	if c.NoFanout {
		args = append(args, "--no-fanout")
	}
	if c.ClientDriven {
		args = append(args, "--client-driven")
	}
	opt("--converge-every", c.ConvergeEvery, 0)
	opt("--batch-window", c.BatchWindow, time.Duration(0))
	opt("--clock-skew", c.ClockSkew, time.Duration(0))
	opt("--groups", c.Groups, 0.0)
	if c.Groups > 0 {
		opt("--group-size", c.GroupSize, 3)
	}
	opt("--txns", c.Txns, 0.0)
	if c.Txns > 0 {
		opt("--txn-size", c.TxnSize, 3)
		opt("--txn-abort", c.TxnAbort, 0.1)
	}
	opt("--strict", c.StrictFrac, 0.0)
	opt("--prev", c.PrevProb, 0.0)
	opt("--loss", c.Loss, 0.0)
	opt("--dup", c.Dup, 0.0)
	opt("--reorder", c.ReorderFrac, 0.0)
	opt("--fsync", c.Fsync, DefaultFsync)
	opt("--client-latency", c.ClientLatency, DefaultClientLatency)
	opt("--think", c.Think, DefaultThink)
	opt("--timeout", c.RequestTimeout, DefaultRequestTimeout)
	opt("--check-timeout", c.CheckTimeout, DefaultCheckTimeout)
	opt("--membership", MembershipSpec(c.Membership), "")
	opt("--power-loss", PowerLossSpec(c.PowerLoss), "")
	if len(c.PowerLoss) > 0 {
		opt("--power-off", c.PowerOff, "")
	}
	if c.Nested {
		args = append(args, "--nested")
	}
	if cc := c.Callee; cc != nil {
		args = append(args, "--callee-protocol", shellQuote(cc.Protocol), "--callee-nodes", fmt.Sprint(cc.Nodes))
		opt("--callee-faults", cc.Faults, "none")
		if cc.Service != "" {
			opt("--callee-service", cc.Service, ServiceName)
		}
		opt("--callee-namespace", c.CalleeNamespace, "")
		opt("--callee-delay", c.CalleeDelay, "")
		ks := make([]string, 0, len(cc.Params))
		for k := range cc.Params {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			args = append(args, "--callee-param", shellQuote(k+"="+cc.Params[k]))
		}
	}
	links := make([]string, 0, len(c.LinkLatency))
	for l := range c.LinkLatency {
		links = append(links, l)
	}
	sort.Strings(links)
	for _, l := range links {
		args = append(args, "--link", shellQuote(l+"="+c.LinkLatency[l]))
	}
	keys := make([]string, 0, len(c.Params))
	for k := range c.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--param", shellQuote(k+"="+c.Params[k]))
	}
	args = append(args, "--seeds", fmt.Sprint(c.Seed))
	return strings.Join(args, " ")
}

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:,/=+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ParseSeeds parses a seed list: "N", "A-B", or a comma list of those
// ("1-100,250"). Duplicates are dropped; at most 10 million seeds.
func ParseSeeds(spec string) ([]int64, error) {
	const limit = 10_000_000
	var out []int64
	seen := map[int64]bool{}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		lo, hi := part, part
		if a, b, ok := strings.Cut(part, "-"); ok && a != "" {
			lo, hi = a, b
		}
		a, err1 := strconv.ParseInt(lo, 10, 64)
		b, err2 := strconv.ParseInt(hi, 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("seeds %q: %q is not N or A-B", spec, part)
		}
		if b < a {
			return nil, fmt.Errorf("seeds %q: range %q is backwards", spec, part)
		}
		if b-a >= limit || len(out)+int(b-a) >= limit {
			return nil, fmt.Errorf("seeds %q: more than %d seeds", spec, limit)
		}
		for s := a; ; s++ {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
			if s == b {
				break
			}
		}
	}
	return out, nil
}
