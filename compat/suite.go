package compat

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/synod-dev/synod/automaton"
)

// Pass is one client library's run over the cases: its driver, and where its
// namespaces and Redis databases are.
type Pass struct {
	Name   string // "go-redis", "redis-py"
	Driver Driver
	// NSPrefix names the pass's Synod namespaces: NSPrefix+protocol.
	NSPrefix string
	// DBOffset is the Redis database of the pass's first protocol.
	DBOffset int
}

// Outcome of one command on one protocol, for docs/COMMANDS.md.
const (
	OutcomeOK       = "yes"
	OutcomeRefused  = "refused"
	OutcomeDiffers  = "differs"
	OutcomeMismatch = "MISMATCH"
)

// Suite runs cases against redis-server and a Synod node and keeps counts.
type Suite struct {
	Redis     string   // redis-server address
	Synod     string   // a Synod node's client address
	Protocols []string // one namespace per protocol per pass; index = database
	Passes    []Pass

	mu sync.Mutex
	// Commands is the number of commands sent (to either server), Compared
	// the number of Synod answers compared with redis-server's, Mismatches
	// the number that differed.
	Commands, Compared, Mismatches int
	// outcomes[command][protocol].
	outcomes map[string]map[string]string
}

// Counts is the suite's one-line summary.
func (s *Suite) Counts() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("compat: %d commands sent, %d answers compared with redis-server, %d mismatches", s.Commands, s.Compared, s.Mismatches)
}

// Outcomes returns a copy of the outcome table: command -> protocol -> outcome.
func (s *Suite) Outcomes() map[string]map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]map[string]string{}
	for c, m := range s.outcomes {
		out[c] = map[string]string{}
		for p, o := range m {
			out[c][p] = o
		}
	}
	return out
}

func (s *Suite) record(cmd, proto, outcome string) {
	if s.outcomes == nil {
		s.outcomes = map[string]map[string]string{}
	}
	m := s.outcomes[cmd]
	if m == nil {
		m = map[string]string{}
		s.outcomes[cmd] = m
	}
	if m[proto] == OutcomeMismatch {
		return
	}
	m[proto] = outcome
}

func (s *Suite) db(p Pass, proto string) int {
	for i, q := range s.Protocols {
		if q == proto {
			return p.DBOffset + i
		}
	}
	return -1
}

// Case is one parsed case: its lines and which protocols run it.
type Case struct {
	Lines   []Line
	NS      []string        // protocols whose namespaces run the case
	Refused map[string]bool // protocols that refuse the case's commands
	Differs map[string]bool // protocols whose answers legitimately differ
}

// protoSet checks that every name in names is one of s.Protocols.
func (s *Suite) protoSet(arg string, names []string) (map[string]bool, error) {
	out := map[string]bool{}
	var expanded []string
	for _, n := range names {
		if g, ok := s.groups()[n]; ok {
			expanded = append(expanded, g...)
		} else {
			expanded = append(expanded, n)
		}
	}
	for _, p := range expanded {
		if !slices.Contains(s.Protocols, p) {
			return nil, fmt.Errorf("%s=%s: no namespace runs protocol %q (protocols: %s)", arg, p, p, strings.Join(s.Protocols, ","))
		}
		out[p] = true
	}
	return out, nil
}

// Groups of protocols a case may name instead of listing them, from the
// registry's capabilities, so that a new protocol falls into place.
const (
	GroupAll       = "all"       // every protocol
	GroupRegister  = "register"  // register protocols (automaton.RegisterProtocol): get, set, del, exists only
	GroupNonAtomic = "nonatomic" // protocols without atomic groups (automaton.TxnSupport.Atomic): no MULTI/EXEC
)

func (s *Suite) groups() map[string][]string {
	g := map[string][]string{GroupAll: s.Protocols}
	for _, p := range s.Protocols {
		if automaton.HasRegisterSemantics(p) {
			g[GroupRegister] = append(g[GroupRegister], p)
		}
		if !automaton.TransactionsOf(p).Atomic {
			g[GroupNonAtomic] = append(g[GroupNonAtomic], p)
		}
	}
	return g
}

// ParseCase reads a case's command lines and its arguments (lists of
// protocol names): ns (absent or "all": every protocol), skip, refused, differs.
func (s *Suite) ParseCase(input string, ns, skip, refused, differs []string) (Case, error) {
	var c Case
	for _, t := range strings.Split(input, "\n") {
		if strings.TrimSpace(t) == "" || strings.HasPrefix(strings.TrimSpace(t), "#") {
			continue
		}
		l, err := ParseLine(t)
		if err != nil {
			return c, err
		}
		c.Lines = append(c.Lines, l)
	}
	if len(ns) == 0 {
		ns = s.Protocols
	}
	sel, err := s.protoSet("ns", ns)
	if err != nil {
		return c, err
	}
	skipped, err := s.protoSet("skip", skip)
	if err != nil {
		return c, err
	}
	for _, p := range s.Protocols {
		if sel[p] && !skipped[p] {
			c.NS = append(c.NS, p)
		}
	}
	if c.Refused, err = s.protoSet("refused", refused); err != nil {
		return c, err
	}
	if c.Differs, err = s.protoSet("differs", differs); err != nil {
		return c, err
	}
	return c, nil
}

// Run runs c in every pass and returns the expected output and one problem
// per mismatch or failure. The expected output is what the Redis twin of the
// first pass's first namespace that neither refuses nor differs answered, as
// each line's marker compares it (Synod's answer for ~synod lines).
func (s *Suite) Run(c Case) (string, []string) {
	var out strings.Builder
	var problems []string
	shown := ""
	for _, proto := range c.NS {
		if !c.Refused[proto] && !c.Differs[proto] {
			shown = proto
			break
		}
	}
	if shown == "" && len(c.NS) > 0 {
		shown = c.NS[0]
	}
	for pi, p := range s.Passes {
		for _, proto := range c.NS {
			show := func(line, answer string) {
				if pi == 0 && proto == shown {
					fmt.Fprintf(&out, "%s\n%s\n", line, answer)
				}
			}
			fail := func(f string, a ...any) {
				problems = append(problems, fmt.Sprintf("%s, namespace %s%s: ", p.Name, p.NSPrefix, proto)+fmt.Sprintf(f, a...))
			}
			redisT := Target{Addr: s.Redis, DB: s.db(p, proto)}
			synodT := Target{Addr: s.Synod, NS: p.NSPrefix + proto}
			refusedAny := false
			for _, l := range c.Lines {
				got, err := p.Driver.Do(synodT, l.Args)
				s.count(1, 0, 0)
				if err != nil {
					fail("%s: %v", l.Text, err)
					continue
				}
				if l.Marker == MarkSynod {
					s.recordOutcome(l.Name(), proto, OutcomeOK)
					show(l.Text, Render(got))
					continue
				}
				if c.Refused[proto] && IsError(got) {
					// Refused: Redis's twin does not run it either.
					refusedAny = true
					s.recordOutcome(l.Name(), proto, OutcomeRefused)
					show(l.Text, "(refused on "+proto+")")
					continue
				}
				want, err := p.Driver.Do(redisT, l.Args)
				s.count(1, 0, 0)
				if err != nil {
					fail("redis-server db %d: %s: %v", redisT.DB, l.Text, err)
					continue
				}
				w, g := Compared(l.Marker, want), Compared(l.Marker, got)
				show(l.Text, w)
				if c.Differs[proto] {
					s.recordOutcome(l.Name(), proto, OutcomeDiffers)
					continue
				}
				s.count(0, 1, 0)
				if w != g {
					s.count(0, 0, 1)
					s.recordOutcome(l.Name(), proto, OutcomeMismatch)
					fail("%s\n  redis-server: %s\n  synod:        %s", l.Text, w, g)
					continue
				}
				s.recordOutcome(l.Name(), proto, OutcomeOK)
			}
			if c.Refused[proto] && !refusedAny {
				fail("marked refused=%s, but Synod answered every command of the case", proto)
			}
		}
	}
	return out.String(), problems
}

func (s *Suite) count(cmds, compared, mismatches int) {
	s.mu.Lock()
	s.Commands += cmds
	s.Compared += compared
	s.Mismatches += mismatches
	s.mu.Unlock()
}

func (s *Suite) recordOutcome(cmd, proto, outcome string) {
	s.mu.Lock()
	s.record(cmd, proto, outcome)
	s.mu.Unlock()
}
