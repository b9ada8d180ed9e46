package orcaprimary

import (
	"fmt"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/sim"
)

// Migration of the primary copy under faults (the Orca paper §3.3), counted: the
// simulator runs orca-primary wrapped in an observer that counts the
// migrations that actually took place (a primary copy installed at an epoch
// no copy of its object had before) and the messages a former primary
// forwarded to the new location (sends carrying an origin), so a scenario
// that never migrates, or never needs a forwarding pointer, fails instead
// of passing vacuously. The history is checked for sequential consistency
// and the invariants run, as in the conformance suite.

// observed counts, over one run, what the wrapped automata did.
type observed struct {
	epochs     map[string]uint64 // highest epoch of each object's primary copy seen so far
	migrations int
	forwards   int
	forwarders map[automaton.NodeID]bool
}

// observedProtocol is orca-primary whose automata report to obs.
type observedProtocol struct {
	protocol
	obs  *observed
	full string
}

func (p observedProtocol) Name() string { return p.full }

func (p observedProtocol) New(cfg automaton.Config) (automaton.Automaton, error) {
	a, err := p.protocol.New(cfg)
	if err != nil {
		return nil, err
	}
	return &observedPrimary{Primary: a.(*Primary), obs: p.obs}, nil
}

func (p observedProtocol) Invariants() ([]string, automaton.InvariantChecker) {
	names, c := p.protocol.Invariants()
	return names, unwrapChecker{c}
}

type observedPrimary struct {
	*Primary
	obs *observed
}

func (o *observedPrimary) Step(in automaton.Input) []automaton.Output {
	out := o.Primary.Step(in)
	for _, x := range out {
		if s, ok := x.(automaton.Send); ok {
			if m, err := decodeMessage(s.Msg); err == nil && m.origin != "" {
				o.obs.forwards++
				o.obs.forwarders[o.cfg.Self] = true
			}
		}
	}
	for k, c := range o.prim {
		if c.epoch > o.obs.epochs[k] {
			o.obs.migrations += int(c.epoch - o.obs.epochs[k])
			o.obs.epochs[k] = c.epoch
		}
	}
	return out
}

// unwrapChecker hands the package's invariant checker the automata it knows.
type unwrapChecker struct{ inner automaton.InvariantChecker }

func (u unwrapChecker) Check(stepped automaton.NodeID, up map[automaton.NodeID]automaton.Automaton) error {
	in := make(map[automaton.NodeID]automaton.Automaton, len(up))
	for id, a := range up {
		if o, ok := a.(*observedPrimary); ok {
			in[id] = o.Primary
		} else {
			in[id] = a
		}
	}
	return u.inner.Check(stepped, in)
}

// migrationRuns is one observer per registered test protocol; sim looks a
// protocol up by name, so each observed scenario registers its own.
var migrationRuns = map[string]*observed{}

func observe(name string) string {
	full := Name + "-observed-" + name
	if _, ok := migrationRuns[full]; !ok {
		obs := &observed{}
		migrationRuns[full] = obs
		automaton.Register(observedProtocol{protocol: protocol{Capabilities: capabilities(Name, "", scenarios)}, obs: obs, full: full})
	}
	return full
}

// simMigrations runs one seed of a scenario (sim flags) under the observer.
func simMigrations(t *testing.T, name string, seed int64, args []string) (*observed, *sim.Result) {
	t.Helper()
	proto := observe(name)
	obs := migrationRuns[proto]
	*obs = observed{epochs: map[string]uint64{}, forwarders: map[automaton.NodeID]bool{}}
	cfg, _, err := sim.ParseArgs(append([]string{"--protocol", proto}, args...))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seed = seed
	r, err := sim.Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Invariant != "" || r.Violation || r.Liveness != "" {
		t.Fatalf("%s seed %d: invariant %q, violation %v, liveness %q (replay: synod-lab sim --protocol %s --seeds %d %s)",
			name, seed, r.Invariant, r.Violation, r.Liveness, Name, seed, strings.Join(args, " "))
	}
	if r.Check == nil {
		t.Fatalf("%s seed %d: the history was not checked", name, seed)
	}
	return obs, r
}

// Every migration scenario the conformance suite runs migrates the primary
// copy under crashes and message loss, forwards through former primaries,
// and keeps the history sequentially consistent.
func TestMigrationScenariosMigrateUnderFaults(t *testing.T) {
	n := 0
	for _, sc := range scenarios {
		if !strings.Contains(strings.Join(sc.Args, " "), "migrate_after=") {
			continue
		}
		n++
		_, seeds, err := sim.ParseArgs(append([]string{"--protocol", Name, "--seeds", sc.Seeds}, sc.Args...))
		if err != nil {
			t.Fatal(err)
		}
		var migrations, forwards, crashes, dropped, completed int
		for _, seed := range seeds {
			obs, r := simMigrations(t, fmt.Sprintf("s%d", n), seed, sc.Args)
			if obs.migrations == 0 {
				t.Errorf("%q seed %d: no primary copy migrated", sc.Name, seed)
			}
			migrations += obs.migrations
			forwards += obs.forwards
			crashes += r.Stats.Crashes
			dropped += r.Stats.MsgsDropped
			completed += r.Completed
		}
		t.Logf("%q seeds %s: %d migrations, %d forwarded messages, %d crashes, %d messages lost, %d operations completed",
			sc.Name, sc.Seeds, migrations, forwards, crashes, dropped, completed)
		if forwards == 0 {
			t.Errorf("%q: no former primary forwarded a message in seeds %s", sc.Name, sc.Seeds)
		}
		if crashes == 0 || dropped == 0 {
			t.Errorf("%q: the faults did not happen (crashes %d, lost %d)", sc.Name, crashes, dropped)
		}
	}
	if n == 0 {
		t.Fatal("no migration scenario declared")
	}
}
